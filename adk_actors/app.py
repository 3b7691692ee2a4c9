"""The application: the root supervision tree of DESIGN.md §4.

`start()` (idempotent) starts ``adk.app``, a `rest_for_one` supervisor, with the
children that exist so far, in the order the design fixes; `stop()` shuts it down
in reverse order. Later issues add their children in their place.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import msgspec

from providers.errors import AdkError
from supervision import ChildSpec, DynamicSupervisor, Pid, Supervisor, whereis
from supervision import stop as stop_server
from supervision.task_supervisor import start_task_supervisor

APP_NAME = "adk.app"
AGENT_SUPERVISOR = "adk.agents"
TASK_SUPERVISOR = "adk.tasks"
RUN_SUPERVISOR = "adk.runs"
MAX_RUNS = 10_000
"""Run actors alive at once (running and retained); past it `runs.start` is refused."""

_lock = threading.Lock()


def _children(admission_config: Any) -> list[ChildSpec]:
    from adk_actors import admission

    # rest_for_one: a child that dies takes down every child after it, so nothing
    # outlives what it depends on. Agents come before the task supervisor in the
    # design's order; agent turns use the kernel's task supervisor for now.
    return [
        # first: agents and runs record into sessions, so they start after it
        ChildSpec("session_owner", _start_session_owner),
        ChildSpec(
            "agent_supervisor",
            lambda: DynamicSupervisor.start_link(name=AGENT_SUPERVISOR, intensity=100, period=5.0),
            type="supervisor",
        ),
        ChildSpec("task_supervisor", _start_tasks, type="supervisor", shutdown="brutal_kill"),
        # Runs, after the task supervisor (every run's worker and settle tasks live under
        # it): first the run registry, which retains ended runs and shuts them down when
        # their retention is over, then the supervisor of run actors. If the registry
        # dies, rest_for_one stops every run with it: no run outlives the registry.
        ChildSpec("run_registry", _start_run_registry),
        ChildSpec(
            "run_supervisor",
            lambda: DynamicSupervisor.start_link(MAX_RUNS, name=RUN_SUPERVISOR),
            type="supervisor",
        ),
        # Admission control, after the runs as the design orders it. Nothing depends on
        # it restarting with them: a restarted controller starts empty, and releasing a
        # permit of the old one is a harmless no-op.
        admission.child_spec(admission_config),
    ]


def _start_session_owner() -> Pid:
    from adk_actors.sessions.memory import OWNER_NAME, SessionOwner

    return SessionOwner.start_link(name=OWNER_NAME)


def _start_run_registry() -> Pid:
    from adk_actors.runs.registry import start_registry

    return start_registry()


def _start_tasks() -> Pid:
    from supervision import register

    pid = start_task_supervisor()
    register(TASK_SUPERVISOR, pid)
    return pid  # type: ignore[no-any-return]


def start(*, admission_control: Mapping[str, Any] | None = None) -> Pid:
    """Start the root tree if it is not running; returns its pid.

    `admission_control` configures the application's admission controller (see
    `adk_actors.admission`); it is validated before anything starts and raises
    ``invalid_application_env`` naming the setting. A running tree is returned as is;
    asking it for another admission config is ``application_already_started``.
    """
    from adk_actors import admission

    try:
        admission_config = admission.validate_config(admission_control)
    except AdkError as error:
        raise AdkError(
            ("invalid_application_env", "admission_control", error.reason), error.detail
        ) from None
    with _lock:
        pid = whereis(APP_NAME)
        if pid is not None:
            if admission_control is not None and not _admission_matches(admission_config):
                raise AdkError(
                    ("application_already_started", "admission_control"),
                    "the application runs with another admission_control; stop() it first",
                )
            return pid
        return Supervisor.start(
            _children(admission_config),
            strategy="rest_for_one",
            intensity=10,
            period=5.0,
            name=APP_NAME,
        )


def _admission_matches(config: Any) -> bool:
    from adk_actors import admission

    try:
        running = admission.status()
    except AdkError:
        return False
    wanted = msgspec.structs.asdict(config) if isinstance(config, msgspec.Struct) else dict(config)
    return all(running.get(key, value) == value for key, value in wanted.items())


ensure_started = start


def stop(timeout: float = 30.0) -> None:
    """Stop the root tree (children in reverse order); a no-op if it is not running."""
    with _lock:
        pid = whereis(APP_NAME)
        if pid is not None:
            stop_server(pid, "shutdown", timeout=timeout)


def running() -> bool:
    return whereis(APP_NAME) is not None
