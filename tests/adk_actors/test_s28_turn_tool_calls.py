"""Issue 20 §4 (less CPU per turn): a serial sync tool call runs in one pool task of
its own, started by the turn (no coroutine task around it). What it raises or how its
task ends still reaches the model as the call's failure; the turn goes on."""

from __future__ import annotations

import asyncio
from typing import Any

import adk_actors as adk

FAILED = {
    "success": False,
    "error": {"component": "tool", "operation": "cancels", "reason": "tool_failed"},
}


class Cancels(adk.Tool):
    """A sync tool that raises `asyncio.CancelledError` (the catalog lets it through)."""

    name = "cancels"
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}

    def execute(self, args: dict[str, Any], ctx: adk.ToolContext) -> Any:
        raise asyncio.CancelledError


def _model(history: Any, tools: Any) -> dict[str, Any]:
    if history[-1].role == "tool":
        return {"text": "went on"}
    return {"tool_calls": [{"name": "cancels", "args": {}}]}


def test_a_serial_sync_tool_raising_cancelled_fails_the_call_not_the_turn():
    """Follows issue 20 §4: what the tool raised comes back as a value from its pool
    task; raised in the turn, a `CancelledError` would end the turn instead."""
    model = adk.ScriptedProvider(fn=_model, inline=True, record_histories=2)
    agent = adk.spawn_agent("S28Cancels", {"provider": model}, tools=[Cancels()])
    try:
        assert adk.prompt(agent, "go", timeout=30) == "went on"
        (part,) = model.histories[1][-1].parts
        assert dict(part.response) == FAILED
    finally:
        adk.stop_agent(agent)


class Confirmed(adk.Tool):
    """A tool whose class overrides `confirmation`: the check still runs every call."""

    name = "confirmed"
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}
    require_confirmation = False

    def confirmation(self, args: dict[str, Any], ctx: adk.ToolContext) -> Any:
        return True, "ask first"

    def execute(self, args: dict[str, Any], ctx: adk.ToolContext) -> Any:
        return {"ran": True}


def test_an_overridden_confirmation_is_asked_even_with_require_confirmation_false():
    """Follows issue 20 §4: the approval check skips only `Tool.confirmation`'s own
    answer for ``require_confirmation`` None/False, never a class's override."""

    def model_fn(history: Any, tools: Any) -> dict[str, Any]:
        if history[-1].role == "tool":
            return {"text": "done"}
        return {"tool_calls": [{"name": "confirmed", "args": {}}]}

    model = adk.ScriptedProvider(fn=model_fn, inline=True, record_histories=2)
    agent = adk.spawn_agent("S28Confirmed", {"provider": model}, tools=[Confirmed()])
    try:
        assert adk.prompt(agent, "go", timeout=30) == "done"
        (part,) = model.histories[1][-1].parts
        assert part.response["error"]["kind"] == "tool_confirmation_requires_runner"
    finally:
        adk.stop_agent(agent)
