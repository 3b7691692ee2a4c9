"""Agent-local callbacks: ``before_model``, ``after_model``, ``before_tool``, ``after_tool``.

A callback returns None to continue, ``{"replace": value}`` to use `value` instead
(before_model/before_tool then skip the model or tool), or ``{"halt": reason}`` to
fail the turn with ``("callback_halted", hook, reason)``. A callback that raises is
logged with a structural tag and ignored: it never crashes the agent, and no values
reach the log or the model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from providers.errors import AdkError
from supervision.logs import get_logger

HOOKS = ("before_model", "after_model", "before_tool", "after_tool")

_log = get_logger("adk.agents")


def check_callbacks(callbacks: Any) -> Mapping[str, Callable[..., Any]]:
    if callbacks is None:
        return {}
    if not isinstance(callbacks, Mapping):
        raise AdkError("invalid_callbacks", f"callbacks maps hook names {HOOKS} to callables")
    unknown = sorted(set(callbacks) - set(HOOKS))
    if unknown:
        raise AdkError(("unknown_callbacks", tuple(unknown)), f"hooks are {HOOKS}")
    if not all(callable(fn) for fn in callbacks.values()):
        raise AdkError("invalid_callbacks", "each callback is callable")
    return dict(callbacks)


def run_callback(spec: Any, hook: str, ctx: Any, value: Any) -> Any:
    """The replacement value, or None to continue; raises `AdkError` on halt."""
    callback = spec.callbacks.get(hook)
    if callback is None:
        return None
    try:
        decision = callback(ctx, value)
    except Exception as error:
        _log.warning(
            "adk.agent.callback_failed",
            agent=spec.name,
            hook=hook,
            error_class=type(error).__name__,
        )
        return None
    if decision is None:
        return None
    if isinstance(decision, Mapping) and set(decision) == {"replace"}:
        return decision["replace"]
    if isinstance(decision, Mapping) and set(decision) == {"halt"}:
        reason = decision["halt"] if isinstance(decision["halt"], str) else "halted"
        raise AdkError(("callback_halted", hook, reason[:128]), "a callback stopped the turn")
    _log.warning(
        "adk.agent.callback_failed", agent=spec.name, hook=hook, error_class="InvalidDecision"
    )
    return None
