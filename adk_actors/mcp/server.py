"""`adk.mcp.serve`: an MCP server over Streamable HTTP, as a supervised process.

`serve(tools=..., resources=..., prompts=..., host="127.0.0.1", port=0, ...)` checks
its options (`server_options.ServerOptions`, decoded once: typed errors naming the
key, every bound finite), builds the catalog
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from adk_actors.mcp.server_auth import AuthorizationFun, ServerAuth, Verifier
from adk_actors.mcp.server_handlers import McpCatalog, build_server
from adk_actors.mcp.server_http import McpHttpApp
from adk_actors.mcp.server_options import (
    DEFAULT_PATH,
    ServerOptions,
    check_exposure,
    server_options,
)
from adk_actors.serving import (
    Listener,
    ListenerNames,
    UvicornOptions,
    start_listener,
    stop_listener,
)
from supervision import Pid, get_logger

_log = get_logger("adk_actors.mcp.server")

__all__ = ["DEFAULT_PATH", "EndpointOptions", "McpServer", "http_app", "serve"]

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


class EndpointOptions(TypedDict, total=False):
    """The endpoint's options, shared by `http_app` and `serve` (checked by
    `server_options.ServerOptions`, where the defaults and bounds are): `path`,
    `auth_token` (a static bearer token, 16+ bytes), `verifier` (``verifier(token)`` ->
    principal or None), `authorization_fun` (``(principal, method, resource)`` -> True),
    `max_body_bytes`, `max_response_bytes`, `max_concurrency`, `request_timeout`,
    `max_sessions`, `session_ttl`, `max_session_requests`, `allowed_origins`,
    `oauth_protected_resource` (RFC 9728 metadata), `callback_timeout`,
    `max_callback_threads`, `name` (the server's name in ``initialize``)."""

    path: str
    auth_token: str | None
    verifier: Verifier | None
    authorization_fun: AuthorizationFun | None
    max_body_bytes: int
    max_response_bytes: int
    max_concurrency: int
    request_timeout: float
    max_sessions: int
    session_ttl: float
    max_session_requests: int
    allowed_origins: Sequence[str]
    oauth_protected_resource: Mapping[str, Any] | None
    callback_timeout: float
    max_callback_threads: int
    name: str


_HOOKS = ("auth_token", "verifier", "authorization_fun", "oauth_protected_resource")


@dataclass(frozen=True)
class _Built:
    catalog: McpCatalog
    options: ServerOptions
    auth: ServerAuth

    def app(self) -> McpHttpApp:
        server = build_server(self.catalog, self.options.name)
        return McpHttpApp(server, self.options, self.auth, self.catalog.workers)


def _build(
    tools: Sequence[Any],
    resources: Sequence[Mapping[str, Any]],
    prompts: Sequence[Mapping[str, Any]],
    options: Mapping[str, Any],
) -> _Built:
    hooks = {key: options[key] for key in _HOOKS if key in options}
    checked = server_options({k: v for k, v in options.items() if k not in _HOOKS})
    auth = ServerAuth(
        auth_token=hooks.get("auth_token"),
        verifier=hooks.get("verifier"),
        authorization_fun=hooks.get("authorization_fun"),
        oauth=hooks.get("oauth_protected_resource"),
        callback_timeout=checked.callback_timeout,
        max_callback_threads=checked.max_callback_threads,
    )
    catalog = McpCatalog(
        tools,
        resources,
        prompts,
        request_timeout=checked.request_timeout,
        max_response_bytes=checked.max_response_bytes,
        max_workers=checked.max_concurrency,
    )
    return _Built(catalog, checked, auth)


def http_app(
    tools: Sequence[Any] = (),
    resources: Sequence[Mapping[str, Any]] = (),
    prompts: Sequence[Mapping[str, Any]] = (),
    **options: Unpack[EndpointOptions],
) -> McpHttpApp:
    """The Streamable HTTP endpoint at `path` as an ASGI app, to mount in another app
    (it answers only `path` and the OAuth metadata path; the host app's listener and
    authentication apply too). `options`: `EndpointOptions`."""
    return _build(tools, resources, prompts, options).app()


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
    listener_options = {
        "host": host,
        "port": port,
        "allow_non_loopback": allow_non_loopback,
        "trusted_tls_proxy": trusted_tls_proxy,
        "tls_certfile": tls_certfile,
        "tls_keyfile": tls_keyfile,
        "max_connections": max_connections,
        "keepalive_timeout": keepalive_timeout,
    }
    built = _build(tools, resources, prompts, {**options, **listener_options})
    checked = built.options
    check_exposure(checked, authenticated=built.auth.required)
    listening = UvicornOptions(
        max_connections=checked.max_connections,
        keepalive_timeout=checked.keepalive_timeout,
        graceful_timeout=_STOP_TIMEOUT / 2,
        stop_timeout=_STOP_TIMEOUT,
        backlog=_BACKLOG,
        tls_certfile=checked.tls_certfile,
        tls_keyfile=checked.tls_keyfile,
        names=_NAMES,
    )
    listener = start_listener(
        built.app,
        listening,
        host=checked.host,
        port=checked.port,
        child_id=f"mcp_server_{next(_ids)}",
        close_app=McpHttpApp.aclose,
    )
    return McpServer(listener.pid, listener.child_id, listener.url + checked.endpoint_path)
