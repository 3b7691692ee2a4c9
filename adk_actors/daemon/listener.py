"""The HTTP listener: uvicorn serving one ASGI app, as a supervised process.

`HttpListener` is a GenServer whose `init` binds the socket and starts uvicorn on
its own thread (uvicorn runs its own event loop there), and whose `terminate`
asks uvicorn to finish and joins it. If uvicorn stops on its own, the server exits
with ``http_listener_stopped`` and its supervisor decides what happens next.
`start_listener` adds one as a child of the root tree (after every other child, so
it stops first), or runs it standalone for a test.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
from typing import Any, NamedTuple

import msgspec
import uvicorn

from adk_actors.app import APP_NAME, ensure_started
from providers.errors import AdkError
from supervision import ChildSpec, Exit, GenServer, Pid, Reply, Supervisor, call, self_pid, send

_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 15.0


class ListenerConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Where and how to listen (times in seconds)."""

    host: str = "127.0.0.1"
    port: int = 0
    max_connections: int = 2048
    keepalive_timeout: float = 5.0
    graceful_timeout: float = 10.0


class _UvicornStopped(NamedTuple):
    error: str | None


class _State(NamedTuple):
    server: uvicorn.Server
    thread: threading.Thread
    sock: socket.socket
    url: str


class HttpListener(GenServer):
    """Serves `app` on a socket it binds in `init`; ``url`` answers the bound address."""

    def init(self, args: Any) -> Any:
        app, config = args
        sock = bind_socket(config.host, config.port)
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                limit_concurrency=config.max_connections,
                timeout_keep_alive=config.keepalive_timeout,
                timeout_graceful_shutdown=config.graceful_timeout,
                log_config=None,
                access_log=False,
                lifespan="off",
                http="httptools",
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
        return _State(server, thread, sock, f"http://{shown}:{port}")

    def handle_call(self, request: Any, from_: Any, state: _State) -> Any:
        match request:
            case "url":
                return Reply(state.url, state)
        return super().handle_call(request, from_, state)

    def handle_info(self, msg: Any, state: _State) -> Any:
        match msg:
            case _UvicornStopped(error=error):
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
    """A listening TCP socket on `host`:`port` (0 picks a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise AdkError(("http_listener_bind_failed", error.errno), str(error)) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def is_loopback(host: str) -> bool:
    """True for an IPv4 127/8 or IPv6 ``::1`` literal (names and wildcards are not)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Listener(NamedTuple):
    """A running listener: its process, its child id in the root tree and its URL."""

    pid: Pid
    child_id: str
    url: str


def start_listener(app: Any, config: ListenerConfig, child_id: str = "http_listener") -> Listener:
    """Start a listener for `app` as the last child of the root tree (rest_for_one: it
    stops first and restarts if anything before it does)."""
    ensure_started()
    spec = ChildSpec(child_id, lambda: HttpListener.start_link((app, config)), restart="transient")
    pid = Supervisor.start_child(APP_NAME, spec)
    assert pid is not None
    return Listener(pid, child_id, call(pid, "url"))


def stop_listener(listener: Listener) -> None:
    """Stop a listener and remove it from the root tree."""
    try:
        Supervisor.terminate_child(APP_NAME, listener.child_id)
        Supervisor.delete_child(APP_NAME, listener.child_id)
    except Exception:
        pass
