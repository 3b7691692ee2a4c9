"""The MCP client supervisor: a DynamicSupervisor of temporary MCP clients.

Each `adk.mcp.connect(...)` starts one client process under it (``restart=
"temporary"``): a client that dies, crashes or is killed is never restarted behind
its pid (its transport, and a stdio server process, die with it), and one client's
failure never touches another's. The application tree starts it after the ambient
supervisor and before the workflow supervisor (DESIGN §4).
"""

from __future__ import annotations

from adk_actors.app import (
    MAX_MCP_CLIENTS,
    MCP_CLIENT_SUPERVISOR,
    MCP_CLIENT_SUPERVISOR_INTENSITY,
    MCP_CLIENT_SUPERVISOR_PERIOD,
)
from supervision import ChildSpec, DynamicSupervisor, Pid

__all__ = [
    "MAX_MCP_CLIENTS",
    "MCP_CLIENT_SUPERVISOR",
    "child_spec",
    "start_mcp_client_supervisor",
]


def start_mcp_client_supervisor() -> Pid:
    """Start ``adk.mcp.clients`` (the application tree does)."""
    return DynamicSupervisor.start_link(
        MAX_MCP_CLIENTS,
        intensity=MCP_CLIENT_SUPERVISOR_INTENSITY,
        period=MCP_CLIENT_SUPERVISOR_PERIOD,
        name=MCP_CLIENT_SUPERVISOR,
    )


def child_spec() -> ChildSpec:
    """The MCP client supervisor's place in the application tree."""
    return ChildSpec("mcp_client_supervisor", start_mcp_client_supervisor, type="supervisor")
