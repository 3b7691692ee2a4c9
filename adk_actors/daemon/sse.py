"""Server-sent events of one run: credit delivery, bounded per connection.

`open_run_stream` subscribes to a run (`runs.subscribe_credit`) after the client's
``Last-Event-ID`` cursor and answers with a streaming response whose body
`_frames` writes: one frame per run item (``event`` or ``terminal``, with the item's
sequence as its ``id``), acknowledging each item only after it was written, so the
connection never holds more than one unacknowledged item ("written" means handed to
the socket: the body yields an empty chunk after each frame, and the server sends it
only once its buffer has drained, so a client that does not read holds back the
acknowledgement, and with it the next item). No thread waits for a
connection: the body awaits the subscription's inbox (`anext`) on the event loop.

A connection ends cleanly at the first of the settings' ``sse_max_events``,
``sse_max_bytes`` and ``sse_max_duration`` (the client reconnects with
``Last-Event-ID``), after the terminal, or with a ``replay_gap`` frame when items after
the last one sent were evicted meanwhile. A refusal before streaming is an HTTP error
(``run_event_replay_gap``, ``run_event_cursor_ahead``, ``run_not_found``). The
subscription closes whenever the body ends, including a client disconnect; the run
itself is never cancelled by it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from adk_actors import runs
from adk_actors.daemon.errors import ApiError
from adk_actors.daemon.settings import DevSettings
from adk_actors.daemon.views import event_json, outcome_json
from adk_actors.runs import CreditSubscription, RunError, RunEvent, RunTerminal, RunTimeout

MEDIA_TYPE = "text/event-stream; charset=utf-8"
HEARTBEAT = b": heartbeat\n\n"
FLUSH = b""
"""An empty body chunk: sends nothing, but waits until the connection can take more."""
MAX_CURSOR = 2**62 - 1
_HEADERS = {"cache-control": "no-cache, no-transform", "x-accel-buffering": "no"}
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


async def open_run_stream(run_id: str, cursor: int, settings: DevSettings) -> Response:
    """The SSE response for `run_id` after `cursor`, or the `ApiError` refusing it."""
    status = await run_in_threadpool(_status, run_id)
    terminal = status.get("terminal_sequence")
    latest = status.get("latest_sequence")
    if isinstance(terminal, int) and cursor == terminal:
        return _empty_stream()  # the client has everything, terminal included
    end = terminal if isinstance(terminal, int) else latest
    if isinstance(end, int) and cursor > end:
        raise _cursor_ahead(cursor, end)
    # Subscribed from the event loop's own thread: the subscription's inbox belongs to
    # it, and the thread outlives every connection (a pool thread may not).
    try:
        subscription = runs.subscribe_credit(run_id, after=cursor)
    except RunError as error:
        raise _refusal(error, cursor, end) from None
    return StreamingResponse(
        _frames(subscription, cursor, settings), media_type=MEDIA_TYPE, headers=_HEADERS
    )


def _status(run_id: str) -> dict[str, Any]:
    try:
        return runs.status(run_id)
    except RunError as error:
        raise _refusal(error, 0, None) from None


def _empty_stream() -> Response:
    return Response(b"", media_type=MEDIA_TYPE, headers=_HEADERS)


def _refusal(error: RunError, cursor: int, end: Any) -> ApiError:
    match error.reason:
        case "not_found":
            return ApiError(404, "run_not_found", "Resource not found")
        case "replay_gap":
            return ApiError(
                409,
                "run_event_replay_gap",
                "Last-Event-ID is older than the retained replay window",
                extra={"details": gap_json(error.gap, "replay_gap", cursor)},
            )
        case "cursor_ahead":
            return _cursor_ahead(cursor, end)
        case "too_many_subscribers":
            return ApiError(
                503,
                "too_many_subscribers",
                "The run has its maximum number of subscribers",
                headers={"retry-after": "1"},
            )
    return ApiError(503, "run_service_unavailable", "The run service is unavailable")


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
) -> AsyncIterator[bytes]:
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
                if error.reason in _OVERRUN_REASONS:
                    gap = frame("replay_gap", None, gap_json(error.gap, error.reason, sent))
                    if budget.fits(gap, counted=False):
                        yield gap
                return
            data = _item_frame(item)
            if not budget.fits(data, counted=True):
                return  # not sent, not acknowledged: the next connection starts with it
            budget.spend(data, counted=True)
            yield data
            yield FLUSH  # resumes once the server's send buffer drained: the frame is out
            sent = item.seq
            if isinstance(item, RunTerminal):
                return
            try:
                subscription.ack(item.seq)
            except RunError as error:
                if error.reason in _OVERRUN_REASONS:
                    gap = frame("replay_gap", None, gap_json(error.gap, error.reason, sent))
                    if budget.fits(gap, counted=False):
                        yield gap
                return
            if budget.spent:
                return
    finally:
        subscription.close()


def _item_frame(item: RunEvent | RunTerminal) -> bytes:
    if isinstance(item, RunEvent):
        return frame("event", item.seq, event_json(item.event))
    return frame("terminal", item.seq, outcome_json(item.outcome))
