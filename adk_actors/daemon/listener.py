"""The HTTP listener: uvicorn serving one ASGI app, as a supervised process.

`HttpListener` is a GenServer whose `init` binds the socket and starts uvicorn on
its own thread (uvicorn runs its own event loop there), and whose `terminate`
asks uvicorn to finish and joins it. If uvicorn stops on its own, the server exits
with ``http_listener_stopped`` and its supervisor restarts it on the same port (a
port that cannot be bound again is ``http_listener_bind_failed``, and after the
supervisor's restart intensity the tree gives up). `start_listener` adds one as the
last child of the root tree, so it stops first.

Connections are bounded: at most ``max_connections`` at once (past it a request is
answered 503 ``too_many_connections``, the API's JSON error body with ``Retry-After``,
and its connection closes: `BoundedHttpProtocol`), idle keep-alive connections close
after ``keepalive_timeout``, and every
request head (request line and headers) must arrive within ``head_timeout``, in at
most ``max_head_bytes`` and ``max_headers`` headers (`BoundedHttpProtocol`: 408 and
431 otherwise, then the connection closes). uvicorn's ``proxy_headers`` is off: every
client is local, so ``X-Forwarded-Proto`` / ``X-Forwarded-For`` are never trusted (the
same-origin check reads the scheme).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
import time
from typing import Any, NamedTuple

import msgspec
import uvicorn
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from adk_actors.app import APP_NAME, ensure_started
from adk_actors.daemon.errors import ApiError, error_response
from adk_actors.daemon.settings import DevSettings
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

_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 15.0
_BACKLOG = 2048
_log = get_logger("adk_actors.daemon.listener")


class ListenerConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Where and how to listen (times in seconds)."""

    host: str = "127.0.0.1"
    port: int = 0
    max_connections: int = 2048
    keepalive_timeout: float = 5.0
    graceful_timeout: float = 10.0
    head_timeout: float = 10.0
    max_head_bytes: int = 32 * 1024
    max_headers: int = 100


def listener_config(
    settings: DevSettings, host: str = "127.0.0.1", port: int = 0
) -> ListenerConfig:
    """The listener of a daemon with `settings` (its connection and keep-alive bounds)."""
    return ListenerConfig(
        host=host,
        port=port,
        max_connections=settings.max_connections,
        keepalive_timeout=settings.keepalive_timeout,
    )


# -- the request head's bounds ----------------------------------------------------------


class _HeadRefused(Exception):
    """Raised inside the parser's callbacks to stop a head past its bounds."""


async def too_many_connections(scope: Scope, receive: Receive, send: Send) -> None:
    """The answer to a request past ``max_connections``, in place of uvicorn's plain-text
    503: the API's error body, ``Retry-After`` and a connection that closes."""
    await error_response(
        ApiError(
            503,
            "too_many_connections",
            "The daemon has its maximum number of connections; retry",
            headers={
                "retry-after": "1",
                "connection": "close",
                "x-content-type-options": "nosniff",
            },
        )
    )(scope, receive, send)


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a bounded request head (uvicorn bounds neither
    its size nor its time with httptools): past `max_head_bytes` or `max_headers`, 431;
    not complete within `head_timeout` of the connection opening or of its first byte,
    408 (a connection that sent nothing just closes). Limits are class attributes, set
    per listener by `_protocol_class`. Past uvicorn's ``limit_concurrency`` (the
    listener's ``max_connections``) a request is answered by `too_many_connections`
    rather than uvicorn's own plain-text 503."""

    max_head_bytes = 32 * 1024
    max_headers = 100
    head_timeout = 10.0

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
        # the request goes to `too_many_connections` instead, as any other ASGI app
        _log.warning("adk.daemon.too_many_connections", limit=limit)
        app, self.app = self.app, too_many_connections
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


def _protocol_class(config: ListenerConfig) -> type[BoundedHttpProtocol]:
    return type(
        "BoundedHttpProtocol",
        (BoundedHttpProtocol,),
        {
            "max_head_bytes": config.max_head_bytes,
            "max_headers": config.max_headers,
            "head_timeout": config.head_timeout,
        },
    )


# -- the listener process ---------------------------------------------------------------


class _UvicornStopped(NamedTuple):
    error: str | None


class _State(NamedTuple):
    server: uvicorn.Server
    thread: threading.Thread
    sock: socket.socket
    url: str


class _Binding:
    """Where a listener listens: the socket `start_listener` bound (so a refusal reaches
    its caller as is), taken by the first `init`; every restart binds the same host and
    port again (after ``port=0`` too: clients come back where they connected)."""

    def __init__(self, sock: socket.socket) -> None:
        self.host, self.port = sock.getsockname()[:2]
        self._first: socket.socket | None = sock
        self._serving: _State | None = None

    def take(self) -> socket.socket:
        sock, self._first = self._first, None
        if sock is not None:
            return sock
        return self._rebind()

    def serving(self, state: _State) -> None:
        """Remember the server now listening (stopped by the next `take` if its
        process was killed without running `terminate`)."""
        self._serving = state

    def _rebind(self) -> socket.socket:
        """Bind again; a server whose process was killed (the untrappable ``"kill"``
        skips `terminate`) still serves on its thread and holds the port: ask it to
        exit and bind once it has let the port go (within `_STOP_TIMEOUT`)."""
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
        """Close the socket a first start did not take (it failed before)."""
        sock, self._first = self._first, None
        if sock is not None:
            sock.close()


