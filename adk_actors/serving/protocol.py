"""uvicorn's httptools protocol with a bounded request head and a JSON 503 past the
connection limit.

uvicorn bounds neither the size nor the time of a request head with httptools.
`BoundedHttpProtocol` does: past ``max_head_bytes`` or ``max_headers``, 431; not
complete within ``head_timeout`` of the connection opening or of its first byte, 408
(a connection that sent nothing just closes); both answers are a small JSON error body
and the connection closes. Past uvicorn's ``limit_concurrency`` (the listener's
``max_connections``) a request is answered by the class's ``overloaded`` ASGI app
rather than uvicorn's own plain-text 503. `bounded_protocol` makes a subclass with a
listener's limits and answer (the class attributes).
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from supervision import get_logger

MAX_HEAD_BYTES = 32 * 1024
MAX_HEADERS = 100
HEAD_TIMEOUT = 10.0
_log = get_logger("adk_actors.serving")

_OVERLOADED_BODY = (
    b'{"error":{"code":"too_many_connections",'
    b'"message":"The server has its maximum number of connections; retry"}}'
)


async def too_many_connections(scope: Scope, receive: Receive, send: Send) -> None:
    """The default answer past ``max_connections``: 503 ``too_many_connections`` as a
    JSON error body, ``Retry-After: 1``, and a connection that closes."""
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(_OVERLOADED_BODY)).encode()),
                (b"cache-control", b"no-store"),
                (b"retry-after", b"1"),
                (b"connection", b"close"),
                (b"x-content-type-options", b"nosniff"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": _OVERLOADED_BODY})


class _HeadRefused(Exception):
    """Raised inside the parser's callbacks to stop a head past its bounds."""


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a bounded request head (see the module
    docstring). Limits, the answer past the connection limit and its log event are
    class attributes, set per listener by `bounded_protocol`."""

    max_head_bytes = MAX_HEAD_BYTES
    max_headers = MAX_HEADERS
    head_timeout = HEAD_TIMEOUT
    overloaded: ASGIApp = staticmethod(too_many_connections)
    overloaded_event = "adk.serving.too_many_connections"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._in_head = True
        self._head_raw = 0
        self._head_bytes = 0
        self._header_count = 0
        self._refusal: tuple[int, bytes] | None = None
        self._head_timer: asyncio.TimerHandle | None = None
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refusal is not None:
            return  # refused: the connection is closing, the rest is not read
        if self._in_head:
            self._head_raw += len(data)
        super().data_received(data)
        if self._refusal is None and self._in_head and self._head_raw > self.max_head_bytes:
            self._refuse(431, b"Request Header Fields Too Large")  # an unfinished huge head

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = 0
        self._header_count = 0
        if self._head_timer is None:
            self._arm_head_timer()

    def on_url(self, url: bytes) -> None:
        self._count(len(url), 0)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4, 1)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_raw = 0
        self._cancel_head_timer()
        limit = self.limit_concurrency
        if limit is None or (len(self.connections) < limit and len(self.tasks) < limit):
            super().on_headers_complete()
            return
        # uvicorn would answer its plain-text 503 (the same test, in the method below):
        # the request goes to `overloaded` instead, as any other ASGI app
        _log.warning(self.overloaded_event, limit=limit)
        app, self.app = self.app, self.overloaded
        self.limit_concurrency = None
        try:
            super().on_headers_complete()
        finally:
            self.app, self.limit_concurrency = app, limit

    def send_400_response(self, msg: str) -> None:
        if self._refusal is None:
            super().send_400_response(msg)
            return
        status, reason = self._refusal
        self._write_refusal(status, reason)

    # -- helpers -----------------------------------------------------------------------

    def _count(self, size: int, headers: int) -> None:
        self._head_bytes += size
        self._header_count += headers
        if self._head_bytes > self.max_head_bytes or self._header_count > self.max_headers:
            self._refusal = (431, b"Request Header Fields Too Large")
            raise _HeadRefused  # the parser stops; uvicorn answers through send_400_response

    def _refuse(self, status: int, reason: bytes) -> None:
        self._refusal = (status, reason)
        self._write_refusal(status, reason)

    def _write_refusal(self, status: int, reason: bytes) -> None:
        self._cancel_head_timer()
        if self.transport.is_closing():
            return
        code = b"request_header_fields_too_large" if status == 431 else b"request_timeout"
        body = b'{"error":{"code":"' + code + b'","message":"' + reason + b'"}}'
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"cache-control: no-store\r\nconnection: close\r\n\r\n%s"
            % (status, reason, len(body), body)
        )
        self.transport.close()

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._in_head or self.transport.is_closing():
            return
        if self._head_raw:
            self._refuse(408, b"Request Timeout")
        else:
            self._refusal = (408, b"Request Timeout")
            self.transport.close()


def bounded_protocol(
    *,
    max_head_bytes: int = MAX_HEAD_BYTES,
    max_headers: int = MAX_HEADERS,
    head_timeout: float = HEAD_TIMEOUT,
    overloaded: ASGIApp = too_many_connections,
    overloaded_event: str = "adk.serving.too_many_connections",
) -> type[BoundedHttpProtocol]:
    """A `BoundedHttpProtocol` with these head bounds and this answer (and log event)
    past the listener's ``max_connections``."""
    return type(
        "BoundedHttpProtocol",
        (BoundedHttpProtocol,),
        {
            "max_head_bytes": max_head_bytes,
            "max_headers": max_headers,
            "head_timeout": head_timeout,
            "overloaded": staticmethod(overloaded),
            "overloaded_event": overloaded_event,
        },
    )
