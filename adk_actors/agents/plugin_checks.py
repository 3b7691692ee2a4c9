"""What a global plugin may put in place of a phase's value, checked again.

Each check is ``check(tag, value)`` (`tag` ``"amend"`` or ``"return"``) and returns
the value the turn goes on with, or raises `AdkError` (the pipeline then records an
``invalid_amendment`` under the plugin's failure policy): an amended prompt is
validated content, a returned model answer is text or content, amended tool
arguments pass the tool's schema and the runtime policy again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from adk_actors.agents.turn_outcome import as_answer
from adk_actors.tools.catalog import ToolCatalog
from providers import content as content_model
from providers.content import Content, FunctionCallPart
from providers.errors import AdkError

MAX_REASON_CHARS = 200


def message(tag: str, value: Any) -> Any:
    """A user message (amend) or the run's answer (return)."""
    if tag == "return":
        return answer(tag, value)
    return user_message(tag, value)


def user_message(tag: str, value: Any) -> Content:
    """The user's message, amended or returned early."""
    if isinstance(value, str):
        return content_model.from_text(value)
    return content_model.validate(value)


def answer(tag: str, value: Any) -> str | Content:
    """A model's or an agent's answer: text, `Content`, or JSON made text."""
    if isinstance(value, Content):
        return content_model.validate(value)
    return as_answer(value)


def model_request(tag: str, value: Any) -> Any:
    """The contents sent to the model (amend), or the model's answer (return)."""
    if tag == "return":
        return answer(tag, value)
    if not isinstance(value, list | tuple) or not value:
        raise AdkError("invalid_amendment", "a model request is a non-empty list of Content")
    return [content_model.validate(item) for item in value]


def tool_call(
    call: FunctionCallPart,
    catalog: ToolCatalog,
    gate: Callable[[FunctionCallPart], Any] | None,
) -> Callable[[str, Any], Any]:
    """The check for `call`'s phase: an amendment is ``{"args": {...}}`` (the name and
    id cannot change), checked and passed on as `call_value`; a return is the tool's
    result."""

    def check(tag: str, value: Any) -> Any:
        if tag == "return":
            return value if isinstance(value, dict) else {"result": value}
        if not isinstance(value, Mapping) or not isinstance(value.get("args"), dict):
            raise AdkError("invalid_amendment", "an amended call is {'args': {...}}")
        if value.get("name", call.name) != call.name or value.get("id", call.id) != call.id:
            raise AdkError("invalid_amendment", "a plugin cannot rename a call")
        amended = FunctionCallPart(call.name, dict(value["args"]), call.id, call.thought_signature)
        if catalog.check_arguments(call.name, amended.args) is not None:
            raise AdkError("invalid_amendment", "the amended arguments fail the tool's schema")
        if gate is not None and gate(amended) is not None:
            raise AdkError("invalid_amendment", "the runtime policy refuses the amended call")
        return call_value(amended)

    return check


def call_value(call: FunctionCallPart) -> dict[str, Any]:
    """What a tool hook sees of a call."""
    return {"name": call.name, "id": call.id, "args": copy.deepcopy(dict(call.args))}


def reason_value(reason: Any) -> dict[str, Any]:
    """A failure as an error hook sees it: its structural tag only."""
    head = reason[0] if isinstance(reason, tuple) and reason else reason
    return {"reason": str(head)[:MAX_REASON_CHARS]}
