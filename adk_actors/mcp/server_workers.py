"""The MCP server's bounded worker threads: `adk_actors.serving.workers.WorkerPool` under
MCP's names (busy reason ``mcp_server_busy``, ``adk.mcp.server.*`` log events,
``adk-mcp-*`` threads). One pool per catalog (sync tools, resource and prompt
callbacks) and one per `ServerAuth` (the hooks)."""

from __future__ import annotations

from adk_actors.serving.workers import IDLE_SECONDS, JobPhase, PoolNames, WorkersBusy
from adk_actors.serving.workers import WorkerPool as _WorkerPool

__all__ = ["IDLE_SECONDS", "MCP_POOL_NAMES", "JobPhase", "WorkerPool", "WorkersBusy"]

MCP_POOL_NAMES = PoolNames(busy="mcp_server_busy", log="adk.mcp.server", thread="adk-mcp")


class WorkerPool(_WorkerPool):
    """A `serving.workers.WorkerPool` named as MCP's."""

    def __init__(self, limit: int, name: str) -> None:
        super().__init__(limit, name, MCP_POOL_NAMES)
