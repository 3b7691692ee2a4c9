"""Tools: derived schemas, catalogs, argument validation, sanitized failures."""

from __future__ import annotations

from typing import Literal

import pytest

import adk_actors as adk
from adk_actors.tools import ToolCatalog, ToolContext
from providers import content


@adk.tool
def get_weather(
    city: str,
    days: int = 1,
    units: Literal["metric", "imperial"] = "metric",
    ctx: ToolContext = None,
) -> dict:
    """Get the weather for a city.

    Args:
        city: the city name
        days: how many days ahead
    """
    return {"city": city, "days": days, "units": units, "session": ctx.session_id}


class Publish(adk.Tool):
    name = "publish_release"
    description = "Publish a release."
    parameters = {
        "type": "object",
        "properties": {"version": {"type": "string"}},
        "required": ["version"],
    }
    require_confirmation = True

    def execute(self, args, ctx):
        return {"published": args["version"]}


def test_schema_from_type_hints_and_docstring():
    declaration = get_weather.schema()
    assert (
        declaration["name"] == "get_weather"
        and declaration["description"] == "Get the weather for a city."
    )
    parameters = declaration["parameters"]
    assert parameters["required"] == ["city"] and parameters["additionalProperties"] is False
    assert parameters["properties"]["city"] == {"type": "string", "description": "the city name"}
    assert sorted(parameters["properties"]["units"]["enum"]) == ["imperial", "metric"]
    assert "ctx" not in parameters["properties"]  # the context parameter is hidden from the model
    assert get_weather("Paris", ctx=ToolContext()) == {
        "city": "Paris",
        "days": 1,
        "units": "metric",
        "session": None,
    }


def test_catalog_rejects_bad_schemas_and_duplicates_naming_both():
    class Broken(adk.Tool):
        name = "broken"
        parameters = {"type": "object", "properties": {"x": {"type": "no-such-type"}}}

    with pytest.raises(adk.AdkError) as info:
        ToolCatalog([Broken()])
    assert info.value.reason == ("invalid_tool_schema", "broken")

    @adk.tool(name="get_weather")
    def other(city: str) -> str:
        return city

    with pytest.raises(adk.AdkError) as info:
        ToolCatalog([get_weather, other])
    reason = info.value.reason
    assert reason[0] == "duplicate_tool_name" and reason[1] == "get_weather" and len(reason) == 4


@pytest.mark.parametrize(
    ("args", "kind", "path"),
    [
        ({}, "required_property", ["city"]),
        ({"city": 42}, "expected_type", ["city"]),
        ({"city": "Paris", "secret": "AIza-should-not-leak"}, "additional_property", []),
        ({"city": "Paris", "units": "kelvin"}, "enum_mismatch", ["units"]),
    ],
)
def test_arguments_are_validated_structurally_without_values(args, kind, path):
    catalog = ToolCatalog([get_weather])
    response = catalog.call(content.function_call("get_weather", args, id="c1"), ToolContext())
    error = response.response["error"]
    assert response.response["success"] is False and error["type"] == "invalid_tool_arguments"
    assert error["validation"]["kind"] == kind and error["validation"]["path"] == path
    flat = str(response.response)
    assert "AIza" not in flat and "kelvin" not in flat and "42" not in flat


def test_tool_failures_become_sanitized_responses():
    @adk.tool
    def flaky(x: int) -> int:
        raise RuntimeError("upstream said: api_key=AIzaSECRET is invalid")

    response = ToolCatalog([flaky]).call(
        content.function_call("flaky", {"x": 1}, id="c"), ToolContext()
    )
    assert response.response == {
        "success": False,
        "error": {
            "component": "tool",
            "operation": "flaky",
            "class": "RuntimeError",
            "reason": "tool_failed",
        },
    }


def test_confirmation_fails_closed_outside_a_runner():
    response = ToolCatalog([Publish()]).call(
        content.function_call("publish_release", {"version": "1.0"}, id="c1"), ToolContext()
    )
    assert response.id == "c1" and response.response == {
        "success": False,
        "error": {"kind": "tool_confirmation_requires_runner"},
    }


def test_a_turn_continues_after_invalid_arguments_and_tool_errors():
    calls = []

    @adk.tool
    def record(note: str) -> str:
        calls.append(note)
        raise ValueError("nope")

    model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "record", "args": {"note": 5}}]},  # invalid: never runs
            {"tool_calls": [{"name": "record", "args": {"note": "x"}}]},  # raises
            {"text": "done"},
        ]
    )
    agent = adk.spawn_agent("Recorder", {"provider": model}, tools=[record])
    assert adk.prompt(agent, "go") == "done"
    assert calls == ["x"]
    seen = model.histories[1][-1].parts[0].response
    assert seen["error"]["type"] == "invalid_tool_arguments"
    assert model.histories[2][-1].parts[0].response["error"]["reason"] == "tool_failed"


def test_tool_context_carries_the_scope():
    model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}, "id": "call-9"}]},
            {"text": "ok"},
        ]
    )
    agent = adk.spawn_agent("Scoped", {"provider": model}, tools=[get_weather])
    adk.invoke(agent, "weather", scope=("app", "u1", "s1"))
    response = model.histories[1][-1].parts[0]
    assert response.id == "call-9" and response.response["session"] == "s1"