class HttpListener(GenServer):
    """Serves `app` on a socket it binds in `init`; ``url`` answers the bound address."""

    dispatcher = "thread"
    """Its own thread: `init` waits for uvicorn to start and `terminate` for it to end."""

    def init(self, args: Any) -> Any:
        app, config, binding = args
        trap_exit(True)  # so a shutdown runs `terminate`, which stops uvicorn and closes the port
        sock = binding.take()
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                http=_protocol_class(config),
                ws="none",
                limit_concurrency=config.max_connections,
                timeout_keep_alive=config.keepalive_timeout,
                timeout_graceful_shutdown=config.graceful_timeout,
                log_config=None,
                access_log=False,
                lifespan="off",
                server_header=False,
                proxy_headers=False,  # no X-Forwarded-* may change the scheme or the client
            )
        )
        me = self_pid()
        started = threading.Event()
        thread = threading.Thread(
            target=_serve, args=(server, sock, me, started), name="adk-http", daemon=True
        )
        thread.start()
        if not started.wait(_START_TIMEOUT) or not server.started:
            server.should_exit = True
            thread.join(_STOP_TIMEOUT)
            sock.close()
            raise AdkError("http_listener_start_failed", "uvicorn did not start in time")
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        _log.info("adk.daemon.listening", host=host, port=port)
        state = _State(server, thread, sock, f"http://{shown}:{port}")
        binding.serving(state)
        return state

    def handle_call(self, request: Any, from_: Any, state: _State) -> Any:
        match request:
            case "url":
                return Reply(state.url, state)
        return super().handle_call(request, from_, state)

    def handle_info(self, msg: Any, state: _State) -> Any:
        match msg:
            case _UvicornStopped(error=error):
                _log.warning("adk.daemon.listener_stopped", error=error or "exited")
                raise Exit(("http_listener_stopped", error or "exited"))
        return state

    def terminate(self, reason: Any, state: Any) -> None:
        if isinstance(state, _State):
            state.server.should_exit = True
            state.thread.join(_STOP_TIMEOUT)
            state.sock.close()


def _serve(
    server: uvicorn.Server, sock: socket.socket, owner: Pid, started: threading.Event
) -> None:
    """uvicorn's startup, main loop and shutdown on this thread's own event loop (not
    `Server.serve`, which would install signal handlers); tells `owner` when it ends."""
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

    try:
        asyncio.run(run())
    except BaseException as exc:  # reported to the owner, who exits with it
        error = type(exc).__name__
    finally:
        started.set()
        send(owner, _UvicornStopped(error))


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host`:`port` (0 picks a free port).

    The protocol is named (``IPPROTO_TCP``, not 0): asyncio turns Nagle's algorithm off
    on accepted connections only for sockets whose ``proto`` says TCP, and with it on a
    small response waits for the client's delayed ACK (about 40 ms per request)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise AdkError(
            ("http_listener_bind_failed", error.errno), f"cannot listen on port {port}"
        ) from None
    sock.listen(_BACKLOG)
    return sock


def is_loopback(host: str) -> bool:
    """True for an IPv4 127/8 or IPv6 ``::1`` literal (names and wildcards are not)."""
    try:
        return ipaddress.ip_address(host).is_loopback and "%" not in host
    except ValueError:
        return False


def check_dev_host(host: str) -> str:
    """`host` if it is ``127.0.0.1`` or ``::1`` (the developer API's only addresses, as
    the reference CLI has it); anything else is ``developer_server_must_bind_loopback``."""
    if host not in ("127.0.0.1", "::1"):
        raise AdkError(
            "developer_server_must_bind_loopback",
            "the developer server listens on 127.0.0.1 or ::1 only",
        )
    return host


class Listener(NamedTuple):
    """A running listener: its process, its child id in the root tree and its URL."""

    pid: Pid
    child_id: str
    url: str


def start_listener(app: Any, config: ListenerConfig, child_id: str = "http_listener") -> Listener:
    """Start a listener for `app` as the last child of the root tree (rest_for_one: it
    stops first, and restarts if anything before it does). A port that cannot be bound
    raises ``("http_listener_bind_failed", errno)``."""
    ensure_started()
    binding = _Binding(bind_socket(config.host, config.port))
    spec = ChildSpec(
        child_id,
        lambda: HttpListener.start_link((app, config, binding)),
        restart="transient",
        shutdown=_STOP_TIMEOUT + 5.0,
    )
    try:
        pid = Supervisor.start_child(APP_NAME, spec)
    except SupervisorError as error:
        binding.discard()
        raise AdkError(
            "http_listener_start_failed", f"the HTTP listener did not start: {error.reason}"
        ) from None
    assert pid is not None
    return Listener(pid, child_id, call(pid, "url"))


def stop_listener(listener: Listener) -> None:
    """Stop a listener and remove it from the root tree (a no-op once it is gone)."""
    try:
        Supervisor.terminate_child(APP_NAME, listener.child_id)
        Supervisor.delete_child(APP_NAME, listener.child_id)
    except (SupervisorError, AdkError):
        pass
    except Exception:  # the tree itself is gone: nothing is left to stop
        pass
