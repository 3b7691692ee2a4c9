"""`DynamicSupervisor`: children started on demand, bounded by `max_children`.

Every child is independent (one_for_one). Runs, Live sessions, plugin instances,
shards and tasks live under one. On shutdown every child is told at once and the
supervisor waits for them together, so stopping 10,000 children does not take
10,000 sequential waits.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable
from typing import Any, NamedTuple

from supervision import crash_report
from supervision.carried_context import Context, capture, run_in
from supervision.child_spec import (
    ChildInfo,
    ChildSpec,
    ChildStartFailed,
    CountChildren,
    GetChildSpec,
    RestartIntensity,
    StartChild,
    TerminateChild,
    WhichChild,
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


class _Restarting(NamedTuple):
    """A child whose restart failed: a `_RetryStart` carrying `token` is queued."""

    spec: ChildSpec
    token: int


_Child = ChildSpec | _Restarting
"""A running child is its spec alone: one object per child, however many there are."""


def _spec(child: _Child) -> ChildSpec:
    return child.spec if isinstance(child, _Restarting) else child


class _State:
    def __init__(self, max_children: int | None, intensity: RestartIntensity) -> None:
        self.max_children = max_children
        self.intensity = intensity
        # by pid: a running child's, or a restarting child's last one; in start order
        self.children: dict[Pid, _Child] = {}
        self.me = self_pid()

    def taken(self, pid: Pid) -> bool:
        return pid == self.me or pid in self.children

    @staticmethod
    def info(pid: Pid, child: _Child) -> ChildInfo:
        if isinstance(child, _Restarting):
            return ChildInfo(child.spec.id, None, child.spec.type, True)
        return ChildInfo(child.id, pid, child.type)


class _RetryStart(NamedTuple):
    """Self-message: start the restarting child keyed by `pid` again (a stale `token`,
    of a child terminated or failed again since, is ignored). `reason` is the exit
    reason that started the restart (for the restart reports)."""

    pid: Pid
    token: int
    reason: Reason


_tokens = itertools.count(1)


class _DynamicSupervisorServer(GenServer):
    # A supervisor blocks while it stops a child (as in OTP). On the shared pool that
    # would hold a pool thread the child may need for its own `terminate`.
    dispatcher = "thread"

    def init(self, args: tuple[int | None, RestartIntensity]) -> _State:
        trap_exit(True)
        return _State(*args)

    def handle_call(self, request: object, from_: From, state: _State) -> Reply:
        match request:
            case StartChild(spec, None | Context() as context):
                return Reply(run_in(context, self._start, state, spec), state)
            case TerminateChild(Pid() as pid):
                return Reply(self._terminate(state, pid), state)
            case WhichChildren():
                rows = [state.info(pid, child) for pid, child in state.children.items()]
                return Reply(Ok(rows), state)
            case WhichChild(Pid() as pid):
                child = state.children.get(pid)
                found = None if child is None else state.info(pid, child)
                return Reply(refuse("not_found") if found is None else Ok(found), state)
            case GetChildSpec(Pid() as pid):
                child = state.children.get(pid)
                return Reply(refuse("not_found") if child is None else Ok(_spec(child)), state)
            case TerminateChild() | WhichChild() | GetChildSpec():
                why = "a dynamic supervisor's children are named by pid"
                return Reply(invalid_request(request, why), state)
            case CountChildren():
                return Reply(Ok(_count(state)), state)
        return Reply(invalid_request(request), state)

    def handle_cast(self, msg: Any, state: _State) -> _State:
        log_unexpected("DynamicSupervisor", "cast", msg)
        return state

    def handle_info(self, msg: Any, state: _State) -> Any:
        match msg:
            case ExitSignal(Pid() as pid, reason):
                child = state.children.get(pid)
                if child is None or isinstance(child, _Restarting):
                    return state
                del state.children[pid]
                if not wants_restart(child.restart, reason):
                    report_exit(self_pid(), child.id, pid, reason, "no_restart")
                    return state
                report_exit(self_pid(), child.id, pid, reason, "restart")
                return self._restart(state, pid, child, reason)
            case _RetryStart(pid, token, reason):
                child = state.children.get(pid)
                if not isinstance(child, _Restarting) or child.token != token:
                    return state  # terminated, or failed again, since: stale
                del state.children[pid]
                return self._restart(state, pid, child.spec, reason)
        return state

    def terminate(self, reason: Reason, state: Any) -> None:
        if not isinstance(state, _State):
            return
        children = [
            (pid, child)
            for pid, child in reversed(state.children.items())
            if not isinstance(child, _Restarting)
        ]
        state.children.clear()
        deadlines = []
        for pid, spec in children:
            begin_shutdown(pid, spec.shutdown)  # type: ignore[arg-type]
            deadlines.append(shutdown_deadline(spec.shutdown))  # type: ignore[arg-type]
        for (pid, spec), deadline in zip(children, deadlines, strict=True):
            finish_shutdown(pid, spec.shutdown, deadline)  # type: ignore[arg-type]

    def _restart(self, state: _State, old_pid: Pid, spec: ChildSpec, reason: Reason) -> Any:
        """Count a restart and start `spec` again (the child exited with `reason`); on
        failure keep it restarting under `old_pid` and queue a retry (OTP's
        ``{restarting, OldPid}``)."""
        if not state.intensity.add_restart():
            crash_report.supervisor_event(
                "supervision.supervisor.max_intensity_reached",
                self_pid(),
                intensity=state.intensity.intensity,
                period=state.intensity.period,
            )
            return Stop("shutdown", state)
        try:
            pid = start_child_process(spec, state.taken)
        except ChildStartFailed as failed:
            crash_report.supervisor_event(
                "supervision.supervisor.child_start_failed",
                self_pid(),
                child_id=spec.id,
                reason=failed.reason,
            )
            token = next(_tokens)
            state.children[old_pid] = _Restarting(spec, token)
            send(self_pid(), _RetryStart(old_pid, token, reason))
            return state
        if pid is not None:  # a restart that returns None drops the child, as OTP
            state.children[pid] = spec
            crash_report.child_restarted(self_pid(), spec.id, pid, reason)
        return state

    @staticmethod
    def _start(state: _State, spec: object) -> Answer:
        try:
            checked = check_spec(spec)
        except SupervisorError as error:
            return Refused(error)
        if checked.significant:
            return _refuse_significant()
        if state.max_children is not None and len(state.children) >= state.max_children:
            return Refused(MaxChildrenReached(state.max_children))
        try:
            pid = start_child_process(checked, state.taken)
        except ChildStartFailed as failed:
            return refuse(failed.reason)
        if pid is not None:
            state.children[pid] = checked
        return Ok(pid)

    @staticmethod
    def _terminate(state: _State, pid: Pid) -> Answer:
        """OTP's simple_one_for_one ``terminate_child``: a restarting child (named by its
        last pid) stops restarting; a pid that is no child but already dead is ok."""
        child = state.children.pop(pid, None)
        if child is None:
            return Ok(None) if not pid.is_alive() else refuse("not_found")
        if not isinstance(child, _Restarting):
            shutdown_child(pid, child.shutdown)  # type: ignore[arg-type]
        return Ok(None)


def _refuse_significant() -> Refused:
    """OTP's simple_one_for_one takes no auto_shutdown, so no significant child either."""
    return Refused(
        SupervisorError(
            ("invalid_child_spec", "significant"),
            "a dynamic supervisor has no auto_shutdown: its children cannot be significant",
        )
    )


