"""The bounded thread pool that runs sync tasks, and bounded shares of it.

At most `max_threads` threads (started on demand, retired after `idle_seconds`
idle) and at most `max_queue` waiting tasks; past that, `submit` raises `TaskBusy`
(reason ``busy``) instead of queueing without bound. A pool thread runs a task as
that task's process, so a task that is killed mid-call is fenced.

A thread whose task was stopped (killed, past its deadline, its owner gone) while
its callable still runs is *abandoned*: Python cannot interrupt it, so it stays
busy until the callable returns. Abandoned threads are counted (`stats`) and do not
count against `max_threads`: the pool starts a replacement thread for new work, up
to `max_abandoned` extra threads, so hung callables cannot take every thread for
good.

A `SyncPool.Share` bounds one party's part of a pool (an agent's tools, say): at
most `limit` of its tasks are in the pool at once, the rest wait in the share's own
FIFO (at most `max_waiting`, holding no thread and no pool slot). A share whose
every slot is held by an abandoned thread, or whose waiting line is full, refuses
new tasks with `ShareFull` (reason ``capacity_exhausted``) at once: the work that
holds it is hung, so waiting would not help.
"""

from __future__ import annotations

import os
import threading
from _thread import LockType
from collections import deque
from collections.abc import Callable
from threading import TIMEOUT_MAX
from typing import TYPE_CHECKING, Any

from supervision.errors import KernelError
from supervision.process import bind_thread
from supervision.wakeups import held_lock, sleep, wake_one

if TYPE_CHECKING:
    from supervision.tasks import TaskProcess

HARD_MAX_THREADS = 1024
HARD_MAX_QUEUE = 1_000_000
HARD_MAX_SHARE = 4096
"""Ceiling of a share's `limit`."""
DEFAULT_SHARE_WAITING = 1024

THREAD_NAME = "supervision-task"
"""The name of every sync pool thread."""

_Work = tuple["TaskProcess", Callable[..., Any], tuple[Any, ...]]


class TaskBusy(KernelError):
    """The sync pool is full: every thread is busy and the queue is at its bound."""

    def __init__(self, max_threads: int, max_queue: int) -> None:
        super().__init__(
            "busy", f"all {max_threads} task threads are busy and {max_queue} tasks wait"
        )


class ShareFull(TaskBusy):
    """``capacity_exhausted``: a `SyncPool.Share` is held by abandoned (hung) threads,
    or its waiting line is full."""

    def __init__(self, name: str, detail: str) -> None:
        KernelError.__init__(self, "capacity_exhausted", f"{name}: {detail}")


