"""The timer service behind `send_after`: one thread, one heap, every timer.

A leaf module (it knows processes only by the methods it calls on them), so that the
process core can cancel a dying process's timers without importing `timers.py`, which
imports the process core for `send_after`.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from supervision.names import lookup
from supervision.pid import Pid
from supervision.signals import Ref

if TYPE_CHECKING:
    from supervision.process import Process


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
        self._wake_lock = threading.Lock()  # `with` it: cheaper than the condition's
        self._wake = threading.Condition(self._wake_lock)
        self._heap: list[tuple[float, int, TimerRef]] = []
        self._active: dict[TimerRef, None] = {}
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def schedule(self, timer: TimerRef) -> None:
        if timer.target is not None and not timer.target.add_timer(timer):
            return  # the destination is already dead: the timer never fires
        with self._wake_lock:
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
        with self._wake_lock:
            found = self._active.pop(timer, False) is None
            if len(self._heap) > 2 * len(self._active) + 64:
                # many cancelled timers far in the future: rebuild instead of waiting
                self._heap = [entry for entry in self._heap if entry[2] in self._active]
                heapq.heapify(self._heap)
        if found and timer.target is not None:
            timer.target.discard_timer(timer)
        return found

    def active_count(self) -> int:
        with self._wake_lock:
            return len(self._active)

    def _run(self) -> None:
        while True:
            due: list[TimerRef] = []
            with self._wake_lock:
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
                target = timer.target if timer.target is not None else _named(timer.dest)
                if target is not None:
                    target.discard_timer(timer)
                    target.deliver(timer.message)


def _named(dest: Pid | Hashable) -> Process | None:
    """The process a named timer reaches when it fires (a pid's timer holds its process)."""
    return None if type(dest) is Pid else lookup(dest)


service = _TimerService()


def cancel_for_exit(timer: Any) -> None:
    """Cancel a timer of a process that is exiting (the process core calls this)."""
    service.cancel(timer)
