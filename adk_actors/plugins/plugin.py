"""`Plugin`: the base class of a Runner-global plugin, and its hooks.

A plugin overrides any subset of the hooks; each is ``hook(self, ctx, value,
config)`` and returns an outcome (see `outcomes`). `ctx` is an immutable mapping with
the run's identifiers, secret keys removed; `config` is the descriptor's config. A
hook may be ``async def``: it then runs on the kernel's reactor (and is cancelled at
its deadline), a plain one on a pool thread (abandoned and fenced at its deadline).

Class attributes give a descriptor's defaults: `id`, `mode` (``observe`` or
``intervene``), `failure_policy` (``open`` or ``closed``), `timeout` (seconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

HOOKS = (
    "on_user_message",
    "before_run",
    "after_run",
    "before_agent",
    "after_agent",
    "before_model",
    "after_model",
    "on_model_error",
    "before_tool",
    "after_tool",
    "on_tool_error",
    "on_event",
    "on_agent_error",
    "on_run_error",
    "on_error",
)
NOTIFICATION_HOOKS = frozenset({"after_run", "on_agent_error", "on_run_error"})
"""Best effort: a failure never fails the pipeline, an intervention is ignored."""
ERROR_HOOKS = frozenset({"on_model_error", "on_tool_error", "on_agent_error", "on_run_error"})
"""Hooks for which a plugin's legacy ``on_error`` is the fallback."""


class Plugin:
    """Override the hooks you need (see the module doc)."""

    id: ClassVar[str | None] = None
    mode: ClassVar[str] = "observe"
    failure_policy: ClassVar[str] = "open"
    timeout: ClassVar[float] = 1.0

    def implemented_hooks(self) -> frozenset[str]:
        """The hooks this plugin overrides (a hook it lacks is ``skipped``)."""
        return frozenset(
            hook for hook in HOOKS if getattr(type(self), hook, None) is not getattr(Plugin, hook)
        )

    def hook_function(self, hook: str) -> Any:
        """The callable for `hook` (``on_error`` for an error hook it lacks), or None."""
        implemented = self.implemented_hooks()
        if hook in implemented:
            return getattr(self, hook)
        if hook in ERROR_HOOKS and "on_error" in implemented:
            return self.on_error
        return None

    # Every hook: (ctx, value, config) -> outcome. The base versions are never called.
    def on_user_message(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        return None

    def before_run(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        return None

    def after_run(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        return None

    def before_agent(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        return None

    def after_agent(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        return None

    def before_model(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        return None

    def after_model(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        return None

    def on_model_error(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        return None

    def before_tool(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        return None

    def after_tool(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        return None

    def on_tool_error(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        return None

    def on_event(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        return None

    def on_agent_error(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        return None

    def on_run_error(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        return None

    def on_error(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        return None
