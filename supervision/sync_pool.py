"""The bounded thread pool that runs sync tasks.

At most `max_threads` threads (started on demand, retired after `idle_seconds`
idle) and at most `max_queue` waiting tasks; past that, `submit` raises `TaskBusy`
(reason ``busy``) instead of queueing without bound. A pool thread runs a task as
that task's process, so a task that is killed mid-call is fenced.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from supervision.errors import KernelError
from supervision.process import bind_thread

if TYPE_CHECKING:
    from supervision.tasks import TaskProcess

HARD_MAX_THREADS = 1024
HARD_MAX_QUEUE = 1_000_000


class TaskBusy(KernelError):
    """The sync pool is full: every thread is busy and the queue is at its bound."""

    def __init__(self, max_threads: int, max_queue: int) -> None:
        super().__init__(
            "busy", f"all {max_threads} task threads are busy and {max_queue} tasks wait"
        )


class SyncPool:
    """Threads for sync tasks, bounded in threads and in queued work."""

    def __init__(
        self, max_threads: int = 32, max_queue: int = 4096, idle_seconds: float = 10.0
    ) -> None:
        if not 1 <= max_threads <= HARD_MAX_THREADS:
            raise KernelError("invalid_pool", f"max_threads must be in 1..{HARD_MAX_THREADS}")
        if not 0 <= max_queue <= HARD_MAX_QUEUE:
            raise KernelError("invalid_pool", f"max_queue must be in 0..{HARD_MAX_QUEUE}")
        self.max_threads = max_threads
        self.max_queue = max_queue
        self.idle_seconds = idle_seconds
        self._queue: deque[tuple[TaskProcess, Callable[..., Any], tuple[Any, ...]]] = deque()
        self._wake = threading.Condition(threading.Lock())
        self._threads = 0
        self._idle = 0

    def submit(self, process: TaskProcess, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        with self._wake:
            if self._idle > len(self._queue):
                self._queue.append((process, fn, args))
                self._wake.notify()
                return
            if self._threads < self.max_threads:
                self._queue.append((process, fn, args))
                self._threads += 1
                threading.Thread(target=self._run, name="supervision-task", daemon=True).start()
                return
            if len(self._queue) >= self.max_queue:
                raise TaskBusy(self.max_threads, self.max_queue)
            self._queue.append((process, fn, args))

    def stats(self) -> dict[str, int]:
        with self._wake:
            return {"threads": self._threads, "idle": self._idle, "queued": len(self._queue)}

    def _run(self) -> None:
        queue, wake = self._queue, self._wake
        while True:
            with wake:
                while not queue:
                    self._idle += 1
                    woken = wake.wait(self.idle_seconds)
                    self._idle -= 1
                    if not woken and not queue:
                        self._threads -= 1
                        return
                process, fn, args = queue.popleft()
            if not process.alive:
                continue  # stopped while it waited: never started
            bind_thread(process)
            try:
                value = fn(*args)
            except BaseException as exc:
                process.fail(exc)
            else:
                process.complete(value)
            finally:
                bind_thread(None)


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
