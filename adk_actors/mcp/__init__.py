"""MCP: supervised clients (stdio, Streamable HTTP) that are toolsets, and servers.

``adk.mcp.connect("stdio", command)`` / ``adk.mcp.connect("streamable_http", url,
auth=..., allow_http_loopback=False, ...)``: see `adk_actors.mcp.connect`;
``adk.mcp.serve(tools=..., ...)`` and ``serve_stdio``: see `adk_actors.mcp.server`
and `adk_actors.mcp.stdio_server`; the package README has both.

The names load on first use (PEP 562): the application tree imports
`adk_actors.mcp.client_supervisor` at start-up without paying for the MCP SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adk_actors.mcp.client_supervisor import (
        MCP_CLIENT_SUPERVISOR,
        child_spec,
        start_mcp_client_supervisor,
    )
    from adk_actors.mcp.connect import McpClient, connect
    from adk_actors.mcp.security import HttpPolicy, default_resolver
    from adk_actors.mcp.server import McpServer, http_app, serve
    from adk_actors.mcp.stdio_server import serve_stdio
    from adk_actors.mcp.toolset import McpRemoteTool, McpTool, McpToolResult

_WHERE = {
    "MCP_CLIENT_SUPERVISOR": "client_supervisor",
    "child_spec": "client_supervisor",
    "start_mcp_client_supervisor": "client_supervisor",
    "McpClient": "connect",
    "connect": "connect",
    "HttpPolicy": "security",
    "default_resolver": "security",
    "McpRemoteTool": "toolset",
    "McpTool": "toolset",
    "McpToolResult": "toolset",
    "McpServer": "server",
    "http_app": "server",
    "serve": "server",
    "serve_stdio": "stdio_server",
}

__all__ = [
    "MCP_CLIENT_SUPERVISOR",
    "HttpPolicy",
    "McpClient",
    "McpRemoteTool",
    "McpServer",
    "McpTool",
    "McpToolResult",
    "child_spec",
    "connect",
    "default_resolver",
    "http_app",
    "serve",
    "serve_stdio",
    "start_mcp_client_supervisor",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'adk_actors.mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"adk_actors.mcp.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
