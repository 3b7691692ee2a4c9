"""`spawn_from_file`: start the agent an `AgentFile` describes.

A Gemini agent needs ``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``) in the environment;
without one the refusal is ``missing_api_key`` with a message that says how to run
offline instead, with the scripted model.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from adk_actors.agents import AgentRef, spawn_agent
from adk_actors.config_file.agent_file import AgentFile
from providers.errors import AdkError

API_KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
MISSING_KEY_HINT = (
    "GEMINI_API_KEY is not set. Export it, or run offline with the scripted model: "
    'put "provider": "scripted" and "script": [{"text": "Hello!"}] in the config file '
    "(see examples/agent.scripted.json)."
)


def api_key_configured(environ: Mapping[str, str] | None = None) -> bool:
    """True when the environment holds a non-empty Gemini API key."""
    source = os.environ if environ is None else environ
    return any(source.get(name) for name in API_KEY_VARIABLES)


def check_credentials(agent_file: AgentFile, environ: Mapping[str, str] | None = None) -> None:
    """``missing_api_key`` (with the offline hint) for a Gemini agent without a key."""
    if agent_file.needs_api_key() and not api_key_configured(environ):
        raise AdkError("missing_api_key", MISSING_KEY_HINT)


def spawn_from_file(agent_file: AgentFile) -> AgentRef:
    """Spawn the file's agent with its tools; `AdkError` if it cannot start
    (``tools_not_imported`` for a file loaded without importing its tools)."""
    if not agent_file.tools_imported:
        raise AdkError(
            "tools_not_imported",
            "the file was loaded without importing its tools; load it again to run it",
        )
    check_credentials(agent_file)
    try:
        return spawn_agent(agent_file.name, agent_file.config, list(agent_file.tool_objects))
    except AdkError as error:
        if error.reason == "missing_api_key":
            raise AdkError("missing_api_key", MISSING_KEY_HINT) from None
        raise
