"""The MCP servers of `benchmarks/mcp_calls.py`, one per process, all serving the same tool
``add(a, b) -> a + b``.

Usage: ``python servers.py MODE`` with MODE one of

* ``ours-http``: `adk.mcp.serve` on 127.0.0.1 (an ephemeral port);
* ``sdk-http``: the official SDK's `MCPServer` (FastMCP in mcp 1.x), its
  ``streamable_http_app()`` under uvicorn on 127.0.0.1, as shipped (each answer an SSE
  stream); ``sdk-http-json``: the same with ``json_response=True`` (JSON answers, the
  shape ours gives);
* ``ours-stdio``: `adk_actors.mcp.serve_stdio` (what ``adk mcp serve-stdio`` runs);
* ``sdk-stdio``: ``MCPServer.run("stdio")``.

An HTTP server prints its endpoint URL as one line on stdout, then serves until its
stdin closes (the benchmark closes it, or exits). A stdio server is the protocol on
stdin and stdout until stdin closes. Logs stay at warnings, on stderr.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
from typing import Any

import structlog
import uvicorn
from mcp.server.mcpserver import MCPServer

import adk_actors as adk

MAX_CONCURRENCY = 256
"""Our server's in-flight bound, above the benchmark's widest fan-out (default 32)."""


def _quiet() -> None:
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)


def _wait_for_stdin_eof() -> None:
    while sys.stdin.buffer.read(4096):
        pass


def _our_tools() -> list[Any]:
    @adk.tool
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: the first addend.
            b: the second addend.
        """
        return a + b

    return [add]


def _sdk_server() -> Any:
    server = MCPServer("bench-sdk-server")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return server


def ours_http() -> None:
    adk.start()
    server = adk.mcp.serve(tools=_our_tools(), max_concurrency=MAX_CONCURRENCY)
    print(server.url, flush=True)
    _wait_for_stdin_eof()
    server.stop()
    adk.stop()


def sdk_http(json_response: bool = False) -> None:
    app = _sdk_server().streamable_http_app(json_response=json_response)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", ws="none")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        threading.Event().wait(0.01)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    _wait_for_stdin_eof()
    server.should_exit = True
    thread.join(10)


def ours_stdio() -> None:
    adk.start()
    adk.mcp.serve_stdio(_our_tools())
    adk.stop()


def sdk_stdio() -> None:
    _sdk_server().run("stdio")


MODES = {
    "ours-http": ours_http,
    "sdk-http": sdk_http,
    "sdk-http-json": lambda: sdk_http(json_response=True),
    "ours-stdio": ours_stdio,
    "sdk-stdio": sdk_stdio,
}

if __name__ == "__main__":
    _quiet()
    MODES[sys.argv[1]]()
