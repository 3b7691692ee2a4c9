"""Bounded worker threads for a server's blocking code: an MCP catalog's sync tools and
callbacks, the bearer-token ``verifier`` / ``authorization_fun`` hooks of an MCP or A2A
server (one pool each).

A Python thread cannot be stopped: a call that passes its deadline is answered at once
(a timeout), but its thread runs on. `WorkerPool` keeps counting such an *abandoned*
thread until it really ends, so at most ``limit`` threads of a pool are ever alive; past
that, `run` refuses at once with `WorkersBusy` (the pool's `PoolNames.busy` reason)
instead of starting another. `abandoned` is what an HTTP endpoint adds to its requests in
flight when it checks its concurrency bound. A thread done with its call waits up to
`IDLE_SECONDS` for the next one (busy and idle threads together never pass ``limit``),
then exits; `release_idle` ends the idle ones at once (the server stopping).
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import queue
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import anyio

from providers.errors import AdkError
from supervision import get_logger

_log = get_logger("adk_actors.serving")

T = TypeVar("T")

IDLE_SECONDS = 10.0


class PoolNames(NamedTuple):
    """What one surface's pools are called: the `WorkersBusy` reason, the log events'
    prefix (``{log}.worker_abandoned``) and the threads' name prefix."""

    busy: str = "server_busy"
    log: str = "adk.serving"
    thread: str = "adk-worker"


DEFAULT_POOL_NAMES = PoolNames()


class WorkersBusy(AdkError):
    """Every thread of a pool is taken (abandoned ones included)."""

    def __init__(self, pool: str, reason: str = PoolNames.busy) -> None:
        super().__init__(reason, f"all {pool} threads are busy")


class JobPhase(enum.Enum):
    """A job's phases: RUNNING -> FINISHED, or RUNNING -> ABANDONED -> FINISHED."""

    RUNNING = "running"
    ABANDONED = "abandoned"
    FINISHED = "finished"


class _Job:
    __slots__ = ("phase",)

    def __init__(self) -> None:
        self.phase = JobPhase.RUNNING


_Task = Callable[[], None]


class _Worker:
    """One daemon thread running the tasks handed to it, until idle too long."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self.tasks: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()

    def loop(self) -> None:
        while True:
            try:
                task = self.tasks.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                if self.pool._retire(self):
                    return
                continue  # taken just now: its task is on the way
            if task is None:  # released by `release_idle`
                return
            task()


class WorkerPool:
    """At most `limit` daemon threads, each running one call at a time."""

    def __init__(self, limit: int, name: str, names: PoolNames = DEFAULT_POOL_NAMES) -> None:
        if limit < 1:
            raise ValueError("limit >= 1")
        self.limit = limit
        self.name = name
        self.names = names
        self._lock = threading.Lock()
        self._alive = 0
        self._abandoned = 0
        self._idle: list[_Worker] = []

    def __repr__(self) -> str:
        return f"WorkerPool({self.name!r}, alive={self._alive}/{self.limit})"

    @property
    def alive(self) -> int:
        """Threads running a call, abandoned ones included."""
        return self._alive

    @property
    def abandoned(self) -> int:
        """Threads whose caller gave up (timeout or cancellation) and that still run."""
        return self._abandoned

    async def run(self, fn: Callable[[], T], timeout: float) -> T:
        """`fn()` on a thread of its own, within `timeout` seconds.

        Raises `WorkersBusy` when `limit` threads are alive, `TimeoutError` past
        `timeout` (the thread is then abandoned, and counted until it ends), or what
        `fn` raised."""
        job = _Job()
        with self._lock:
            if self._alive >= self.limit:
                raise WorkersBusy(self.name, self.names.busy)
            self._alive += 1
            worker = self._idle.pop() if self._idle else None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()

        def work() -> None:
            outcome: tuple[bool, Any]
            try:
                outcome = (True, context.run(fn))
            except BaseException as error:  # handed to the caller, who decides
                outcome = (False, error)
            with self._lock:
                self._alive -= 1
                if job.phase is JobPhase.ABANDONED:
                    self._abandoned -= 1
                job.phase = JobPhase.FINISHED
                self._idle.append(running)
            try:
                loop.call_soon_threadsafe(_settle, future, outcome)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

        running = worker if worker is not None else _Worker(self)
        running.tasks.put(work)
        if worker is None:
            thread = threading.Thread(
                target=running.loop, name=f"{self.names.thread}-{self.name}", daemon=True
            )
            try:
                thread.start()
            except RuntimeError:  # the interpreter cannot start another thread
                with self._lock:
                    self._alive -= 1
                raise WorkersBusy(self.name, self.names.busy) from None
        try:
            with anyio.fail_after(timeout):
                return await future
        except BaseException:
            with self._lock:
                if job.phase is JobPhase.RUNNING:
                    job.phase = JobPhase.ABANDONED
                    self._abandoned += 1
                    _log.warning(f"{self.names.log}.worker_abandoned", pool=self.name)
            raise

    def release_idle(self) -> None:
        """End the idle threads now (when the server stops); busy ones end with their
        call. The pool stays usable: a later call starts a thread again."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.tasks.put(None)

    def _retire(self, worker: _Worker) -> bool:
        """May idle `worker` exit? False when a caller has just taken it."""
        with self._lock:
            if worker in self._idle:
                self._idle.remove(worker)
                return True
            return False


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
