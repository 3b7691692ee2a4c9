"""Instructions rendered per turn: templates over scoped state, or a provider function.

A template names state keys in braces: ``"Greet {user:name}. Plan: {app:plan?}"``.
A key with ``?`` may be missing (it renders empty); another missing key fails the
turn with ``("missing_instruction_key", key)``. Keys that look like credentials are
refused when the agent is spawned (``("secret_instruction_key", key)``). A callable
`instructions` receives a read-only scope (agent, app, user, session, state) and
returns the text (at most 64 KiB).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from providers.errors import AdkError, is_secret_key

MAX_INSTRUCTION_BYTES = 64 * 1024
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_:.\-]*)(\?)?\}")


def template_keys(template: str) -> list[str]:
    """The state keys a template uses; refuses credential-like keys."""
    keys = [match.group(1) for match in _PLACEHOLDER.finditer(template)]
    for key in keys:
        if is_secret_key(key.split(":", 1)[-1]):
            raise AdkError(
                ("secret_instruction_key", key), "instructions may not read credential-like state"
            )
    return keys


def static_instructions(spec: Any) -> bool:
    """No instructions, or plain text without placeholders: the same every turn, so
    the spec's own provider config is every turn's (nothing is rendered)."""
    source = spec.instructions
    return source is None or (isinstance(source, str) and not spec.instruction_keys)


def render_instructions(
    spec: Any, scope: Mapping[str, Any], state: Mapping[str, Any]
) -> Mapping[str, Any]:
    """The provider config for one turn, with its instructions rendered."""
    source = spec.instructions
    config: Mapping[str, Any] = spec.provider_config
    if static_instructions(spec):
        return config  # nothing to render
    if callable(source):
        text = _call_provider(source, scope, state)
    else:
        text = _PLACEHOLDER.sub(
            lambda match: _lookup(state, match.group(1), bool(match.group(2))), source
        )
    if len(text.encode("utf-8")) > MAX_INSTRUCTION_BYTES:
        raise AdkError(
            "instructions_too_large", f"instructions are at most {MAX_INSTRUCTION_BYTES} bytes"
        )
    return {**config, "instructions": text}


def _lookup(state: Mapping[str, Any], key: str, optional: bool) -> str:
    if key in state:
        value = state[key]
        return value if isinstance(value, str) else str(value)
    if optional:
        return ""
    raise AdkError(
        ("missing_instruction_key", key),
        "the instruction template needs a state key that is not set",
    )


def _call_provider(
    source: Callable[[Mapping[str, Any]], Any], scope: Mapping[str, Any], state: Mapping[str, Any]
) -> str:
    view = MappingProxyType({**scope, "state": MappingProxyType(dict(state))})
    try:
        text = source(view)
    except Exception:
        raise AdkError("instruction_provider_failed", "the instruction provider raised") from None
    if not isinstance(text, str):
        raise AdkError(
            "invalid_instruction_provider_result", "an instruction provider returns a string"
        )
    return text
