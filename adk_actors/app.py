"""The application's names and entry points.

A leaf: agents, the Runner and runs import the tree's registered names and
`ensure_started` from here, and the tree itself (`application.py`) imports them, so
this module imports no area of `adk_actors` (only the `collector` leaf). `start` runs the tree's starter, which
the package wires in (`adk_actors/__init__.py` installs `application.start_tree`);
`stop` and `running` need only the names.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from adk_actors import collector
from providers.errors import AdkError
from supervision import Pid, whereis
from supervision import stop as stop_server

APP_NAME = "adk.app"
AGENT_SUPERVISOR = "adk.agents"
AGENT_SUPERVISOR_INTENSITY = 1_000_000
AGENT_SUPERVISOR_PERIOD = 1.0
"""The agent supervisor's own restart intensity: out of reach on purpose. Each agent
has its own (``restart_intensity`` in its config, by default 3 in 5 s), past which
that agent alone is failed; the supervisor giving up would restart every agent and
every run after it in the tree."""
PLUGIN_INSTANCE_SUPERVISOR = "adk.plugin_instances"
MAX_PLUGIN_INSTANCES = 10_000
"""Stateful plugin instances alive at once (each a temporary child of the plugin
instance supervisor); past it a start is refused with ``too_many_plugin_instances``."""
TASK_SUPERVISOR = "adk.tasks"
RUN_SUPERVISOR = "adk.runs"
MAX_RUNS = 100_000
"""Invocation servers alive at once (running, and retained runs); past it a start is
refused with ``too_many_runs``."""
AMBIENT_SUPERVISOR = "adk.ambient"
MCP_CLIENT_SUPERVISOR = "adk.mcp.clients"
MAX_MCP_CLIENTS = 1024
"""MCP clients alive at once (each a temporary child of the MCP client supervisor);
past it `adk.mcp.connect` is refused with ``too_many_mcp_clients``."""
MCP_CLIENT_SUPERVISOR_INTENSITY = 20
MCP_CLIENT_SUPERVISOR_PERIOD = 10.0
"""The MCP client supervisor's restart intensity. Its children are temporary, so
nothing is restarted; the bound only matters to the kernel's bookkeeping."""
WORKFLOW_SUPERVISOR = "adk.workflows"
MAX_WORKFLOWS = 100_000
"""Workflow coordinators alive at once (running, and retained ones); past it a start is
refused with ``too_many_workflows``."""
WORKFLOW_SUPERVISOR_INTENSITY = 20
WORKFLOW_SUPERVISOR_PERIOD = 10.0
"""The workflow supervisor's restart intensity (the spec's: 20 in 10 s). Its children
are temporary, so nothing is restarted; the bound only matters to the kernel's
bookkeeping."""

Starter = Callable[[Mapping[str, Any] | None], Pid]
"""Starts the tree if it is not running (given its admission config) and returns its pid."""

tree_lock = threading.Lock()
"""Held while the tree starts or stops, so the two never interleave."""

_starter: Starter | None = None


def install(starter: Starter) -> None:
    """Make `starter` what `start` runs (the package does this once, at import)."""
    global _starter
    _starter = starter


def start(
    *,
    admission_control: Mapping[str, Any] | None = None,
    gc_young_threshold: int | None = collector.DEFAULT_YOUNG_THRESHOLD,
) -> Pid:
    """Start the root tree if it is not running; returns its pid.

    `admission_control` configures the application's admission controller (see
    `adk_actors.admission`); it is validated before anything starts and raises
    ``invalid_application_env`` naming the setting. A running tree is returned as is;
    asking it for another admission config is ``application_already_started``.

    `gc_young_threshold`: while the tree runs, CPython's young-generation collection
    threshold (see `adk_actors.collector`; Python's 700 makes the runtime's short-lived
    objects reach the old generations). Setting it also sets the middle generation's
    threshold to 50 young collections (`collector.MIDDLE_THRESHOLD`); both only when
    the process has Python's default thresholds (an application that set its own keeps
    all three), restored by `stop`; None leaves the collector alone. Decided by the
    start that starts the tree.
    """
    starter = _starter
    if starter is None:
        raise AdkError("unavailable", "the application tree is not wired: import adk_actors")
    young_threshold = collector.check_young_threshold(gc_young_threshold)
    if young_threshold is not None and whereis(APP_NAME) is None:
        collector.tune(young_threshold)
    return starter(admission_control)


def ensure_started() -> Pid:
    """The running tree's pid, starting it with the defaults if it is not running (the
    fast path is one registry lookup: every invocation start passes here)."""
    pid = whereis(APP_NAME)
    return pid if pid is not None else start()


def stop(timeout: float = 30.0) -> None:
    """Stop the root tree (children in reverse order); a no-op if it is not running."""
    with tree_lock:
        pid = whereis(APP_NAME)
        if pid is not None:
            stop_server(pid, "shutdown", timeout=timeout)
        collector.restore()


def running() -> bool:
    return whereis(APP_NAME) is not None
