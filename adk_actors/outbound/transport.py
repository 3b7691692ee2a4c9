"""The guarded HTTP transport every outbound client uses (httpx2/httpcore2, the MCP
SDK's HTTP client).

* `PinnedBackend`: the connection pool's network backend. Each new TCP connection
  resolves and validates again and connects to a validated *address* (TLS keeps the
  host name for SNI and certificate checks, the request keeps its Host header), so a
  DNS answer that changes between the check and the connect is never used unchecked.
* `GuardedTransport`: refuses any request outside the endpoint's origin, records
  redirects (never followed: clients set ``max_redirects`` to 0), 401/403 as typed
  refusals, lost sessions (404 to a request carrying the session header) and bounds
  every response body (`ResponseTooLarge`). Every request asks for
  ``Accept-Encoding: identity`` and a response in any other ``Content-Encoding`` is
  refused (``reasons.unsupported_content_encoding``): the bound counts the bytes the
  caller reads, so a compressed body can never decode past it. The status is recorded
  first: a redirect or a 401/403 (refused by status, body never read) keeps its own
  refusal, its compressed body dropped unread.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio
import anyio.to_thread
import httpcore2
import httpx2

from adk_actors.outbound.auth import MAX_HEADER_BYTES
from adk_actors.outbound.endpoints import Endpoint, normal_host, same_origin
from adk_actors.outbound.observed import Observed
from adk_actors.outbound.policy import HttpPolicy
from adk_actors.outbound.reasons import OutboundReasons
from providers.errors import AdkError


class PinnedBackend(httpcore2.AsyncNetworkBackend):
    """Connects only to the endpoint's host, at an address validated just now."""

    def __init__(self, endpoint: Endpoint, policy: HttpPolicy, observed: Observed) -> None:
        self.endpoint = endpoint
        self.policy = policy
        self.observed = observed
        self.inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        if (normal_host(host), port) != (self.endpoint.host, self.endpoint.port):
            self.observed.refused = AdkError(
                self.policy.reasons.destination_not_allowed, "a connection to another origin"
            )
            raise httpcore2.ConnectError("refused: another origin")
        try:  # a hung resolver is abandoned when the caller's deadline cancels the wait
            addresses = await anyio.to_thread.run_sync(
                self.policy.addresses, self.endpoint, abandon_on_cancel=True
            )
        except AdkError as error:
            self.observed.refused = error
            raise httpcore2.ConnectError(f"refused: {error.reason}") from None
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as error:
                failure = error
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("refused: unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class ResponseTooLarge(httpx2.StreamError):
    """A response body past ``max_response_bytes`` (the MCP SDK reports it as a parse error)."""

    def __init__(self) -> None:
        super().__init__("the response is larger than max_response_bytes")


class BoundedStream(httpx2.AsyncByteStream):
    """A response body that raises `ResponseTooLarge` once past `limit` bytes."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, observed: Observed) -> None:
        self.inner = inner
        self.limit = limit
        self.observed = observed

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.inner:
            seen += len(chunk)
            if seen > self.limit:
                self.observed.too_large += 1
                raise ResponseTooLarge()
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class GuardedTransport(httpx2.AsyncBaseTransport):
    """The endpoint's origin only, bounded bodies, redirects, refusals and lost sessions
    recorded in `observed`."""

    def __init__(
        self,
        endpoint: Endpoint,
        policy: HttpPolicy,
        observed: Observed,
        max_response_bytes: int,
        ssl_context: ssl.SSLContext | None = None,
        *,
        session_header: str | None = None,
        max_connections: int = 8,
    ) -> None:
        self.endpoint = endpoint
        self.reasons = policy.reasons
        self.observed = observed
        self.max_response_bytes = max_response_bytes
        self.session_header = session_header
        context = ssl_context or httpx2.create_ssl_context(verify=True, trust_env=False)
        self.inner = httpx2.AsyncHTTPTransport(verify=context, trust_env=False)
        # httpx2 takes no network backend, so the transport's pool (the one private
        # attribute used) is replaced by one built here, with the pinning backend
        self.inner._pool = httpcore2.AsyncConnectionPool(
            ssl_context=context,
            max_connections=max_connections,
            max_keepalive_connections=max(1, max_connections // 2),
            keepalive_expiry=5.0,
            network_backend=PinnedBackend(endpoint, policy, observed),
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if same_origin(request.url, self.endpoint) is False:
            self.observed.refused = AdkError(self.reasons.destination_not_allowed, "another origin")
            raise httpx2.ConnectError("refused: another origin", request=request)
        request.headers["Accept-Encoding"] = "identity"
        response = await self.inner.handle_async_request(request)
        status = response.status_code
        self.observed.statuses = [*self.observed.statuses[-15:], status]
        if 300 <= status < 400:
            self.observed.redirects += 1
        if (
            status == 404
            and self.session_header is not None
            and request.headers.get(self.session_header)
        ):
            self.observed.session_lost += 1
        if status in (401, 403):
            self.observed.refused = auth_refusal(
                status, response.headers.get("www-authenticate", ""), self.reasons
            )
        encoding = response.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            await response.aclose()
            if status in UNREAD_STATUSES:  # refused by their status: never decoded
                return unread(response, request)
            self.observed.refused = AdkError(
                self.reasons.unsupported_content_encoding,
                "the server sent a compressed body; the client asks for identity only",
            )
            raise httpx2.DecodingError("refused: content encoding", request=request)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = BoundedStream(response.stream, self.max_response_bytes, self.observed)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


UNREAD_STATUSES = frozenset({*range(300, 400), 401, 403})
"""Statuses a client refuses without reading the body (a redirect, never followed; an
auth refusal, typed from the challenge): their compressed body is dropped, not refused,
so the status keeps its own refusal."""


def unread(response: httpx2.Response, request: httpx2.Request) -> httpx2.Response:
    """`response` (already closed) with an empty, unencoded body and its status and other
    headers: what the caller acts on is the status."""
    dropped = {"content-encoding", "content-length", "transfer-encoding"}
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in dropped]
    return httpx2.Response(
        response.status_code,
        headers=[*headers, ("content-length", "0")],
        content=b"",
        request=request,
        extensions=response.extensions,
    )


_CHALLENGE_ERROR = re.compile(r'error\s*=\s*"?([A-Za-z_]+)', re.IGNORECASE)


def auth_refusal(status: int, challenge: str, reasons: OutboundReasons) -> AdkError:
    """The typed error for a 401 or 403 (RFC 6750 §3.1 ``error=`` in the challenge),
    one of a fixed set: ``(reasons.unauthorized, "invalid_token" | "token_required")``,
    ``(reasons.forbidden, "insufficient_scope" | "forbidden")``."""
    found = _CHALLENGE_ERROR.search(challenge[:MAX_HEADER_BYTES])
    code = found.group(1).lower() if found else ""
    if status == 401:
        why = "invalid_token" if code == "invalid_token" else "token_required"
        return AdkError((reasons.unauthorized, why), "the server refused the credentials (401)")
    why = "insufficient_scope" if code == "insufficient_scope" else "forbidden"
    return AdkError((reasons.forbidden, why), "the server refused the request (403)")


def caused_by(error: BaseException, kind: type[BaseException]) -> bool:
    """Is `error`, or one of the errors it was raised from or during, a `kind`?"""
    seen: BaseException | None = error
    for _ in range(16):
        if seen is None:
            return False
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def tls_failure(error: BaseException, reasons: OutboundReasons) -> AdkError | None:
    """``reasons.tls_failed`` if `error` came from the TLS handshake or certificate check."""
    if caused_by(error, ssl.SSLError):
        return AdkError(reasons.tls_failed, "the TLS handshake or certificate check failed")
    return None
