"""``/mcp``: the daemon's agent over MCP Streamable HTTP (`adk_actors.mcp.http_app`).

The agent of ``adk serve --config`` is a tool taking one ``request`` string, beside the
file's own tools. The endpoint is behind the daemon's guards (loopback Host, same
origin, drain, deadline) and its own MCP rules; its bearer token is the developer
token (``ADK_DEV_TOKEN``), checked as the /dev/v1 routes check it.
"""

from __future__ import annotations

from starlette.routing import BaseRoute, Route

from adk_actors.agents import AgentRef
from adk_actors.config_file import AgentFile
from adk_actors.daemon import auth
from adk_actors.daemon.settings import DevSettings
from adk_actors.mcp import http_app

PATH = "/mcp"
PRINCIPAL = "developer"


def mcp_route(agent: AgentRef, agent_file: AgentFile, settings: DevSettings) -> BaseRoute:
    """The ``/mcp`` route serving `agent` and `agent_file`'s tools."""
    digest = settings.token_digest

    def verify(token: str) -> str | None:
        header = b"Bearer " + token.encode()
        verdict = auth.authorize([(b"authorization", header)], digest)
        return PRINCIPAL if verdict == "ok" else None

    endpoint = http_app(
        tools=[agent, *agent_file.tool_objects],
        path=PATH,
        verifier=verify,
        name=f"adk-{agent_file.name}",
    )
    return Route(PATH, endpoint, methods=None)
