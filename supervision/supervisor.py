"""`Supervisor`: OTP's static supervisor (one_for_one, one_for_all, rest_for_one).

Children start in order and stop in reverse order. When a child exits, its restart
type decides whether anything happens; the strategy decides which children restart.
More than `intensity` restarts within `period` seconds and the supervisor gives up:
it stops every child and exits with ``"shutdown"``, escalating to its own parent.
A restart that fails is retried through a message to the supervisor itself (the
child is *restarting* meanwhile); the children and their group restarts live in
`supervision.supervisor_children`. With ``auto_shutdown`` the supervisor also exits
with ``"shutdown"`` when its significant children exit on their own (OTP 24+).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Literal

from supervision import crash_report
from supervision.carried_context import Context, capture, run_in
from supervision.child_spec import (
    ChildInfo,
    ChildSpec,
    ChildStartFailed,
    CountChildren,
    DeleteChild,
    GetChildSpec,
    RestartChild,
    RestartIntensity,
    StartChild,
    TerminateChild,
    WhichChild,
    WhichChildren,
    check_spec,
    hashable,
    invalid_request,
    refuse,
    report_exit,
    wants_restart,
)
from supervision.errors import SupervisorError
from supervision.gen_server import From, GenServer, Reply, Stop, call
from supervision.pid import Pid
from supervision.primitives import trap_exit
from supervision.process import self_pid
from supervision.protocol import Answer, Ok, Refused, describe, log_unexpected, unwrap
from supervision.signals import ExitSignal, Reason
from supervision.supervisor_children import (
    STRATEGIES,
    ChildPhase,
    Children,
    RetryStart,
    Strategy,
    restart,
    start,
    stop,
    stop_all,
)

AutoShutdown = Literal["never", "any_significant", "all_significant"]
_AUTO_SHUTDOWNS = ("never", "any_significant", "all_significant")


class _State:
    def __init__(
        self, strategy: Strategy, intensity: RestartIntensity, auto_shutdown: AutoShutdown
    ) -> None:
        self.strategy = strategy
        self.intensity = intensity
        self.auto_shutdown = auto_shutdown
        self.children = Children()


class _SupervisorServer(GenServer):
    # A supervisor blocks while it stops a child (as in OTP). On the shared pool that
    # would hold a pool thread the child may need for its own `terminate`.
    dispatcher = "thread"

    def init(
        self, args: tuple[Sequence[ChildSpec], Strategy, RestartIntensity, AutoShutdown]
    ) -> Any:
        specs, strategy, intensity, auto_shutdown = args
        trap_exit(True)
        state = _State(strategy, intensity, auto_shutdown)
        for spec in specs:
            child = state.children.add(spec)
            try:
                pid = start(state.children, child)
            except ChildStartFailed as failed:
                crash_report.supervisor_event(
                    "supervision.supervisor.child_start_failed",
                    self_pid(),
                    child_id=spec.id,
                    reason=failed.reason,
                )
                stop_all(state.children)
                return Stop(("failed_to_start_child", spec.id, failed.reason))
            if pid is None and spec.restart == "temporary":
                state.children.remove(child)  # an ignored temporary child is not kept
        return state

    def handle_call(self, request: object, from_: From, state: _State) -> Reply:
        match request:
            case WhichChildren():
                return Reply(Ok([child.info() for child in state.children]), state)
            case CountChildren():
                return Reply(Ok(_count(state.children)), state)
            case StartChild(spec, None | Context() as context):
                return Reply(run_in(context, self._start_new, state, spec), state)
            case (
                TerminateChild(child_id)
                | RestartChild(child_id)
                | DeleteChild(child_id)
                | WhichChild(child_id)
                | GetChildSpec(child_id)
            ) if not hashable(child_id):
                return Reply(invalid_request(request, "a child id must be hashable"), state)
            case TerminateChild(child_id):
                return Reply(self._terminate(state, child_id), state)
            case RestartChild(child_id):
                return Reply(self._restart(state, child_id), state)
            case DeleteChild(child_id):
                return Reply(self._delete(state, child_id), state)
            case WhichChild(child_id):
                child = state.children.get(child_id)
                return Reply(refuse("not_found") if child is None else Ok(child.info()), state)
            case GetChildSpec(child_id):
                child = state.children.get(child_id)
                return Reply(refuse("not_found") if child is None else Ok(child.spec), state)
        return Reply(invalid_request(request), state)

    def handle_cast(self, msg: Any, state: _State) -> _State:
        log_unexpected("Supervisor", "cast", msg)
        return state

    def handle_info(self, msg: Any, state: _State) -> Any:
        match msg:
            case ExitSignal(Pid() as pid, reason):
                return self._child_exited(state, pid, reason)
            case RetryStart(child_id, token, reason):
                child = state.children.get(child_id)
                if child is None or child.phase is not ChildPhase.RESTARTING:
                    return state  # terminated or restarted meanwhile: stale
                if child.token != token:
                    return state  # it failed again since: that failure queued its own retry
                if not state.intensity.add_restart():
                    return self._give_up(state)
                restart(state.children, state.strategy, child, reason)
        return state

    def terminate(self, reason: Reason, state: Any) -> None:
        if isinstance(state, _State):
            stop_all(state.children)

    # -- restarts ----------------------------------------------------------------------

    def _child_exited(self, state: _State, pid: Pid, reason: Reason) -> Any:
        child = state.children.with_pid(pid)
        if child is None:
            return state  # not a current child (already replaced or shut down by us)
        state.children.stopped(child)
        if not wants_restart(child.spec.restart, reason):
            report_exit(self_pid(), child.spec.id, pid, reason, "no_restart")
            if child.spec.restart == "temporary":
                state.children.remove(child)
            if child.spec.significant and self._auto_shutdown(state):
                crash_report.supervisor_event(
                    "supervision.supervisor.auto_shutdown",
                    self_pid(),
                    child_id=child.spec.id,
                    auto_shutdown=state.auto_shutdown,
                )
                return Stop("shutdown", state)
            return state
        report_exit(self_pid(), child.spec.id, pid, reason, "restart")
        if not state.intensity.add_restart():
            return self._give_up(state)
        restart(state.children, state.strategy, child, reason)
        return state

    @staticmethod
    def _auto_shutdown(state: _State) -> bool:
        """OTP's ``do_auto_shutdown``, after a significant child exited on its own."""
        if state.auto_shutdown == "any_significant":
            return True
        if state.auto_shutdown == "all_significant":
            return not any(
                c.spec.significant and c.phase is not ChildPhase.STOPPED for c in state.children
            )
        return False

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
            checked = _check_spec(spec, state.auto_shutdown)
        except SupervisorError as error:
            return Refused(error)
        existing = state.children.get(checked.id)
        if existing is not None:
            if existing.pid is not None:
                return refuse(("already_started", existing.pid))
            return refuse("already_present")
        child = state.children.add(checked)
        try:
            pid = start(state.children, child)
        except ChildStartFailed as failed:
            state.children.remove(child)
            return refuse(failed.reason)
        if pid is None and checked.restart == "temporary":
            state.children.remove(child)
        return Ok(pid)

    @staticmethod
    def _terminate(state: _State, child_id: Hashable) -> Answer:
        """OTP's ``terminate_child``: a RESTARTING child stops restarting."""
        child = state.children.get(child_id)
        if child is None:
            return refuse("not_found")
        stop(state.children, child)
        if child.spec.restart == "temporary":
            state.children.remove(child)
        return Ok(None)

    @staticmethod
    def _restart(state: _State, child_id: Hashable) -> Answer:
        child = state.children.get(child_id)
        if child is None:
            return refuse("not_found")
        if child.phase is not ChildPhase.STOPPED:
            return refuse(child.phase.value)  # "running" or "restarting", as OTP
        try:
            return Ok(start(state.children, child))
        except ChildStartFailed as failed:
            return refuse(failed.reason)

    @staticmethod
    def _delete(state: _State, child_id: Hashable) -> Answer:
        child = state.children.get(child_id)
        if child is None:
            return refuse("not_found")
        if child.phase is not ChildPhase.STOPPED:
            return refuse(child.phase.value)
        state.children.remove(child)
        return Ok(None)


