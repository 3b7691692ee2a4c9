"""Server-sent events of one run: credit delivery, bounded per connection.

`open_run_stream` subscribes to a run after the client's ``Last-Event-ID`` cursor and
answers with a `RunStream` whose body (`_frames`) writes one frame per run item
(``event`` or ``terminal``, with the item's sequence as its ``id``), acknowledging
each item only after it was written, so the connection never holds more than one
unacknowledged item ("written" means handed to the socket: the body yields an empty
chunk after each frame, and the server sends it only once its buffer has drained, so
a client that does not read holds back the acknowledgement, and with it the next
item).

Nothing here blocks the event loop, and no thread waits for a connection:

* the next item is awaited on the subscription's inbox (`CreditSubscription.anext`):
  a future the delivering thread resolves, so a thousand idle streams hold a thousand
  small inboxes and no thread;
* subscribing (`runs.subscribe_credit_async`) and acknowledging (`ack_async`) are one
  request each to the run's stream server, awaited on the loop (the kernel's awaitable
  credit-stream requests): no thread is held, even while the stream is busy. A run's
  first subscribe is one request more, to the run's server, which starts the stream
  (`adk.runs` starts a run's stream for its first subscriber only), awaited the same
  way; a server or stream that does not answer within 5 s is ``unavailable``, a 503
  ``run_service_unavailable`` the client retries;
* the status read before subscribing (`run_status`, shared with the runs routes) is
  one short call on Starlette's worker threads.

A connection ends cleanly at the first of the settings' ``sse_max_events``,
``sse_max_bytes`` and ``sse_max_duration`` (the client reconnects with
``Last-Event-ID``), after the terminal, or with a ``replay_gap`` frame when items after
the last one sent were evicted meanwhile. An item whose frame alone is larger than
``sse_max_bytes`` could never be sent on any connection: an ``event_too_large`` frame
with its id takes its place (a terminal is sent without its data), so the stream goes
on instead of ending at the same item on every reconnection. A refusal before
streaming is an HTTP error (``run_event_replay_gap``, ``run_event_cursor_ahead``,
``run_not_found``, ``too_many_subscribers``).

The subscription is closed whenever the response ends, however it ends: the terminal,
a bound, a client disconnect, or the drain (the guards cancel an event stream's route
when the daemon starts draining, and finish its body cleanly). `RunStream` closes it
itself rather than leaving it to the body generator's finalization, so the run's
subscriber count drops as soon as the response is over; the run itself is never
cancelled by any of this.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator
from typing import Any

import msgspec
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from adk_actors import runs
from adk_actors.daemon.errors import ApiError
from adk_actors.daemon.settings import DevSettings
from adk_actors.daemon.views import event_json, outcome_json, run_refusal
from adk_actors.runs import (
    CreditSubscription,
    RunError,
    RunEvent,
    RunTerminal,
    RunTimeout,
    subscribe_credit_async,
)

MEDIA_TYPE = "text/event-stream; charset=utf-8"
HEARTBEAT = b": heartbeat\n\n"
FLUSH = b""
"""An empty body chunk: sends nothing, but waits until the connection can take more."""
MAX_CURSOR = 2**62 - 1
HEADERS = {"cache-control": "no-cache, no-transform", "x-accel-buffering": "no"}
_OVERRUN_REASONS = ("replay_gap", "slow_subscriber")


def last_event_id(request: Request) -> int:
    """The cursor: the ``Last-Event-ID`` header (absent or empty: 0), a non-negative
    integer; 400 ``invalid_last_event_id`` otherwise. A query string is never read."""
    raw = request.headers.get("last-event-id")
    if raw is None or raw.strip() == "":
        return 0
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 19 or int(text) > MAX_CURSOR:
        raise ApiError(400, "invalid_last_event_id", "Last-Event-ID must be a non-negative integer")
    return int(text)


def frame(kind: str, seq: int | None, data: Any) -> bytes:
    """One SSE frame: ``id`` (when given), ``event`` and one line of JSON ``data``."""
    head = f"id: {seq}\n" if seq is not None else ""
    return b"".join((f"{head}event: {kind}\ndata: ".encode(), msgspec.json.encode(data), b"\n\n"))


async def run_status(run_id: str) -> dict[str, Any]:
    """`runs.status` off the event loop, its refusal as the API's (404 ``run_not_found``,
    ...): the one status lookup of the runs routes and the event stream."""
    try:
        return await run_in_threadpool(runs.status, run_id)
    except RunError as error:
        raise run_refusal(error) from None


async def open_run_stream(run_id: str, cursor: int, settings: DevSettings) -> Response:
    """The SSE response for `run_id` after `cursor`, or the `ApiError` refusing it."""
    status = await run_status(run_id)
    terminal = status.get("terminal_sequence")
    latest = status.get("latest_sequence")
    if isinstance(terminal, int) and cursor == terminal:
        return Response(b"", media_type=MEDIA_TYPE, headers=HEADERS)  # nothing more to send
    end = terminal if isinstance(terminal, int) else latest
    if isinstance(end, int) and cursor > end:
        raise _cursor_ahead(cursor, end)
    try:
        subscription = await subscribe_credit_async(run_id, after=cursor)
    except RunError as error:
        raise _refusal(error, cursor, end) from None
    return RunStream(subscription, cursor, settings)


def _refusal(error: RunError, cursor: int, end: Any) -> ApiError:
    match error.reason:
        case "replay_gap":
            return ApiError(
                409,
                "run_event_replay_gap",
                "Last-Event-ID is older than the retained replay window",
                extra={"details": gap_json(error.gap, "replay_gap", cursor)},
            )
        case "cursor_ahead":
            return _cursor_ahead(cursor, end)
    return run_refusal(error)


def _cursor_ahead(cursor: int, end: Any) -> ApiError:
    return ApiError(
        409,
        "run_event_cursor_ahead",
        "Last-Event-ID is newer than this run",
        extra={
            "details": {
                "after_sequence": cursor,
                "latest_sequence": end if isinstance(end, int) else None,
            }
        },
    )


def gap_json(gap: dict[str, Any] | None, reason: str, after: int) -> dict[str, Any]:
    """What a replay gap says: the cursor, and the window that is left."""
    known = gap or {}
    return {
        "reason": reason,
        "after_sequence": known.get("after_sequence", after),
        "oldest_available_sequence": known.get("oldest_available_sequence"),
        "latest_sequence": known.get("latest_sequence"),
        "terminal": known.get("terminal"),
    }


class RunStream(StreamingResponse):
    """The event stream of one subscription: `_frames` as its body, and the
    subscription closed as soon as the response is over, however it ends (a client
    disconnect or the drain cancels the body where it waits; the generator may be
    left suspended at a ``yield``, and is closed here too, not by the garbage
    collector)."""

    def __init__(
        self, subscription: CreditSubscription, cursor: int, settings: DevSettings
    ) -> None:
        self.subscription = subscription
        self._body = _frames(subscription, cursor, settings)
        super().__init__(self._body, media_type=MEDIA_TYPE, headers=HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.subscription.close()  # never blocks: the inbox exits, the stream drops it
            with contextlib.suppress(RuntimeError):  # still running: it closes itself
                await self._body.aclose()


class _Budget:
    """What one connection may still send: frames, bytes and time."""

    def __init__(self, settings: DevSettings) -> None:
        self.events_left = settings.sse_max_events
        self.bytes_left = settings.sse_max_bytes
        self.deadline = time.monotonic() + settings.sse_max_duration
        self.heartbeat = settings.sse_heartbeat

    def wait(self) -> float:
        """How long to wait for the next item before a heartbeat (0: time is up)."""
        return max(0.0, min(self.heartbeat, self.deadline - time.monotonic()))

    def fits(self, data: bytes, counted: bool) -> bool:
        return len(data) <= self.bytes_left and (not counted or self.events_left > 0)

    def spend(self, data: bytes, counted: bool) -> None:
        self.bytes_left -= len(data)
        if counted:
            self.events_left -= 1

    @property
    def spent(self) -> bool:
        return self.events_left <= 0 or self.bytes_left <= 0


async def _frames(
    subscription: CreditSubscription, cursor: int, settings: DevSettings
) -> AsyncGenerator[bytes, None]:
    """The body: items as frames until the terminal, a bound, an overrun or a
    disconnect (which cancels this generator); the subscription closes in every case."""
    budget = _Budget(settings)
    sent = cursor
    try:
        while True:
            wait = budget.wait()
            if wait <= 0:
                return
            try:
                item = await subscription.anext(wait)
            except RunTimeout:
                if budget.wait() <= 0 or not budget.fits(HEARTBEAT, counted=False):
                    return
                budget.spend(HEARTBEAT, counted=False)
                yield HEARTBEAT
                continue
            except RunError as error:
                gap = _overrun_frame(error, sent, budget)
                if gap:
                    yield gap
                return
            data = item_frame(item, settings.sse_max_bytes)
            if not budget.fits(data, counted=True):
                return  # not sent, not acknowledged: the next connection starts with it
            budget.spend(data, counted=True)
            yield data
            yield FLUSH  # resumes once the server's send buffer drained: the frame is out
            sent = item.seq
            if isinstance(item, RunTerminal):
                return
            try:
                await subscription.ack_async(item.seq)
            except RunError as error:
                gap = _overrun_frame(error, sent, budget)
                if gap:
                    yield gap
                return
            if budget.spent:
                return
    finally:
        subscription.close()


def _overrun_frame(error: RunError, sent: int, budget: _Budget) -> bytes:
    """The ``replay_gap`` frame that ends a stream whose next item was evicted (an
    overrun), if it fits the budget; empty for any other reason to end."""
    if error.reason not in _OVERRUN_REASONS:
        return b""
    gap = frame("replay_gap", None, gap_json(error.gap, error.reason, sent))
    return gap if budget.fits(gap, counted=False) else b""


def item_frame(item: RunEvent | RunTerminal, max_bytes: int) -> bytes:
    """The frame of one run item; one larger than `max_bytes` (no connection could
    carry it) becomes an ``event_too_large`` frame with the item's id (a terminal: a
    ``terminal`` frame without its data), so the client's cursor moves past it."""
    if isinstance(item, RunEvent):
        data = frame("event", item.seq, event_json(item.event))
        if len(data) <= max_bytes:
            return data
        too_large = {
            "reason": "event_too_large",
            "sequence": item.seq,
            "bytes": len(data),
            "max_bytes": max_bytes,
        }
        return frame("event_too_large", item.seq, too_large)
    outcome = outcome_json(item.outcome)
    data = frame("terminal", item.seq, outcome)
    if len(data) <= max_bytes:
        return data
    brief: dict[str, Any] = {"type": outcome.get("type")}
    if isinstance(outcome.get("reason"), str):
        brief["reason"] = outcome["reason"]
    brief.update(data_omitted=True, bytes=len(data), max_bytes=max_bytes)
    if isinstance(outcome.get("pause"), dict):  # what a console needs to offer a decision
        with_pause = frame("terminal", item.seq, {**brief, "pause": outcome["pause"]})
        if len(with_pause) <= max_bytes:
            return with_pause
    return frame("terminal", item.seq, brief)
