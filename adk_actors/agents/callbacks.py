"""Agent-local callbacks: each ``fn(ctx, value)``, run on a pool thread, never the loop.

Deciding hooks, around the turn, the model and each tool:

* ``before_agent(ctx, message)`` / ``after_agent(ctx, answer)``: once per turn;
* ``before_model(ctx, contents)`` / ``after_model(ctx, output)``: each model call;
* ``before_tool(ctx, call)`` / ``after_tool(ctx, payload)``: each tool call that runs.

One returns None to continue, ``{"replace": value}`` to use `value` instead (a
before-hook then skips what it wraps, and the matching after-hook still sees the
value), or ``{"halt": reason}`` to fail the turn with ``("callback_halted", hook,
reason)``.

Observing hooks, ``on_tool_start(ctx, call)`` (before ``before_tool``) and
``on_tool_end(ctx, response)`` (after ``after_tool``, with the final
`FunctionResponsePart`), are told and cannot change anything: what they return is
ignored.

A callback that raises is logged with a structural tag and ignored: it never crashes
the agent, and no values reach the log or the model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from providers.errors import AdkError
from supervision.logs import get_logger

DECIDING_HOOKS = (
    "before_agent",
    "after_agent",
    "before_model",
    "after_model",
    "before_tool",
    "after_tool",
)
OBSERVING_HOOKS = ("on_tool_start", "on_tool_end")
HOOKS = DECIDING_HOOKS + OBSERVING_HOOKS

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
    """The replacement value, or None to continue; raises `AdkError` on halt. An
    observing hook's answer is ignored (always None)."""
    callback = spec.callbacks.get(hook)
    if callback is None:
        return None
    try:
        decision = callback(ctx, value)
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as error:  # SystemExit too: a callback never ends the turn
        _log.warning(
            "adk.agent.callback_failed",
            agent=spec.name,
            hook=hook,
            error_class=type(error).__name__,
        )
        return None
    if decision is None or hook in OBSERVING_HOOKS:
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
