"""google-adk eval sets read as ours: the fixtures were written by google-adk's own
pydantic models (``benchmarks/_adk_peer_app/weather_evalset.py``, snake_case and
camelCase aliases); converted, checked, and evaluated end to end on a scripted agent."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import adk_actors as adk
from adk_actors import evaluation as ev
from adk_actors.evaluation.google_adk import from_google_adk, is_google_adk_evalset
from providers.errors import AdkError
from providers.scripted import ScriptedProvider

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def test_evalset_file_converts_to_a_v2_set() -> None:
    data = fixture("weather.evalset.json")
    assert is_google_adk_evalset(data)
    converted = from_google_adk(data, version="2026-12-01")
    eval_set = ev.load_eval_set(converted)
    assert (eval_set.id, eval_set.version, eval_set.name) == (
        "weather",
        "2026-12-01",
        "Weather questions",
    )
    assert eval_set.metadata == {"source": "google-adk", "eval_set_id": "weather"}
    tokyo, paris = eval_set.cases
    assert (tokyo.id, paris.id) == ("weather-tokyo-0", "weather-paris-1")
    assert tokyo.session_state == {"units": "metric"}
    hello, weather = tokyo.turns
    assert (hello.id, hello.input, hello.expected_response) == (
        "inv-0-hello",
        "Hello",
        "Hello! Ask me about the weather.",
    )
    assert hello.expected_trajectory == ()  # google-adk said: no tool here
    assert weather.expected_response == "sunny"
    assert weather.expected_trajectory == (
        ev.ExpectedToolCall(name="get_weather", args={"city": "Tokyo"}),
    )
    assert [turn.input for turn in paris.turns] == ["What is the weather in Paris?"]


def test_camel_case_aliases_convert_the_same() -> None:
    snake = from_google_adk(fixture("weather.evalset.json"))
    camel_data = fixture("weather_camel.evalset.json")
    assert "evalId" in camel_data["eval_cases"][0]  # the fixture really uses the aliases
    assert from_google_adk(camel_data) == snake


def _weather_model(history: Any, tools: Any) -> dict[str, Any]:
    """The agent under test: greets, or asks for the weather tool, then answers."""
    last = history[-1]
    if last.role == "tool":
        return {"text": "sunny"}
    text = last.text_value()
    if text == "Hello":
        return {"text": "Hello! Ask me about the weather."}
    city = re.search(r"weather in (\w+)", text)
    assert city is not None
    return {"tool_calls": [{"name": "get_weather", "args": {"city": city.group(1)}}]}


def test_converted_set_evaluates_end_to_end() -> None:
    @adk.tool
    def get_weather(city: str) -> dict[str, Any]:
        """Get the weather for a city."""
        return {"city": city, "forecast": "sunny"}

    eval_set = ev.load_eval_set(from_google_adk(fixture("weather.evalset.json")))
    adapter = ev.AgentAdapter(
        "Weather", {"provider": ScriptedProvider(fn=_weather_model)}, [get_weather]
    )
    metrics = ev.load_metrics(
        [
            {"id": "response", "criterion": "exact_response", "threshold": 1.0},
            {"id": "tools", "criterion": "trajectory_exact", "threshold": 1.0},
        ]
    )
    result = ev.run(adapter, eval_set, metrics)
    assert result.passed, ev.encode_result(result)
    assert [metric.average_score for metric in result.metrics] == [1.0, 1.0]

    wrong = ev.AgentAdapter(
        "Wrong",
        {"provider": ScriptedProvider(fn=lambda history, tools: {"text": "no idea"})},
        [get_weather],
    )
    failed = ev.run(wrong, eval_set, metrics)
    assert not failed.passed and failed.pass_rate == 0.0


def test_test_json_rows_become_one_conversation() -> None:
    rows = [
        {"query": "Hi", "expected_tool_use": [], "reference": "Hello!"},
        {
            "query": "Roll a 17 sided die",
            "expected_tool_use": [{"tool_name": "roll_die", "tool_input": {"sides": 17}}],
            "expected_intermediate_agent_responses": [],
            "reference": "I rolled a 4.",
        },
    ]
    assert is_google_adk_evalset(rows)
    eval_set = ev.load_eval_set(from_google_adk(rows, set_id="dice"))
    assert eval_set.id == "dice" and eval_set.metadata["format"] == "test.json"
    [case] = eval_set.cases
    assert [turn.input for turn in case.turns] == ["Hi", "Roll a 17 sided die"]
    assert case.turns[1].expected_trajectory == (
        ev.ExpectedToolCall(name="roll_die", args={"sides": 17}),
    )
    assert case.turns[1].expected_response == "I rolled a 4."


def test_invocation_events_tool_calls_and_secret_state() -> None:
    data = {
        "evalSetId": "events",
        "evalCases": [
            {
                "evalId": "case",
                "conversation": [
                    {
                        "userContent": {"parts": [{"text": "first"}, {"text": "second"}]},
                        "finalResponse": {
                            "parts": [{"text": "thinking", "thought": True}, {"text": "done"}]
                        },
                        "intermediateData": {
                            "invocationEvents": [
                                {
                                    "author": "agent",
                                    "content": {
                                        "parts": [
                                            {"functionCall": {"name": "lookup", "args": {"q": 1}}}
                                        ]
                                    },
                                }
                            ]
                        },
                    }
                ],
                "sessionInput": {
                    "appName": "app",
                    "userId": "u",
                    "state": {"api_key": "AIzaSy-secret", "plan": "pro"},
                },
            }
        ],
    }
    eval_set = ev.load_eval_set(from_google_adk(data))
    [case] = eval_set.cases
    [turn] = case.turns
    assert (turn.id, turn.input, turn.expected_response) == ("turn-1", "first\nsecond", "done")
    assert turn.expected_trajectory == (ev.ExpectedToolCall(name="lookup", args={"q": 1}),)
    assert case.session_state == {"plan": "pro"}  # the secret-named key is pruned
    assert "AIzaSy-secret" not in json.dumps(ev.encode_eval_set(eval_set))


def test_what_is_not_a_google_adk_set_is_refused() -> None:
    v2 = {"schema_version": 2, "id": "x", "version": "1", "cases": []}
    assert not is_google_adk_evalset(v2)
    assert not is_google_adk_evalset([{"input": "hi", "expected": "hello"}])
    assert not is_google_adk_evalset([])
    base = fixture("weather.evalset.json")
    scenario = {
        **base,
        "eval_cases": [{"eval_id": "sim", "conversation_scenario": {"starting_prompt": "hi"}}],
    }
    no_text = {
        **base,
        "eval_cases": [
            {"eval_id": "img", "conversation": [{"user_content": {"parts": [{"inline_data": {}}]}}]}
        ],
    }
    bad_tool = {
        **base,
        "eval_cases": [
            {
                "eval_id": "tool",
                "conversation": [
                    {
                        "user_content": {"parts": [{"text": "hi"}]},
                        "intermediate_data": {"tool_uses": [{"args": {}}]},
                    }
                ],
            }
        ],
    }
    cases = [
        (v2, "invalid_google_adk_evalset"),
        ({**base, "eval_set_id": ""}, "invalid_google_adk_evalset"),
        (scenario, "google_adk_conversation_scenario_unsupported"),
        (no_text, "invalid_google_adk_evalset"),
        (bad_tool, "invalid_google_adk_evalset"),
        ({**base, "eval_cases": [{"eval_id": "x" * 300, "conversation": []}]}, None),
    ]
    for data, reason in cases:
        with pytest.raises(AdkError) as refused:
            from_google_adk(data)
        shown = refused.value.reason
        if reason is not None:
            assert (shown[0] if isinstance(shown, tuple) else shown) == reason
    deep: Any = {"eval_set_id": "deep", "eval_cases": []}
    for _ in range(100):
        deep = {"eval_set_id": "d", "eval_cases": [deep]}
    with pytest.raises(AdkError) as too_deep:
        from_google_adk(deep)
    assert too_deep.value.reason == ("invalid_google_adk_evalset", "eval_data_depth_exceeded")
