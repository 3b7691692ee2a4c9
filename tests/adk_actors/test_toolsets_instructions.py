"""Toolset snapshots and instruction templates."""

from __future__ import annotations

import pytest

import adk_actors as adk


class Backend(adk.Toolset):
    """A mutable backend, like an MCP server whose tools can change."""

    name = "weather-backend"

    def __init__(self):
        self.tool_name = "forecast"

    def fetch(self):
        outer = self

        class Forecast(adk.Tool):
            name = outer.tool_name
            description = "Forecast."
            parameters = {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            }

            def execute(self, args, ctx):
                return {"forecast": f"sunny in {args['city']}"}

        return [Forecast()]


def reason(fn):
    with pytest.raises(adk.AdkError) as info:
        fn()
    return info.value.reason


def test_a_renamed_backend_tool_fails_closed_until_refresh():
    backend = Backend()
    snapshot = backend.snapshot()
    script = [{"tool_calls": [{"name": "forecast", "args": {"city": "Oslo"}}]}, "first"]
    model = adk.ScriptedProvider(
        [*script, {"tool_calls": [{"name": "forecast", "args": {"city": "Oslo"}}]}, "second"]
    )
    agent = adk.spawn_agent("Snap", {"provider": model}, tools=[snapshot])
    assert adk.prompt(agent, "weather") == "first"
    assert model.histories[1][-1].parts[0].response == {"forecast": "sunny in Oslo"}
    backend.tool_name = "forecast_v2"  # the backend renames its tool
    assert adk.prompt(agent, "weather again") == "second"
    assert model.histories[3][-1].parts[0].response == {
        "success": False,
        "error": {"kind": "tool_catalog_changed", "operation": "forecast"},
    }
    refreshed = snapshot.refresh()
    assert [tool.name for tool in refreshed.tools] == ["forecast_v2"]


def test_toolset_names_are_checked_like_any_tool():
    @adk.tool
    def forecast(city: str) -> str:
        return city

    error = reason(
        lambda: adk.spawn_agent(
            "Dup", {"provider": adk.ScriptedProvider(["x"])}, tools=[Backend(), forecast]
        )
    )
    assert error[:2] == ("duplicate_tool_name", "forecast") and "toolset weather-backend" in error


def test_instruction_templates_over_scoped_state():
    seen = []
    model = adk.ScriptedProvider(fn=lambda history, tools: {"text": "ok"})
    original_generate = model.agenerate  # turns call the model as a coroutine

    async def spy(config, history, tools):
        seen.append(config.get("instructions"))
        return await original_generate(config, history, tools)

    model.agenerate = spy
    agent = adk.spawn_agent(
        "Greeter", {"provider": model, "instructions": "Greet {user:name}. Plan: {app:plan?}."}
    )
    adk.invoke(agent, "hi", scope=("app", "u1", "s1"), state={"user:name": "Ada"})
    assert seen == ["Greet Ada. Plan: ."]
    assert reason(lambda: adk.invoke(agent, "hi", scope=("app", "u1", "s1"))) == (
        "missing_instruction_key",
        "user:name",
    )
    assert reason(
        lambda: adk.spawn_agent("Leaky", {"provider": model, "instructions": "Use {user:api_key}"})
    ) == (
        "secret_instruction_key",
        "user:api_key",
    )


def test_dynamic_instruction_provider_gets_a_read_only_scope():
    captured = {}

    def instructions(scope):
        captured["scope"] = scope
        return f"You serve {scope['user_id']} ({len(scope['state'])} state keys)."

    seen = []
    model = adk.ScriptedProvider(fn=lambda history, tools: {"text": "ok"})
    original = model.agenerate  # turns call the model as a coroutine

    async def spy(config, history, tools):
        seen.append(config["instructions"])
        return await original(config, history, tools)

    model.agenerate = spy
    agent = adk.spawn_agent("Dynamic", {"provider": model, "instructions": instructions})
    adk.invoke(agent, "hi", scope=("app", "u7", "s"), state={"k": 1})
    assert seen == ["You serve u7 (1 state keys)."]
    with pytest.raises(TypeError):
        captured["scope"]["user_id"] = "someone else"  # read-only

    def broken(scope):
        raise RuntimeError("bug")

    failing = adk.spawn_agent(
        "Broken", {"provider": adk.ScriptedProvider(["x"]), "instructions": broken}
    )
    assert reason(lambda: adk.prompt(failing, "hi")) == "instruction_provider_failed"
