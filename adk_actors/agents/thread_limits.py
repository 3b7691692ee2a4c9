"""How many pool threads an agent's tools (and, apart, its callbacks) may hold: the
``max_tool_threads`` config value, a leaf shared by the spec and the turn."""

from __future__ import annotations

import os
from typing import Any

from providers.errors import AdkError

DEFAULT_MAX_TOOL_THREADS = 8
MAX_TOOL_THREADS_CEILING = 256
MAX_TOOL_THREADS_ENV = "ADK_MAX_TOOL_THREADS"
"""Overrides `DEFAULT_MAX_TOOL_THREADS` for agents whose config does not set it."""


def check_max_tool_threads(value: Any) -> int:
    """A ``max_tool_threads`` config value: an int in 1..`MAX_TOOL_THREADS_CEILING`
    (None: the environment's `MAX_TOOL_THREADS_ENV`, else the default)."""
    source = "max_tool_threads"
    if value is None:
        raw = os.environ.get(MAX_TOOL_THREADS_ENV, "").strip()
        if not raw:
            return DEFAULT_MAX_TOOL_THREADS
        source = MAX_TOOL_THREADS_ENV
        value = int(raw) if raw.isascii() and raw.isdigit() else None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= MAX_TOOL_THREADS_CEILING
    ):
        raise AdkError(
            "invalid_max_tool_threads", f"{source} is an int in 1..{MAX_TOOL_THREADS_CEILING}"
        )
    return value