def _count(children: Children) -> dict[str, int]:
    """OTP's counts: every spec (a restarting child too); active: running and alive."""
    return {
        "specs": len(children),
        "active": sum(1 for c in children if c.pid is not None and c.pid.is_alive()),
        "supervisors": sum(1 for c in children if c.spec.type == "supervisor"),
        "workers": sum(1 for c in children if c.spec.type == "worker"),
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
        auto_shutdown: AutoShutdown = "never",
        name: Hashable | None = None,
    ) -> Pid:
        """Start a supervisor linked to the caller, and its children in order.

        Raises `StartError` with reason ``("failed_to_start_child", id, reason)`` if a
        child fails to start (the children already started are stopped first).
        `auto_shutdown` (OTP 24+): ``"any_significant"`` or ``"all_significant"`` ends
        the supervisor (reason ``"shutdown"``) when any, or the last, significant child
        exits on its own; ``"never"`` (the default) refuses significant children.
        """
        return _SupervisorServer.start_link(
            _check_args(children, strategy, intensity, period, auto_shutdown), name=name
        )

    @staticmethod
    def start(
        children: Sequence[ChildSpec],
        *,
        strategy: Strategy = "one_for_one",
        intensity: int = 3,
        period: float = 5.0,
        auto_shutdown: AutoShutdown = "never",
        name: Hashable | None = None,
    ) -> Pid:
        """Like `start_link`, without a link to the caller."""
        return _SupervisorServer.start(
            _check_args(children, strategy, intensity, period, auto_shutdown), name=name
        )

    @staticmethod
    def check_childspecs(
        children: Sequence[ChildSpec], auto_shutdown: AutoShutdown | None = None
    ) -> None:
        """Raise `SupervisorError` if `start_link` would refuse these specs (OTP's
        ``check_childspecs``): ``("invalid_child_spec", what)`` or
        ``("duplicate_child_id", id)``. With `auto_shutdown` ``"never"``, a significant
        child is refused too, as `start_link` with that option would."""
        if auto_shutdown is not None:
            _check_auto_shutdown(auto_shutdown)
        _check_specs(children, auto_shutdown)

    @staticmethod
    def which_children(sup: Pid | Hashable, timeout: float | None = None) -> list[ChildInfo]:
        """Every child in start order; a restarting child has ``pid=None, restarting=True``."""
        return unwrap(call(sup, WhichChildren(), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def which_child(
        sup: Pid | Hashable, child_id: Hashable, timeout: float | None = None
    ) -> ChildInfo:
        """One child's row, as `which_children` lists it (OTP 27); ``not_found`` otherwise."""
        return unwrap(call(sup, WhichChild(child_id), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def get_childspec(
        sup: Pid | Hashable, child_id: Hashable, timeout: float | None = None
    ) -> ChildSpec:
        """A child's spec with its defaults filled in; ``not_found`` otherwise."""
        return unwrap(call(sup, GetChildSpec(child_id), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def count_children(sup: Pid | Hashable, timeout: float | None = None) -> dict[str, int]:
        """``{"specs", "active", "supervisors", "workers"}`` as OTP counts them."""
        return unwrap(call(sup, CountChildren(), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def start_child(
        sup: Pid | Hashable, spec: ChildSpec, timeout: float | None = None
    ) -> Pid | None:
        """Add and start a child; `SupervisorError` with ``already_present`` or
        ``("already_started", pid)`` if the id is in use, ``("invalid_child_spec",
        what)`` for a malformed spec, or the start failure's reason."""
        request = StartChild(spec, capture())  # the child starts in the caller's context
        return unwrap(call(sup, request, timeout))  # type: ignore[no-any-return]

    @staticmethod
    def terminate_child(
        sup: Pid | Hashable, child_id: Hashable, timeout: float | None = None
    ) -> None:
        """Stop a child and keep its spec (a temporary child's spec is dropped). A
        restarting child stops being restarted."""
        unwrap(call(sup, TerminateChild(child_id), timeout))

    @staticmethod
    def restart_child(
        sup: Pid | Hashable, child_id: Hashable, timeout: float | None = None
    ) -> Pid | None:
        """Start a terminated child again; ``running``, ``restarting`` or ``not_found``
        otherwise."""
        return unwrap(call(sup, RestartChild(child_id), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def delete_child(sup: Pid | Hashable, child_id: Hashable, timeout: float | None = None) -> None:
        """Forget a terminated child's spec; ``running``, ``restarting`` or ``not_found``
        otherwise."""
        unwrap(call(sup, DeleteChild(child_id), timeout))


def _check_spec(spec: object, auto_shutdown: AutoShutdown | None) -> ChildSpec:
    checked = check_spec(spec)
    if checked.significant and auto_shutdown == "never":
        raise SupervisorError(
            ("invalid_child_spec", "significant"),
            "a significant child needs auto_shutdown any_significant or all_significant"
            " (OTP: bad_combination)",
        )
    return checked


def _check_specs(children: object, auto_shutdown: AutoShutdown | None) -> list[ChildSpec]:
    if not isinstance(children, Sequence) or isinstance(children, str | bytes | ChildSpec):
        raise SupervisorError(
            ("invalid_child_spec", "children"),
            f"children must be a sequence of ChildSpec, not {describe(children)}",
        )
    specs = [_check_spec(spec, auto_shutdown) for spec in children]
    seen: set[Hashable] = set()
    for spec in specs:
        if spec.id in seen:
            raise SupervisorError(
                ("duplicate_child_id", spec.id), f"two children share the id {spec.id!r}"
            )
        seen.add(spec.id)
    return specs


def _check_auto_shutdown(auto_shutdown: object) -> None:
    if not isinstance(auto_shutdown, str) or auto_shutdown not in _AUTO_SHUTDOWNS:
        raise SupervisorError(
            ("invalid_auto_shutdown", auto_shutdown),
            f"auto_shutdown must be one of {_AUTO_SHUTDOWNS}",
        )


def _check_args(
    children: Sequence[ChildSpec],
    strategy: str,
    intensity: int,
    period: float,
    auto_shutdown: AutoShutdown,
) -> tuple[list[ChildSpec], Strategy, RestartIntensity, AutoShutdown]:
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise SupervisorError(
            ("invalid_strategy", strategy), f"strategy must be one of {STRATEGIES}"
        )
    _check_auto_shutdown(auto_shutdown)
    specs = _check_specs(children, auto_shutdown)
    return specs, strategy, RestartIntensity(intensity, period), auto_shutdown  # type: ignore[return-value]
