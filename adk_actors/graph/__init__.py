"""The legacy graph helpers (`adk.graph`): build a graph of state-delta functions,
compile it, run it as a supervised graph workflow (see `builder.py`), and the node
helpers for event-based graphs (`nodes.py`)."""

from adk_actors.graph.builder import (
    END,
    CompiledGraph,
    Graph,
    add_conditional_edge,
    add_edge,
    add_node,
    compile,
    new,
    run,
    set_entry_point,
)
from adk_actors.graph.nodes import agent_node, function_node, tool_node

__all__ = [
    "END",
    "CompiledGraph",
    "Graph",
    "add_conditional_edge",
    "add_edge",
    "add_node",
    "agent_node",
    "compile",
    "function_node",
    "new",
    "run",
    "set_entry_point",
    "tool_node",
]