class SyncPool:
    """Threads for sync tasks, bounded in threads and in queued work."""

    def __init__(
        self,
        max_threads: int = 32,
        max_queue: int = 4096,
        idle_seconds: float | None = 10.0,
        max_abandoned: int | None = None,
    ) -> None:
        """`idle_seconds`: how long an idle thread waits for work before it leaves
        (None: it never leaves; `inf` counts as None)."""
        if not 1 <= max_threads <= HARD_MAX_THREADS:
            raise KernelError("invalid_pool", f"max_threads must be in 1..{HARD_MAX_THREADS}")
        if not 0 <= max_queue <= HARD_MAX_QUEUE:
            raise KernelError("invalid_pool", f"max_queue must be in 0..{HARD_MAX_QUEUE}")
        abandoned = max_threads if max_abandoned is None else max_abandoned
        if not 0 <= abandoned <= HARD_MAX_THREADS:
            raise KernelError("invalid_pool", f"max_abandoned must be in 0..{HARD_MAX_THREADS}")
        if idle_seconds is not None and not idle_seconds >= 0:  # `not >=`: NaN too
            raise KernelError("invalid_pool", "idle_seconds must be None or >= 0")
        self.max_threads = max_threads
        self.max_queue = max_queue
        self.max_abandoned = abandoned
        self.idle_seconds = idle_seconds
        # what an idle thread's wait takes: -1 (for ever) past a lock wait's limit too
        self._idle_timeout = (
            -1 if idle_seconds is None or idle_seconds >= TIMEOUT_MAX else idle_seconds
        )
        self._queue: deque[_Work] = deque()
        self._wake_lock = threading.Lock()
        # The wake locks of the idle threads (see `supervision.wakeups`): `_submit`
        # releases one (a one-shot wake-up, cheaper than a `threading.Condition`).
        self._sleeping: list[LockType] = []
        self._threads = 0
        self._idle = 0  # threads waiting for work, woken ones that have not resumed too
        self._executing: set[TaskProcess] = set()

    def submit(self, process: TaskProcess, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """Queue `fn(*args)` to run as `process` (counted against ``process.share``,
        if it has one: it may wait there instead, or be refused with `ShareFull`)."""
        share = process.share
        if share is not None and not share._admit(self, process, fn, args):
            return  # waits in the share's line
        try:
            self._submit(process, fn, args)
        except BaseException:
            if share is not None:
                share._leave(process)
            raise

    def _submit(self, process: TaskProcess, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        with self._wake_lock:
            if self._idle > len(self._queue):
                self._queue.append((process, fn, args))
                if self._sleeping:  # `wakeups.wake_one`, inline: once per hand-off
                    self._sleeping.pop().release()
                return
            if self._threads < self.max_threads or self._may_replace():
                self._queue.append((process, fn, args))
                self._threads += 1
                threading.Thread(target=self._run, name=THREAD_NAME, daemon=True).start()
                return
            if len(self._queue) >= self.max_queue:
                raise TaskBusy(self.max_threads, self.max_queue)
            self._queue.append((process, fn, args))

    def _hand_over(self) -> None:
        """Under the lock, as a thread leaves with work queued (a wake-up may have been
        spent on it): wake an idle thread, or start one in its place."""
        if self._sleeping:
            wake_one(self._sleeping)
        elif self._threads < self.max_threads or self._may_replace():
            self._threads += 1
            threading.Thread(target=self._run, name=THREAD_NAME, daemon=True).start()

    def _may_replace(self) -> bool:
        """Under the lock, with every thread taken: may a thread be added because some
        are abandoned? (Scans the executing tasks: only on this saturated path.)"""
        if self._threads >= self.max_threads + self.max_abandoned:
            return False
        abandoned = sum(1 for process in self._executing if not process.alive)
        return self._threads - abandoned < self.max_threads

    def stats(self) -> dict[str, int]:
        """``threads`` (started), ``idle``, ``queued``, ``busy`` (running a task) and
        ``abandoned`` (running a task that was stopped: a hung or late callable)."""
        with self._wake_lock:
            abandoned = sum(1 for process in self._executing if not process.alive)
            return {
                "threads": self._threads,
                "idle": self._idle,
                "queued": len(self._queue),
                "busy": len(self._executing),
                "abandoned": abandoned,
            }

    def _run(self) -> None:
        queue, sleeping, executing = self._queue, self._sleeping, self._executing
        wake_lock, idle_timeout = self._wake_lock, self._idle_timeout
        wake = held_lock()  # held, but while a `_submit` has just woken this thread
        current: TaskProcess | None = None
        while True:
            with wake_lock:
                while not queue:
                    self._idle += 1
                    try:
                        woken = sleep(wake_lock, sleeping, wake, idle_timeout)
                    except BaseException:  # this thread ends: not counted, work handed on
                        self._idle -= 1
                        self._threads -= 1
                        if queue:
                            self._hand_over()
                        raise
                    self._idle -= 1
                    if not woken and not queue:
                        self._threads -= 1
                        return
                process, fn, args = queue.popleft()
                if process.alive:
                    executing.add(process)
                    current = process
            share = process.share
            if current is None:  # stopped while it waited: never started
                if share is not None:
                    share._leave(process)
                del process, fn, args, share
                continue
            bind_thread(process)
            try:
                value = fn(*args)
            except BaseException as exc:
                failure: BaseException | None = exc
                value = None
            else:
                failure = None
            finally:
                bind_thread(None)
            # free the thread's place first: whoever the outcome wakes may start a task
            # at once, and must not find this finished one counted as busy or abandoned
            with wake_lock:
                executing.discard(process)
                current = None
            if share is not None:
                share._leave(process)
            if failure is None:
                process.complete(value)
            else:
                process.fail(failure)
            # An idle worker holds nothing of the task it ran: a finished task (its
            # process, callable, arguments and result) is freed as soon as it ends.
            del process, fn, args, share, value, failure

    class Share:
        """At most `limit` tasks of one party in a pool at once; see the module doc.

        A task joins a share with ``Task.start(..., share=share)`` (or by being started
        from a task that has one, see `Task.bind_share`). `stats` reports ``active``
        (in the pool: queued or running), ``abandoned`` (of those, stopped while their
        callable still runs), ``waiting`` and ``refused`` (``capacity_exhausted`` so
        far).
        """

        __slots__ = ("_active", "_lock", "_waiting", "limit", "max_waiting", "name", "refused")

        def __init__(self, name: str, limit: int, max_waiting: int = DEFAULT_SHARE_WAITING) -> None:
            if isinstance(limit, bool) or not isinstance(limit, int):
                raise KernelError("invalid_share", "limit is an int")
            if not 1 <= limit <= HARD_MAX_SHARE:
                raise KernelError("invalid_share", f"limit must be in 1..{HARD_MAX_SHARE}")
            if not 0 <= max_waiting <= HARD_MAX_QUEUE:
                raise KernelError("invalid_share", f"max_waiting must be in 0..{HARD_MAX_QUEUE}")
            self.name = name
            self.limit = limit
            self.max_waiting = max_waiting
            self.refused = 0
            self._active: set[TaskProcess] = set()
            self._waiting: deque[tuple[SyncPool, _Work]] = deque()
            self._lock = threading.Lock()

        def __repr__(self) -> str:
            return f"<SyncPool.Share {self.name!r} limit={self.limit}>"

        def stats(self) -> dict[str, int]:
            with self._lock:
                return {
                    "limit": self.limit,
                    "active": len(self._active),
                    "abandoned": sum(1 for process in self._active if not process.alive),
                    "waiting": sum(1 for _, (process, _, _) in self._waiting if process.alive),
                    "refused": self.refused,
                }

        def _admit(
            self,
            pool: SyncPool,
            process: TaskProcess,
            fn: Callable[..., Any],
            args: tuple[Any, ...],
        ) -> bool:
            """True: go into the pool now. False: queued here. Raises `ShareFull`."""
            with self._lock:
                active = self._active
                if len(active) < self.limit:
                    active.add(process)
                    return True
                if all(not other.alive for other in active):
                    self.refused += 1
                    raise ShareFull(
                        self.name, f"all {self.limit} threads are held by stopped, hung tasks"
                    )
                waiting = self._waiting
                if len(waiting) >= self.max_waiting:
                    live = [entry for entry in waiting if entry[1][0].alive]
                    waiting.clear()
                    waiting.extend(live)
                    if len(waiting) >= self.max_waiting:
                        self.refused += 1
                        raise ShareFull(
                            self.name, f"{self.limit} tasks run and {self.max_waiting} wait"
                        )
                waiting.append((pool, (process, fn, args)))
                return False

        def _leave(self, process: TaskProcess) -> None:
            """`process` is out of the pool: let the next live waiting task in."""
            while True:
                with self._lock:
                    self._active.discard(process)
                    if len(self._active) >= self.limit or not self._waiting:
                        return
                    pool, work = self._waiting.popleft()
                    process = work[0]
                    if not process.alive:
                        continue  # stopped while it waited: dropped, never started
                    self._active.add(process)
                try:
                    pool._submit(*work)
                    return
                except BaseException as exc:  # the pool itself is full: the task fails
                    process.fail(exc)


_shared: dict[str, SyncPool] = {}
_shared_lock = threading.Lock()


def shared_pool(
    name: str, threads_env: str, default_threads: int, max_queue: int = 4096
) -> SyncPool:
    """One process-wide pool per `name`, made on first use; the environment variable
    `threads_env` overrides its thread bound. Work that waits on other work (a run
    waiting on its invocation, an invocation on its tools) takes its own pool, so a
    pool never fills with waiters whose work queues behind them."""
    with _shared_lock:
        pool = _shared.get(name)
        if pool is None:
            threads = int(os.environ.get(threads_env, str(default_threads)))
            pool = _shared[name] = SyncPool(max_threads=threads, max_queue=max_queue)
        return pool


def default_sync_pool() -> SyncPool:
    """The process-wide pool (`SUPERVISION_TASK_THREADS` sets its thread bound)."""
    return shared_pool("default", "SUPERVISION_TASK_THREADS", 32)


def pool_stats() -> dict[str, int]:
    """`SyncPool.stats` summed over every shared pool (what `kernel_stats` reports)."""
    with _shared_lock:
        pools = list(_shared.values())
    total = {"threads": 0, "idle": 0, "queued": 0, "busy": 0, "abandoned": 0}
    for pool in pools:
        for key, value in pool.stats().items():
            total[key] += value
    return total


def shared_pools_bound() -> int:
    """The most threads the shared pools may have together: each its `max_threads`
    plus its `max_abandoned` replacements for hung tasks."""
    with _shared_lock:
        pools = list(_shared.values())
    return sum(pool.max_threads + pool.max_abandoned for pool in pools)
