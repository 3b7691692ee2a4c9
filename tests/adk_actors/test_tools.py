"""Tools: derived schemas, catalogs, argument validation, sanitized failures."""

from __future__ import annotations

from typing import Literal

import pytest

import adk_actors as adk
from adk_actors.agents.api import agent_spec
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
        ],
        record_histories=10,
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
        ],
        record_histories=10,
    )
    agent = adk.spawn_agent("Scoped", {"provider": model}, tools=[get_weather])
    adk.invoke(agent, "weather", scope=("app", "u1", "s1"))
    response = model.histories[1][-1].parts[0]
    assert response.id == "call-9" and response.response["session"] == "s1"


# -- shared validators (issue 20: spawning compiles nothing already compiled) ------------------


def _weather_tool():
    """A tool object per call, as a factory that spawns agents writes it."""

    @adk.tool
    def get_weather(city: str, days: int = 1, ctx: ToolContext = None) -> dict:
        """Get the weather for a city."""
        return {"city": city, "days": days}

    return get_weather


def test_agents_with_one_tool_object_share_one_compiled_validator():
    config = {"provider": "scripted", "script": [{"text": "hi"}]}
    first = agent_spec(adk.spawn_agent("SharedA", config, tools=[get_weather]))
    second = agent_spec(adk.spawn_agent("SharedB", config, tools=[get_weather]))
    assert first.catalog is not second.catalog
    validator = first.catalog.validator("get_weather")
    assert validator is not None and second.catalog.validator("get_weather") is validator


def test_a_tool_object_per_agent_shares_the_validator_but_not_the_schema():
    config = {"provider": "scripted", "script": [{"text": "hi"}]}
    one, two = _weather_tool(), _weather_tool()
    assert one is not two and one.schema() == two.schema()
    assert one.parameters is not two.parameters  # each tool owns its schema, deep
    assert one.parameters["properties"]["city"] is not two.parameters["properties"]["city"]
    first = agent_spec(adk.spawn_agent("OwnA", config, tools=[one]))
    second = agent_spec(adk.spawn_agent("OwnB", config, tools=[two]))
    assert first.catalog.validator("get_weather") is second.catalog.validator("get_weather")


@pytest.mark.parametrize(
    ("args", "validation"),
    [
        ({}, {"kind": "required_property", "path": ["city"], "constraint": "required"}),
        ({"city": 42}, {"kind": "expected_type", "path": ["city"], "constraint": "type"}),
        (
            {"city": "Oslo", "secret": "x"},
            {"kind": "additional_property", "path": [], "constraint": "additionalProperties"},
        ),
        (
            {"city": "Oslo", "days": "2"},
            {"kind": "expected_type", "path": ["days"], "constraint": "type"},
        ),
        (
            {"city": "Oslo", "days": float("nan")},
            {"kind": "not_json", "path": [], "constraint": "json"},
        ),
    ],
)
def test_a_shared_validator_reports_the_same_errors(args, validation):
    expected = {
        "success": False,
        "error": {"type": "invalid_tool_arguments", "validation": validation},
    }
    catalogs = [ToolCatalog([_weather_tool()]) for _ in range(3)]
    assert len({id(catalog.validator("get_weather")) for catalog in catalogs}) == 1
    for catalog in catalogs:
        assert catalog.check_arguments("get_weather", args) == expected
        assert catalog.check_arguments("get_weather", {"city": "Oslo", "days": 2}) is None


def test_only_plain_json_schemas_are_shared_and_refusals_are_never_cached():
    def explicit(name, parameters):
        tool = adk.Tool()
        tool.name, tool.parameters = name, parameters
        return tool

    plain = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    reordered = {"required": ["a"], "properties": {"a": {"type": "string"}}, "type": "object"}
    with_tuple = {**plain, "required": ("a",)}  # not JSON as it stands: compiled afresh
    tools = [("p", plain), ("q", dict(plain)), ("r", reordered), ("t", with_tuple)]
    catalog = ToolCatalog([explicit(*tool) for tool in [*tools, ("u", dict(with_tuple))]])
    assert catalog.validator("p") is catalog.validator("q")
    assert catalog.validator("r") is not catalog.validator("p")  # key order is kept
    assert catalog.validator("t") is not catalog.validator("u")
    refusal = {"kind": "required_property", "path": ["a"], "constraint": "required"}
    for name in "pqrtu":
        response = catalog.check_arguments(name, {})
        assert response is not None and response["error"]["validation"] == refusal
    broken = {"type": "object", "properties": {"x": {"type": "no-such-type"}}}
    remote = {"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}}
    for _ in range(2):  # refused again: a refusal is never cached
        with pytest.raises(adk.AdkError) as info:
            ToolCatalog([explicit("broken", broken)])
        assert info.value.reason == ("invalid_tool_schema", "broken")
        with pytest.raises(adk.AdkError) as info:
            ToolCatalog([explicit("remote", remote)])
        assert info.value.reason == ("invalid_schema", "remote_ref", "remote")
