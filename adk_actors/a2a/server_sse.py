"""The A2A server's SSE answer: a task subscription written as ``text/event-stream``.

Each event is ``id: <seq>`` and ``data: <a JSON-RPC result envelope holding one
StreamResponse>``; the first is the task snapshot (the store's order; a later ``task``
payload, such as a replayed creation event, is not sent: updates only), the sequence
strictly increases, and the stream ends after the status update that puts the task in
a terminal or interrupted state, when the store ends the subscription (a slow subscriber
it detached: the client reconnects with ``Last-Event-ID``), or when the client goes
away, or when the server stops (`StreamsClosing.close`: the stream ends at once with
its last, empty chunk; the client reconnects with ``Last-Event-ID`` elsewhere or learns
the server is gone). Leaving never cancels the task: the subscription is closed
(detached), the work goes on. An idle stream carries an SSE comment every
`HEARTBEAT_SECONDS`, so proxies keep it open and a vanished client is noticed. A stream
cancelled from outside (the daemon's drain) closes its subscription without awaiting
anything under the cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from a2a.types import a2a_pb2 as pb
from starlette.types import Receive, Send

from adk_actors.a2a import wire
from adk_actors.a2a.errors import result_response
from supervision import get_logger

_log = get_logger("adk_actors.a2a.server")

HEARTBEAT_SECONDS = 15.0
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
_HEARTBEAT = b": keepalive\n\n"
_ENDING_STATES = wire.TERMINAL_STATES | wire.INTERRUPTED_STATES


class Subscription(Protocol):
    """What the stream reads: the store's `TaskSubscription`."""

    def __aiter__(self) -> AsyncIterator[tuple[int, pb.StreamResponse]]: ...

    async def aclose(self) -> None: ...


class StreamsClosing:
    """Tells a server's open streams that it stops: `close` (from any thread) ends each
    at once and cleanly, and every stream opened later ends as soon as it starts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._watchers: dict[asyncio.Future[None], asyncio.AbstractEventLoop] = {}

    @property
    def closed(self) -> bool:
        return self._closed

    def watch(self) -> asyncio.Future[None]:
        """A future of the running loop, done once `close` is called (done already when
        it was)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._closed:
                future.set_result(None)
            else:
                self._watchers[future] = loop
        return future

    def forget(self, future: asyncio.Future[None]) -> None:
        """The stream watching with `future` is over."""
        with self._lock:
            self._watchers.pop(future, None)

    def close(self) -> None:
        """End every open stream (thread-safe; idempotent)."""
        with self._lock:
            self._closed = True
            watchers = list(self._watchers.items())
            self._watchers.clear()
        for future, loop in watchers:
            with contextlib.suppress(RuntimeError):  # a closed loop: its streams are gone
                loop.call_soon_threadsafe(_settle, future)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def sse_frame(request_id: str | int, seq: int, event: pb.StreamResponse) -> bytes:
    """One SSE event: ``id: <seq>`` and the JSON-RPC result envelope of `event`."""
    data = json.dumps(
        result_response(request_id, wire.render(event)), separators=(",", ":"), ensure_ascii=False
    )
    return f"id: {seq}\ndata: {data}\n\n".encode()


def ends_stream(event: pb.StreamResponse) -> bool:
    """Does `event` (after the snapshot) put its task in a terminal or interrupted state?
    A snapshot never ends the stream here: events replayed after ``Last-Event-ID`` may
    follow a terminal one, and the store ends the subscription when there are none."""
    kind = event.WhichOneof("payload")
    if kind == "status_update":
        return bool(event.status_update.status.state in _ENDING_STATES)
    return bool(kind == "message")


async def stream_subscription(
    send: Send,
    receive: Receive,
    request_id: str | int,
    subscription: Subscription,
    *,
    heartbeat: float = HEARTBEAT_SECONDS,
    closing: StreamsClosing | None = None,
) -> None:
    """Answer with `subscription`'s events as SSE until it ends, the client leaves or
    `closing` is closed; the subscription is closed either way (the task itself goes on)."""
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    events = aiter(subscription)
    gone: asyncio.Task[None] = asyncio.ensure_future(_disconnected(receive))
    stopping = (closing or StreamsClosing()).watch()
    pending: asyncio.Task[tuple[int, pb.StreamResponse] | None] | None = None
    connected = True
    started = False
    try:
        while True:
            reading = pending = asyncio.ensure_future(_next(events))
            waited: set[asyncio.Future[Any]] = {reading, gone, stopping}
            done, _ = await asyncio.wait(
                waited, timeout=heartbeat, return_when=asyncio.FIRST_COMPLETED
            )
            while not done:  # idle: a comment keeps the connection (and notices a leaver)
                await send({"type": "http.response.body", "body": _HEARTBEAT, "more_body": True})
                done, _ = await asyncio.wait(
                    waited, timeout=heartbeat, return_when=asyncio.FIRST_COMPLETED
                )
            if reading not in done:
                connected = gone not in done  # else the server stops: end the answer cleanly
                break
            pending = None
            try:
                item = reading.result()
            except Exception as error:  # the answer has started: the stream just ends
                _log.warning("adk.a2a.server.stream_failed", error_class=type(error).__name__)
                break
            if item is None:  # the store ended it (done, or a slow subscriber detached)
                break
            seq, event = item
            if started and event.WhichOneof("payload") == "task":
                continue  # after the snapshot, updates only (a replayed creation event is not one)
            started = True
            frame = sse_frame(request_id, seq, event)
            await send({"type": "http.response.body", "body": frame, "more_body": True})
            if ends_stream(event):
                break
    except OSError:  # the client went away while we wrote
        connected = False
    finally:
        if closing is not None:
            closing.forget(stopping)
        for future in (pending, gone, stopping):
            _drop(future)
        await _close(subscription.aclose)
    if connected:
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _next(
    events: AsyncIterator[tuple[int, pb.StreamResponse]],
) -> tuple[int, pb.StreamResponse] | None:
    """The next event, or None at the end."""
    try:
        return await anext(events)
    except StopAsyncIteration:
        return None


async def _disconnected(receive: Receive) -> None:
    """Returns once the client has gone (the request body was read before)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


def _drop(future: asyncio.Future[Any] | None) -> None:
    """Cancel `future` without waiting for it (nothing is awaited while this request may
    itself be cancelled); its outcome is retrieved when it ends, never logged as lost."""
    if future is None:
        return
    future.cancel()
    future.add_done_callback(_retrieve)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


async def _close(aclose: Callable[[], Awaitable[None]]) -> None:
    """Detach from the task, even while this request is being cancelled (the close goes
    on under the shield; the cancellation then propagates)."""
    try:
        await asyncio.shield(aclose())
    except Exception as error:
        _log.warning("adk.a2a.server.subscription_close_failed", error_class=type(error).__name__)
