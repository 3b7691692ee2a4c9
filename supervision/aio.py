"""Calling servers from asyncio code without blocking the event loop.

`await aio.call(pid, request)` has the same semantics as `call`: the reply, or
`CallTimeout`, or `ProcessExit` as soon as the server dies. The reply is handed to
the loop with `call_soon_threadsafe`; no thread is parked per call. A kernel server
whose requests are private to its module offers awaitable forms built on it
(`CreditStream.subscribe_async`, `ack_async`, `unsubscribe_async`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterator, Sequence
from typing import Any, TypeVar

from supervision.carried_context import capture
from supervision.envelopes import CALL
from supervision.errors import CallTimeout, ProcessExit
from supervision.gen_server import _server
from supervision.pid import Pid
from supervision.reply_slot import From
from supervision.tasks import Task, TaskFailed, TaskTimeout

T = TypeVar("T")


class _LoopFrom(From):
    """A reply slot that resolves an asyncio future on its loop."""

    __slots__ = ("_future", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._loop = loop
        self._future: asyncio.Future[None] = loop.create_future()

    @property
    def future(self) -> asyncio.Future[None]:
        """Done (on the slot's loop) once the slot is settled."""
        return self._future

    def _wake(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._resolve)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more

    def _resolve(self) -> None:
        if not self._future.done():
            self._future.set_result(None)


async def call(dest: Pid | Hashable, request: Any, timeout: float | None = 5.0) -> Any:
    """Like `supervision.call`, awaitable; the event loop keeps running meanwhile."""
    process = _server(dest)
    if process is None:
        raise ProcessExit("noproc", f"no process {dest!r}")
    slot = _LoopFrom(asyncio.get_running_loop())
    if not process.add_watcher(slot, slot):
        raise ProcessExit("noproc", f"{dest!r} is not alive")
    process.tell((CALL, request, slot))
    try:
        await asyncio.wait_for(asyncio.shield(slot.future), timeout)
    except TimeoutError:
        if slot.claim_for_timeout():
            raise CallTimeout(timeout) from None
        await slot.future  # settled right at the deadline
    finally:
        process.remove_watcher(slot)
    return slot.result()


class LoopWindow:
    """At most `size` holders at once on each event loop, first come first served:
    `acquire` waits for a place and returns the function that gives it back (call it
    once, on that loop). Made once (a module constant) and used from any number of
    loops: unlike an `asyncio.Semaphore`, which keeps the loop it first waited on, it
    refers to a loop only through a weak key and its waiters' futures, so a loop's
    places go with the loop once nothing waits on it (`asyncio.run` cancels every task
    left, and so every waiter)."""

    __slots__ = ("_places", "_size")

    def __init__(self, size: int) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError("a window holds an int >= 1 of places")
        self._size = size
        self._places: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Places] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def size(self) -> int:
        return self._size

    async def acquire(self) -> Callable[[], None]:
        """A place on the running loop (at once if one is free and nobody waits before);
        cancelled meanwhile, the caller holds none."""
        loop = asyncio.get_running_loop()
        places = self._places.get(loop)
        if places is None:
            places = self._places[loop] = _Places(self._size)
        await places.acquire()
        return places.release

    async def started(self, work: Callable[[], Awaitable[T]]) -> asyncio.Future[T]:
        """A place on the running loop, then `work()` as a task of its own that gives the
        place back when it ends, whoever still awaits it: cancelling the caller once it
        has the task does not cancel the work (await it through `asyncio.shield`).
        Cancelled while it waits for a place, the caller has started nothing."""
        release = await self.acquire()
        task = asyncio.ensure_future(work())
        task.add_done_callback(lambda _: release())
        return task

    def loops(self) -> int:
        """How many live loops have used the window (a leak check)."""
        return len(self._places)


class _Places:
    """One loop's places in a `LoopWindow`."""

    __slots__ = ("_free", "_waiting")

    def __init__(self, size: int) -> None:
        self._free = size
        self._waiting: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        turn = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release()  # given a place as it was cancelled: pass it on
            elif turn in self._waiting:  # a release may have dropped it already
                self._waiting.remove(turn)
            raise

    def release(self) -> None:
        """Give a place back: to the first caller still waiting, if any."""
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self._free += 1


_END = object()
THREAD_PREFIX = "aio-"
"""An executor thread's name: this, the executor's name, ``_`` and an index."""
_executors: dict[str, concurrent.futures.ThreadPoolExecutor] = {}
_bounds: dict[str, int] = {}
_executor_lock = threading.Lock()


