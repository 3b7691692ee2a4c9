"""Tools: `@tool`, `Tool`, `ToolContext` and the immutable `ToolCatalog`."""

from adk_actors.tools.catalog import ToolCatalog
from adk_actors.tools.tool import FunctionTool, Tool, ToolContext, tool
from adk_actors.tools.toolset import Toolset, ToolsetSnapshot

__all__ = [
    "FunctionTool",
    "Tool",
    "ToolCatalog",
    "ToolContext",
    "Toolset",
    "ToolsetSnapshot",
    "tool",
]
