"""Agent names: what a valid one is, and the name its process is registered under.

A leaf module: the spec, `AgentTool`, the low-level calls (`calls.py`) and the facade
all need these, and none of them may import another for it.
"""

from __future__ import annotations

import re
from typing import Any

from providers.errors import AdkError

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_NAME_BYTES = 128


def check_agent_name(name: Any) -> str:
    """Agent names are identifiers; ``user`` is reserved for the human."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name) or len(name) > MAX_NAME_BYTES:
        raise AdkError(
            "invalid_identifier", "agent names match [A-Za-z_][A-Za-z0-9_]* (at most 128)"
        )
    if name.lower() == "user":
        raise AdkError("reserved_user", "'user' names the human in a conversation")
    return name


def registered_name(name: str) -> tuple[str, str]:
    """The registry name of the process serving agent `name`."""
    return ("adk.agent", name)
