"""The Streamable HTTP client's security rules (spec "MCP clients": client security).

* `parse_endpoint`: ``http`` or ``https`` only, a host, no user info, query or fragment
  (a credential must never become part of a request URL): ``invalid_mcp_url``.
* `HttpPolicy.addresses`: the host is resolved (an IP literal is used as is) by the
  policy's resolver (injectable: tests use a stub) and *every* address is checked
  before anything connects. ``https`` needs every address public (not private,
  loopback, link-local, shared, reserved, multicast, unspecified or a cloud metadata
  address), unless the host is named in ``allowed_private_hosts``;
  ``http`` (cleartext) needs ``allow_http_loopback=True`` and every address loopback.
  Refusals: ``insecure_mcp_destination`` (cleartext), ``mcp_private_destination_rejected``,
  ``mcp_destination_not_allowed`` (a host outside ``allowed_hosts``),
  ``mcp_dns_resolution_failed``.
* `PinnedBackend`: the HTTP connection pool's network backend. Each new TCP connection
  resolves and validates again and connects to a validated *address* (TLS keeps the
  host name for SNI and certificate checks, the request keeps its Host header), so a
  DNS answer that changes between the check and the connect is never used unchecked.
* `GuardedTransport`: refuses any request outside the endpoint's origin, records
  redirects (never followed: the client's ``max_redirects`` is 0), lost sessions
  (404 to a request carrying a session id) and bounds every response body.
* `OriginAuth`: headers come only from the ``auth`` callback, per request, and only
  for the endpoint's origin; at most one ``Authorization`` header.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import ssl
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import httpcore2
import httpx2

from providers.errors import AdkError

Resolver = Callable[[str, int], Sequence[str]]
"""``resolver(host, port)`` -> the host's IP addresses (strings); raising means unresolvable."""
AuthCallback = Callable[[], Mapping[str, str]]
"""``auth()`` -> ``{"Authorization": "Bearer ..."}`` (or ``{}``), called for every request."""

DEFAULT_MAX_RESOLVED_ADDRESSES = 64
MAX_RESOLVED_ADDRESSES = 256
MAX_HEADER_BYTES = 8192
MAX_URL_BYTES = 2048

_METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254")
)
_SHARED = ipaddress.ip_network("100.64.0.0/10")


def default_resolver(host: str, port: int) -> list[str]:
    """The system resolver (``getaddrinfo``), unique addresses in its order."""
    found: list[str] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = str(sockaddr[0])
        if address not in found:
            found.append(address)
    return found


@dataclass(frozen=True)
class Endpoint:
    """A checked Streamable HTTP endpoint."""

    url: str
    scheme: str
    host: str
    port: int
    path: str

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


def parse_endpoint(url: Any) -> Endpoint:
    """The endpoint of `url`, or ``("invalid_mcp_url", why)``."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_BYTES:
        raise AdkError(("invalid_mcp_url", "not_a_url"), "the endpoint is a URL string")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise AdkError(("invalid_mcp_url", "unparsable"), "the endpoint is not a URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise AdkError(("invalid_mcp_url", "scheme"), "the endpoint is http:// or https://")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise AdkError(("invalid_mcp_url", "userinfo"), "credentials never go in the URL")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise AdkError(("invalid_mcp_url", "query_or_fragment"), "no query or fragment")
    host = (parts.hostname or "").lower().rstrip(".")
    if not host or any(ch.isspace() for ch in url):
        raise AdkError(("invalid_mcp_url", "host"), "the endpoint names a host")
    if port is None:
        port = 443 if scheme == "https" else 80
    if not 0 < port <= 65535:
        raise AdkError(("invalid_mcp_url", "port"), "ports are 1-65535")
    return Endpoint(url, scheme, host, port, parts.path or "/")


def _ip(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_COMPATIBLE = ipaddress.ip_network("::/96")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries, by the form it has: IPv4-mapped
    (``::ffff:a.b.c.d``), IPv4-compatible (``::a.b.c.d``), 6to4 (``2002:AABB:CCDD::/48``),
    Teredo (``2001::/32``: its server and its client), NAT64 (``64:ff9b::/96``, and the
    local-use ``64:ff9b:1::/48`` under both RFC 6052 layouts a /48 network may use).
    Each is checked with the IPv4 rules, so no form tunnels to an address the IPv4
    rules refuse."""
    found: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    value = int(ip)
    if ip in _NAT64 or ip in _NAT64_LOCAL or (ip in _COMPATIBLE and value > 1):
        found.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if ip in _NAT64_LOCAL:  # RFC 6052 /48: bits 48-63 and 72-87 (bits 64-71 are zero)
        found.append(
            ipaddress.IPv4Address((((value >> 64) & 0xFFFF) << 16) | ((value >> 40) & 0xFFFF))
        )
    return found


