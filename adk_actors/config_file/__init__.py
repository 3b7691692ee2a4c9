"""Agent config files: checked JSON that names an agent, its model and its tools.

agent = load_agent_file("examples/agent.json")   # AdkError naming the bad key
ref = spawn_from_file(agent)                     # adk.spawn_agent(agent.name, agent.config, tools)
runner = adk.Runner(ref, "app", sessions, **agent.runner_options)
"""

from adk_actors.config_file.agent_file import DEFAULT_AGENT_NAME, DEFAULT_MODEL, AgentFile
from adk_actors.config_file.loader import MAX_FILE_BYTES, load_agent_file
from adk_actors.config_file.spawn import (
    API_KEY_VARIABLES,
    MISSING_KEY_HINT,
    api_key_configured,
    check_credentials,
    spawn_from_file,
)
from adk_actors.config_file.tool_paths import resolve_tool

__all__ = [
    "API_KEY_VARIABLES",
    "DEFAULT_AGENT_NAME",
    "DEFAULT_MODEL",
    "MAX_FILE_BYTES",
    "MISSING_KEY_HINT",
    "AgentFile",
    "api_key_configured",
    "check_credentials",
    "load_agent_file",
    "resolve_tool",
    "spawn_from_file",
]
