"""Agents: supervised processes that run model turns in tasks."""

from adk_actors.agents.api import (
    AgentRef,
    AgentResponse,
    agent_info,
    delegate,
    invoke,
    list_agents,
    prompt,
    spawn_agent,
    stop_agent,
)
from adk_actors.agents.scope import Scope
from adk_actors.agents.spec import AgentSpec, compile_spec

__all__ = [
    "AgentRef",
    "AgentResponse",
    "AgentSpec",
    "Scope",
    "agent_info",
    "compile_spec",
    "delegate",
    "invoke",
    "list_agents",
    "prompt",
    "spawn_agent",
    "stop_agent",
]
