"""`DynamicSupervisor`: children started on demand, bounded by `max_children`.

Every child is independent (one_for_one). Runs, Live sessions, plugin instances,
shards and tasks live under one. On shutdown every child is told at once and the
supervisor waits for them together, so stopping 10,000 children does not take
10,000 sequential waits.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, NamedTuple

from supervision import crash_report
from supervision.child_spec import (
    ChildInfo,
    ChildSpec,
    ChildStartFailed,
    CountChildren,
    RestartIntensity,
    StartChild,
    TerminateChild,
    WhichChildren,
    begin_shutdown,
    check_spec,
    finish_shutdown,
    invalid_request,
    refuse,
    report_exit,
    shutdown_child,
    shutdown_deadline,
    start_child_process,
    wants_restart,
)
from supervision.errors import MaxChildrenReached, SupervisorError
from supervision.gen_server import From, GenServer, Reply, Stop, call
from supervision.pid import Pid
from supervision.primitives import send, trap_exit
from supervision.process import self_pid
from supervision.protocol import Answer, Ok, Refused, log_unexpected, unwrap
from supervision.signals import ExitSignal, Reason


class _State:
    def __init__(self, max_children: int | None, intensity: RestartIntensity) -> None:
        self.max_children = max_children
        self.intensity = intensity
        self.children: dict[Pid, ChildSpec] = {}  # in start order


class _RetryStart(NamedTuple):
    spec: ChildSpec


class _DynamicSupervisorServer(GenServer):
    # A supervisor blocks while it stops a child (as in OTP). On the shared pool that
    # would hold a pool thread the child may need for its own `terminate`.
    dispatcher = "thread"

    def init(self, args: tuple[int | None, RestartIntensity]) -> _State:
        trap_exit(True)
        return _State(*args)

    def handle_call(self, request: object, from_: From, state: _State) -> Reply:
        match request:
            case StartChild(spec):
                return Reply(self._start(state, spec), state)
            case TerminateChild(Pid() as pid):
                return Reply(self._terminate(state, pid), state)
            case TerminateChild():
                why = "a dynamic supervisor's children are named by pid"
                return Reply(invalid_request(request, why), state)
            case WhichChildren():
                rows = [ChildInfo(spec.id, pid, spec.type) for pid, spec in state.children.items()]
                return Reply(Ok(rows), state)
            case CountChildren():
                specs = list(state.children.values())
                counts = {
                    "specs": len(specs),
                    "active": sum(1 for pid in state.children if pid.is_alive()),
                    "supervisors": sum(1 for s in specs if s.type == "supervisor"),
                    "workers": sum(1 for s in specs if s.type == "worker"),
                }
                return Reply(Ok(counts), state)
        return Reply(invalid_request(request), state)

    def handle_cast(self, msg: Any, state: _State) -> _State:
        log_unexpected("DynamicSupervisor", "cast", msg)
        return state

    def handle_info(self, msg: Any, state: _State) -> Any:
        if type(msg) is ExitSignal:
            spec = state.children.pop(msg.pid, None)  # type: ignore[arg-type]
            if spec is None:
                return state
            if not wants_restart(spec.restart, msg.reason):
                report_exit(self_pid(), spec.id, msg.pid, msg.reason, "no_restart")  # type: ignore[arg-type]
                return state
            report_exit(self_pid(), spec.id, msg.pid, msg.reason, "restart")  # type: ignore[arg-type]
            return self._restart(state, spec)
        if type(msg) is _RetryStart:
            return self._restart(state, msg.spec)
        return state

    def terminate(self, reason: Reason, state: Any) -> None:
        if not isinstance(state, _State):
            return
        children = list(reversed(state.children.items()))
        state.children.clear()
        deadlines = []
        for pid, spec in children:
            begin_shutdown(pid, spec.shutdown)  # type: ignore[arg-type]
            deadlines.append(shutdown_deadline(spec.shutdown))  # type: ignore[arg-type]
        for (pid, spec), deadline in zip(children, deadlines, strict=True):
            finish_shutdown(pid, spec.shutdown, deadline)  # type: ignore[arg-type]

    def _restart(self, state: _State, spec: ChildSpec) -> Any:
        if not state.intensity.add_restart():
            crash_report.supervisor_event(
                "supervision.supervisor.max_intensity_reached",
                self_pid(),
                intensity=state.intensity.intensity,
                period=state.intensity.period,
            )
            return Stop("shutdown", state)
        try:
            pid = start_child_process(spec)
        except ChildStartFailed as failed:
            crash_report.supervisor_event(
                "supervision.supervisor.child_start_failed",
                self_pid(),
                child_id=spec.id,
                reason=failed.reason,
            )
            send(self_pid(), _RetryStart(spec))
            return state
        if pid is not None:
            state.children[pid] = spec
            crash_report.supervisor_event(
                "supervision.supervisor.child_restarted", self_pid(), child_id=spec.id, pid=str(pid)
            )
        return state

    @staticmethod
    def _start(state: _State, spec: object) -> Answer:
        try:
            checked = check_spec(spec)
        except SupervisorError as error:
            return Refused(error)
        if state.max_children is not None and len(state.children) >= state.max_children:
            return Refused(MaxChildrenReached(state.max_children))
        try:
            pid = start_child_process(checked)
        except ChildStartFailed as failed:
            return refuse(failed.reason)
        if pid is not None:
            state.children[pid] = checked
        return Ok(pid)

    @staticmethod
    def _terminate(state: _State, pid: Pid) -> Answer:
        spec = state.children.pop(pid, None)
        if spec is None:
            return refuse("not_found")
        shutdown_child(pid, spec.shutdown)  # type: ignore[arg-type]
        return Ok(None)


class DynamicSupervisor:
    """Start and query dynamic supervisors. Every function takes the supervisor's pid or name."""

    @staticmethod
    def start_link(
        max_children: int | None = None,
        *,
        intensity: int = 3,
        period: float = 5.0,
        name: Hashable | None = None,
    ) -> Pid:
        return _DynamicSupervisorServer.start_link(
            _check_args(max_children, intensity, period), name=name
        )

    @staticmethod
    def start(
        max_children: int | None = None,
        *,
        intensity: int = 3,
        period: float = 5.0,
        name: Hashable | None = None,
    ) -> Pid:
        return _DynamicSupervisorServer.start(
            _check_args(max_children, intensity, period), name=name
        )

    @staticmethod
    def start_child(
        sup: Pid | Hashable, spec: ChildSpec, timeout: float | None = None
    ) -> Pid | None:
        """Start a child; raises `MaxChildrenReached` when `max_children` already run."""
        return unwrap(call(sup, StartChild(spec), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def terminate_child(sup: Pid | Hashable, pid: Pid, timeout: float | None = None) -> None:
        """Stop the child `pid`; ``not_found`` if it is not a child of this supervisor."""
        unwrap(call(sup, TerminateChild(pid), timeout))

    @staticmethod
    def which_children(sup: Pid | Hashable, timeout: float | None = None) -> list[ChildInfo]:
        return unwrap(call(sup, WhichChildren(), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def count_children(sup: Pid | Hashable, timeout: float | None = None) -> dict[str, int]:
        return unwrap(call(sup, CountChildren(), timeout))  # type: ignore[no-any-return]


def _check_args(
    max_children: int | None, intensity: int, period: float
) -> tuple[int | None, RestartIntensity]:
    if max_children is not None and (
        not isinstance(max_children, int) or isinstance(max_children, bool) or max_children < 0
    ):
        raise SupervisorError(
            ("invalid_max_children", max_children), "max_children must be None or an int >= 0"
        )
    return max_children, RestartIntensity(intensity, period)
