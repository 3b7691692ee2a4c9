"""Cancel an HTTP exchange once, and let it clean up.

httpcore closes the connection of an abandoned request in an ``except`` block that
awaits (its state lock, then the socket close), inside an anyio ``CancelScope(shield=
True)``. That shield holds off anyio's cancellations only, not asyncio's own
`Task.cancel`: a second cancellation of the task arriving while the first one is
being cleaned up interrupts the cleanup, and the connection stays open (ACTIVE in its
pool, the request long gone) until the server answers or the garbage collector finds
the socket. Two cancellations a loop turn apart are ordinary here: the LLM judge
wraps an async call in its own `asyncio.timeout` and hands the provider the same
deadline, so both timers pass together (see encode/httpcore#922, still open, for the
same gap). `cancelled_once` runs an attempt in a task of its own that any number of
cancellations of the caller reach as exactly one, and waits (boundedly) for its
cleanup before the caller's cancellation goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

CLEANUP_SECONDS = 5.0
"""How long a cancelled caller waits for the attempt's cleanup (closing a socket takes
a loop turn or two; a TLS goodbye to a silent peer could take longer)."""


async def cancelled_once(attempt: Callable[[], Awaitable[T]]) -> T:
    """`attempt()` in its own task. When the caller is cancelled (once or many times),
    the task is cancelled exactly once and awaited up to `CLEANUP_SECONDS`, then the
    caller's `CancelledError` propagates (so `asyncio.timeout` scopes above still see
    their own cancellation and count it correctly)."""
    task: asyncio.Future[T] = asyncio.ensure_future(attempt())
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()
        loop = asyncio.get_running_loop()
        give_up = loop.time() + CLEANUP_SECONDS
        while not task.done():
            left = give_up - loop.time()
            if left <= 0:
                break
            try:
                await asyncio.wait((task,), timeout=left)
            except asyncio.CancelledError:
                continue  # a further cancellation: already forwarded once, keep waiting
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: the caller's cancellation is what is raised
        raise
