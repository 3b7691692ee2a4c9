"""`adk.mcp.serve`: an MCP server over Streamable HTTP, as a supervised process.

`serve(tools=..., resources=..., prompts=..., host="127.0.0.1", port=0, ...)` checks
its options (typed errors, every bound finite), builds the catalog
(`server_handlers.McpCatalog`) and the endpoint (`server_http.McpHttpApp`: the SDK's
session manager behind our checks), then starts an `McpListener` as a child of the
root tree: a GenServer whose `init` binds the socket and runs uvicorn on its own thread
and whose `terminate` stops it. If uvicorn stops on its own the process exits with
``mcp_listener_stopped`` and the supervisor restarts it on the same port, with a fresh
session table (clients see 404 and initialize again); a listener killed without
`terminate` leaves its uvicorn serving on the thread: the restart asks that orphan to
exit and binds once the port is free (as the daemon's listener does).

Binding anywhere but loopback needs authentication (``auth_token`` or ``verifier``),
``allow_non_loopback=True``, and TLS: direct (``tls_certfile`` / ``tls_keyfile``) or
``trusted_tls_proxy=True`` (only when the clear listener is reachable exclusively from
that TLS terminator; forwarding headers are never proof of TLS).

`http_app(...)` is the same endpoint without a listener, for mounting in another ASGI
app (the daemon's ``adk serve``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import math
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import uvicorn

from adk_actors.app import APP_NAME, ensure_started
from adk_actors.mcp.server_auth import AuthorizationFun, ServerAuth, Verifier
from adk_actors.mcp.server_handlers import McpCatalog, build_server
from adk_actors.mcp.server_http import HttpOptions, McpHttpApp
from providers.errors import AdkError
from supervision import (
    ChildSpec,
    Exit,
    GenServer,
    Pid,
    Reply,
    Supervisor,
    SupervisorError,
    call,
    get_logger,
    self_pid,
    send,
    trap_exit,
)

_log = get_logger("adk_actors.mcp.server")

DEFAULT_PATH = "/mcp"
DEFAULT_MAX_BODY_BYTES = 1 << 20
DEFAULT_MAX_CONCURRENCY = 32
DEFAULT_REQUEST_TIMEOUT = 30.0
DEFAULT_MAX_SESSIONS = 1024
DEFAULT_SESSION_TTL = 3600.0
DEFAULT_MAX_SESSION_REQUESTS = 10_000
DEFAULT_CALLBACK_TIMEOUT = 5.0
_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 10.0
_BACKLOG = 1024
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
    path: str,
    auth_token: str | None,
    verifier: Verifier | None,
    authorization_fun: AuthorizationFun | None,
    max_body_bytes: int,
    max_concurrency: int,
    request_timeout: float,
    max_sessions: int,
    session_ttl: float,
    max_session_requests: int,
    allowed_origins: Sequence[str],
    oauth_protected_resource: Mapping[str, Any] | None,
    callback_timeout: float,
    name: str,
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
) -> McpHttpApp:
    """The Streamable HTTP endpoint at `path` as an ASGI app, to mount in another app
    (it answers only `path` and the OAuth metadata path; the host app's listener and
    authentication apply too)."""
    return _build(
        tools,
        resources,
        prompts,
        path=path,
        auth_token=auth_token,
        verifier=verifier,
        authorization_fun=authorization_fun,
        max_body_bytes=max_body_bytes,
        max_concurrency=max_concurrency,
        request_timeout=request_timeout,
        max_sessions=max_sessions,
        session_ttl=session_ttl,
        max_session_requests=max_session_requests,
        allowed_origins=allowed_origins,
        oauth_protected_resource=oauth_protected_resource,
        callback_timeout=callback_timeout,
        name=name,
    ).app()


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
        try:
            Supervisor.terminate_child(APP_NAME, self.child_id)
            Supervisor.delete_child(APP_NAME, self.child_id)
        except (SupervisorError, AdkError):
            pass
        except Exception:  # the tree itself is gone: nothing is left to stop
            pass


def serve(
    tools: Sequence[Any] = (),
    resources: Sequence[Mapping[str, Any]] = (),
    prompts: Sequence[Mapping[str, Any]] = (),
    *,
    host: str = "127.0.0.1",
    port: int = 0,
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
    allow_non_loopback: bool = False,
    trusted_tls_proxy: bool = False,
    tls_certfile: str | None = None,
    tls_keyfile: str | None = None,
    callback_timeout: float = DEFAULT_CALLBACK_TIMEOUT,
    max_connections: int = 256,
    keepalive_timeout: float = 5.0,
    name: str = "adk-mcp",
) -> McpServer:
    """Serve `tools`, `resources` and `prompts` over MCP Streamable HTTP (see the module
    docstring); returns once the socket is listening."""
    built = _build(
        tools,
        resources,
        prompts,
        path=path,
        auth_token=auth_token,
        verifier=verifier,
        authorization_fun=authorization_fun,
        max_body_bytes=max_body_bytes,
        max_concurrency=max_concurrency,
        request_timeout=request_timeout,
        max_sessions=max_sessions,
        session_ttl=session_ttl,
        max_session_requests=max_session_requests,
        allowed_origins=allowed_origins,
        oauth_protected_resource=oauth_protected_resource,
        callback_timeout=callback_timeout,
        name=name,
    )
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
    config = _ListenConfig(
        max_connections=_bounded("max_connections", max_connections, True),
        keepalive_timeout=float(_bounded("keepalive_timeout", keepalive_timeout, False)),
        tls_certfile=tls_certfile,
        tls_keyfile=tls_keyfile,
    )
    ensure_started()
    binding = _Binding(bind_socket(host, port))
    child_id = f"mcp_server_{next(_ids)}"
    spec = ChildSpec(
        child_id,
        lambda: McpListener.start_link((built, config, binding)),
        restart="transient",
        shutdown=_STOP_TIMEOUT + 5.0,
    )
    try:
        pid = Supervisor.start_child(APP_NAME, spec)
    except SupervisorError as error:
        binding.discard()
        raise AdkError(
            "mcp_server_start_failed", f"the MCP listener did not start: {error.reason}"
        ) from None
    assert pid is not None
    base: str = call(pid, "url")
    return McpServer(pid, child_id, base + built.options.path)


# -- the listener process ---------------------------------------------------------------


@dataclass(frozen=True)
class _ListenConfig:
    max_connections: int
    keepalive_timeout: float
    tls_certfile: str | None
    tls_keyfile: str | None


class _UvicornStopped(NamedTuple):
    error: str | None


class _State(NamedTuple):
    server: uvicorn.Server
    thread: threading.Thread
    sock: socket.socket
    url: str


class _Binding:
    """Where a listener listens: the socket `serve` bound (so a refusal reaches its
    caller), taken by the first `init`; a restart binds the same host and port again,
    first asking a killed predecessor's uvicorn (still serving on its thread) to exit."""

    def __init__(self, sock: socket.socket) -> None:
        self.host, self.port = sock.getsockname()[:2]
        self._first: socket.socket | None = sock
        self._serving: _State | None = None

    def take(self) -> socket.socket:
        sock, self._first = self._first, None
        return sock if sock is not None else self._rebind()

    def serving(self, state: _State) -> None:
        self._serving = state

    def _rebind(self) -> socket.socket:
        orphan, self._serving = self._serving, None
        if orphan is None or not orphan.thread.is_alive():
            return bind_socket(self.host, self.port)
        orphan.server.should_exit = True
        deadline = time.monotonic() + _STOP_TIMEOUT
        while True:
            try:
                return bind_socket(self.host, self.port)
            except AdkError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def discard(self) -> None:
        sock, self._first = self._first, None
        if sock is not None:
            sock.close()


