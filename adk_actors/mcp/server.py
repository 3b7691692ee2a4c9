"""`adk.mcp.serve`: an MCP server over Streamable HTTP, as a supervised process.

`serve(tools=..., resources=..., prompts=..., host="127.0.0.1", port=0, ...)` checks
its options (typed errors, every bound finite), builds the catalog
(`server_handlers.McpCatalog`) and the endpoint (`server_http.McpHttpApp`: the SDK's
session manager behind our checks), then starts `adk_actors.serving`'s supervised
listener as a child of the root tree: uvicorn on its own thread, with bounded request
heads (431/408) and a JSON 503 ``too_many_connections`` past ``max_connections``. If
uvicorn stops on its own the process exits with ``mcp_listener_stopped`` and the
supervisor restarts it on the same port with a fresh endpoint (a new session table:
clients see 404 and initialize again); a listener killed without `terminate` leaves
its uvicorn serving on the thread: the restart asks that orphan to exit and binds once
the port is free. A port that cannot be bound is ``("mcp_server_bind_failed", errno)``.

Binding anywhere but loopback needs authentication (``auth_token`` or ``verifier``),
``allow_non_loopback=True``, and TLS: direct (``tls_certfile`` / ``tls_keyfile``) or
``trusted_tls_proxy=True`` (only when the clear listener is reachable exclusively from
that TLS terminator; forwarding headers are never proof of TLS).

`http_app(...)` is the same endpoint without a listener, for mounting in another ASGI
app (the daemon's ``adk serve``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from adk_actors.mcp.server_auth import AuthorizationFun, ServerAuth, Verifier
from adk_actors.mcp.server_handlers import McpCatalog, build_server
from adk_actors.mcp.server_http import HttpOptions, McpHttpApp
from adk_actors.serving import (
    Listener,
    ListenerNames,
    UvicornOptions,
    is_loopback,
    start_listener,
    stop_listener,
)
from providers.errors import AdkError
from supervision import Pid, get_logger

_log = get_logger("adk_actors.mcp.server")

DEFAULT_PATH = "/mcp"
DEFAULT_MAX_BODY_BYTES = 1 << 20
DEFAULT_MAX_CONCURRENCY = 32
DEFAULT_REQUEST_TIMEOUT = 30.0
DEFAULT_MAX_SESSIONS = 1024
DEFAULT_SESSION_TTL = 3600.0
DEFAULT_MAX_SESSION_REQUESTS = 10_000
DEFAULT_CALLBACK_TIMEOUT = 5.0
_STOP_TIMEOUT = 10.0
_BACKLOG = 1024
_NAMES = ListenerNames(
    bind_failed="mcp_server_bind_failed",
    start_failed="mcp_server_start_failed",
    stopped="mcp_listener_stopped",
    log="adk.mcp.server",
    thread="adk-mcp",
    label="MCP listener",
)
_ids = itertools.count(1)

_BOUNDS: dict[str, tuple[float, float]] = {
    "max_body_bytes": (256, 64 << 20),
    "max_concurrency": (1, 4096),
    "request_timeout": (0.001, 3600.0),
    "max_sessions": (1, 65_536),
    "session_ttl": (0.01, 7 * 86_400.0),
    "max_session_requests": (1, 10_000_000),
    "callback_timeout": (0.001, 30.0),
    "max_connections": (1, 65_536),
    "keepalive_timeout": (0.1, 600.0),
}


def _bounded(name: str, value: Any, integer: bool) -> Any:
    low, high = _BOUNDS[name]
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if not ok or isinstance(value, bool) or not math.isfinite(value) or not low <= value <= high:
        raise AdkError(
            ("invalid_mcp_server_option", name), f"{name} is a number in [{low}, {high}]"
        )
    return value


class EndpointOptions(TypedDict, total=False):
    """The endpoint's options, shared by `http_app` and `serve` (defaults in brackets):
    `path` (``/mcp``), `auth_token` (a static bearer token, 32+ characters), `verifier`
    (``verifier(token)`` -> principal or None), `authorization_fun` (``(principal,
    method, resource)`` -> bool), `max_body_bytes` (1 MiB), `max_concurrency` (32
    requests at once), `request_timeout` (30 s a call), `max_sessions` (1024),
    `session_ttl` (3600 s idle), `max_session_requests` (10 000 ids a session),
    `allowed_origins` (browser origins besides none), `oauth_protected_resource`
    (RFC 9728 metadata), `callback_timeout` (5 s for `verifier` /
    `authorization_fun`), `name` (the server's name in ``initialize``)."""

    path: str
    auth_token: str | None
    verifier: Verifier | None
    authorization_fun: AuthorizationFun | None
    max_body_bytes: int
    max_concurrency: int
    request_timeout: float
    max_sessions: int
    session_ttl: float
    max_session_requests: int
    allowed_origins: Sequence[str]
    oauth_protected_resource: Mapping[str, Any] | None
    callback_timeout: float
    name: str


@dataclass(frozen=True)
class _Built:
    catalog: McpCatalog
    options: HttpOptions
    auth: ServerAuth
    name: str

    def app(self) -> McpHttpApp:
        return McpHttpApp(build_server(self.catalog, self.name), self.options, self.auth)


def _build(
    tools: Sequence[Any],
    resources: Sequence[Mapping[str, Any]],
    prompts: Sequence[Mapping[str, Any]],
    *,
    path: str = DEFAULT_PATH,
    auth_token: str | None = None,
    verifier: Verifier | None = None,
    authorization_fun: AuthorizationFun | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    session_ttl: float = DEFAULT_SESSION_TTL,
    max_session_requests: int = DEFAULT_MAX_SESSION_REQUESTS,
    allowed_origins: Sequence[str] = (),
    oauth_protected_resource: Mapping[str, Any] | None = None,
    callback_timeout: float = DEFAULT_CALLBACK_TIMEOUT,
    name: str = "adk-mcp",
) -> _Built:
    if not isinstance(path, str) or not path.startswith("/") or "?" in path or "#" in path:
        raise AdkError(("invalid_mcp_server_option", "path"), "path is an absolute path")
    if isinstance(allowed_origins, str) or not all(isinstance(o, str) for o in allowed_origins):
        raise AdkError(
            ("invalid_mcp_server_option", "allowed_origins"), "allowed_origins is a list of origins"
        )
    options = HttpOptions(
        path=path.rstrip("/") or "/",
        max_body_bytes=_bounded("max_body_bytes", max_body_bytes, True),
        max_concurrency=_bounded("max_concurrency", max_concurrency, True),
        max_sessions=_bounded("max_sessions", max_sessions, True),
        session_ttl=float(_bounded("session_ttl", session_ttl, False)),
        max_session_requests=_bounded("max_session_requests", max_session_requests, True),
        allowed_origins=frozenset(allowed_origins),
    )
    auth = ServerAuth(
        auth_token=auth_token,
        verifier=verifier,
        authorization_fun=authorization_fun,
        oauth=oauth_protected_resource,
        callback_timeout=float(_bounded("callback_timeout", callback_timeout, False)),
    )
    timeout = float(_bounded("request_timeout", request_timeout, False))
    catalog = McpCatalog(tools, resources, prompts, request_timeout=timeout)
    return _Built(catalog, options, auth, name)


def http_app(
    tools: Sequence[Any] = (),
    resources: Sequence[Mapping[str, Any]] = (),
    prompts: Sequence[Mapping[str, Any]] = (),
    **options: Unpack[EndpointOptions],
) -> McpHttpApp:
    """The Streamable HTTP endpoint at `path` as an ASGI app, to mount in another app
    (it answers only `path` and the OAuth metadata path; the host app's listener and
    authentication apply too). `options`: `EndpointOptions`."""
    return _build(tools, resources, prompts, **options).app()


class McpServer:
    """A running MCP server: `url` is the Streamable HTTP endpoint itself."""

    def __init__(self, pid: Pid, child_id: str, url: str) -> None:
        self.pid = pid
        self.child_id = child_id
        self.url = url

    def __repr__(self) -> str:
        return f"McpServer({self.url!r})"

    def stop(self) -> None:
        """Stop the listener and remove it from the tree (a no-op once it is gone)."""
        stop_listener(Listener(self.pid, self.child_id, self.url))


def serve(
    tools: Sequence[Any] = (),
    resources: Sequence[Mapping[str, Any]] = (),
    prompts: Sequence[Mapping[str, Any]] = (),
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    allow_non_loopback: bool = False,
    trusted_tls_proxy: bool = False,
    tls_certfile: str | None = None,
    tls_keyfile: str | None = None,
    max_connections: int = 256,
    keepalive_timeout: float = 5.0,
    **options: Unpack[EndpointOptions],
) -> McpServer:
    """Serve `tools`, `resources` and `prompts` over MCP Streamable HTTP (see the module
    docstring) on `host`:`port`, at most `max_connections` at once; returns once the
    socket is listening. `options`: the endpoint's (`EndpointOptions`)."""
    built = _build(tools, resources, prompts, **options)
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise AdkError(("invalid_mcp_server_option", "port"), "port is 0..65535")
    if (tls_certfile is None) != (tls_keyfile is None):
        raise AdkError(
            ("invalid_mcp_server_option", "tls"), "tls_certfile and tls_keyfile go together"
        )
    tls = tls_certfile is not None
    if not is_loopback(host):
        if not built.auth.required:
            raise AdkError(
                "mcp_non_loopback_requires_auth",
                "a non-loopback MCP server needs auth_token or verifier",
            )
        if allow_non_loopback is not True:
            raise AdkError(
                "mcp_non_loopback_not_acknowledged",
                "binding beyond loopback needs allow_non_loopback=True",
            )
        if not tls and trusted_tls_proxy is not True:
            raise AdkError(
                "mcp_non_loopback_requires_tls",
                "a non-loopback MCP server needs tls_certfile/tls_keyfile or trusted_tls_proxy=True",
            )
    listening = UvicornOptions(
        max_connections=_bounded("max_connections", max_connections, True),
        keepalive_timeout=float(_bounded("keepalive_timeout", keepalive_timeout, False)),
        graceful_timeout=_STOP_TIMEOUT / 2,
        stop_timeout=_STOP_TIMEOUT,
        backlog=_BACKLOG,
        tls_certfile=tls_certfile,
        tls_keyfile=tls_keyfile,
        names=_NAMES,
    )
    listener = start_listener(
        built.app,
        listening,
        host=host,
        port=port,
        child_id=f"mcp_server_{next(_ids)}",
        close_app=McpHttpApp.aclose,
    )
    return McpServer(listener.pid, listener.child_id, listener.url + built.options.path)
