"""A test MCP server built with the official SDK's `MCPServer` (FastMCP in mcp 1.x).

Run over stdio: ``python sdk_server.py`` (what our stdio tests launch with
``sys.executable``); or import `build()` and serve ``build().streamable_http_app()``
with uvicorn for Streamable HTTP. `CALLS` counts each tool's runs (the HTTP tests read
it in-process; over stdio the ``calls`` tool reports it).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter

from mcp.server.mcpserver import MCPServer

CALLS: Counter[str] = Counter()


def build() -> MCPServer:
    server = MCPServer("sdk-test-server")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        CALLS["add"] += 1
        return a + b

    @server.tool()
    def bump(key: str) -> str:
        """Count one run under `key` (a tool with an effect)."""
        CALLS[f"bump:{key}"] += 1
        return f"{key}={CALLS[f'bump:{key}']}"

    @server.tool()
    def calls(key: str) -> int:
        """How many times `bump(key)` ran."""
        return CALLS[f"bump:{key}"]

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        CALLS["slow"] += 1
        await asyncio.sleep(seconds)
        return "done"

    @server.tool()
    def pid() -> int:
        """This server's process id."""
        return os.getpid()

    @server.tool()
    def big(size: int) -> str:
        """A text of `size` characters."""
        return "x" * size

    @server.tool()
    def fail(why: str) -> str:
        """Always fails."""
        raise ValueError(why)

    @server.resource("memo://otp", name="otp-note", mime_type="text/plain")
    def otp_note() -> str:
        CALLS["resource"] += 1
        return "Supervise every long-lived process."

    @server.prompt()
    def explain(topic: str) -> str:
        """Explain a topic."""
        return f"Explain {topic}"

    return server


if __name__ == "__main__":
    build().run("stdio")
    sys.exit(0)
