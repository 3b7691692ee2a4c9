"""The application: the root supervision tree.

`start_tree` (idempotent) starts ``adk.app``, a `rest_for_one` supervisor, with its
children in dependency order (a service starts after the services it uses);
`app.stop()` shuts them down in reverse order. A new service's supervisor takes its
place in that order.

This is the composition root: it imports the areas whose servers it starts (sessions,
runs, admission, ambient; the plugin-instance and workflow supervisors are plain
DynamicSupervisors). Those areas import the tree's names from `app.py`, never this
module, and `adk_actors/__init__.py` installs `start_tree` as `app.start`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any

import msgspec

from adk_actors import admission, app
from adk_actors.ambient import supervisor as ambient_supervisor
from adk_actors.app import (
    AGENT_SUPERVISOR,
    AGENT_SUPERVISOR_INTENSITY,
    AGENT_SUPERVISOR_PERIOD,
    APP_NAME,
    MAX_RUNS,
    MAX_WORKFLOWS,
    RUN_SUPERVISOR,
    TASK_SUPERVISOR,
    WORKFLOW_SUPERVISOR,
    WORKFLOW_SUPERVISOR_INTENSITY,
    WORKFLOW_SUPERVISOR_PERIOD,
    tree_lock,
)
from adk_actors.mcp import client_supervisor as mcp_client_supervisor
from adk_actors.plugins import notifier as plugin_notifier
from adk_actors.runs.registry import start_registry
from adk_actors.sessions.memory import OWNER_NAME, SessionOwner
from providers.errors import AdkError
from supervision import (
    ChildSpec,
    DynamicSupervisor,
    Pid,
    Supervisor,
    register,
    start_task_supervisor,
    whereis,
)


def _children(admission_config: admission.AdmissionConfig) -> list[ChildSpec]:
    # rest_for_one: a child that dies takes down every child after it, so nothing
    # outlives what it depends on. Agents come before the task supervisor in the
    # design's order; agent turns use the kernel's task supervisor for now.
    return [
        # first: agents and runs record into sessions, so they start after it
        ChildSpec("session_owner", _start_session_owner),
        # Stateful plugin instances, before the agents (the design's order): runs use
        # them, so none outlives a restart of this supervisor. Children are temporary:
        # a crashed instance is never replaced behind its pid.
        ChildSpec(
            "plugin_instance_supervisor",
            lambda: DynamicSupervisor.start_link(
                app.MAX_PLUGIN_INSTANCES, name=app.PLUGIN_INSTANCE_SUPERVISOR
            ),
            type="supervisor",
        ),
        # Plugin run-end notifications (after_run, on_run_error), after the instances
        # their hooks may call and before the invocation servers that send them (a
        # service starts before its users): on stop every run has ended, and cast its
        # last notification, before the notifier drains (a few seconds, then kills).
        # Under a one_for_one supervisor of its own: a notifier that dies is restarted
        # there alone, never taking the agents and runs after it down (a restarted
        # agent supervisor starts empty); only a notifier crash loop past that
        # supervisor's intensity reaches this tree.
        ChildSpec(
            "plugin_notifier_supervisor",
            lambda: Supervisor.start_link(
                [plugin_notifier.child_spec()], strategy="one_for_one", intensity=5, period=10
            ),
            type="supervisor",
        ),
        # Each agent has its own restart intensity (its `AgentLifeline`): a crash loop
        # fails that agent alone. Giving up here would restart every agent and, through
        # rest_for_one, every run after it, and a restarted agent supervisor starts empty,
        # so it never gives up on account of agent restarts (a ceiling no real restart
        # rate reaches: each restart is a process start in this supervisor's thread).
        ChildSpec(
            "agent_supervisor",
            lambda: DynamicSupervisor.start_link(
                name=AGENT_SUPERVISOR,
                intensity=AGENT_SUPERVISOR_INTENSITY,
                period=AGENT_SUPERVISOR_PERIOD,
            ),
            type="supervisor",
        ),
        ChildSpec("task_supervisor", _start_tasks, type="supervisor", shutdown="brutal_kill"),
        # Runs, after the task supervisor (every run's worker and settle tasks live under
        # it): first the run registry, which retains ended runs and shuts them down when
        # their retention is over, then the supervisor of run actors. If the registry
        # dies, rest_for_one stops every run with it: no run outlives the registry.
        ChildSpec("run_registry", start_registry),
        ChildSpec(
            "run_supervisor",
            lambda: DynamicSupervisor.start_link(MAX_RUNS, name=RUN_SUPERVISOR),
            type="supervisor",
        ),
        # Admission control, after the runs as the design orders it. Nothing depends on
        # it restarting with them: a restarted controller starts empty, and releasing a
        # permit of the old one is a harmless no-op.
        admission.child_spec(admission_config),
        # Ambient triggers, after admission control (the design's order): their jobs
        # start runs, so a restart of anything before it stops every trigger too.
        ambient_supervisor.child_spec(),
        # MCP clients, after ambient (the design's order). Each client is a temporary
        # child: a dead client is never restarted behind its pid and clients fail
        # independently; a restart of anything before it closes every client (and
        # stops their stdio servers).
        mcp_client_supervisor.child_spec(),
        # Workflows, after the MCP clients (the design's order; the auth supervisor
        # will come between ambient and MCP). Each workflow is a temporary coordinator
        # child: a crash fails that workflow alone, nothing is restarted. Workflows use
        # agents, tasks and runs, which all start before it, so a restart of any of them
        # stops every workflow too (rest_for_one): no workflow outlives what it uses.
        ChildSpec(
            "workflow_supervisor",
            lambda: DynamicSupervisor.start_link(
                MAX_WORKFLOWS,
                intensity=WORKFLOW_SUPERVISOR_INTENSITY,
                period=WORKFLOW_SUPERVISOR_PERIOD,
                name=WORKFLOW_SUPERVISOR,
            ),
            type="supervisor",
        ),
    ]


def _start_session_owner() -> Pid:
    return SessionOwner.start_link(name=OWNER_NAME)


def _start_tasks() -> Pid:
    pid = start_task_supervisor()
    register(TASK_SUPERVISOR, pid)
    return pid  # type: ignore[no-any-return]


def start_tree(admission_control: Mapping[str, Any] | None = None) -> Pid:
    """Start the root tree if it is not running; returns its pid (see `app.start`)."""
    try:
        admission_config = admission.validate_config(admission_control)
    except AdkError as error:
        raise AdkError(
            ("invalid_application_env", "admission_control", error.reason), error.detail
        ) from None
    with tree_lock:
        pid = whereis(APP_NAME)
        if pid is not None:
            if admission_control is not None and not _admission_matches(admission_config):
                raise AdkError(
                    ("application_already_started", "admission_control"),
                    "the application runs with another admission_control; stop() it first",
                )
            return pid
        # In an empty context: a server keeps a copy of its starter's contextvars for
        # life, and the tree is often started lazily inside a request (its trace span,
        # a request id); no process of the tree should carry that request's context.
        return contextvars.Context().run(
            Supervisor.start,
            _children(admission_config),
            strategy="rest_for_one",
            intensity=10,
            period=5.0,
            name=APP_NAME,
        )


def _admission_matches(config: admission.AdmissionConfig) -> bool:
    try:
        running = admission.status()
    except AdkError:
        return False
    wanted = msgspec.structs.asdict(config)
    return all(running.get(key, value) == value for key, value in wanted.items())
