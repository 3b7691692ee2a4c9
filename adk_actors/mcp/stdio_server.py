"""An MCP server over stdio: what ``adk mcp serve-stdio`` runs.

`serve_stdio` serves one `McpCatalog` (tools, agents as tools, resources, prompts;
see `server_handlers`) with the SDK's low-level server and its stdio transport, on the
calling thread, until the client closes stdin. The SDK's transport owns stdin and
stdout while it serves (stdout carries only protocol messages: anything else written
there would corrupt the stream, so logs go to stderr); tool calls run through the same
machinery as over HTTP, under ``request_timeout``, with at most ``max_concurrency``
worker threads (a timed-out call's counted until it ends; past it a call is ``-32000``)
and answers bounded by ``max_response_bytes``; the options are checked as
`adk.mcp.serve`'s (`server_options.ServerOptions`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio
from mcp.server.stdio import stdio_server

from adk_actors.mcp.server_handlers import McpCatalog, build_server
from adk_actors.mcp.server_options import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_RESPONSE_BYTES,
    server_options,
)

DEFAULT_REQUEST_TIMEOUT = 120.0


def serve_stdio(
    tools: Sequence[Any] = (),
    resources: Sequence[Mapping[str, Any]] = (),
    prompts: Sequence[Mapping[str, Any]] = (),
    *,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    name: str = "adk-mcp",
) -> None:
    """Serve over this process's stdin and stdout until stdin closes."""
    options = server_options(
        {
            "request_timeout": request_timeout,
            "max_concurrency": max_concurrency,
            "max_response_bytes": max_response_bytes,
            "name": name,
        }
    )
    catalog = McpCatalog(
        tools,
        resources,
        prompts,
        request_timeout=options.request_timeout,
        max_response_bytes=options.max_response_bytes,
        max_workers=options.max_concurrency,
    )
    server = build_server(catalog, options.name)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(run)
    finally:
        catalog.workers.release_idle()
