"""`DynamicSupervisor`: children started on demand, bounded by `max_children`.

Every child is independent (one_for_one). Runs, Live sessions, plugin instances,
shards and tasks live under one. On shutdown every child is told at once and the
supervisor waits for them together, so stopping 10,000 children does not take
10,000 sequential waits.

Direct starts. `start_child` (without a timeout) does not send the supervisor a
message: the calling thread runs the child's start itself, as the supervisor (its
thread is bound to the supervisor's process for the start, so the child is linked to
the supervisor and has it as parent, exactly as when the supervisor's own thread ran
it), then records the child and returns. That saves the two cross-thread wake-ups of
a call (the supervisor's and the caller's) per start. Starts stay serial, as in OTP:
whoever runs a start (a caller, or the supervisor's thread for a restart) holds the
supervisor's start lock until the child is recorded, and the supervisor takes that
lock before it restarts a child, answers a call (which_children, terminate_child...:
answered after a start under way, as a call queued behind a StartChild was), handles
the exit of a pid it does not know yet (a child that died before its starter recorded
it), or shuts down. The children table itself is read and written under a second,
short lock. The main thread starts directly too, with its SIGINT and SIGTERM handlers
held back until the child is recorded (`deferred_signals`): Python runs them there,
between any two bytecodes, and a Ctrl-C must not land halfway through a child's init
or the supervisor's bookkeeping; it lands once the start is over (a second Ctrl-C
during the child's own start function lands at once, for a start that hangs). Other
signals are not held (an alarm still stops a start that hangs). Starts from an event
loop's thread stay calls: a child's init never runs on a running loop.
Asyncio code awaits `start_child_async` instead, a call whose reply is handed to the
loop: the loop runs on while the supervisor's thread starts the child.

The start lock is reentrant: a pooled child's init runs on its starter's thread, so a
sibling it starts re-enters the lock. `max_children` therefore counts the starts under
way (`_State.starting`) with the recorded children: the outer child is not in the
table yet when its init starts the sibling. A pool worker that must wait for the lock
first pays the wake-ups it deferred (`wakeups.before_blocking`), as every kernel wait
does: a server it readied must not sit in the ready queue while it waits.
"""

from __future__ import annotations

import itertools
import threading
from asyncio import _get_running_loop  # in `asyncio.events.__all__`; no raise when none
from collections.abc import Hashable
from threading import get_ident, main_thread
from typing import Any, NamedTuple, NoReturn

from supervision import aio, crash_report
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
from supervision.deferred_signals import signals_deferred
from supervision.errors import MaxChildrenReached, ProcessExit, SupervisorError
from supervision.gen_server import From, GenServer, Reply, Stop, call
from supervision.pid import Pid
from supervision.primitives import send, trap_exit
from supervision.process import Process, _current, bind_thread, current_process, resolve, self_pid
from supervision.protocol import Answer, Ok, Refused, log_unexpected, unwrap
from supervision.signals import ExitSignal, Reason
from supervision.wakeups import acquire_or_hand_over


class _Restarting(NamedTuple):
    """A child whose restart failed: a `_RetryStart` carrying `token` is queued."""

    spec: ChildSpec
    token: int


_Child = ChildSpec | _Restarting
"""A running child is its spec alone: one object per child, however many there are."""


def _spec(child: _Child) -> ChildSpec:
    return child.spec if isinstance(child, _Restarting) else child


