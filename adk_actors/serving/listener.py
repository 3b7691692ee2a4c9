"""The supervised HTTP listener: uvicorn serving one ASGI app, as a kernel process.

`start_listener(make_app, options, host=..., port=..., child_id=...)` binds the socket
(a refusal reaches its caller as ``(options.names.bind_failed, errno)``) and adds a
`UvicornListener` as the last child of the root tree. Its `init` takes that socket,
makes the app (`make_app`, once per start: a restart serves a fresh one if the factory
builds one) and runs uvicorn on its own thread, with its own event loop; `terminate`
asks uvicorn to finish, joins it within ``options.stop_timeout`` and closes the port.

If uvicorn stops on its own, the process exits with ``(names.stopped, error)`` and its
supervisor restarts it on the same host and port (after ``port=0`` too: clients come
back where they connected). A listener killed with the untrappable ``"kill"`` skips
`terminate`, so its uvicorn still serves on its thread and holds the port: the restart
asks that orphan to exit and binds once the port is free (within ``stop_timeout``).

uvicorn runs without lifespan events, signal handlers, a ``Server`` header, an access
log or ``proxy_headers`` (no ``X-Forwarded-*`` may change the scheme or the client);
its HTTP protocol is ``options.protocol`` (by default `protocol.bounded_protocol()`:
bounded request heads and a JSON 503 past ``max_connections``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

import uvicorn
from starlette.types import ASGIApp

from adk_actors.app import APP_NAME, ensure_started
from adk_actors.serving.protocol import bounded_protocol
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

START_TIMEOUT = 10.0
BACKLOG = 2048
_log = get_logger("adk_actors.serving")

App = TypeVar("App", bound=ASGIApp)


class ListenerNames(NamedTuple):
    """What one kind of listener is called: its error reasons, log events (``{log}.listening``,
    ``{log}.listener_stopped``), thread name and the label in its messages."""

    bind_failed: str = "http_listener_bind_failed"
    start_failed: str = "http_listener_start_failed"
    stopped: str = "http_listener_stopped"
    log: str = "adk.serving"
    thread: str = "adk-http"
    label: str = "HTTP listener"


@dataclass(frozen=True, kw_only=True)
class UvicornOptions:
    """How uvicorn serves (times in seconds): at most ``max_connections`` at once, idle
    keep-alive connections closed after ``keepalive_timeout``, ``graceful_timeout`` for
    requests in flight at shutdown, ``stop_timeout`` for the whole stop (and for a
    killed predecessor to let the port go), ``backlog`` pending accepts; TLS when both
    files are given."""

    max_connections: int = 2048
    keepalive_timeout: float = 5.0
    graceful_timeout: float = 10.0
    stop_timeout: float = 15.0
    backlog: int = BACKLOG
    protocol: type[asyncio.Protocol] = field(default_factory=bounded_protocol)
    tls_certfile: str | None = None
    tls_keyfile: str | None = None
    names: ListenerNames = field(default_factory=ListenerNames)


class Listener(NamedTuple):
    """A running listener: its process, its child id in the root tree and its URL
    (``http://host:port`` or ``https://...``, no path)."""

    pid: Pid
    child_id: str
    url: str


class _UvicornStopped(NamedTuple):
    error: str | None


class _State(NamedTuple):
    server: uvicorn.Server
    thread: threading.Thread
    sock: socket.socket
    url: str
    options: UvicornOptions


class _Binding:
    """Where a listener listens: the socket `start_listener` bound, taken by the first
    `init`; every restart binds the same host and port again."""

    def __init__(self, host: str, port: int, options: UvicornOptions) -> None:
        self._reason = options.names.bind_failed
        self._backlog = options.backlog
        self._stop_timeout = options.stop_timeout
        self.host, self.port = host, port
        sock = self._bind()
        self.host, self.port = sock.getsockname()[:2]
        self._first: socket.socket | None = sock
        self._serving: _State | None = None

    def take(self) -> socket.socket:
        sock, self._first = self._first, None
        return sock if sock is not None else self._rebind()

    def serving(self, state: _State) -> None:
        """Remember the server now listening (stopped by the next `take` if its
        process was killed without running `terminate`)."""
        self._serving = state

    def _rebind(self) -> socket.socket:
        """Bind again, first asking a killed predecessor's uvicorn (still serving on its
        thread, holding the port) to exit; bind once it has let the port go."""
        orphan, self._serving = self._serving, None
        if orphan is None or not orphan.thread.is_alive():
            return self._bind()
        orphan.server.should_exit = True
        deadline = time.monotonic() + self._stop_timeout
        while True:
            try:
                return self._bind()
            except AdkError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _bind(self) -> socket.socket:
        return bind_socket(self.host, self.port, reason=self._reason, backlog=self._backlog)

    def discard(self) -> None:
        """Close the socket a first start did not take (it failed before)."""
        sock, self._first = self._first, None
        if sock is not None:
            sock.close()


@dataclass(frozen=True)
class _Start(Generic[App]):
    make_app: Callable[[], App]
    options: UvicornOptions
    binding: _Binding
    close_app: Callable[[App], Awaitable[None]] | None


class UvicornListener(GenServer):
    """Serves the app of a `_Start` on the socket its binding gives `init`; ``url``
    answers the bound address."""

    dispatcher = "thread"
    """Its own thread: `init` waits for uvicorn to start and `terminate` for it to end."""

    def init(self, args: Any) -> Any:
        start: _Start[Any] = args
        options, names = start.options, start.options.names
        trap_exit(True)  # so a shutdown runs `terminate`, which stops uvicorn and closes the port
        app = start.make_app()  # before the socket: a failing factory leaks no port
        sock = start.binding.take()
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                http=options.protocol,
                ws="none",
                limit_concurrency=options.max_connections,
                timeout_keep_alive=options.keepalive_timeout,  # type: ignore[arg-type]
                timeout_graceful_shutdown=options.graceful_timeout,  # type: ignore[arg-type]
                log_config=None,
                access_log=False,
                lifespan="off",
                server_header=False,
                proxy_headers=False,  # no X-Forwarded-* may change the scheme or the client
                ssl_certfile=options.tls_certfile,
                ssl_keyfile=options.tls_keyfile,
            )
        )
        closing = None if start.close_app is None else _closer(start.close_app, app)
        started = threading.Event()
        thread = threading.Thread(
            target=_serve,
            args=(server, sock, self_pid(), started, closing),
            name=names.thread,
            daemon=True,
        )
        thread.start()
        if not started.wait(START_TIMEOUT) or not server.started:
            server.should_exit = True
            thread.join(options.stop_timeout)
            sock.close()
            raise AdkError(names.start_failed, "uvicorn did not start in time")
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        scheme = "https" if options.tls_certfile else "http"
        _log.info(f"{names.log}.listening", host=host, port=port)
        state = _State(server, thread, sock, f"{scheme}://{shown}:{port}", options)
        start.binding.serving(state)
        return state

    def handle_call(self, request: Any, from_: Any, state: _State) -> Any:
        if request == "url":
            return Reply(state.url, state)
        return super().handle_call(request, from_, state)

    def handle_info(self, msg: Any, state: _State) -> Any:
        if isinstance(msg, _UvicornStopped):
            names = state.options.names
            _log.warning(f"{names.log}.listener_stopped", error=msg.error or "exited")
            raise Exit((names.stopped, msg.error or "exited"))
        return state

    def terminate(self, reason: Any, state: Any) -> None:
        if isinstance(state, _State):
            state.server.should_exit = True
            state.thread.join(state.options.stop_timeout)
            state.sock.close()


