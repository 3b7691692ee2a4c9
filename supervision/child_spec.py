"""What supervisors share: `ChildSpec`, `ChildInfo`, the requests both supervisors
answer, starting and stopping a child, the restart decision and the restart-intensity
window.

A spec is checked field by field before a supervisor keeps it (`check_spec`): whatever
object arrives in a request, the check refuses it with ``("invalid_child_spec", field)``
and never raises anything else, so a malformed request cannot crash a supervisor.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Literal, NamedTuple

from supervision import crash_report
from supervision.carried_context import Context
from supervision.deferred_signals import interruptible
from supervision.errors import KernelError, SupervisorError
from supervision.pid import Exited, Pid
from supervision.primitives import exit, link, unlink
from supervision.process import Process, current_process, resolve
from supervision.protocol import Refused, describe
from supervision.signals import Crash, Reason, is_normal_exit

Restart = Literal["permanent", "transient", "temporary"]
Shutdown = float | Literal["brutal_kill", "infinity"]
ChildType = Literal["worker", "supervisor"]

DEFAULT_WORKER_SHUTDOWN = 5.0
"""Seconds a worker gets to stop after ``shutdown`` before it is killed (OTP's default)."""

_MAX_WAIT = threading.TIMEOUT_MAX
"""The longest a thread can wait (centuries); a longer `shutdown` is ``"infinity"``."""


class ChildSpec(NamedTuple):
    """How to start and supervise one child.

    `start` is called in the supervisor's process and returns the child's `Pid` (use
    ``start_link`` so the child is linked) or None to be ignored. `shutdown` is seconds
    to wait after the ``shutdown`` exit signal before killing, ``"brutal_kill"`` or
    ``"infinity"``; by default 5 s for a worker and ``"infinity"`` for a supervisor.
    A `significant` child (transient or temporary only) ends its supervisor when it
    exits on its own, if the supervisor's ``auto_shutdown`` says so (OTP 24+).
    """

    id: Hashable
    start: Callable[[], Pid | None]
    restart: Restart = "permanent"
    shutdown: Shutdown | None = None
    type: ChildType = "worker"
    significant: bool = False

    def checked(self) -> ChildSpec:
        """This spec with defaults filled in (itself if it has none to fill); raises
        `SupervisorError` if it is malformed."""
        if not hashable(self.id):
            raise SupervisorError(
                ("invalid_child_spec", "id"), f"child id must be hashable, not {describe(self.id)}"
            )
        if not callable(self.start):
            raise _invalid(self.id, "start", "start must be callable")
        restart = _choice(self.restart, _RESTARTS)
        if restart is None:
            raise _invalid(self.id, "restart", "restart must be permanent, transient or temporary")
        child_type = _choice(self.type, _CHILD_TYPES)
        if child_type is None:
            raise _invalid(self.id, "type", "type must be worker or supervisor")
        if type(self.significant) is not bool:
            raise _invalid(self.id, "significant", "significant must be a bool")
        if self.significant and restart == "permanent":
            raise _invalid(
                self.id,
                "significant",
                "a permanent child cannot be significant (OTP: bad_combination)",
            )
        shutdown = _checked_shutdown(self.shutdown, child_type, self.id)
        if restart is self.restart and child_type is self.type and shutdown is self.shutdown:
            return self  # already in canonical form: a supervisor keeps it as it is
        # tuple.__new__: the fields are checked, and `_replace` costs a few microseconds
        return tuple.__new__(
            type(self), (self.id, self.start, restart, shutdown, child_type, self.significant)
        )


_RESTARTS = ("permanent", "transient", "temporary")
_CHILD_TYPES = ("worker", "supervisor")


def _invalid(child_id: object, field: str, what: str) -> SupervisorError:
    """``("invalid_child_spec", field)``, the message naming the child (built only here,
    on the way to a refusal: a well-formed spec never pays for its label)."""
    return SupervisorError(("invalid_child_spec", field), f"child {_label(child_id)}: {what}")


def _checked_shutdown(shutdown: object, child_type: str, child_id: object) -> Shutdown:
    if shutdown is None:
        return DEFAULT_WORKER_SHUTDOWN if child_type == "worker" else "infinity"
    if type(shutdown) is float and 0 <= shutdown < _MAX_WAIT:
        return shutdown  # the common case, as `checked` leaves it: kept as it is
    keyword = _choice(shutdown, ("brutal_kill", "infinity"))
    if keyword is not None:
        return keyword  # type: ignore[return-value]
    if isinstance(shutdown, int | float) and not isinstance(shutdown, bool):
        try:
            seconds = float(shutdown)  # a plain number: a subclass's comparisons never run
        except Exception:
            seconds = math.nan
        if seconds >= 0:  # NaN is not
            # no thread waits longer than TIMEOUT_MAX (centuries): beyond that is infinity
            return "infinity" if seconds >= _MAX_WAIT else seconds
    raise _invalid(child_id, "shutdown", "shutdown must be seconds >= 0, brutal_kill or infinity")


def hashable(value: object) -> bool:
    """True if `value` can be a dict key (a child id): any error from its ``__hash__``,
    or from its ``__eq__`` (which a lookup may call), says no."""
    try:
        hash(value)
        _ = value == value  # an id whose comparison raises would crash a lookup later
    except Exception:
        return False
    return True


def _choice(value: object, choices: tuple[str, ...]) -> str | None:
    """The plain string among `choices` that `value` equals, or None. Only `str`'s own
    comparison runs, so an object with a strange ``__eq__`` cannot raise here."""
    if isinstance(value, str):
        for choice in choices:
            if str.__eq__(value, choice) is True:
                return choice
    return None


def _label(child_id: object) -> str:
    """A child id for an error message: bounded, and never a failing ``__repr__``."""
    if isinstance(child_id, str | int) and not isinstance(child_id, bool):
        return repr(child_id)[:80]
    return describe(child_id)


def check_spec(spec: object) -> ChildSpec:
    """`spec` with defaults filled in; `SupervisorError` with reason
    ``("invalid_child_spec", what)`` if it is not a well-formed `ChildSpec`."""
    if not isinstance(spec, ChildSpec):
        raise SupervisorError(
            ("invalid_child_spec", "spec"), f"expected a ChildSpec, not {describe(spec)}"
        )
    return spec.checked()


class ChildInfo(NamedTuple):
    """One row of `which_children`: the child's id, its pid (None if not running), its type.

    `restarting` is True for a child whose restart failed and that the supervisor is
    trying to start again (OTP lists ``restarting`` in place of its pid); its `pid` is
    then None.
    """

    id: Hashable
    pid: Pid | None
    type: ChildType
    restarting: bool = False


# -- the requests a supervisor answers, each with `Ok(value)` or `Refused(error)` ------------


class WhichChildren(NamedTuple):
    """Every child as a `ChildInfo`, in start order."""


class CountChildren(NamedTuple):
    """``{"specs", "active", "supervisors", "workers"}``, as OTP counts them."""


class StartChild(NamedTuple):
    """Add and start a child; the answer is its pid (None if `start` ignored it).
    `start` runs in `context`, the caller's (see `carried_context`), when given."""

    spec: ChildSpec
    context: Context | None = None


class TerminateChild(NamedTuple):
    """Stop a child: by id for a `Supervisor`, by pid for a `DynamicSupervisor`."""

    child: Hashable


class RestartChild(NamedTuple):
    """Start a terminated child of a `Supervisor` again (by id)."""

    child_id: Hashable


class DeleteChild(NamedTuple):
    """Forget a terminated child's spec (`Supervisor` only)."""

    child_id: Hashable


class WhichChild(NamedTuple):
    """One child's `ChildInfo` (OTP 27 ``which_child``): by id, or by pid for a dynamic one."""

    child: Hashable


class GetChildSpec(NamedTuple):
    """One child's `ChildSpec` with its defaults filled in: by id, or by pid for a dynamic one."""

    child: Hashable


def refuse(reason: Reason) -> Refused:
    """The answer for a request the supervisor refuses with an OTP reason."""
    return Refused(
        SupervisorError(reason, f"supervisor refused: {crash_report.format_reason(reason)}")
    )


def invalid_request(request: object, why: str | None = None) -> Refused:
    """The answer for a request a supervisor does not take (unknown, or badly typed)."""
    detail = f"{describe(request)}: {why}" if why else f"not a request: {describe(request)}"
    return Refused(SupervisorError("invalid_request", detail))


class ChildStartFailed(Exception):
    """A child's start failed with `reason`. If the start returned a process that could
    not be linked, `start_child_process` has given it the exit signal of its dead
    supervisor already, on every path."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(reason)
        self.reason = reason


def start_child_process(spec: ChildSpec, taken: Callable[[Pid], bool]) -> Pid | None:
    """Run `spec.start` in the calling supervisor and make sure the child is linked.

    Whatever `start` raises (a `KernelError`, any exception, even ``SystemExit``) or
    returns besides a new `Pid` or None becomes `ChildStartFailed`: a start cannot crash
    the supervisor. `taken(pid)` is true for the supervisor itself and its current
    children, which a start must not return (``bad_start_return``).
    """
    try:
        with interruptible():  # a second Ctrl-C may stop the child's start, no more
            pid = spec.start()
    except KernelError as exc:
        raise ChildStartFailed(exc.reason) from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        raise ChildStartFailed(Crash.from_exception(exc)) from None
    if pid is None:
        return None
    if type(pid) is not Pid:
        raise ChildStartFailed(
            Crash("bad_start_return", f"start returned {type(pid).__name__}, not a Pid")
        )
    if taken(pid):
        raise ChildStartFailed(
            Crash("bad_start_return", "start returned the supervisor or one of its children")
        )
    supervisor = current_process()
    child = resolve(pid)
    if supervisor is not None and child is not None and supervisor.linked_to(child):
        return pid  # a start_link child: linked already
    try:
        link(pid)  # a plain start() child is supervised too
    except KernelError as exc:
        _signal_orphan(supervisor, child)
        raise ChildStartFailed(exc.reason) from None
    _signal_orphan(supervisor, child)  # the supervisor may have died during the link
    return pid


def _signal_orphan(supervisor: Process | None, child: Process | None) -> None:
    """A plain `start()` child whose supervisor died (killed by the start itself, or
    meanwhile) before the link was made: a dead process links to nothing, so give the
    child the exit signal that link would have given, whichever thread runs the start
    (a caller's direct start, the supervisor's own thread, a restart, a `Supervisor`).

    It is a link's signal, so trappable, as in OTP: a child that traps exits gets an
    `ExitSignal(supervisor, reason)` message and lives on (it has no parent to stop
    for), exactly as it would had the link been made just before the supervisor died.
    A second signal, if the link was made after all, is harmless (ignored, or one more
    message to a trapping child)."""
    if supervisor is not None and child is not None and not supervisor.alive:
        child.exit_signal(supervisor, supervisor.exit_reason, from_link=True)


def begin_shutdown(pid: Pid, shutdown: Shutdown) -> None:
    """Unlink the child and send it ``shutdown`` (or ``kill`` for ``brutal_kill``)."""
    unlink(pid)
    exit(pid, "kill" if shutdown == "brutal_kill" else "shutdown")


def finish_shutdown(pid: Pid, shutdown: Shutdown, deadline: float | None) -> Reason:
    """Wait for a child told to shut down; kill it at `deadline`. Returns its exit reason."""
    process = resolve(pid)
    if process is None:  # dead: wait for the end of its exit's propagation, if under way
        exited = pid._process
        assert isinstance(exited, Exited)
        process = exited.propagating
        if process is None:
            return exited.exit_reason
    if (
        shutdown != "infinity"
        and deadline is not None
        and not process.wait_dead(max(0.0, deadline - time.monotonic()))
    ):
        exit(pid, "kill")
    process.wait_dead(None)
    return process.exit_reason


def shutdown_deadline(shutdown: Shutdown) -> float | None:
    if isinstance(shutdown, str):
        return None
    return time.monotonic() + shutdown


def shutdown_child(pid: Pid, shutdown: Shutdown) -> Reason:
    """Stop one child the OTP way: ``shutdown``, wait, then ``kill``."""
    begin_shutdown(pid, shutdown)
    return finish_shutdown(pid, shutdown, shutdown_deadline(shutdown))


def wants_restart(restart: Restart, reason: Reason) -> bool:
    """Permanent children always restart, transient ones after an abnormal exit only."""
    if restart == "permanent":
        return True
    return restart == "transient" and not is_normal_exit(reason)


class RestartIntensity:
    """OTP's restart window: more than `intensity` restarts within `period` seconds is too many."""

    def __init__(self, intensity: int, period: float) -> None:
        if not isinstance(intensity, int) or isinstance(intensity, bool) or intensity < 0:
            raise SupervisorError(("invalid_intensity", intensity), "intensity must be an int >= 0")
        if (
            not isinstance(period, int | float)
            or isinstance(period, bool)
            or not 0 < period < math.inf
        ):
            raise SupervisorError(("invalid_period", period), "period must be finite and > 0 s")
        self.intensity = intensity
        self.period = float(period)
        self._restarts: deque[float] = deque()

    def add_restart(self) -> bool:
        """Count one restart; False if that exceeds the intensity (the supervisor gives up)."""
        now = time.monotonic()
        self._restarts.append(now)
        while self._restarts and self._restarts[0] < now - self.period:
            self._restarts.popleft()
        return len(self._restarts) <= self.intensity


def report_exit(
    supervisor: Pid, child_id: Hashable, pid: Pid, reason: Reason, decision: str
) -> None:
    abnormal = not is_normal_exit(reason)
    if not abnormal and not crash_report.routine_exits_logged():
        return  # a DEBUG event nothing records: not even its fields are built
    crash_report.supervisor_event(
        "supervision.supervisor.child_exited",
        supervisor,
        child_id=child_id,
        pid=str(pid),
        reason=reason,
        decision=decision,
        abnormal=abnormal,
    )
