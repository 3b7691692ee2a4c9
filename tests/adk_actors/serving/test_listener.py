"""The supervised uvicorn listener both HTTP surfaces use: serving, restarts on the
same port (after uvicorn stops on its own and after an untrappable kill), the app
factory and its close hook, the listener's names, and the bounded protocol."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

import httpx
import pytest
from starlette.types import Receive, Scope, Send

import supervision as sv
from adk_actors import serving
from adk_actors.app import APP_NAME
from adk_actors.mcp.server import serve
from adk_actors.serving import Listener, UvicornOptions
from providers.errors import AdkError
from tests.helpers import wait_until


class _Hello:
    """A raw ASGI app answering ``hello <n>``: `n` tells which app instance served."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.closed = threading.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b"hello %d" % self.number
        headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def aclose(self) -> None:
        self.closed.set()


class _Apps:
    """An app factory that remembers every app it made."""

    def __init__(self) -> None:
        self.made: list[_Hello] = []

    def __call__(self) -> _Hello:
        self.made.append(_Hello(len(self.made) + 1))
        return self.made[-1]


@pytest.fixture
def listeners() -> Iterator[list[Listener]]:
    started: list[Listener] = []
    yield started
    for listener in started:
        serving.stop_listener(listener)


def _start(
    listeners: list[Listener], apps: _Apps, options: UvicornOptions | None = None
) -> Listener:
    listener = serving.start_listener(
        apps,
        options or UvicornOptions(max_connections=8, stop_timeout=5.0),
        host="127.0.0.1",
        port=0,
        child_id=f"serving_test_{len(listeners)}",
        close_app=_Hello.aclose,
    )
    listeners.append(listener)
    return listener


def _get(url: str) -> str | None:
    try:
        with httpx.Client(timeout=5.0) as client:
            return client.get(url).text
    except httpx.TransportError:
        return None


def _until(condition: Callable[[], bool]) -> None:
    wait_until(condition, timeout=10.0, interval=0.05)


def _child_pid(child_id: str) -> sv.Pid | None:
    children = {child.id: child.pid for child in sv.Supervisor.which_children(APP_NAME)}
    return children.get(child_id)


def _raw(port: int, request: bytes) -> bytes:
    """Send `request` as is and read the answer until the server closes."""
    chunks: list[bytes] = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        with contextlib.suppress(OSError):
            while data := conn.recv(65_536):
                chunks.append(data)
    return b"".join(chunks)


def test_a_listener_serves_its_app_as_the_last_child_and_stops(
    listeners: list[Listener],
) -> None:
    apps = _Apps()
    listener = _start(listeners, apps)
    assert listener.url.startswith("http://127.0.0.1:")
    assert _get(listener.url + "/") == "hello 1"
    assert sv.Supervisor.which_children(APP_NAME)[-1].id == listener.child_id
    serving.stop_listener(listener)
    serving.stop_listener(listener)  # a second stop is a no-op
    assert _child_pid(listener.child_id) is None
    assert apps.made[0].closed.is_set()  # the close hook ran after uvicorn shut down
    port = int(listener.url.rsplit(":", 1)[1])
    with socket.socket() as again:  # the port is free
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))


def test_a_stopped_uvicorn_is_restarted_on_the_same_port_with_a_fresh_app(
    listeners: list[Listener],
) -> None:
    apps = _Apps()
    listener = _start(listeners, apps)
    assert _get(listener.url) == "hello 1"
    sv.get_state(listener.pid).server.should_exit = True  # uvicorn ends on its own
    _until(lambda: _get(listener.url) == "hello 2")
    assert _child_pid(listener.child_id) not in (None, listener.pid)
    assert apps.made[0].closed.is_set()


def test_a_killed_listener_asks_its_orphan_to_exit_and_rebinds(
    listeners: list[Listener],
) -> None:
    """The untrappable kill skips `terminate`: the first uvicorn still holds the port
    until the restart asks it to exit."""
    apps = _Apps()
    listener = _start(listeners, apps)
    assert _get(listener.url) == "hello 1"
    sv.exit(listener.pid, "kill")
    _until(lambda: _get(listener.url) == "hello 2")
    _until(lambda: apps.made[0].closed.is_set())


