"""An MCP server's tools as agent tools.

An `McpClient` is an `adk.Toolset`: `fetch()` lists the server's tools and wraps each
in an `McpRemoteTool`, whose declaration is the server's ``inputSchema`` (so the
catalog validates arguments against it like any local tool's) and whose
`execute` (``async``: it runs on the reactor and awaits the client process's answer,
so no thread waits for the server) calls the client process with the arguments
alone: the
`ToolContext` (app, user, session, invocation, state) is never sent. Timeouts,
structural errors, confirmation and policy are the agent's, exactly as for local
tools. MCP names are kept when they are valid tool names; any other character
becomes ``_`` (``get-sum`` -> ``get_sum``), and two server names that map to one
model name are refused (``duplicate_tool_name``).

A result with ``isError`` answers the model with ``{"success": false, "error":
{"kind": "mcp_tool_error", "content": [...]}}`` (the server's content is content,
like any result); otherwise ``{"content": [...]}`` plus ``structuredContent`` when the
server sent it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

from adk_actors.tools import Tool, ToolContext
from providers.errors import AdkError

_INVALID = re.compile(r"[^A-Za-z0-9_]")


class McpTool(msgspec.Struct, frozen=True, kw_only=True):
    """A tool as the server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    title: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] = {}

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        }
        if self.title is not None:
            found["title"] = self.title
        if self.output_schema is not None:
            found["outputSchema"] = self.output_schema
        if self.annotations:
            found["annotations"] = self.annotations
        return found


class McpToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """What ``tools/call`` answered."""

    content: list[dict[str, Any]]
    is_error: bool = False
    structured_content: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"content": self.content, "isError": self.is_error}
        if self.structured_content is not None:
            found["structuredContent"] = self.structured_content
        return found

    def for_model(self) -> dict[str, Any]:
        if self.is_error:
            return {"success": False, "error": {"kind": "mcp_tool_error", "content": self.content}}
        found: dict[str, Any] = {"content": self.content}
        if self.structured_content is not None:
            found["structuredContent"] = self.structured_content
        return found


def model_name(mcp_name: str) -> str:
    """The tool name the model sees for an MCP tool name."""
    name = _INVALID.sub("_", mcp_name)[:64]
    if not name or name[0].isdigit():
        name = ("t_" + name)[:64]
    return name


CallTool = Callable[[str, dict[str, Any]], Awaitable[McpToolResult]]
"""``McpClient.acall_tool``: the awaitable call an `McpRemoteTool` makes."""


class McpRemoteTool(Tool):
    """One server tool; `execute` awaits the client process's answer."""

    parallel_safe = True

    def __init__(
        self, tool: McpTool, call: CallTool, source: str, require_confirmation: Any = None
    ) -> None:
        self.require_confirmation = require_confirmation
        self.mcp_name = tool.name
        self.name = model_name(tool.name)
        self.description = tool.description
        self.parameters = _parameters(tool.input_schema)
        self.source = source
        self._call = call

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        del ctx  # invocation context is never sent to an MCP server
        result = await self._call(self.mcp_name, dict(args))
        return result.for_model()


def _parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    parameters = dict(schema)
    parameters.setdefault("type", "object")
    parameters.pop("$schema", None)
    return parameters


Confirmation = bool | Callable[..., Any] | Mapping[str, Any] | None
"""``require_confirmation`` for a client's tools: one rule (a bool, or a callable
``(args, ctx)`` as for local tools) for all, or a mapping MCP tool name -> rule."""


def remote_tools(
    tools: list[McpTool], call: CallTool, source: str, confirmation: Confirmation = None
) -> list[Tool]:
    """The agent tools for `tools`, refusing two that the model could not tell apart."""
    made: dict[str, McpRemoteTool] = {}
    for tool in tools:
        rule = confirmation.get(tool.name) if isinstance(confirmation, Mapping) else confirmation
        remote = McpRemoteTool(tool, call, source, rule)
        if remote.name in made:
            raise AdkError(
                ("duplicate_tool_name", remote.name, source, source),
                f"two MCP tools map to {remote.name!r}",
            )
        made[remote.name] = remote
    return list(made.values())