def _pool(
    name: str, threads_env: str, default_threads: int
) -> concurrent.futures.ThreadPoolExecutor:
    """A lazily made, process-wide executor; `threads_env` overrides its size."""
    with _executor_lock:
        executor = _executors.get(name)
        if executor is None:
            threads = int(os.environ.get(threads_env, str(default_threads)))
            executor = _executors[name] = concurrent.futures.ThreadPoolExecutor(
                threads, thread_name_prefix=f"{THREAD_PREFIX}{name}"
            )
            _bounds[name] = threads
        return executor


def executor_bounds() -> dict[str, int]:
    """The thread bound of each executor made so far, by name (``iterate``,
    ``blocking``): an executor keeps the threads it started, never more than this."""
    with _executor_lock:
        return dict(_bounds)


def _steps() -> concurrent.futures.ThreadPoolExecutor:
    """Iteration steps: short, so a small pool serves many streams."""
    return _pool("iterate", "SUPERVISION_AIO_STEP_THREADS", 32)


def _blocking() -> concurrent.futures.ThreadPoolExecutor:
    """Whole blocking calls (a prompt, a run): each holds its thread throughout."""
    return _pool("blocking", "SUPERVISION_AIO_BLOCKING_THREADS", 256)


def _next(iterator: Iterator[Any]) -> Any:
    return next(iterator, _END)


def _close(iterator: Iterator[Any]) -> None:
    close = getattr(iterator, "close", None)
    if close is not None:
        close()


async def iterate(iterator: Iterator[Any]) -> AsyncIterator[Any]:
    """``async for`` over a blocking iterator: each step runs on a small thread pool
    (32 steps at once by default, `SUPERVISION_AIO_STEP_THREADS`), never on the loop.
    Leaving early (break, cancellation) closes the iterator once its current step is
    over, so its ``finally`` blocks run."""
    step: concurrent.futures.Future[Any] | None = None
    try:
        while True:
            step = _steps().submit(capture().run, _next, iterator)  # in the caller's context
            item = await asyncio.wrap_future(step)
            step = None
            if item is _END:
                return
            yield item
    finally:
        if step is not None and not step.done():  # still running: close right after it
            step.add_done_callback(lambda _: _close(iterator))
        else:
            _steps().submit(_close, iterator)


async def run_blocking(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Await a blocking call made on a thread pool of its own (256 threads by default,
    `SUPERVISION_AIO_BLOCKING_THREADS`), never on the loop, and never in the way of
    `iterate`'s steps. Cancelling the awaiting coroutine does not stop the call. The
    call runs in a copy of the awaiting coroutine's context (as `asyncio.to_thread`),
    and so does each step of `iterate`."""
    call = functools.partial(fn, *args, **kwargs)
    return await asyncio.wrap_future(_blocking().submit(capture().run, call))


class _TaskWatch:
    """Resolves an asyncio future on its loop when a task's process exits."""

    __slots__ = ("_future", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._future: asyncio.Future[None] = loop.create_future()

    def notify_down(self, ref: Hashable, pid: Pid, reason: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(self._resolve)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more

    def _resolve(self) -> None:
        if not self._future.done():
            self._future.set_result(None)


async def wait_task(task: Task, timeout: float | None = None) -> Any:
    """`task.wait(timeout)` for a coroutine: the result, or `TaskFailed`/`TaskTimeout`,
    awaited without parking a thread (a monitor resolves a future on this loop)."""
    process = task._process
    watch = _TaskWatch(asyncio.get_running_loop())
    if process.add_watcher(watch, watch):
        try:
            await asyncio.wait_for(asyncio.shield(watch._future), timeout)
        except TimeoutError:
            raise TaskTimeout(
                "wait_timeout", f"the task did not finish within {timeout} s"
            ) from None
        finally:
            process.remove_watcher(watch)
    return task.result()


async def wait_tasks(tasks: Sequence[Task], deadline: float, grace: float = 0.0) -> list[Any]:
    """`wait_all` for a coroutine: each task's result in order, or the `TaskFailed` /
    `TaskTimeout` it ended with; one absolute `deadline` (plus `grace`) covers them all,
    and a task still running then is killed."""
    results: list[Any] = []
    for task in tasks:
        try:
            remaining = max(0.0, deadline + grace - time.monotonic())
            results.append(await wait_task(task, remaining))
        except (TaskFailed, TaskTimeout) as error:
            task.kill()
            results.append(error)
    return results
