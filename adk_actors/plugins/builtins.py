"""The four built-in plugins: ordinary descriptors, opt-in, configured by ``config``.

* `GlobalInstruction` (``before_model``, intervene): amends the model request with a
  Runner-wide instruction, merged into the leading system turn (``"position":
  "prepend"`` puts it first, ``"append"`` after the local one).
* `ContextFilter` (``before_model``, intervene): keeps the turns whose role is in
  ``include_roles`` (all by default), the last ``max_messages`` of them, plus the
  system turns and the latest user turn when asked; a model turn with calls and the
  tool turn answering it stay or go together.
* `ReflectRetry` (``on_tool_error``, intervene): turns a failed tool result into
  bounded, model-visible retry guidance, at most ``max_attempts`` times per tool in a
  turn (the context's ``retry_attempt``); the failure's text never passes through:
  only its ``component``, ``operation`` and ``reason`` tags, redacted, cut to an
  identifier charset and together at most ``max_error_chars`` (default
  `DEFAULT_ERROR_CHARS`, at most `MAX_ERROR_CHARS`).
* `MetadataLogger` (every hook, observe): records the hook, the value's type and size
  and the run's identifiers, never a prompt, response, argument, result, media or
  credential; to a `sink` callable if given, else the ``adk.plugin.metadata`` log.

Each has a constructor helper returning a descriptor: `global_instruction`,
`context_filter`, `reflect_retry`, `metadata_logger`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from adk_actors.plugins.outcomes import Amend, Return
from adk_actors.plugins.plugin import HOOKS, Plugin
from providers import content as content_model
from providers.content import Content
from providers.errors import AdkError
from supervision import redact_text
from supervision.logs import get_logger

_log = get_logger("adk.plugins")

MAX_INSTRUCTION_CHARS = 16_384
MAX_GUIDANCE_CHARS = 4096
MAX_RETRY_ATTEMPTS = 16
DEFAULT_ERROR_CHARS = 1024
MAX_ERROR_CHARS = 4096
_SUMMARY_KEYS = ("component", "operation", "reason")
_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_.:/-]")
DEFAULT_GUIDANCE = (
    "Reflect on the tool error, correct the arguments, and retry only when the "
    "operation is safe and idempotent."
)
CONTEXT_KEYS = ("app_name", "user_id", "session_id", "invocation_id", "agent_name", "tool")


class GlobalInstruction(Plugin):
    id = "global_instruction"
    mode = "intervene"

    def before_model(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        instruction = config.get("instruction")
        position = config.get("position", "prepend")
        if (
            not isinstance(instruction, str)
            or not 0 < len(instruction) <= MAX_INSTRUCTION_CHARS
            or position not in ("prepend", "append")
        ):
            raise AdkError("invalid_global_instruction_config", "instruction and position")
        contents = list(value)
        if contents and contents[0].role == "system":
            local = contents[0].text_value()
            text = (
                f"{instruction}\n\n{local}"
                if position == "prepend"
                else f"{local}\n\n{instruction}"
            )
            contents[0] = content_model.from_text(text, role="system")
        else:
            contents.insert(0, content_model.from_text(instruction, role="system"))
        return Amend(contents)


class ContextFilter(Plugin):
    id = "context_filter"
    mode = "intervene"

    def before_model(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        limit = config.get("max_messages")
        roles = config.get("include_roles")
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise AdkError("invalid_context_filter_config", "max_messages")
        if roles is not None and not (
            isinstance(roles, list) and all(isinstance(role, str) for role in roles)
        ):
            raise AdkError("invalid_context_filter_config", "include_roles")
        contents: list[Content] = list(value)
        latest_user = max(
            (
                at
                for at, item in enumerate(contents)
                if item.role == "user" and not _responses(item)
            ),
            default=None,
        )
        kept: set[int] = set()
        if config.get("preserve_system", True):
            kept |= {at for at, item in enumerate(contents) if item.role == "system"}
        if config.get("preserve_latest_user", True) and latest_user is not None:
            kept.add(latest_user)
        groups = _groups(contents)
        chosen = [
            group
            for group in groups
            if not set(group) <= kept
            and (roles is None or all(contents[at].role in roles for at in group))
        ]
        if limit is not None:
            chosen = _last_messages(chosen, limit)
        for group in chosen:
            kept |= set(group)
        return Amend([contents[at] for at in sorted(kept)])


class ReflectRetry(Plugin):
    id = "reflect_retry"
    mode = "intervene"

    def on_tool_error(self, ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
        enabled = config.get("enabled", True)
        attempts = config.get("max_attempts", 1)
        guidance = config.get("guidance", DEFAULT_GUIDANCE)
        error_chars = config.get("max_error_chars", DEFAULT_ERROR_CHARS)
        if (
            not isinstance(enabled, bool)
            or isinstance(attempts, bool)
            or not isinstance(attempts, int)
            or not 0 < attempts <= MAX_RETRY_ATTEMPTS
            or not isinstance(guidance, str)
            or not 0 < len(guidance) <= MAX_GUIDANCE_CHARS
            or isinstance(error_chars, bool)
            or not isinstance(error_chars, int)
            or not len(_SUMMARY_KEYS) <= error_chars <= MAX_ERROR_CHARS
        ):
            raise AdkError(
                "invalid_reflect_retry_plugin_config",
                "enabled, max_attempts, guidance, max_error_chars",
            )
        attempt = ctx.get("retry_attempt", 0)
        if not enabled or not isinstance(attempt, int) or attempt >= attempts:
            return None
        return Return(
            {
                "success": False,
                "adk_retry": {
                    "retryable": True,
                    "attempt": attempt + 1,
                    "max_attempts": attempts,
                    "guidance": guidance,
                    "error": _failure_summary(value, error_chars),
                },
            }
        )


class MetadataLogger(Plugin):
    id = "metadata_logger"
    mode = "observe"

    def __init__(self, sink: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.sink = sink

    def implemented_hooks(self) -> frozenset[str]:
        return frozenset(hook for hook in HOOKS if hook != "on_error")

    def hook_function(self, hook: str) -> Any:
        if hook == "on_error":
            return None

        def record(ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
            entry: dict[str, Any] = {
                "hook": hook,
                "value_type": _value_type(value),
                "size": len(value)
                if isinstance(value, Sequence | Mapping) and not isinstance(value, str)
                else None,
                **{key: ctx[key] for key in CONTEXT_KEYS if isinstance(ctx.get(key), str)},
            }
            if isinstance(config.get("id"), str):
                entry["logger"] = config["id"][:256]
            if self.sink is not None:
                self.sink(entry)
            else:
                _log.info("adk.plugin.metadata", **entry)
            return None

        return record


def _value_type(value: Any) -> str:
    if isinstance(value, Content):
        return "content"
    if isinstance(value, str):
        return "text"
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, Sequence):
        return "list"
    if value is None:
        return "none"
    return type(value).__name__.lower()[:32]


def _responses(item: Content) -> bool:
    return any(type(part).__name__ == "FunctionResponsePart" for part in item.parts)


def _groups(contents: list[Content]) -> list[list[int]]:
    """Positions grouped so a model turn with calls and the tool turn after it stay
    together."""
    groups: list[list[int]] = []
    for at, item in enumerate(contents):
        if item.role == "tool" and groups and contents[groups[-1][-1]].function_calls():
            groups[-1].append(at)
        else:
            groups.append([at])
    return groups


def _last_messages(groups: list[list[int]], limit: int) -> list[list[int]]:
    chosen: list[list[int]] = []
    count = 0
    for group in reversed(groups):
        if count + len(group) > limit:
            break
        chosen.append(group)
        count += len(group)
    return chosen


def _failure_summary(value: Any, max_chars: int = DEFAULT_ERROR_CHARS) -> dict[str, Any]:
    """The failure's structural tags, each a redacted identifier of at most its share
    of `max_chars`."""
    error = value.get("error") if isinstance(value, Mapping) else None
    if not isinstance(error, Mapping):
        return {"reason": "external_failure"}
    share = max_chars // len(_SUMMARY_KEYS)
    return {key: _tag(error[key], share) for key in _SUMMARY_KEYS if key in error} or {
        "reason": "external_failure"
    }


def _tag(item: Any, limit: int) -> Any:
    if isinstance(item, int) and not isinstance(item, bool) and abs(item) < 10**15:
        return item
    if not isinstance(item, str) or not item:
        return "external_failure"
    return _NOT_IDENTIFIER.sub("_", redact_text(item[: limit * 4]))[:limit]


def _descriptor(plugin: Plugin, config: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    return {"plugin": plugin, "config": config, **options}


def global_instruction(
    instruction: str, *, position: str = "prepend", **options: Any
) -> dict[str, Any]:
    return _descriptor(
        GlobalInstruction(), {"instruction": instruction, "position": position}, options
    )


def context_filter(
    *,
    max_messages: int | None = None,
    include_roles: list[str] | None = None,
    preserve_system: bool = True,
    preserve_latest_user: bool = True,
    **options: Any,
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "preserve_system": preserve_system,
        "preserve_latest_user": preserve_latest_user,
    }
    if max_messages is not None:
        config["max_messages"] = max_messages
    if include_roles is not None:
        config["include_roles"] = list(include_roles)
    return _descriptor(ContextFilter(), config, options)


def reflect_retry(
    *,
    max_attempts: int = 1,
    guidance: str = DEFAULT_GUIDANCE,
    max_error_chars: int = DEFAULT_ERROR_CHARS,
    **options: Any,
) -> dict[str, Any]:
    return _descriptor(
        ReflectRetry(),
        {"max_attempts": max_attempts, "guidance": guidance, "max_error_chars": max_error_chars},
        options,
    )


def metadata_logger(
    sink: Callable[[dict[str, Any]], None] | None = None, **options: Any
) -> dict[str, Any]:
    return _descriptor(MetadataLogger(sink), {}, options)