def is_loopback_destination(address: str) -> bool:
    """A resolved destination address (zone ids allowed, IPv4-mapped unwrapped) that
    is loopback: where cleartext ``http`` may go with ``allow_http_loopback``. Not
    `adk_actors.serving.is_loopback`, which judges a *bind* host literal."""
    try:
        return _ip(address).is_loopback
    except ValueError:
        return False


def is_public(address: str) -> bool:
    """A globally routable unicast address that is no cloud metadata service; an IPv6
    address that embeds IPv4 addresses (`embedded_ipv4`) is public only if they are."""
    try:
        ip = _ip(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and not all(
        _public(inner) for inner in embedded_ipv4(ip)
    ):
        return False
    return _public(ip)


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if ip in _METADATA_ADDRESSES:
        return False
    if isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED:
        return False
    return ip.is_global and not (
        ip.is_multicast or ip.is_reserved or ip.is_link_local or ip.is_unspecified
    )


@dataclass(frozen=True)
class HttpPolicy:
    """Where the Streamable HTTP client may connect."""

    allow_http_loopback: bool = False
    allowed_hosts: frozenset[str] | None = None
    """None: any public host; else only these exact host names."""
    allowed_private_hosts: frozenset[str] = frozenset()
    """Exact HTTPS host names that may resolve to private addresses."""
    resolver: Resolver = default_resolver
    max_resolved_addresses: int = DEFAULT_MAX_RESOLVED_ADDRESSES

    def check_scheme(self, endpoint: Endpoint) -> None:
        if endpoint.scheme == "http" and not self.allow_http_loopback:
            raise AdkError(
                "insecure_mcp_destination",
                "cleartext http is refused; use https, or allow_http_loopback=True "
                "for a loopback endpoint",
            )

    def addresses(self, endpoint: Endpoint) -> list[str]:
        """The endpoint's validated addresses (resolved now; blocking)."""
        self.check_scheme(endpoint)
        if self.allowed_hosts is not None and endpoint.host not in self.allowed_hosts:
            raise AdkError("mcp_destination_not_allowed", "the host is not in allowed_hosts")
        return self.validate(endpoint, self._resolve(endpoint))

    def _resolve(self, endpoint: Endpoint) -> list[str]:
        try:
            _ip(endpoint.host.strip("[]"))
        except ValueError:
            pass
        else:
            return [endpoint.host.strip("[]")]
        try:
            found = list(self.resolver(endpoint.host, endpoint.port))
        except Exception:
            raise AdkError("mcp_dns_resolution_failed", "the host did not resolve") from None
        if not found or not all(isinstance(address, str) for address in found):
            raise AdkError("mcp_dns_resolution_failed", "the host resolved to nothing")
        return found[: self.max_resolved_addresses]

    def validate(self, endpoint: Endpoint, addresses: Iterable[str]) -> list[str]:
        checked = list(addresses)
        for address in checked:
            try:
                _ip(address)
            except ValueError:
                raise AdkError(
                    "mcp_dns_resolution_failed", "the resolver returned a non-address"
                ) from None
        if endpoint.scheme == "http":
            if not all(is_loopback_destination(address) for address in checked):
                raise AdkError(
                    "insecure_mcp_destination", "cleartext http is only allowed to loopback"
                )
            return checked
        if endpoint.host in self.allowed_private_hosts:
            return checked
        if not all(is_public(address) for address in checked):
            raise AdkError(
                "mcp_private_destination_rejected",
                "the host resolves to a private, loopback, link-local, reserved or "
                "metadata address",
            )
        return checked


@dataclass
class Observed:
    """What the transport saw while one session ran (read by the client to type errors)."""

    redirects: int = 0
    session_lost: int = 0
    too_large: int = 0
    refused: AdkError | None = None
    statuses: list[int] = field(default_factory=list)


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
        if (host.lower().strip("[]"), port) != (self.endpoint.host.strip("[]"), self.endpoint.port):
            self.observed.refused = AdkError(
                "mcp_destination_not_allowed", "a connection to another origin"
            )
            raise httpcore2.ConnectError("refused: another origin")
        try:
            addresses = await anyio.to_thread.run_sync(self.policy.addresses, self.endpoint)
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
    """A response body past ``max_response_bytes`` (the SDK reports it as a parse error)."""

    def __init__(self) -> None:
        super().__init__("the response is larger than max_response_bytes")


class _BoundedStream(httpx2.AsyncByteStream):
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
    """The endpoint's origin only, bounded bodies, redirects and lost sessions recorded."""

    def __init__(
        self,
        endpoint: Endpoint,
        policy: HttpPolicy,
        observed: Observed,
        max_response_bytes: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.observed = observed
        self.max_response_bytes = max_response_bytes
        context = ssl_context or httpx2.create_ssl_context(verify=True, trust_env=False)
        self.inner = httpx2.AsyncHTTPTransport(verify=context, trust_env=False)
        # httpx2 takes no network backend, so the transport's pool (the one private
        # attribute used) is replaced by one built here, with the pinning backend
        self.inner._pool = httpcore2.AsyncConnectionPool(
            ssl_context=context,
            max_connections=8,
            max_keepalive_connections=4,
            keepalive_expiry=5.0,
            network_backend=PinnedBackend(endpoint, policy, observed),
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if same_origin(request.url, self.endpoint) is False:
            self.observed.refused = AdkError("mcp_destination_not_allowed", "another origin")
            raise httpx2.ConnectError("refused: another origin", request=request)
        response = await self.inner.handle_async_request(request)
        self.observed.statuses = [*self.observed.statuses[-15:], response.status_code]
        if 300 <= response.status_code < 400:
            self.observed.redirects += 1
        if response.status_code == 404 and request.headers.get("mcp-session-id"):
            self.observed.session_lost += 1
        if response.status_code in (401, 403):
            self.observed.refused = auth_refusal(
                response.status_code, response.headers.get("www-authenticate", "")
            )
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _BoundedStream(response.stream, self.max_response_bytes, self.observed)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


_CHALLENGE_ERROR = re.compile(r'error\s*=\s*"?([A-Za-z_]+)', re.IGNORECASE)


def auth_refusal(status: int, challenge: str) -> AdkError:
    """The typed error for a 401 or 403 (RFC 6750 §3.1 ``error=`` in the challenge),
    one of a fixed set: ``("mcp_unauthorized", "invalid_token" | "token_required")``,
    ``("mcp_forbidden", "insufficient_scope" | "forbidden")``."""
    found = _CHALLENGE_ERROR.search(challenge[:MAX_HEADER_BYTES])
    code = found.group(1).lower() if found else ""
    if status == 401:
        why = "invalid_token" if code == "invalid_token" else "token_required"
        return AdkError(("mcp_unauthorized", why), "the server refused the credentials (401)")
    why = "insufficient_scope" if code == "insufficient_scope" else "forbidden"
    return AdkError(("mcp_forbidden", why), "the server refused the request (403)")


def same_origin(url: httpx2.URL, endpoint: Endpoint) -> bool:
    port = url.port or (443 if url.scheme == "https" else 80)
    return (url.scheme, (url.host or "").lower().rstrip("."), port) == endpoint.origin


class OriginAuth(httpx2.Auth):
    """Calls ``auth()`` for each request to the endpoint's origin; other origins get
    nothing (and are refused by the transport anyway)."""

    def __init__(self, endpoint: Endpoint, callback: AuthCallback, observed: Observed) -> None:
        self.endpoint = endpoint
        self.callback = callback
        self.observed = observed

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if same_origin(request.url, self.endpoint):
            try:
                headers = await anyio.to_thread.run_sync(self.callback)
                name, value = auth_header(headers)
            except AdkError as error:
                self.observed.refused = error
                raise httpx2.ConnectError(f"refused: {error.reason}", request=request) from None
            except Exception:
                self.observed.refused = AdkError("mcp_auth_callback_failed", "auth() raised")
                raise httpx2.ConnectError("refused: auth", request=request) from None
            if name is not None:
                request.headers[name] = value
        yield request


def auth_header(headers: Any) -> tuple[str | None, str]:
    """The one ``Authorization`` header `headers` may hold (or none)."""
    if not isinstance(headers, Mapping):
        raise AdkError("invalid_mcp_auth_header", "auth() returns a mapping")
    if not headers:
        return None, ""
    items = list(headers.items())
    if len(items) != 1:
        raise AdkError("invalid_mcp_auth_header", "auth() returns at most one header")
    name, value = items[0]
    if not isinstance(name, str) or name.lower() != "authorization":
        raise AdkError("invalid_mcp_auth_header", "auth() returns only Authorization")
    if (
        not isinstance(value, str)
        or not value
        or len(value.encode()) > MAX_HEADER_BYTES
        or any(ch in value for ch in "\r\n\0")
    ):
        raise AdkError("invalid_mcp_auth_header", "a bounded single-line value")
    return "Authorization", value


STATIC_HEADER_OPTIONS = ("headers", "cookies", "proxy_authorization", "static_headers")


def refuse_static_headers(options: Mapping[str, Any]) -> None:
    """Static credentials are refused: they would outlive a token and can leak."""
    for key in STATIC_HEADER_OPTIONS:
        if options.get(key) is not None:
            raise AdkError(
                "static_headers_not_supported",
                f"{key}= is not supported; pass auth=callable returning the Authorization header",
            )