def _count(state: _State) -> dict[str, int]:
    """Every child is a spec (a restarting one too); active: running and alive."""
    children = state.children
    return {
        "specs": len(children),
        "active": sum(
            1 for p, c in children.items() if not isinstance(c, _Restarting) and p.is_alive()
        ),
        "supervisors": sum(1 for c in children.values() if _spec(c).type == "supervisor"),
        "workers": sum(1 for c in children.values() if _spec(c).type == "worker"),
    }


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
        """Start a child; raises `MaxChildrenReached` when `max_children` children (running
        or restarting) exist, ``("invalid_child_spec", what)`` for a malformed or a
        significant spec."""
        request = StartChild(spec, capture())  # the child starts in the caller's context
        return unwrap(call(sup, request, timeout))  # type: ignore[no-any-return]

    @staticmethod
    def terminate_child(sup: Pid | Hashable, pid: Pid, timeout: float | None = None) -> None:
        """Stop the child `pid` (a restarting child by its last pid: it stops restarting).
        None as well if `pid` is already dead (OTP); ``not_found`` if it is a live
        process that is not a child of this supervisor."""
        unwrap(call(sup, TerminateChild(pid), timeout))

    @staticmethod
    def which_children(sup: Pid | Hashable, timeout: float | None = None) -> list[ChildInfo]:
        """Every child; a restarting one has ``pid=None, restarting=True``."""
        return unwrap(call(sup, WhichChildren(), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def which_child(sup: Pid | Hashable, pid: Pid, timeout: float | None = None) -> ChildInfo:
        """The row of the child `pid` (OTP 27 ``which_child``); ``not_found`` otherwise."""
        return unwrap(call(sup, WhichChild(pid), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def get_childspec(sup: Pid | Hashable, pid: Pid, timeout: float | None = None) -> ChildSpec:
        """The spec the child `pid` was started from; ``not_found`` otherwise."""
        return unwrap(call(sup, GetChildSpec(pid), timeout))  # type: ignore[no-any-return]

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
