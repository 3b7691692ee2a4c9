"""What supervisors share: `ChildSpec`, `ChildInfo`, starting and stopping a child,
the restart decision and the restart-intensity window.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any, Literal, NamedTuple

from supervision import crash_report
from supervision.errors import KernelError, SupervisorError
from supervision.pid import Pid
from supervision.primitives import exit, link, unlink
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


class ChildInfo(NamedTuple):
    """One row of `which_children`: the child's id, its pid (None if not running), its type."""

    id: Hashable
    pid: Pid | None
    type: ChildType


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
        if not isinstance(period, int | float) or isinstance(period, bool) or period <= 0:
            raise SupervisorError(("invalid_period", period), "period must be > 0 seconds")
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


def unwrap(result: tuple[str, Any]) -> Any:
    """Turn a supervisor's ("ok", value) / ("error", reason) reply into a value or an error."""
    status, value = result
    if status == "ok":
        return value
    if isinstance(value, SupervisorError):
        raise value
    raise SupervisorError(value, f"supervisor refused: {crash_report.format_reason(value)}")
