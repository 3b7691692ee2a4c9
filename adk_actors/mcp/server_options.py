"""The MCP server's options: one msgspec struct, decoded by `server_options`.

`ServerOptions` holds every plain-data option of `adk.mcp.serve` and `adk.mcp.http_app`
(the hooks, the token and the OAuth document are checked by `server_auth.ServerAuth`;
the tools, resources and prompts by `server_handlers.McpCatalog`). Its constraints are
the rules: every number is bounded and finite, a bool is never a number, and a bad value
fails as ``AdkError(("invalid_mcp_server_option", key))`` naming the key (unknown keys:
``("invalid_mcp_server_option", ("unknown_keys", [names...]))``).

`check_exposure` is the non-loopback rule (`adk_actors.serving.exposure`, under MCP's
reasons): binding anywhere but loopback needs authentication, ``allow_non_loopback=True``
and TLS (``tls_certfile`` with ``tls_keyfile``, or ``trusted_tls_proxy=True``); each
missing piece is its own reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from adk_actors.serving import exposure
from adk_actors.serving.exposure import ExposureReasons
from providers.errors import AdkError, decode_options

REASON = "invalid_mcp_server_option"
DEFAULT_PATH = "/mcp"
DEFAULT_MAX_BODY_BYTES = 1 << 20
DEFAULT_MAX_RESPONSE_BYTES = 4 << 20
"""The spec's default bound on one response (a JSON-RPC answer, encoded)."""
MIN_RESPONSE_BYTES = 256
MAX_RESPONSE_BYTES = 64 << 20
"""The hard ceiling for ``max_response_bytes``."""
DEFAULT_MAX_CONCURRENCY = 32
DEFAULT_REQUEST_TIMEOUT = 30.0
DEFAULT_MAX_SESSIONS = 1024
DEFAULT_SESSION_TTL = 3600.0
DEFAULT_MAX_SESSION_REQUESTS = 10_000
"""The spec's default request budget of a session; also the size of the window of
request ids a session remembers (`server_sessions`)."""
DEFAULT_CALLBACK_TIMEOUT = 5.0
DEFAULT_MAX_CALLBACK_THREADS = 16
MAX_ORIGINS = 64

Bytes = Annotated[int, msgspec.Meta(ge=256, le=64 << 20)]


class ServerOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An MCP server's checked options (times in seconds); build one with `server_options`.

    Endpoint: `path`, `max_body_bytes` (a larger request is 413), `max_response_bytes`
    (a larger answer is ``-32603``), `max_concurrency` (requests in flight, a timed-out
    call's still-running thread included), `request_timeout` (one call),
    `max_sessions`, `session_ttl` (idle), `max_session_requests` (then the session
    expires: 404, the client initializes again), `callback_timeout` and
    `max_callback_threads` (the `verifier` / `authorization_fun` hooks' threads,
    abandoned ones included: past it a request is 503), `allowed_origins`, `name`.
    Listener (`serve` only): `host`, `port`, `allow_non_loopback`, `trusted_tls_proxy`,
    `tls_certfile`, `tls_keyfile`, `max_connections`, `keepalive_timeout`."""

    path: Annotated[str, msgspec.Meta(pattern=r"^/[^?#\s]*$", max_length=256)] = DEFAULT_PATH
    max_body_bytes: Bytes = DEFAULT_MAX_BODY_BYTES
    max_response_bytes: Bytes = DEFAULT_MAX_RESPONSE_BYTES
    max_concurrency: Annotated[int, msgspec.Meta(ge=1, le=4096)] = DEFAULT_MAX_CONCURRENCY
    request_timeout: Annotated[float, msgspec.Meta(ge=0.001, le=3600.0)] = DEFAULT_REQUEST_TIMEOUT
    max_sessions: Annotated[int, msgspec.Meta(ge=1, le=65_536)] = DEFAULT_MAX_SESSIONS
    session_ttl: Annotated[float, msgspec.Meta(ge=0.01, le=7 * 86_400.0)] = DEFAULT_SESSION_TTL
    max_session_requests: Annotated[int, msgspec.Meta(ge=1, le=10_000_000)] = (
        DEFAULT_MAX_SESSION_REQUESTS
    )
    callback_timeout: Annotated[float, msgspec.Meta(ge=0.001, le=30.0)] = DEFAULT_CALLBACK_TIMEOUT
    max_callback_threads: Annotated[int, msgspec.Meta(ge=1, le=256)] = DEFAULT_MAX_CALLBACK_THREADS
    allowed_origins: Annotated[
        tuple[Annotated[str, msgspec.Meta(min_length=1, max_length=2048)], ...],
        msgspec.Meta(max_length=MAX_ORIGINS),
    ] = ()
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=128)] = "adk-mcp"
    host: Annotated[str, msgspec.Meta(min_length=1, max_length=255)] = "127.0.0.1"
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 0
    allow_non_loopback: bool = False
    trusted_tls_proxy: bool = False
    tls_certfile: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)] | None = None
    tls_keyfile: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)] | None = None
    max_connections: Annotated[int, msgspec.Meta(ge=1, le=65_536)] = 256
    keepalive_timeout: Annotated[float, msgspec.Meta(ge=0.1, le=600.0)] = 5.0

    @property
    def endpoint_path(self) -> str:
        """`path` without a trailing slash (``/`` stays)."""
        return self.path.rstrip("/") or "/"

    @property
    def tls(self) -> bool:
        return self.tls_certfile is not None


def server_options(options: Mapping[str, Any] | None = None) -> ServerOptions:
    """The checked `ServerOptions` of `options` (omitted keys take their defaults)."""
    checked = decode_options(ServerOptions, options, REASON, what="MCP server option")
    if (checked.tls_certfile is None) != (checked.tls_keyfile is None):
        raise AdkError((REASON, "tls"), "tls_certfile and tls_keyfile go together")
    return checked


MCP_EXPOSURE_REASONS = ExposureReasons(
    requires_auth="mcp_non_loopback_requires_auth",
    not_acknowledged="mcp_non_loopback_not_acknowledged",
    requires_tls="mcp_non_loopback_requires_tls",
    label="MCP server",
)


def check_exposure(options: ServerOptions, *, authenticated: bool) -> None:
    """Refuse a non-loopback `host` without authentication, the acknowledgement or TLS
    (`adk_actors.serving.exposure.check_exposure` under MCP's reasons)."""
    exposure.check_exposure(
        options.host,
        authenticated=authenticated,
        allow_non_loopback=options.allow_non_loopback,
        tls=options.tls,
        trusted_tls_proxy=options.trusted_tls_proxy,
        reasons=MCP_EXPOSURE_REASONS,
    )
