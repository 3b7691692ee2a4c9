"""`send_after` / `cancel_timer`: one timer service thread for every timer.

Timers live in a heap ordered by their monotonic due time. A timer aimed at a pid
is cancelled when that process exits, so dead processes leave no timers behind; a
timer aimed at a name resolves the name when it fires.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Hashable
from typing import Any

from supervision.pid import Pid
from supervision.process import Process, _hooks, is_fenced_thread, resolve
from supervision.signals import Ref


class TimerRef(Ref):
    """Returned by `send_after`; pass it to `cancel_timer`."""

    __slots__ = ("dest", "due", "message", "target")

    def __init__(
        self, dest: Pid | Hashable, target: Process | None, message: Any, due: float
    ) -> None:
        super().__init__()
        self.dest = dest
        self.target = target
        self.message = message
        self.due = due

    def __repr__(self) -> str:
        return f"#TimerRef<{self._id}>"


class _TimerService:
    """The single thread that fires timers; started on first use."""

    def __init__(self) -> None:
        self._wake = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, TimerRef]] = []
        self._active: dict[TimerRef, None] = {}
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def schedule(self, timer: TimerRef) -> None:
        if timer.target is not None and not timer.target.add_timer(timer):
            return  # the destination is already dead: the timer never fires
        with self._wake:
            self._active[timer] = None
            heapq.heappush(self._heap, (timer.due, next(self._order), timer))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="supervision-timers", daemon=True
                )
                self._thread.start()
            elif self._heap[0][2] is timer:
                self._wake.notify()
        if timer.target is not None and not timer.target.alive:
            self.cancel(timer)  # it died between add_timer and here: leave nothing behind

    def cancel(self, timer: TimerRef) -> bool:
        with self._wake:
            found = self._active.pop(timer, False) is None
            if len(self._heap) > 2 * len(self._active) + 64:
                # many cancelled timers far in the future: rebuild instead of waiting
                self._heap = [entry for entry in self._heap if entry[2] in self._active]
                heapq.heapify(self._heap)
        if found and timer.target is not None:
            timer.target.discard_timer(timer)
        return found

    def active_count(self) -> int:
        with self._wake:
            return len(self._active)

    def _run(self) -> None:
        while True:
            due: list[TimerRef] = []
            with self._wake:
                while not due:
                    now = time.monotonic()
                    while self._heap and self._heap[0][0] <= now:
                        timer = heapq.heappop(self._heap)[2]
                        if self._active.pop(timer, False) is None:
                            due.append(timer)
                    if due:
                        break
                    if not self._heap:
                        self._wake.wait()
                    else:
                        self._wake.wait(self._heap[0][0] - now)
                    # drop cancelled entries from the top so the heap does not grow
                    while self._heap and self._heap[0][2] not in self._active:
                        heapq.heappop(self._heap)
            for timer in due:
                target = timer.target if timer.target is not None else resolve(timer.dest)
                if target is not None:
                    target.discard_timer(timer)
                    target.deliver(timer.message)


_service = _TimerService()


def send_after(dest: Pid | Hashable, message: Any, seconds: float) -> TimerRef:
    """Deliver `message` to `dest` (a pid or a registered name) after `seconds`.

    The message arrives as a plain message (`handle_info` for a GenServer).
    """
    if seconds < 0:
        raise ValueError("send_after: seconds must be >= 0")
    target = dest._process if type(dest) is Pid else None
    timer = TimerRef(dest, target, message, time.monotonic() + seconds)
    if not is_fenced_thread():  # a killed process's timers never fire
        _service.schedule(timer)
    return timer


def cancel_timer(timer: TimerRef) -> float | None:
    """Cancel a timer: the seconds it had left, or None if it already fired or was cancelled."""
    if _service.cancel(timer):
        return max(0.0, timer.due - time.monotonic())
    return None


def timer_count() -> int:
    """Timers scheduled and not yet fired or cancelled."""
    return _service.active_count()


def _cancel_for_exit(timer: Any) -> None:
    _service.cancel(timer)


_hooks.cancel_timer = _cancel_for_exit
