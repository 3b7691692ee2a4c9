"""The timer service behind `send_after`: one thread, one heap, every timer.

A leaf module (it knows processes only by the methods it calls on them), so that the
process core can cancel a dying process's timers without importing `timers.py`, which
imports the process core for `send_after`.
"""

from __future__ import annotations

import heapq
import itertools
import math
import queue
import threading
import time
from collections import deque
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
    """The single thread that fires timers; started on first use.

    Scheduling and cancelling never wait for that thread. A new timer is added to
    `_active` and appended to `_incoming`, which the thread moves into its heap (the
    heap is the thread's alone); the thread is rung (`_bell`) only when the new timer
    is due before the thread would wake anyway (`_ring_before`, minus infinity while it
    is awake: it takes every incoming timer before it sleeps). A cancel only removes the
    timer from `_active`; its heap entry is dropped when it comes up, or in a rebuild
    once dropped entries outnumber live ones (the canceller rings for that). Each
    shared step is one atomic dict or deque operation, so firing and cancelling never
    both win. Before, both took the thread's lock, and a starter whose server set a
    timer in `init` (every run's deadline) queued for it behind the thread: half a
    millisecond a start with 1,024 runs in flight (session 31).
    """

    def __init__(self) -> None:
        self._active: dict[TimerRef, None] = {}
        self._incoming: deque[TimerRef] = deque()
        self._heap: list[tuple[float, int, TimerRef]] = []
        self._order = itertools.count()
        self._ring_before = math.inf
        self._bell: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def schedule(self, timer: TimerRef) -> None:
        if timer.target is not None and not timer.target.add_timer(timer):
            return  # the destination is already dead: the timer never fires
        self._active[timer] = None
        self._incoming.append(timer)
        if self._thread is None:
            self._start()
        if timer.due < self._ring_before:
            self._bell.put(None)
        if timer.target is not None and not timer.target.alive:
            self.cancel(timer)  # it died between add_timer and here: leave nothing behind

    def cancel(self, timer: TimerRef) -> bool:
        found = self._active.pop(timer, False) is None
        if len(self._heap) + len(self._incoming) > 2 * len(self._active) + _SLACK:
            self._bell.put(None)  # many cancelled timers far in the future: rebuild
        if found and timer.target is not None:
            timer.target.discard_timer(timer)
        return found

    def active_count(self) -> int:
        return len(self._active)

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="supervision-timers", daemon=True)
                thread.start()
                self._thread = thread

    def _run(self) -> None:
        heap, active, incoming, bell = self._heap, self._active, self._incoming, self._bell
        while True:
            self._ring_before = -math.inf  # awake: whatever comes in is taken below
            while incoming:
                timer = incoming.popleft()
                heapq.heappush(heap, (timer.due, next(self._order), timer))
            now = time.monotonic()
            due: list[TimerRef] = []
            while heap and heap[0][0] <= now:
                timer = heapq.heappop(heap)[2]
                if active.pop(timer, False) is None:  # not cancelled: it fires
                    due.append(timer)
            while heap and heap[0][2] not in active:
                heapq.heappop(heap)  # cancelled entries at the top
            if len(heap) > 2 * len(active) + _SLACK:
                heap[:] = [entry for entry in heap if entry[2] in active]
                heapq.heapify(heap)
            for timer in due:
                target = timer.target if timer.target is not None else _named(timer.dest)
                if target is not None:
                    target.discard_timer(timer)
                    target.deliver(timer.message)
            if due:
                continue  # time went by while firing: look again
            wake_at = heap[0][0] if heap else math.inf
            self._ring_before = wake_at
            if incoming:
                continue  # scheduled before `_ring_before` was set: it did not ring
            try:
                wait = None if wake_at == math.inf else max(0.0, wake_at - time.monotonic())
                bell.get(timeout=wait)
            except queue.Empty:
                pass
            while not bell.empty():  # rings that came together: one look serves them all
                bell.get_nowait()


_SLACK = 64
"""Dropped heap entries tolerated beyond twice the live timers before a rebuild."""


def _named(dest: Pid | Hashable) -> Process | None:
    """The process a named timer reaches when it fires (a pid's timer holds its process)."""
    return None if type(dest) is Pid else lookup(dest)


service = _TimerService()


def cancel_for_exit(timer: Any) -> None:
    """Cancel a timer of a process that is exiting (the process core calls this)."""
    service.cancel(timer)