class _State:
    """The supervisor's state, shared with the callers that start children directly.

    `children` is read and written under `lock` (held briefly, never across a start);
    `start_lock` is held by whoever runs a child's start until the child is recorded,
    so starts are serial (OTP). The lock is reentrant (a pooled child's init, run on
    its starter's thread, may start a sibling), so `starting` counts the starts under
    way on the lock's holder (changed under `start_lock` only) and `max_children`
    counts them with the table. `stopping` is set (under `start_lock`) when
    `terminate` begins.
    """

    def __init__(
        self, max_children: int | None, intensity: RestartIntensity, direct_starts: bool
    ) -> None:
        self.max_children = max_children
        self.intensity = intensity
        self.direct_starts = direct_starts
        # by pid: a running child's, or a restarting child's last one; in start order
        self.children: dict[Pid, _Child] = {}
        self.me = self_pid()
        self.lock = threading.Lock()
        self.start_lock = threading.RLock()  # a child's init may start a sibling
        self.starting = 0  # starts under way (nested ones included): not in `children` yet
        self.stopping = False
        self.stop_reason: Reason = None

    def taken(self, pid: Pid) -> bool:
        return pid == self.me or pid in self.children

    def get(self, pid: Pid) -> _Child | None:
        with self.lock:
            return self.children.get(pid)

    def record(self, pid: Pid, child: _Child) -> None:
        with self.lock:
            self.children[pid] = child

    def full(self) -> Refused | None:
        """The refusal if `max_children` children exist or are being started (call with
        `start_lock` held): a nested start must count the outer child, not yet recorded."""
        if (
            self.max_children is not None
            and len(self.children) + self.starting >= self.max_children
        ):
            return Refused(MaxChildrenReached(self.max_children))
        return None

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

    shared: _State | None = None
    """The state, for direct starts from other threads (None until init has run)."""

    def init(self, args: tuple[int | None, RestartIntensity, bool]) -> _State:
        trap_exit(True)
        self.shared = state = _State(*args)
        return state

    def handle_call(self, request: object, from_: From, state: _State) -> Reply:
        # Answered after any start under way on a caller's thread has recorded its
        # child, as a call queued behind a StartChild was: whoever learned a child's
        # pid from its init (a task it spawned, a message) finds it in the table.
        with state.start_lock:
            return self._answer(request, state)

    def _answer(self, request: object, state: _State) -> Reply:
        match request:
            case StartChild(spec, None | Context() as context):
                return Reply(run_in(context, self._start, state, spec), state)
            case TerminateChild(Pid() as pid):
                return Reply(self._terminate(state, pid), state)
            case WhichChildren():
                with state.lock:
                    rows = [state.info(pid, child) for pid, child in state.children.items()]
                return Reply(Ok(rows), state)
            case WhichChild(Pid() as pid):
                child = state.get(pid)
                found = None if child is None else state.info(pid, child)
                return Reply(refuse("not_found") if found is None else Ok(found), state)
            case GetChildSpec(Pid() as pid):
                child = state.get(pid)
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
                child = state.get(pid)
                if child is None:
                    # Perhaps a child that died before its starter recorded it: the
                    # starter holds the start lock until it has, so wait for it.
                    with state.start_lock:
                        child = state.get(pid)
                if child is None or isinstance(child, _Restarting):
                    return state
                if not wants_restart(child.restart, reason):
                    with state.lock:
                        del state.children[pid]
                    report_exit(self_pid(), child.id, pid, reason, "no_restart")
                    return state
                report_exit(self_pid(), child.id, pid, reason, "restart")
                with state.start_lock:
                    with state.lock:
                        del state.children[pid]
                    return self._restart(state, pid, child, reason)
            case _RetryStart(pid, token, reason):
                with state.start_lock:
                    child = state.get(pid)
                    if not isinstance(child, _Restarting) or child.token != token:
                        return state  # terminated, or failed again, since: stale
                    with state.lock:
                        del state.children[pid]
                    return self._restart(state, pid, child.spec, reason)
        return state

    def terminate(self, reason: Reason, state: Any) -> None:
        if not isinstance(state, _State):
            return
        # A start under way on a caller's thread ends first (it holds the start lock
        # until its child is recorded), as OTP's shutdown waits behind a start_child;
        # a start that comes later finds `stopping` and fails as a call would.
        with state.start_lock:
            state.stopping = True
            state.stop_reason = reason
            with state.lock:
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
        ``{restarting, OldPid}``). The caller holds the start lock."""
        if not state.intensity.add_restart():
            crash_report.supervisor_event(
                "supervision.supervisor.max_intensity_reached",
                self_pid(),
                intensity=state.intensity.intensity,
                period=state.intensity.period,
            )
            return Stop("shutdown", state)
        state.starting += 1  # its init may start a sibling: count this child (M2)
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
            state.record(old_pid, _Restarting(spec, token))
            send(self_pid(), _RetryStart(old_pid, token, reason))
            return state
        finally:
            state.starting -= 1
        if pid is not None:  # a restart that returns None drops the child, as OTP
            state.record(pid, spec)
            crash_report.child_restarted(self_pid(), spec.id, pid, reason)
        return state

    @staticmethod
    def _start(state: _State, spec: object) -> Answer:
        return _start_recorded(state, spec, None)

    @staticmethod
    def _terminate(state: _State, pid: Pid) -> Answer:
        """OTP's simple_one_for_one ``terminate_child``: a restarting child (named by its
        last pid) stops restarting; a pid that is no child but already dead is ok."""
        with state.lock:
            child = state.children.pop(pid, None)
        if child is None:
            return Ok(None) if not pid.is_alive() else refuse("not_found")
        if not isinstance(child, _Restarting):
            shutdown_child(pid, child.shutdown)  # type: ignore[arg-type]
        return Ok(None)


def _start_directly(sup: Pid | Hashable, spec: object) -> Answer | None:
    """`start_child` on the calling thread: the supervisor's answer, or None where the
    start must be a call (not a dynamic supervisor whose init has run, one started with
    ``direct_starts=False``, an event loop's thread, or the caller is the
    supervisor itself, which a call refuses with ``calling_self``). Raises `ProcessExit`
    as a call to the supervisor would: ``noproc`` if it is dead, its exit reason if it
    stops before the start."""
    process = resolve(sup)
    server = getattr(process, "server", None)
    if type(server) is not _DynamicSupervisorServer or process is None:
        return None  # no such process, or not a dynamic supervisor: as a call answers
    state = server.shared
    if state is None or not state.direct_starts:
        return None
    if _get_running_loop() is not None:
        return None  # an event loop's thread: see `start_child`
    me = current_process(create=False)
    if me is process:
        return None
    if me is not None and not me.alive and not me.is_pseudo:
        raise ProcessExit(me.exit_reason, "this thread's process was killed")
    if not process.alive:
        raise ProcessExit("noproc", f"{sup!r} is not alive")
    # The start runs in a copy of the caller's context, as the call's start did; on the
    # main thread, with its signal handlers held back until the child is recorded.
    if get_ident() != main_thread().ident:
        return capture().run(_start_recorded, state, spec, process)
    with signals_deferred():
        return capture().run(_start_recorded, state, spec, process)


def _start_recorded(state: _State, spec: object, supervisor: Process | None) -> Answer:
    """Check `spec`, run its start and record the child, all under the start lock: the
    one start path, for a call (on the supervisor's own thread, `supervisor` None) and a
    direct start (`supervisor` is the supervisor's process).

    A direct start binds this thread to `supervisor` while the start runs, so the child
    is linked to it and has it as parent. Once the lock is held (the wait may be long,
    e.g. behind a `terminate_child`) it raises `ProcessExit` if the caller's process was
    killed meanwhile (the kernel's fence: a killed process starts nothing) or, as a call
    would, if the supervisor went; and after the start if the supervisor died then.
    """
    try:
        checked = check_spec(spec)
    except SupervisorError as error:
        return Refused(error)
    if checked.significant:
        return _refuse_significant()
    caller = getattr(_current, "process", None)
    lock = state.start_lock
    # A kernel wait: a pool worker first wakes the servers it readied and owes
    # (28b5589), or they would wait in the ready queue until this start ends.
    acquire_or_hand_over(lock)
    try:
        if supervisor is not None:
            _check_still_there(caller, supervisor, state)
        full = state.full()
        if full is not None:
            return full
        state.starting += 1
        if supervisor is not None:
            bind_thread(supervisor)
        try:
            pid = start_child_process(checked, state.taken)
            answer: Answer = Ok(pid)
        except ChildStartFailed as failed:
            pid = None  # a child it could not link has its exit signal already (L1)
            answer = refuse(failed.reason)
        finally:
            if supervisor is not None:
                bind_thread(caller)
            state.starting -= 1
        if supervisor is not None and not supervisor.alive:
            _supervisor_gone(supervisor.exit_reason)  # linked, the child goes too
        if pid is not None:
            state.record(pid, checked)
        return answer
    finally:
        lock.release()


def _check_still_there(caller: Process | None, supervisor: Process, state: _State) -> None:
    """A direct start that waited for the start lock: raise `ProcessExit` if the
    caller's process was killed meanwhile (as `_start_directly` does before the wait) or
    the supervisor died or began to stop."""
    if caller is not None and not caller.alive and not caller.is_pseudo:
        raise ProcessExit(caller.exit_reason, "this thread's process was killed")
    if not supervisor.alive or state.stopping:
        _supervisor_gone(supervisor.exit_reason if not supervisor.alive else state.stop_reason)


def _supervisor_gone(reason: Reason) -> NoReturn:
    """What a call raises when its server exits before it replies."""
    raise ProcessExit(reason, f"the supervisor exited: {crash_report.format_reason(reason)}")


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
    with state.lock:
        children = dict(state.children)
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
        direct_starts: bool = True,
    ) -> Pid:
        """A dynamic supervisor linked to the caller. With `direct_starts` False, every
        `start_child` is a call the supervisor's thread answers (the start runs there)."""
        return _DynamicSupervisorServer.start_link(
            _check_args(max_children, intensity, period, direct_starts), name=name
        )

    @staticmethod
    def start(
        max_children: int | None = None,
        *,
        intensity: int = 3,
        period: float = 5.0,
        name: Hashable | None = None,
        direct_starts: bool = True,
    ) -> Pid:
        return _DynamicSupervisorServer.start(
            _check_args(max_children, intensity, period, direct_starts), name=name
        )

    @staticmethod
    def start_child(
        sup: Pid | Hashable, spec: ChildSpec, timeout: float | None = None
    ) -> Pid | None:
        """Start a child; raises `MaxChildrenReached` when `max_children` children (running
        or restarting) exist, ``("invalid_child_spec", what)`` for a malformed or a
        significant spec.

        Returns once the child is in the supervisor's table. Without a `timeout` the
        calling thread runs the start itself, as the supervisor (see the module's
        docstring); with one, or from the supervisor itself, it is a call. On the main
        thread a Ctrl-C (SIGINT, or a SIGTERM) that arrives during the start is held
        back and handled once the child is recorded, so it never aborts a start
        halfway; the same signal again during the child's own start function lands at
        once (a start that hangs can still be stopped). On a
        thread running an asyncio event loop the start is a call: the child's init must
        not find itself on a running loop (where blocking helpers refuse to block)."""
        if timeout is None:
            answer = _start_directly(sup, spec)
            if answer is not None:
                return unwrap(answer)  # type: ignore[no-any-return]
        request = StartChild(spec, capture())  # the child starts in the caller's context
        return unwrap(call(sup, request, timeout))  # type: ignore[no-any-return]

    @staticmethod
    async def start_child_async(
        sup: Pid | Hashable, spec: ChildSpec, timeout: float | None = None
    ) -> Pid | None:
        """`start_child` for asyncio code: the supervisor's thread runs the start (in a
        copy of the caller's context) while the event loop runs on, and no thread waits.
        The same answers and errors, and `CallTimeout` after `timeout` seconds. A cancelled
        await does not cancel the start: a child it started is the supervisor's like any
        other (as with a call whose caller left), so a caller that must not leave one
        behind shields the await and ends the child itself."""
        request = StartChild(spec, capture())
        return unwrap(await aio.call(sup, request, timeout))  # type: ignore[no-any-return]

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
    max_children: int | None, intensity: int, period: float, direct_starts: bool
) -> tuple[int | None, RestartIntensity, bool]:
    if max_children is not None and (
        not isinstance(max_children, int) or isinstance(max_children, bool) or max_children < 0
    ):
        raise SupervisorError(
            ("invalid_max_children", max_children), "max_children must be None or an int >= 0"
        )
    if type(direct_starts) is not bool:
        raise SupervisorError(("invalid_direct_starts", direct_starts), "direct_starts is a bool")
    return max_children, RestartIntensity(intensity, period), direct_starts
