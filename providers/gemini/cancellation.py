"""Cancel an HTTP exchange once, and let it clean up.

httpcore closes the connection of an abandoned request in an ``except`` block that
awaits (its state lock, then the socket close), inside an anyio ``CancelScope(shield=
True)``. That shield holds off anyio's cancellations only, not asyncio's own
`Task.cancel`: a second cancellation of the task arriving while the first one is
being cleaned up interrupts the cleanup, and the connection stays open (ACTIVE in its
pool, the request long gone) until the server answers or the garbage collector finds
the socket. Two cancellations a loop turn apart are ordinary here: the LLM judge
wraps an async call in its own `asyncio.timeout` and hands the provider the same
deadline, so both timers pass together (pull request encode/httpcore#922, still open,
proposes an asyncio shield of the same shape). `cancelled_once` runs an attempt in a
task of its own that any number of cancellations of the caller reach as exactly one,
and waits (at most `CLEANUP_SECONDS`) for its cleanup before the caller's cancellation
goes on: a cancelled call returns after its connection's cleanup, normally a loop turn
or two after the cancel, never more than `CLEANUP_SECONDS` later.

A shutdown sweep (`asyncio.run` ending, the kernel reactor stopping) cancels every
task, the attempt's included, and the caller in the same sweep: the caller then does
not cancel the attempt again. One case is left: a sweep that arrives while the
attempt's own cleanup (after the caller's single cancel) is running still interrupts
it; only httpcore itself can close that gap.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from supervision import get_logger

T = TypeVar("T")

CLEANUP_SECONDS = 1.0
"""How long a cancelled caller waits for the attempt's cleanup (closing a socket takes
a loop turn or two). Past it the caller goes on, the attempt is left to finish, and
its outcome is retrieved when it does (``adk.gemini.cleanup_abandoned`` is logged)."""

_log = get_logger("adk.gemini")

_caller: contextvars.ContextVar[tuple[asyncio.Task[object], int] | None] = contextvars.ContextVar(
    "gemini_attempt_caller", default=None
)
"""In an attempt's task: the caller's task and its cancellation count when the attempt
started (see `caller_cancelled`)."""


def caller_cancelled() -> bool:
    """True inside an attempt whose caller has been cancelled since the attempt started.
    The attempt itself is cancelled only when the caller next runs, a loop turn later;
    a stream checks this before handing a frame to its reader, so no frame reaches the
    reader after the caller's cancellation."""
    started = _caller.get()
    return started is not None and started[0].cancelling() > started[1]


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Done callback of an abandoned attempt: its outcome is read (nobody else will)."""
    if not task.cancelled():
        task.exception()


async def cancelled_once(attempt: Callable[[], Awaitable[T]]) -> T:
    """`attempt()` in its own task. When the caller is cancelled (once or many times),
    the task is cancelled exactly once (not at all if a shutdown sweep already did) and
    awaited up to `CLEANUP_SECONDS`, then the caller's `CancelledError` propagates (so
    `asyncio.timeout` scopes above still see their own cancellation and count it
    correctly)."""
    loop = asyncio.get_running_loop()
    caller = asyncio.current_task()
    context = contextvars.copy_context()
    if caller is not None:
        context.run(_caller.set, (caller, caller.cancelling()))
    task: asyncio.Task[T] = loop.create_task(_awaited(attempt), context=context)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.cancelling():  # a shutdown sweep cancelled it already: not again
            task.cancel()
        give_up = loop.time() + CLEANUP_SECONDS
        while not task.done():
            left = give_up - loop.time()
            if left <= 0:
                break
            try:
                await asyncio.wait((task,), timeout=left)
            except asyncio.CancelledError:
                continue  # a further cancellation: already forwarded once, keep waiting
        if task.done():
            _retrieve(task)  # the caller's cancellation is what is raised
        else:
            task.add_done_callback(_retrieve)
            _log.warning("adk.gemini.cleanup_abandoned", waited_seconds=CLEANUP_SECONDS)
        raise


async def _awaited(attempt: Callable[[], Awaitable[T]]) -> T:
    """`attempt()` called inside the task, so it runs in the task's context."""
    return await attempt()
