"""The ADK domain layer and its public facade.

import adk_actors as adk

adk.start()
agent = adk.spawn_agent("WeatherAgent", {"provider": "scripted", "script": [...]}, tools=[get_weather])
text = adk.prompt(agent, "What is the weather in Tokyo?")
adk.stop_agent(agent)
"""

import importlib
from typing import TYPE_CHECKING, Any

from adk_actors import (
    a2a,
    aio,
    ambient,
    app,
    application,
    events,
    graph,
    mcp,
    planning,
    plugins,
    runs,
    sessions,
    workflows,
)
from adk_actors.agents import (
    AgentRef,
    AgentResponse,
    Scope,
    agent_info,
    delegate,
    invoke,
    prompt,
    spawn_agent,
    stop_agent,
)
from adk_actors.agents.agent_tool import AgentTool
from adk_actors.app import start, stop
from adk_actors.events import Event, EventActions
from adk_actors.orchestration import loop, parallel, sequential
from adk_actors.outcomes import Cancelled, Completed, Failed, Paused
from adk_actors.planning import run_planning
from adk_actors.runner import Runner
from adk_actors.tools import Tool, ToolContext, Toolset, tool
from adk_actors.tools.suspension import long_running, request_human_approval
from adk_actors.workflows import compile_workflow, run_workflow
from providers import AdkError, Content, ScriptedProvider, content, redact
from providers import protocol as _protocol

providers = _protocol
"""`adk.providers`: `generate`, `stream`, `stream_content` (and their async twins),
`capabilities`, `validate_config`, `register_provider` and `ScriptedProvider`."""

app.install(application.start_tree)  # the tree's composition root, behind `start`

if TYPE_CHECKING:
    from adk_actors import evaluation, stress

_ON_FIRST_USE = frozenset({"evaluation", "stress"})
"""Areas a running agent never needs, loaded on first use (PEP 562): `adk.evaluation`
and `adk.stress` (the stress harness brings the daemon, uvicorn and matplotlib), so
``import adk_actors`` stays as quick as the runtime itself."""


def __getattr__(name: str) -> Any:
    if name in _ON_FIRST_USE:
        return importlib.import_module(f"adk_actors.{name}")
    raise AttributeError(f"module 'adk_actors' has no attribute {name!r}")


__all__ = [
    "AdkError",
    "AgentRef",
    "AgentResponse",
    "AgentTool",
    "Cancelled",
    "Completed",
    "Content",
    "Event",
    "EventActions",
    "Failed",
    "Paused",
    "Runner",
    "Scope",
    "ScriptedProvider",
    "Tool",
    "ToolContext",
    "Toolset",
    "a2a",
    "agent_info",
    "aio",
    "ambient",
    "compile_workflow",
    "content",
    "delegate",
    "evaluation",
    "events",
    "graph",
    "invoke",
    "long_running",
    "loop",
    "mcp",
    "parallel",
    "planning",
    "plugins",
    "prompt",
    "providers",
    "redact",
    "request_human_approval",
    "run_planning",
    "run_workflow",
    "runs",
    "sequential",
    "sessions",
    "spawn_agent",
    "start",
    "stop",
    "stop_agent",
    "stress",
    "tool",
    "workflows",
]