def test_a_port_in_use_is_refused_with_the_listeners_own_reason() -> None:
    names = serving.ListenerNames(bind_failed="demo_bind_failed", start_failed="demo_start_failed")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(AdkError) as refused:
            serving.start_listener(
                _Apps(), UvicornOptions(names=names), host="127.0.0.1", port=port, child_id="x"
            )
    assert refused.value.reason[0] == "demo_bind_failed"
    assert _child_pid("x") is None
    held = serving.bind_socket("127.0.0.1", 0)
    try:
        with pytest.raises(AdkError) as default:
            serving.bind_socket("127.0.0.1", held.getsockname()[1])
        assert default.value.reason[0] == "http_listener_bind_failed"
    finally:
        held.close()


def test_the_default_protocol_bounds_the_head(listeners: list[Listener]) -> None:
    protocol = serving.bounded_protocol(max_head_bytes=2048, max_headers=10, head_timeout=0.5)
    listener = _start(listeners, _Apps(), UvicornOptions(protocol=protocol, stop_timeout=5.0))
    port = int(listener.url.rsplit(":", 1)[1])
    line = b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n"
    many = b"".join(b"x-h%d: v\r\n" % index for index in range(20))
    assert _raw(port, line + many + b"\r\n").startswith(b"HTTP/1.1 431")
    assert _raw(port, line + b"x-big: " + b"a" * 5000 + b"\r\n\r\n").startswith(b"HTTP/1.1 431")
    assert _raw(port, line).startswith(b"HTTP/1.1 408")  # never finished
    assert _raw(port, line + b"connection: close\r\n\r\n").startswith(b"HTTP/1.1 200")


def test_past_max_connections_the_default_answer_is_a_json_503(
    listeners: list[Listener],
) -> None:
    """uvicorn counts the asking connection too: two leave room for one other."""
    options = UvicornOptions(max_connections=2, stop_timeout=5.0)
    listener = _start(listeners, _Apps(), options)
    port = int(listener.url.rsplit(":", 1)[1])
    held = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        _until(lambda: _get(listener.url) is not None)
        with httpx.Client(timeout=5.0) as client:
            refused = client.get(listener.url)
        assert refused.status_code == 503
        assert refused.headers["content-type"] == "application/json"
        assert refused.json()["error"]["code"] == "too_many_connections"
        assert refused.headers["retry-after"] == "1"
        assert refused.headers["connection"] == "close"
    finally:
        held.close()
    _until(lambda: _get(listener.url) == "hello 1")


def test_the_mcp_listener_bounds_request_heads_too() -> None:
    """``adk.mcp.serve`` runs on the same listener: a head past 100 headers is 431."""
    server = serve(auth_token="t" * 32)
    try:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        many = b"".join(b"x-h%d: v\r\n" % index for index in range(150))
        head = b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n" + many + b"\r\n"
        assert _raw(port, head).startswith(b"HTTP/1.1 431")
    finally:
        server.stop()


def test_is_loopback_takes_literals_only() -> None:
    assert (
        serving.is_loopback("127.0.0.1")
        and serving.is_loopback("127.1.2.3")
        and serving.is_loopback("::1")
    )
    for host in ("localhost", "0.0.0.0", "::", "192.168.0.1", "::1%lo", "not an address"):
        assert not serving.is_loopback(host)


def test_accepted_connections_turn_nagle_off() -> None:
    """The listening socket names TCP as its protocol, so asyncio sets TCP_NODELAY on
    every accepted connection (otherwise each small response waits for the client's
    delayed ACK)."""

    async def accepted_nodelay() -> int:
        sock = serving.bind_socket("127.0.0.1", 0)
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted = writer.get_extra_info("socket")
            seen.set_result(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            value = await asyncio.wait_for(seen, 10.0)
            writer.close()
            return value

    assert asyncio.run(accepted_nodelay()) != 0
