"""`EventStream`: what `Runner.run_async` returns, one invocation's events with ``for``
or ``async for``, and its cancel (`Runner.cancel(stream, reason)`).

Nothing starts until iteration does. ``for`` starts the invocation's server with the
blocking start (`launch.launch`) and follows it (`follow.follow`); ``async for`` awaits
the start (`launch.launch_async`) and the inbox (`follow.afollow`), so its event loop
runs on meanwhile, and a consumer cancelled while the start is in flight leaves once it
has answered, an invocation started meanwhile cancelled with ``consumer_closed``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from adk_actors.events import Event
from adk_actors.outcomes import OUTCOME_TYPES
from adk_actors.runner.follow import afollow, cancel_abandoned, follow, result_of
from adk_actors.runner.launch import launch, launch_async
from adk_actors.runner.messages import Cancel, check_cancel_reason
from adk_actors.runner.request import InvocationRequest
from supervision import Pid, ProcessExit, call

DEFAULT_CANCEL_REASON = "user_cancelled"
"""The reason `Runner.cancel` (and `EventStream.cancel`) ends an invocation with."""


_NOT_CANCELLED = object()


class EventStream:
    """One invocation's events: iterate with ``for`` or ``async for`` (never both).
    Nothing starts until iteration does; a failed invocation raises `AdkError` after
    its last event; a pause ends the stream after the pause event; `cancel` (also
    `Runner.cancel(stream, reason)`) ends it with the cancel.

    ``for`` starts the invocation's server with a blocking start; ``async for`` awaits
    it, so the event loop runs on meanwhile. A consumer cancelled while that start is in
    flight gets its `CancelledError` once the start has answered, and an invocation
    started meanwhile is cancelled with ``consumer_closed`` (`launch.launch_async`), as
    when it leaves the loop early."""

    def __init__(self, request: Callable[[Pid], InvocationRequest]) -> None:
        self._request = request  # the invocation's request, for its caller's inbox
        self._server: Pid | None = None
        self._cancel: Any = _NOT_CANCELLED

    def cancel(self, reason: Any = DEFAULT_CANCEL_REASON) -> None:
        """Cancel the invocation (see `Runner.cancel`); safe from any thread."""
        check_cancel_reason(reason)
        self._cancel = reason  # seen by `_started` if the server is not known yet
        if self._server is not None:
            _send_cancel(self._server, reason)

    def _started(self, server: Pid) -> None:
        self._server = server
        if self._cancel is not _NOT_CANCELLED:  # cancelled before it started
            _send_cancel(server, self._cancel)

    def __iter__(self) -> Iterator[Event]:
        items = follow(lambda inbox: launch(self._request(inbox)), self._started)
        try:
            for item in items:
                if isinstance(item, OUTCOME_TYPES):
                    result_of(item)
                    return
                yield item
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._aiterate()

    async def _aiterate(self) -> AsyncIterator[Event]:
        items = afollow(
            lambda inbox: launch_async(self._request(inbox), cancel_abandoned), self._started
        )
        try:
            async for item in items:
                if isinstance(item, OUTCOME_TYPES):
                    result_of(item)
                    return
                yield item
        finally:
            await items.aclose()


def _send_cancel(server: Pid, reason: Any) -> None:
    """Cancel at once (no grace: the caller asked); an ended invocation ignores it."""
    try:
        call(server, Cancel(reason, 0.0))
    except ProcessExit:
        pass  # it ended meanwhile: its own terminal stands
