"""The ambient supervisor and its registry.

``adk.ambient`` is a `one_for_all` supervisor over the job supervisor (a kernel task
supervisor: every event's job and settling task), the trigger supervisor (a
DynamicSupervisor of temporary trigger servers and schedule sources) and the
registry (this module's `AmbientRegistry`, which serializes registration and bounds
the number of triggers). They live and die together: a trigger never outlives the
supervisor of its jobs, nor the registry that admitted it.
"""

from __future__ import annotations

from typing import Any

from adk_actors.ambient.options import MAX_TRIGGERS, TriggerOptions
from adk_actors.ambient.trigger import EVENT_BUDGET, JOB_SUPERVISOR, TriggerServer
from adk_actors.ambient.values import TRIGGER_NAME, Refusal, Register, Triggers
from adk_actors.app import AMBIENT_SUPERVISOR
from supervision import (
    ChildSpec,
    Down,
    DynamicSupervisor,
    From,
    GenServer,
    KernelError,
    Pid,
    Ref,
    Reply,
    Supervisor,
    monitor,
    register,
    start_task_supervisor,
    whereis,
)

TRIGGER_SUPERVISOR = "adk.ambient.triggers"
AMBIENT_REGISTRY = "adk.ambient.registry"


class _State:
    def __init__(self) -> None:
        self.triggers: dict[str, Pid] = {}
        self.by_ref: dict[Ref, str] = {}


class AmbientRegistry(GenServer):
    """Registers triggers one at a time: a free name, at most `MAX_TRIGGERS`."""

    def init(self, args: Any) -> _State:
        return _State()

    def handle_call(self, request: Any, from_: From, state: _State) -> Reply:
        match request:
            case Register(name, runner, TriggerOptions() as options):
                if whereis((TRIGGER_NAME, name)) is not None:
                    return Reply(Refusal("already_registered", "the name is taken"), state)
                if len(state.triggers) >= MAX_TRIGGERS:
                    return Reply(
                        Refusal("trigger_limit_reached", f"{MAX_TRIGGERS} triggers exist"), state
                    )
                spec = ChildSpec(
                    ("trigger", name),
                    lambda: TriggerServer.start_link(
                        (name, runner, options), name=(TRIGGER_NAME, name)
                    ),
                    restart="temporary",
                )
                try:
                    pid = DynamicSupervisor.start_child(TRIGGER_SUPERVISOR, spec)
                except KernelError as error:
                    return Reply(Refusal(("trigger_start_failed", error.reason), ""), state)
                assert pid is not None
                state.triggers[name] = pid
                state.by_ref[monitor(pid)] = name
                return Reply(None, state)
            case Triggers():
                return Reply(sorted(state.triggers), state)
        return Reply(Refusal("unsupported_request", type(request).__name__), state)

    def handle_info(self, msg: Any, state: _State) -> _State:
        match msg:
            case Down(ref, _, _):
                name = state.by_ref.pop(ref, None)
                if name is not None:
                    state.triggers.pop(name, None)
        return state


def _start_jobs() -> Pid:
    pid: Pid = start_task_supervisor()
    register(JOB_SUPERVISOR, pid)
    return pid


def start_ambient_supervisor() -> Pid:
    """Start ``adk.ambient`` (the application tree does, after admission control)."""
    EVENT_BUDGET.reset()  # the events of an earlier tree went with its triggers
    return Supervisor.start_link(
        [
            ChildSpec("job_supervisor", _start_jobs, type="supervisor", shutdown="brutal_kill"),
            ChildSpec(
                "trigger_supervisor",
                lambda: DynamicSupervisor.start_link(name=TRIGGER_SUPERVISOR),
                type="supervisor",
            ),
            ChildSpec("registry", lambda: AmbientRegistry.start_link(None, name=AMBIENT_REGISTRY)),
        ],
        strategy="one_for_all",
        name=AMBIENT_SUPERVISOR,
    )


def child_spec() -> ChildSpec:
    """The ambient supervisor's place in the application tree."""
    return ChildSpec("ambient_supervisor", start_ambient_supervisor, type="supervisor")
