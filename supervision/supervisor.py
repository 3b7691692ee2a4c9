"""`Supervisor`: OTP's static supervisor (one_for_one, one_for_all, rest_for_one).

Children start in order and stop in reverse order. When a child exits, its restart
type decides whether anything happens; the strategy decides which children restart.
More than `intensity` restarts within `period` seconds and the supervisor gives up:
it stops every child and exits with ``"shutdown"``, escalating to its own parent.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Literal, NamedTuple

from supervision import crash_report
from supervision.child_spec import (
    ChildInfo,
    ChildSpec,
    ChildStartFailed,
    CountChildren,
    DeleteChild,
    RestartChild,
    RestartIntensity,
    StartChild,
    TerminateChild,
    WhichChildren,
    check_spec,
    invalid_request,
    refuse,
    report_exit,
    shutdown_child,
    start_child_process,
    wants_restart,
)
from supervision.errors import SupervisorError
from supervision.gen_server import From, GenServer, Reply, Stop, call
from supervision.pid import Pid
from supervision.primitives import send, trap_exit
from supervision.process import self_pid
from supervision.protocol import (
    Answer,
    Ok,
    Refused,
    describe,
    is_hashable,
    log_unexpected,
    unwrap,
)
from supervision.signals import ExitSignal, Reason

Strategy = Literal["one_for_one", "one_for_all", "rest_for_one"]
_STRATEGIES = ("one_for_one", "one_for_all", "rest_for_one")


class _Child:
    __slots__ = ("pid", "spec")

    def __init__(self, spec: ChildSpec, pid: Pid | None) -> None:
        self.spec = spec
        self.pid = pid


class _State:
    def __init__(self, strategy: Strategy, intensity: RestartIntensity) -> None:
        self.strategy = strategy
        self.intensity = intensity
        self.children: list[_Child] = []  # in start order

    def find(self, child_id: Hashable) -> _Child | None:
        for child in self.children:
            if child.spec.id == child_id:
                return child
        return None

    def find_pid(self, pid: Pid) -> _Child | None:
        for child in self.children:
            if child.pid == pid:
                return child
        return None


class _RetryStart(NamedTuple):
    """Self-message: children whose restart failed, to try again (counts as a restart)."""

    ids: tuple[Hashable, ...]


class _SupervisorServer(GenServer):
    # A supervisor blocks while it stops a child (as in OTP). On the shared pool that
    # would hold a pool thread the child may need for its own `terminate`.
    dispatcher = "thread"

    def init(self, args: tuple[Sequence[ChildSpec], Strategy, RestartIntensity]) -> Any:
        specs, strategy, intensity = args
        trap_exit(True)
        state = _State(strategy, intensity)
        for spec in specs:
            try:
                pid = start_child_process(spec)
            except ChildStartFailed as failed:
                crash_report.supervisor_event(
                    "supervision.supervisor.child_start_failed",
                    self_pid(),
                    child_id=spec.id,
                    reason=failed.reason,
                )
                self._stop_all(state)
                return Stop(("failed_to_start_child", spec.id, failed.reason))
            if pid is not None or spec.restart != "temporary":
                state.children.append(_Child(spec, pid))
        return state

    def handle_call(self, request: object, from_: From, state: _State) -> Reply:
        match request:
            case WhichChildren():
                rows = [ChildInfo(c.spec.id, c.pid, c.spec.type) for c in state.children]
                return Reply(Ok(rows), state)
            case CountChildren():
                return Reply(Ok(_count(state)), state)
            case StartChild(spec):
                return Reply(self._start_new(state, spec), state)
            case TerminateChild(child_id) if is_hashable(child_id):
                return Reply(self._terminate(state, child_id), state)
            case RestartChild(child_id) if is_hashable(child_id):
                return Reply(self._restart(state, child_id), state)
            case DeleteChild(child_id) if is_hashable(child_id):
                return Reply(self._delete(state, child_id), state)
            case TerminateChild() | RestartChild() | DeleteChild():
                return Reply(invalid_request(request, "a child id must be hashable"), state)
        return Reply(invalid_request(request), state)

    def handle_cast(self, msg: Any, state: _State) -> _State:
        log_unexpected("Supervisor", "cast", msg)
        return state

    def handle_info(self, msg: Any, state: _State) -> Any:
        if type(msg) is ExitSignal:
            return self._child_exited(state, msg.pid, msg.reason)
        if type(msg) is _RetryStart:
            if not state.intensity.add_restart():
                return self._give_up(state)
            return self._start_in_order(state, msg.ids)
        return state

    def terminate(self, reason: Reason, state: Any) -> None:
        if isinstance(state, _State):
            self._stop_all(state)

    # -- restarts ----------------------------------------------------------------------

    def _child_exited(self, state: _State, pid: Pid | None, reason: Reason) -> Any:
        child = state.find_pid(pid) if pid is not None else None
        if child is None:
            return state  # not a current child (already replaced or shut down by us)
        child.pid = None
        if not wants_restart(child.spec.restart, reason):
            report_exit(self_pid(), child.spec.id, pid, reason, "no_restart")  # type: ignore[arg-type]
            if child.spec.restart == "temporary":
                state.children.remove(child)
            return state
        report_exit(self_pid(), child.spec.id, pid, reason, "restart")  # type: ignore[arg-type]
        if not state.intensity.add_restart():
            return self._give_up(state)
        if state.strategy == "one_for_one":
            return self._start_in_order(state, (child.spec.id,))
        index = state.children.index(child)
        affected = state.children if state.strategy == "one_for_all" else state.children[index:]
        for sibling in reversed(affected):
            if sibling is not child and sibling.pid is not None:
                shutdown_child(sibling.pid, sibling.spec.shutdown)  # type: ignore[arg-type]
                sibling.pid = None
        # temporary siblings stopped by the strategy are never restarted
        state.children = [
            c
            for c in state.children
            if c is child or c not in affected or c.spec.restart != "temporary"
        ]
        ids = tuple(c.spec.id for c in state.children if c is child or c in affected)
        return self._start_in_order(state, ids)

    def _start_in_order(self, state: _State, ids: tuple[Hashable, ...]) -> Any:
        for position, child_id in enumerate(ids):
            child = state.find(child_id)
            if child is None or child.pid is not None:
                continue
            try:
                child.pid = start_child_process(child.spec)
            except ChildStartFailed as failed:
                crash_report.supervisor_event(
                    "supervision.supervisor.child_start_failed",
                    self_pid(),
                    child_id=child_id,
                    reason=failed.reason,
                )
                send(self_pid(), _RetryStart(ids[position:]))
                return state
            if child.pid is None and child.spec.restart == "temporary":
                state.children.remove(child)
                continue
            crash_report.supervisor_event(
                "supervision.supervisor.child_restarted",
                self_pid(),
                child_id=child_id,
                pid=str(child.pid),
            )
        return state

    def _give_up(self, state: _State) -> Stop:
        crash_report.supervisor_event(
            "supervision.supervisor.max_intensity_reached",
            self_pid(),
            intensity=state.intensity.intensity,
            period=state.intensity.period,
        )
        return Stop("shutdown", state)

    # -- requests ----------------------------------------------------------------------

    def _start_new(self, state: _State, spec: object) -> Answer:
        try:
            checked = check_spec(spec)
        except SupervisorError as error:
            return Refused(error)
        existing = state.find(checked.id)
        if existing is not None:
            if existing.pid is not None:
                return refuse(("already_started", existing.pid))
            return refuse("already_present")
        try:
            pid = start_child_process(checked)
        except ChildStartFailed as failed:
            return refuse(failed.reason)
        if pid is not None or checked.restart != "temporary":
            state.children.append(_Child(checked, pid))
        return Ok(pid)

    @staticmethod
    def _terminate(state: _State, child_id: Hashable) -> Answer:
        child = state.find(child_id)
        if child is None:
            return refuse("not_found")
        if child.pid is not None:
            shutdown_child(child.pid, child.spec.shutdown)  # type: ignore[arg-type]
            child.pid = None
        if child.spec.restart == "temporary":
            state.children.remove(child)
        return Ok(None)

    @staticmethod
    def _restart(state: _State, child_id: Hashable) -> Answer:
        child = state.find(child_id)
        if child is None:
            return refuse("not_found")
        if child.pid is not None:
            return refuse("running")
        try:
            child.pid = start_child_process(child.spec)
        except ChildStartFailed as failed:
            return refuse(failed.reason)
        return Ok(child.pid)

    @staticmethod
    def _delete(state: _State, child_id: Hashable) -> Answer:
        child = state.find(child_id)
        if child is None:
            return refuse("not_found")
        if child.pid is not None:
            return refuse("running")
        state.children.remove(child)
        return Ok(None)

    @staticmethod
    def _stop_all(state: _State) -> None:
        for child in reversed(state.children):
            if child.pid is not None:
                shutdown_child(child.pid, child.spec.shutdown)  # type: ignore[arg-type]
                child.pid = None


def _count(state: _State) -> dict[str, int]:
    return {
        "specs": len(state.children),
        "active": sum(1 for c in state.children if c.pid is not None and c.pid.is_alive()),
        "supervisors": sum(1 for c in state.children if c.spec.type == "supervisor"),
        "workers": sum(1 for c in state.children if c.spec.type == "worker"),
    }


class Supervisor:
    """Start and query static supervisors. Every function takes the supervisor's pid or name."""

    @staticmethod
    def start_link(
        children: Sequence[ChildSpec],
        *,
        strategy: Strategy = "one_for_one",
        intensity: int = 3,
        period: float = 5.0,
        name: Hashable | None = None,
    ) -> Pid:
        """Start a supervisor linked to the caller, and its children in order.

        Raises `StartError` with reason ``("failed_to_start_child", id, reason)`` if a
        child fails to start (the children already started are stopped first).
        """
        return _SupervisorServer.start_link(
            _check_args(children, strategy, intensity, period), name=name
        )

    @staticmethod
    def start(
        children: Sequence[ChildSpec],
        *,
        strategy: Strategy = "one_for_one",
        intensity: int = 3,
        period: float = 5.0,
        name: Hashable | None = None,
    ) -> Pid:
        """Like `start_link`, without a link to the caller."""
        return _SupervisorServer.start(
            _check_args(children, strategy, intensity, period), name=name
        )

    @staticmethod
    def check_childspecs(children: Sequence[ChildSpec]) -> None:
        """Raise `SupervisorError` if `start_link` would refuse these specs (OTP's
        ``check_childspecs``): ``("invalid_child_spec", what)`` or
        ``("duplicate_child_id", id)``."""
        _check_specs(children)

    @staticmethod
    def which_children(sup: Pid | Hashable, timeout: float | None = None) -> list[ChildInfo]:
        return unwrap(call(sup, WhichChildren(), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def count_children(sup: Pid | Hashable, timeout: float | None = None) -> dict[str, int]:
        """``{"specs", "active", "supervisors", "workers"}`` as OTP counts them."""
        return unwrap(call(sup, CountChildren(), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def start_child(
        sup: Pid | Hashable, spec: ChildSpec, timeout: float | None = None
    ) -> Pid | None:
        """Add and start a child; `SupervisorError` with ``already_present`` or
        ``("already_started", pid)`` if the id is in use, or the start failure's reason."""
        return unwrap(call(sup, StartChild(spec), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def terminate_child(
        sup: Pid | Hashable, child_id: Hashable, timeout: float | None = None
    ) -> None:
        """Stop a child and keep its spec (a temporary child's spec is dropped)."""
        unwrap(call(sup, TerminateChild(child_id), timeout))

    @staticmethod
    def restart_child(
        sup: Pid | Hashable, child_id: Hashable, timeout: float | None = None
    ) -> Pid | None:
        """Start a terminated child again; ``running`` or ``not_found`` otherwise."""
        return unwrap(call(sup, RestartChild(child_id), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def delete_child(sup: Pid | Hashable, child_id: Hashable, timeout: float | None = None) -> None:
        """Forget a terminated child's spec; ``running`` or ``not_found`` otherwise."""
        unwrap(call(sup, DeleteChild(child_id), timeout))


def _check_specs(children: object) -> list[ChildSpec]:
    if not isinstance(children, Sequence) or isinstance(children, str | bytes | ChildSpec):
        raise SupervisorError(
            ("invalid_child_spec", "children"),
            f"children must be a sequence of ChildSpec, not {describe(children)}",
        )
    specs = [check_spec(spec) for spec in children]
    seen: set[Hashable] = set()
    for spec in specs:
        if spec.id in seen:
            raise SupervisorError(
                ("duplicate_child_id", spec.id), f"two children share the id {spec.id!r}"
            )
        seen.add(spec.id)
    return specs


def _check_args(
    children: Sequence[ChildSpec], strategy: str, intensity: int, period: float
) -> tuple[list[ChildSpec], Strategy, RestartIntensity]:
    if not isinstance(strategy, str) or strategy not in _STRATEGIES:
        raise SupervisorError(
            ("invalid_strategy", strategy), f"strategy must be one of {_STRATEGIES}"
        )
    specs = _check_specs(children)
    return specs, strategy, RestartIntensity(intensity, period)  # type: ignore[return-value]
