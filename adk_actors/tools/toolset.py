"""Toolsets: tools that come from a backend (MCP, OpenAPI, ...), as immutable snapshots.

`Toolset.fetch()` asks the backend for its tools. An agent holds a `snapshot()`: the
declarations as they were when it was taken. Before a snapshotted tool runs, the
backend is asked again; a tool it no longer offers, or offers with another schema,
fails closed with ``tool_catalog_changed`` instead of running against a stale
declaration. New backend tools stay unknown (``not_found``) until `refresh()` makes a
new snapshot (and a new agent uses it).
"""

from __future__ import annotations

from typing import Any

from adk_actors.tools.tool import Tool, ToolContext
from providers.errors import AdkError


class Toolset:
    """Subclass and implement `fetch`; `name` labels the source in error messages."""

    name = "toolset"

    def fetch(self) -> list[Tool]:
        raise NotImplementedError

    def snapshot(self) -> ToolsetSnapshot:
        return ToolsetSnapshot(self, self.fetch())


class ToolsetSnapshot:
    """The toolset's tools at one moment, each guarded against backend changes."""

    def __init__(self, toolset: Toolset, tools: list[Tool]) -> None:
        self.toolset = toolset
        self.tools = [_Guarded(toolset, tool) for tool in tools]

    def refresh(self) -> ToolsetSnapshot:
        """A new snapshot of the backend as it is now."""
        return self.toolset.snapshot()


class _Guarded(Tool):
    def __init__(self, toolset: Toolset, inner: Tool) -> None:
        self.toolset = toolset
        self.inner = inner
        self._declaration = dict(inner.schema())
        self.name = self._declaration["name"]
        self.description = self._declaration.get("description", "")
        self.parameters = self._declaration.get("parameters")
        self.parallel_safe = inner.parallel_safe
        self.source = f"toolset {toolset.name}"

    def schema(self) -> dict[str, Any]:
        return dict(self._declaration)

    @property
    def require_confirmation(self) -> Any:
        """The backend tool's own approval rule: a snapshot never weakens it."""
        return getattr(self.inner, "require_confirmation", None)

    def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> tuple[bool, str | None]:
        return self.inner.confirmation(args, ctx)

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        current = {tool.schema().get("name"): tool for tool in self.toolset.fetch()}
        live = current.get(self.name)
        if live is None or dict(live.schema()) != self._declaration:
            raise AdkError(
                "tool_catalog_changed",
                f"{self.name} changed in {self.toolset.name}; refresh the toolset",
            )
        return live.execute(args, ctx)
