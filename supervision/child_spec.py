"""What supervisors share: `ChildSpec`, `ChildInfo`, the requests both supervisors
answer, starting and stopping a child, the restart decision and the restart-intensity
window.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Literal, NamedTuple

from supervision import crash_report
from supervision.errors import KernelError, SupervisorError
from supervision.pid import Pid
from supervision.primitives import exit, link, unlink
from supervision.protocol import Refused, describe, is_hashable
from supervision.signals import Crash, Reason, is_normal_exit

Restart = Literal["permanent", "transient", "temporary"]
Shutdown = float | Literal["brutal_kill", "infinity"]
ChildType = Literal["worker", "supervisor"]

DEFAULT_WORKER_SHUTDOWN = 5.0
"""Seconds a worker gets to stop after ``shutdown`` before it is killed (OTP's default)."""


class ChildSpec(NamedTuple):
    """How to start and supervise one child.

    `start` is called in the supervisor's process and returns the child's `Pid` (use
    ``start_link`` so the child is linked) or None to be ignored. `shutdown` is seconds
    to wait after the ``shutdown`` exit signal before killing, ``"brutal_kill"`` or
    ``"infinity"``; by default 5 s for a worker and ``"infinity"`` for a supervisor.
    """

    id: Hashable
    start: Callable[[], Pid | None]
    restart: Restart = "permanent"
    shutdown: Shutdown | None = None
    type: ChildType = "worker"

    def checked(self) -> ChildSpec:
        """This spec with defaults filled in; raises `SupervisorError` if it is malformed."""
        if not is_hashable(self.id):
            raise SupervisorError(
                ("invalid_child_spec", "id"), f"child id must be hashable, not {describe(self.id)}"
            )
        if not callable(self.start):
            raise SupervisorError(
                ("invalid_child_spec", "start"), f"child {self.id!r}: start must be callable"
            )
        if self.restart not in ("permanent", "transient", "temporary"):
            raise SupervisorError(
                ("invalid_child_spec", "restart"), f"child {self.id!r}: restart {self.restart!r}"
            )
        if self.type not in ("worker", "supervisor"):
            raise SupervisorError(
                ("invalid_child_spec", "type"), f"child {self.id!r}: type {self.type!r}"
            )
        shutdown = self.shutdown
        if shutdown is None:
            shutdown = DEFAULT_WORKER_SHUTDOWN if self.type == "worker" else "infinity"
        elif not (
            shutdown in ("brutal_kill", "infinity")
            or (
                isinstance(shutdown, int | float)
                and not isinstance(shutdown, bool)
                and shutdown >= 0
            )
        ):
            raise SupervisorError(
                ("invalid_child_spec", "shutdown"), f"child {self.id!r}: shutdown {shutdown!r}"
            )
        return self._replace(shutdown=shutdown)


def check_spec(spec: object) -> ChildSpec:
    """`spec` with defaults filled in; `SupervisorError` with reason
    ``("invalid_child_spec", what)`` if it is not a well-formed `ChildSpec`."""
    if not isinstance(spec, ChildSpec):
        raise SupervisorError(
            ("invalid_child_spec", "spec"), f"expected a ChildSpec, not {describe(spec)}"
        )
    return spec.checked()


class ChildInfo(NamedTuple):
    """One row of `which_children`: the child's id, its pid (None if not running), its type."""

    id: Hashable
    pid: Pid | None
    type: ChildType


# -- the requests a supervisor answers, each with `Ok(value)` or `Refused(error)` ------------


class WhichChildren(NamedTuple):
    """Every child as a `ChildInfo`, in start order."""


class CountChildren(NamedTuple):
    """``{"specs", "active", "supervisors", "workers"}``, as OTP counts them."""


class StartChild(NamedTuple):
    """Add and start a child; the answer is its pid (None if `start` ignored it)."""

    spec: ChildSpec


class TerminateChild(NamedTuple):
    """Stop a child: by id for a `Supervisor`, by pid for a `DynamicSupervisor`."""

    child: Hashable


class RestartChild(NamedTuple):
    """Start a terminated child of a `Supervisor` again (by id)."""

    child_id: Hashable


class DeleteChild(NamedTuple):
    """Forget a terminated child's spec (`Supervisor` only)."""

    child_id: Hashable


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
    def __init__(self, reason: Reason) -> None:
        super().__init__(reason)
        self.reason = reason


def start_child_process(spec: ChildSpec) -> Pid | None:
    """Run `spec.start` in the calling supervisor and make sure the child is linked."""
    try:
        pid = spec.start()
    except KernelError as exc:
        raise ChildStartFailed(exc.reason) from None
    except Exception as exc:
        raise ChildStartFailed(Crash.from_exception(exc)) from None
    if pid is None:
        return None
    if type(pid) is not Pid:
        raise ChildStartFailed(
            Crash("bad_start_return", f"start returned {type(pid).__name__}, not a Pid")
        )
    try:
        link(pid)  # a no-op for start_link children; makes plain start() children supervised too
    except KernelError as exc:
        raise ChildStartFailed(exc.reason) from None
    return pid


def begin_shutdown(pid: Pid, shutdown: Shutdown) -> None:
    """Unlink the child and send it ``shutdown`` (or ``kill`` for ``brutal_kill``)."""
    unlink(pid)
    exit(pid, "kill" if shutdown == "brutal_kill" else "shutdown")


def finish_shutdown(pid: Pid, shutdown: Shutdown, deadline: float | None) -> Reason:
    """Wait for a child told to shut down; kill it at `deadline`. Returns its exit reason."""
    process = pid._process
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
    crash_report.supervisor_event(
        "supervision.supervisor.child_exited",
        supervisor,
        child_id=child_id,
        pid=str(pid),
        reason=reason,
        decision=decision,
        abnormal=not is_normal_exit(reason),
    )
