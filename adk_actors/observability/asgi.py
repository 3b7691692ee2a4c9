"""`TraceContextMiddleware`: an ASGI request joins its caller's W3C trace.

Plain ASGI (no web framework imported). For an HTTP request whose headers carry a
valid `traceparent` (and optional `tracestate`), the rest of the application runs
with that remote span as the current parent, so an invocation a handler starts, on
whatever thread, joins the caller's trace with its sampling decision. A header that
fails the strict parse is ignored as a whole (the W3C rule for an invalid parent: start
a new trace), and the request is served as if it had none. An application that already
uses OpenTelemetry's own ASGI instrumentation does not need this.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from adk_actors.observability.trace_context import TraceContext, TraceContextError
from adk_actors.observability.tracing import remote_parent

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_HEADER_BYTES = 1024


def _parent(scope: Scope) -> TraceContext | None:
    pairs: list[tuple[str, str]] = []
    for name, value in scope.get("headers") or ():
        if name in (b"traceparent", b"tracestate"):
            if len(value) > MAX_HEADER_BYTES:
                return None
            pairs.append((name.decode("latin-1"), value.decode("latin-1")))
    if not pairs:
        return None
    try:
        return TraceContext.from_headers(pairs)
    except TraceContextError:
        return None


class TraceContextMiddleware:
    """Wrap an ASGI app: ``app = TraceContextMiddleware(app)``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        with remote_parent(_parent(scope)):
            await self.app(scope, receive, send)