def _closer(close_app: Callable[[App], Awaitable[None]], app: App) -> Callable[[], Awaitable[None]]:
    return lambda: close_app(app)


def _serve(
    server: uvicorn.Server,
    sock: socket.socket,
    owner: Pid,
    started: threading.Event,
    closing: Callable[[], Awaitable[None]] | None,
) -> None:
    """uvicorn's startup, main loop and shutdown on this thread's own event loop (not
    `Server.serve`, which would install signal handlers), then `closing` (the app's own
    cleanup); tells `owner` when it ends."""
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
        if closing is not None:
            await closing()

    try:
        asyncio.run(run())
    except BaseException as exc:  # reported to the owner, who exits with it
        error = type(exc).__name__
    finally:
        started.set()
        send(owner, _UvicornStopped(error))


def start_listener(
    make_app: Callable[[], App],
    options: UvicornOptions,
    *,
    host: str,
    port: int,
    child_id: str,
    close_app: Callable[[App], Awaitable[None]] | None = None,
) -> Listener:
    """Bind `host`:`port` and start a listener serving ``make_app()`` as the last child
    of the root tree (rest_for_one: it stops first, and restarts if anything before it
    does); `close_app` runs on the app after uvicorn has shut down. Returns once it is
    listening. A port that cannot be bound raises ``(options.names.bind_failed, errno)``,
    a listener that does not start ``options.names.start_failed``."""
    ensure_started()
    binding = _Binding(host, port, options)
    start = _Start(make_app, options, binding, close_app)
    spec = ChildSpec(
        child_id,
        lambda: UvicornListener.start_link(start),
        restart="transient",
        shutdown=options.stop_timeout + 5.0,
    )
    try:
        pid = Supervisor.start_child(APP_NAME, spec)
    except SupervisorError as error:
        binding.discard()
        raise AdkError(
            options.names.start_failed,
            f"the {options.names.label} did not start: {error.reason}",
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


def bind_socket(
    host: str, port: int, *, reason: str = "http_listener_bind_failed", backlog: int = BACKLOG
) -> socket.socket:
    """A listening TCP socket on `host`:`port` (0 picks a free port); a refusal is
    ``(reason, errno)``.

    The protocol is named (``IPPROTO_TCP``, not 0): asyncio turns Nagle's algorithm off
    on accepted connections only for sockets whose ``proto`` says TCP, and with it on a
    small response waits for the client's delayed ACK (about 40 ms per request)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    except OSError as error:
        raise AdkError((reason, error.errno), "cannot open a socket") from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise AdkError((reason, error.errno), f"cannot listen on {host}:{port}") from None
    sock.listen(backlog)
    return sock


def is_loopback(host: str) -> bool:
    """True for an IPv4 127/8 or IPv6 ``::1`` literal (names and wildcards are not)."""
    try:
        return ipaddress.ip_address(host).is_loopback and "%" not in host
    except ValueError:
        return False