class McpListener(GenServer):
    """Serves one MCP endpoint on a socket it binds in `init`; ``url`` answers its base."""

    dispatcher = "thread"

    def init(self, args: Any) -> Any:
        built, config, binding = args
        trap_exit(True)  # a shutdown runs `terminate`, which stops uvicorn
        sock = binding.take()
        server = uvicorn.Server(
            uvicorn.Config(
                built.app(),
                ws="none",
                limit_concurrency=config.max_connections,
                timeout_keep_alive=config.keepalive_timeout,
                timeout_graceful_shutdown=int(_STOP_TIMEOUT / 2),
                h11_max_incomplete_event_size=32 * 1024,
                log_config=None,
                access_log=False,
                lifespan="off",
                server_header=False,
                proxy_headers=False,
                ssl_certfile=config.tls_certfile,
                ssl_keyfile=config.tls_keyfile,
            )
        )
        started = threading.Event()
        thread = threading.Thread(
            target=_serve, args=(server, sock, self_pid(), started), name="adk-mcp", daemon=True
        )
        thread.start()
        if not started.wait(_START_TIMEOUT) or not server.started:
            server.should_exit = True
            thread.join(_STOP_TIMEOUT)
            sock.close()
            raise AdkError("mcp_server_start_failed", "uvicorn did not start in time")
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        scheme = "https" if config.tls_certfile else "http"
        _log.info("adk.mcp.server.listening", host=host, port=port)
        state = _State(server, thread, sock, f"{scheme}://{shown}:{port}")
        binding.serving(state)
        return state

    def handle_call(self, request: Any, from_: Any, state: _State) -> Any:
        if request == "url":
            return Reply(state.url, state)
        return super().handle_call(request, from_, state)

    def handle_info(self, msg: Any, state: _State) -> Any:
        if isinstance(msg, _UvicornStopped):
            _log.warning("adk.mcp.server.listener_stopped", error=msg.error or "exited")
            raise Exit(("mcp_listener_stopped", msg.error or "exited"))
        return state

    def terminate(self, reason: Any, state: Any) -> None:
        if isinstance(state, _State):
            state.server.should_exit = True
            state.thread.join(_STOP_TIMEOUT)
            state.sock.close()


def _serve(
    server: uvicorn.Server, sock: socket.socket, owner: Pid, started: threading.Event
) -> None:
    """uvicorn's startup, main loop and shutdown on this thread's own loop (no signal
    handlers); tells `owner` when it ends."""
    error: str | None = None

    async def run() -> None:
        config = server.config
        if not config.loaded:
            config.load()
        server.lifespan = config.lifespan_class(config)
        await server.startup(sockets=[sock])
        started.set()
        if server.should_exit:
            return
        await server.main_loop()
        await server.shutdown(sockets=[sock])
        app = config.app
        if isinstance(app, McpHttpApp):
            await app.aclose()

    try:
        asyncio.run(run())
    except BaseException as exc:  # reported to the owner, who exits with it
        error = type(exc).__name__
    finally:
        started.set()
        send(owner, _UvicornStopped(error))


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host`:`port` (0 picks a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    except OSError as error:
        raise AdkError(("mcp_server_bind_failed", error.errno), "cannot open a socket") from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise AdkError(
            ("mcp_server_bind_failed", error.errno), f"cannot listen on {host}:{port}"
        ) from None
    sock.listen(_BACKLOG)
    return sock


def is_loopback(host: str) -> bool:
    """True for an IPv4 127/8 or IPv6 ``::1`` literal (names and wildcards are not)."""
    try:
        return ipaddress.ip_address(host).is_loopback and "%" not in host
    except ValueError:
        return False
