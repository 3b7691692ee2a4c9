"""An MCP server over stdio: what ``adk mcp serve-stdio`` runs.

`serve_stdio` serves one `McpCatalog` (tools, agents as tools, resources, prompts;
see `server_handlers`) with the SDK's low-level server and its stdio transport, on the
calling thread, until the client closes stdin. The SDK's transport owns stdin and
stdout while it serves (stdout carries only protocol messages: anything else written
there would corrupt the stream, so logs go to stderr); tool calls run through the same
machinery as over HTTP, under ``request_timeout``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio
from mcp.server.stdio import stdio_server

from adk_actors.mcp.server_handlers import McpCatalog, build_server

DEFAULT_REQUEST_TIMEOUT = 120.0


def serve_stdio(
    tools: Sequence[Any] = (),
    resources: Sequence[Mapping[str, Any]] = (),
    prompts: Sequence[Mapping[str, Any]] = (),
    *,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    name: str = "adk-mcp",
) -> None:
    """Serve over this process's stdin and stdout until stdin closes."""
    catalog = McpCatalog(tools, resources, prompts, request_timeout=request_timeout)
    server = build_server(catalog, name)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
