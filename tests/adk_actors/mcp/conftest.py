"""MCP tests: real servers on 127.0.0.1 and the helpers the test files share.

The autouse `app` fixture of tests/adk_actors/conftest.py starts the runtime, whose
root tree starts the MCP client supervisor (`mcp_clients` checks that it is there).
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from adk_actors import mcp
from providers.errors import AdkError
from supervision import whereis

HERE = Path(__file__).parent
SDK_SERVER = [sys.executable, str(HERE / "servers" / "sdk_server.py")]
REPO = HERE.parents[2]
EVERYTHING = REPO / ".mcp-node" / "node_modules" / ".bin" / "mcp-server-everything"


@pytest.fixture(autouse=True)
def mcp_clients(app: Any) -> None:
    assert whereis(mcp.MCP_CLIENT_SUPERVISOR) is not None, "the root tree starts it"


def reason(fn: Callable[[], Any]) -> Any:
    """The `AdkError` reason `fn()` raises (it must raise one)."""
    with pytest.raises(AdkError) as info:
        fn()
    return info.value.reason


class HttpServer:
    """An ASGI app served by uvicorn on a thread, on 127.0.0.1 (restartable on its port)."""

    def __init__(self, make_app: Callable[[], Any], **options: Any) -> None:
        self.make_app = make_app
        self.options = options
        self.port = 0
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> HttpServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.make_app(),
            log_level="error",
            lifespan="auto",
            interface="asgi3",
            timeout_graceful_shutdown=0.2,
            **self.options,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        for _ in range(500):
            if server.started:
                break
            threading.Event().wait(0.01)
        assert server.started
        self.server, self.thread = server, thread
        self._sock = sock
        return self

    def stop(self) -> None:
        if self.server is not None and self.thread is not None:
            self.server.should_exit = True
            self.thread.join(10)
            self._sock.close()
            self.server = None

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def http_server() -> Iterator[Callable[[Callable[[], Any]], HttpServer]]:
    servers: list[HttpServer] = []

    def serve(make_app: Callable[[], Any], **options: Any) -> HttpServer:
        server = HttpServer(make_app, **options).start()
        servers.append(server)
        return server

    yield serve
    for server in servers:
        server.stop()


class Recorder:
    """ASGI middleware: records each request's method, path, Authorization header and
    the session ids the app hands out (the app itself is unchanged)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests: list[tuple[str, str, str | None]] = []
        self.session_ids: list[str] = []
        self.bodies: list[bytes] = []
        self.hosts: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization")
        self.hosts.append(headers.get(b"host", b"").decode())
        self.requests.append((scope["method"], scope["path"], auth.decode() if auth else None))

        async def recording_receive() -> Any:
            message = await receive()
            if message.get("type") == "http.request":
                self.bodies.append(message.get("body", b""))
            return message

        async def recording_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                for key, value in message.get("headers") or []:
                    if key.lower() == b"mcp-session-id" and value.decode() not in self.session_ids:
                        self.session_ids.append(value.decode())
            await send(message)

        await self.app(scope, recording_receive, recording_send)
