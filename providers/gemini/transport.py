"""The httpx layer under google-genai: what our own HTTP clients do to every exchange.

Owns the response body cap (`CappedTransport`, `CappedAsyncTransport`: past the cap a
read raises `ResponseTooLarge`), the sync call's deadline at the transport
(`sync_deadline`: connecting, writing and each read get only the time left, and a
watchdog shuts the socket down at the deadline so a read blocked on a silent server
ends then too), the one verifying TLS context every client shares (`ssl_context`), and
the pool limits and timeout a client gets from its settings. How a call is made, tried
again and mapped to `AdkError` stays with the provider (`providers.gemini`), which
builds its clients on these transports.

The cap is not a constant here: a transport asks `cap()` at each response, so the
provider's ``providers.gemini.MAX_RESPONSE_BYTES`` stays the one setting that counts,
for the clients already built too.
"""

from __future__ import annotations

import contextlib
import contextvars
import socket
import ssl
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx

from providers.gemini import retry
from providers.gemini.config import GeminiSettings

ResponseCap = Callable[[], int]
"""The body cap in bytes, asked at each response."""


class ResponseTooLarge(Exception):
    """A response body passed the cap (the provider maps it to ``response_too_large``)."""


sync_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "gemini_sync_deadline", default=None
)
"""The `time.monotonic()` deadline of the sync call running in this context."""


class _CappedStream(httpx.SyncByteStream):
    """Stops reading a response body past `limit` bytes, or past `deadline`: a
    watchdog shuts the socket down at the deadline, so a read blocked on a silent
    server ends then too (a per-read timeout would start afresh at every byte)."""

    def __init__(
        self, inner: Any, limit: int, deadline: float | None = None, sock: Any = None
    ) -> None:
        self._inner = inner
        self._limit = limit
        self._deadline = deadline
        self._watchdog: threading.Timer | None = None
        if deadline is not None and isinstance(sock, socket.socket):
            self._watchdog = threading.Timer(
                max(0.0, deadline - time.monotonic()), _shut_down, (sock,)
            )
            self._watchdog.daemon = True
            self._watchdog.start()

    def __iter__(self) -> Iterator[bytes]:
        seen = 0
        deadline = self._deadline
        try:
            for chunk in self._inner:
                seen += len(chunk)
                if seen > self._limit:
                    raise ResponseTooLarge()
                if deadline is not None and time.monotonic() > deadline:
                    raise retry.DeadlineReached("the request deadline passed mid-response")
                yield chunk
        except httpx.TransportError:
            if deadline is not None and time.monotonic() >= deadline:  # the watchdog's
                raise retry.DeadlineReached("the request deadline passed mid-response") from None
            raise
        finally:
            self._stop_watchdog()

    def close(self) -> None:
        self._stop_watchdog()
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()

    def _stop_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None


def _shut_down(sock: socket.socket) -> None:
    """Wake a read blocked on `sock` (another thread's): its call's deadline passed."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class CappedTransport(httpx.HTTPTransport):
    """Caps the body at `cap()`; under a sync call's deadline, connecting, writing and
    each read get only the time left, and the body stops at the deadline."""

    def __init__(self, *, cap: ResponseCap, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cap = cap

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        deadline = sync_deadline.get()
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise retry.DeadlineReached("the request deadline passed")
            request.extensions["timeout"] = {
                "connect": left,
                "read": left,
                "write": left,
                "pool": left,
            }
        response = super().handle_request(request)
        network = response.extensions.get("network_stream")
        sock = None if network is None else network.get_extra_info("socket")
        response.stream = _CappedStream(response.stream, self._cap(), deadline, sock)
        return response


class _CappedAsyncStream(httpx.AsyncByteStream):
    """`_CappedStream` for async responses (their deadline is the caller's
    `asyncio.timeout`, which cancels a blocked read)."""

    def __init__(self, inner: Any, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise ResponseTooLarge()
            yield chunk

    async def aclose(self) -> None:
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()


class CappedAsyncTransport(httpx.AsyncHTTPTransport):
    """Caps the body at `cap()`."""

    def __init__(self, *, cap: ResponseCap, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cap = cap

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        response.stream = _CappedAsyncStream(response.stream, self._cap())
        return response


_ssl_lock = threading.Lock()
_shared_ssl_context: ssl.SSLContext | None = None


def ssl_context() -> ssl.SSLContext:
    """One verifying TLS context for every client: building one costs tens of ms
    (it loads the CA bundle), too much to pay per event loop."""
    global _shared_ssl_context
    with _ssl_lock:
        if _shared_ssl_context is None:
            _shared_ssl_context = httpx.create_ssl_context()
        return _shared_ssl_context


def limits(settings: GeminiSettings) -> httpx.Limits:
    """A sync client's pool: ``max_connections``, all of them kept alive."""
    return httpx.Limits(
        max_connections=settings.max_connections,
        max_keepalive_connections=settings.max_connections,
    )


def timeout(settings: GeminiSettings) -> httpx.Timeout:
    """httpx's own timeout: ``timeout_ms`` when set (the call's deadline is separate)."""
    return httpx.Timeout(None if settings.timeout_ms is None else settings.timeout_ms / 1000)
