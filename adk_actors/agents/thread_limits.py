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
        raw = _environment_value().strip()
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


_ENVIRON_DATA: Any = getattr(os.environ, "_data", None)
"""`os.environ`'s own store (encoded keys and values), which every change made through
`os.environ` (`os.environ[...] = ...`, `monkeypatch.setenv`, `os.environ.pop`) updates;
None where it is not a dict (then `os.environ.get` is asked). `os.putenv` alone never
reached `os.environ.get` either."""
_ENCODED_KEY: Any = os.environ.encodekey(MAX_TOOL_THREADS_ENV)


def _environ_value_via_data() -> str:
    """`os.environ.get(MAX_TOOL_THREADS_ENV, "")`, read now, as one dict lookup: every
    spawn reads it, and `os.environ.get` of an unset name costs a raised and caught
    KeyError (about 1 us)."""
    raw = _ENVIRON_DATA.get(_ENCODED_KEY)
    return "" if raw is None else os.environ.decodevalue(raw)


def _environ_value_via_mapping() -> str:
    return os.environ.get(MAX_TOOL_THREADS_ENV, "")


_environment_value = (
    _environ_value_via_data if type(_ENVIRON_DATA) is dict else _environ_value_via_mapping
)
