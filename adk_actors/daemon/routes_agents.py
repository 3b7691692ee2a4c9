"""The /dev/v1 discovery routes: the running agents, and the diagnostics of what this
daemon serves (context capabilities; artifact and memory sources).

Both answer from the process's own registries and settings: no agent is asked
anything, and nothing holds content, a pid or a handle.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from adk_actors.agents import list_agents
from adk_actors.daemon.bodies import dev_state
from adk_actors.daemon.views import context_capabilities, context_policy, json_response

MAX_LISTED_AGENTS = 1000
UNAVAILABLE = "unavailable"
"""A resource source the daemon does not have (artifact and memory services do not
exist yet)."""


async def _agents(request: Request) -> Response:
    """The running agents by name, sorted, at most `MAX_LISTED_AGENTS`."""
    names = list_agents(MAX_LISTED_AGENTS + 1)
    shown = names[:MAX_LISTED_AGENTS]
    return json_response(
        {
            "schema_version": 1,
            "agents": [{"name": name} for name in shown],
            "total": len(shown),
            "truncated": len(names) > MAX_LISTED_AGENTS,
        }
    )


async def _diagnostics(request: Request) -> Response:
    """Context capabilities and the configured resource sources: no content, no handles."""
    state = dev_state(request)
    body: dict[str, Any] = {
        "schema_version": 1,
        "context": context_capabilities(context_policy(state.runner_options)),
        "resources": {"artifact": UNAVAILABLE, "memory": UNAVAILABLE},
        "scope_required": True,
        "artifact_bytes_exposed": False,
    }
    return json_response(body)


ROUTES: list[BaseRoute] = [
    Route("/dev/v1/agents", _agents, methods=["GET"]),
    Route("/dev/v1/diagnostics", _diagnostics, methods=["GET"]),
]
