"""Eval sets: loading v2 / v1 / bare lists, strict validation, secret pruning, round-trip."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from adk_actors import evaluation as ev
from adk_actors.evaluation.limits import MAX_CASES, MAX_TURNS_PER_CASE
from providers import AdkError

V2: dict[str, Any] = {
    "schema_version": 2,
    "id": "weather",
    "version": "2026-11-30",
    "name": "Weather",
    "description": "Tool use and answers",
    "metadata": {"owner": "qa"},
    "cases": [
        {
            "id": "tokyo",
            "metadata": {"tier": 1},
            "session_state": {"units": "metric"},
            "expected_final_response": "Sunny.",
            "expected_trajectory": [{"name": "get_weather", "args": {"city": "Tokyo"}}],
            "turns": [
                {
                    "id": "t1",
                    "input": "What is the weather in Tokyo?",
                    "expected_response": "Sunny.",
                    "expected_trajectory": [{"name": "get_weather", "args": {"city": "Tokyo"}}],
                    "metadata": {"note": "first"},
                },
                {"id": "t2", "input": "Thanks", "expected_trajectory": ["noop"]},
            ],
        },
        {"id": "plain", "turns": [{"id": "only", "input": "hi"}]},
    ],
}


def refused(data: Any) -> Any:
    with pytest.raises(AdkError) as caught:
        ev.load_eval_set(data)
    return caught.value.reason


def test_v2_set_loads_into_structs() -> None:
    loaded = ev.load_eval_set(V2)
    assert (loaded.schema_version, loaded.id, loaded.version) == (2, "weather", "2026-11-30")
    tokyo = loaded.cases[0]
    assert tokyo.session_state == {"units": "metric"}
    assert tokyo.expected_final_response == "Sunny."
    assert tokyo.expected_trajectory == (
        ev.ExpectedToolCall(name="get_weather", args={"city": "Tokyo"}),
    )
    assert [turn.id for turn in tokyo.turns] == ["t1", "t2"]
    assert tokyo.turns[1].expected_trajectory == (ev.ExpectedToolCall(name="noop"),)
    assert tokyo.turns[1].expected_trajectory[0].args is None  # a bare name: args not compared
    assert loaded.cases[1].turns[0].expected_response is None


@pytest.mark.parametrize(
    "data",
    [
        V2,
        {
            "schema_version": 1,
            "id": "s",
            "version": "1",
            "cases": [
                {"id": "c", "turns": [{"id": "a", "input": "x", "expected": "y"}, {"input": "z"}]}
            ],
        },
        [
            {
                "input": "Reply with exactly ERLANG",
                "expected": "ERLANG",
                "metadata": {"case": "smoke"},
            }
        ],
    ],
    ids=["v2", "v1", "bare-list"],
)
def test_encode_json_load_round_trips(data: Any) -> None:
    """Follows erlang_adk test/evaluation/adk_eval_set_test.erl:
    set_and_result_roundtrip_multiturn_trajectory_test."""
    loaded = ev.load_eval_set(data)
    encoded = ev.encode_eval_set(loaded)
    again = ev.load_eval_set(json.loads(json.dumps(encoded)))
    assert again == loaded
    assert ev.encode_eval_set(again) == encoded


def test_bare_list_is_the_spec_v1_example() -> None:
    """The spec's v1 examples/eval.json: one single-turn case per row."""
    rows: list[dict[str, Any]] = [
        {
            "input": "Reply with exactly ERLANG and nothing else.",
            "expected": "ERLANG",
            "metadata": {"case": "exact-output-smoke"},
        },
        {"input": "second", "expected": None},
    ]
    loaded = ev.load_eval_set(rows)
    assert loaded.schema_version == 1
    assert [case.id for case in loaded.cases] == [f"case-{i + 1}" for i in range(len(rows))]
    first = loaded.cases[0]
    assert first.turns[0].id == "turn-1"
    assert first.turns[0].expected_response == rows[0]["expected"]


def test_v1_set_keeps_the_legacy_expected_key() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_v2_test.erl: v1 sets remain readable."""
    loaded = ev.load_eval_set(
        {
            "schema_version": 1,
            "id": "s",
            "version": "1",
            "cases": [{"id": "c", "input": "ping", "expected": "pong"}],
        }
    )
    assert loaded.cases[0].turns[0].expected_response == "pong"
    assert ev.encode_eval_set(loaded)["cases"][0]["turns"][0]["expected"] == "pong"


def _with(path: list[Any], value: Any, *, delete: bool = False) -> dict[str, Any]:
    data = copy.deepcopy(V2)
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ("nope", "invalid_eval_set"),
        (_with(["schema_version"], 3), ("unsupported_eval_set_schema_version", 3)),
        (_with(["schema_version"], True), ("unsupported_eval_set_schema_version", "bool")),
        (_with(["extra"], 1), ("invalid_eval_set", ("unknown_keys", ["extra"]))),
        (_with(["id"], ""), "invalid_eval_set_id"),
        (_with(["version"], None, delete=True), "invalid_eval_set_version"),
        (_with(["version"], ""), "invalid_eval_set_version"),
        (_with(["cases"], {}), "invalid_eval_cases"),
        (_with(["cases", 1, "id"], "tokyo"), ("duplicate_eval_case_id", "tokyo")),
        (_with(["cases", 1, "id"], 7), ("invalid_eval_case_id", 1)),
        (_with(["cases", 1], "x"), ("invalid_eval_case", 1)),
        (_with(["cases", 1, "bogus"], 1), ("invalid_eval_case", 1, ("unknown_keys", ["bogus"]))),
        (_with(["cases", 1, "turns"], []), ("eval_case_has_no_turns", "plain")),
        (_with(["cases", 1, "turns"], "x"), ("invalid_eval_case_turns", "plain")),
        (_with(["cases", 1, "turns"], None, delete=True), ("invalid_eval_case_turns", "plain")),
        (_with(["cases", 0, "turns", 1, "id"], "t1"), ("duplicate_eval_turn_id", "tokyo", "t1")),
        (_with(["cases", 0, "turns", 1, "id"], ""), ("invalid_eval_turn_id", "tokyo", 1)),
        (
            _with(["cases", 0, "turns", 1, "input"], None, delete=True),
            ("missing_eval_turn_input", "tokyo", "t2"),
        ),
        (
            _with(["cases", 0, "turns", 1, "input"], {"text": "x"}),
            ("invalid_eval_turn", "tokyo", "t2"),
        ),
        (
            _with(["cases", 0, "turns", 0, "expected"], "v1 key in v2"),
            ("invalid_eval_turn", "tokyo", 0, ("unknown_keys", ["expected"])),
        ),
        (
            _with(["cases", 0, "expected_trajectory"], [{"name": "x", "when": 1}]),
            ("invalid_eval_field", "tokyo", "expected_trajectory", ("unknown_keys", ["when"])),
        ),
        (
            _with(["cases", 0, "expected_trajectory"], [{"name": "x", "args": [1]}]),
            ("invalid_eval_field", "tokyo", "expected_trajectory"),
        ),
        (
            _with(["cases", 0, "expected_final_response"], 5),
            ("invalid_eval_field", "tokyo", "expected_final_response"),
        ),
        (
            _with(["cases", 0, "session_state"], []),
            ("invalid_eval_field", "tokyo", "session_state"),
        ),
        (_with(["metadata"], "x"), ("invalid_eval_set_field", "metadata")),
        (_with(["name"], 1), ("invalid_eval_set_field", "name")),
    ],
)
def test_invalid_sets_are_refused_with_their_reason(data: Any, reason: Any) -> None:
    """The reference's validation reasons (erlang_adk src/evaluation/adk_eval_set.erl)."""
    assert refused(data) == reason


def test_v1_sets_refuse_v2_only_keys() -> None:
    data = {
        "schema_version": 1,
        "id": "s",
        "version": "1",
        "cases": [{"id": "c", "session_state": {}, "turns": [{"input": "x"}]}],
    }
    assert refused(data) == ("invalid_eval_case", 0, ("unknown_keys", ["session_state"]))


def test_case_and_turn_counts_are_bounded() -> None:
    too_many_cases = [{"input": str(i)} for i in range(MAX_CASES + 1)]
    assert refused(too_many_cases) == "eval_set_case_limit_exceeded"
    turns = [{"id": f"t{i}", "input": "x"} for i in range(MAX_TURNS_PER_CASE + 1)]
    data = {"id": "s", "version": "1", "cases": [{"id": "c", "turns": turns}]}
    assert refused(data) == ("eval_case_turn_limit_exceeded", "c")


def test_depth_and_size_bounds_come_first() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_v2_test.erl bounded_set_validation_test."""
    deep: Any = "leaf"
    for _ in range(80):
        deep = {"x": deep}
    assert refused(_with(["metadata"], deep)) == ("invalid_eval_set", "eval_data_depth_exceeded")
    huge = "x" * (1_048_576 + 1)
    assert refused(_with(["description"], huge)) == ("invalid_eval_set", "eval_string_too_large")
    assert refused(_with(["metadata"], {"f": float("nan")})) == (
        "invalid_eval_set",
        "eval_data_not_json",
    )


def test_secret_keys_are_pruned_everywhere() -> None:
    data = copy.deepcopy(V2)
    data["metadata"] = {"api_key": "sk-1", "owner": "qa", "nested": {"password": "p"}}
    data["cases"][0]["session_state"] = {"token": "t", "units": "metric"}
    data["cases"][0]["expected_trajectory"] = [
        {"name": "login", "args": {"user": "u", "secret": "s"}}
    ]
    data["cases"][0]["turns"][0]["metadata"] = {"authorization": "Bearer x", "k": 1}
    loaded = ev.load_eval_set(data)
    assert loaded.metadata == {"owner": "qa", "nested": {}}
    assert loaded.cases[0].session_state == {"units": "metric"}
    assert loaded.cases[0].expected_trajectory == (
        ev.ExpectedToolCall(name="login", args={"user": "u"}),
    )
    assert loaded.cases[0].turns[0].metadata == {"k": 1}
    assert "sk-1" not in json.dumps(ev.encode_eval_set(loaded))


def test_encode_refuses_what_is_not_a_set() -> None:
    with pytest.raises(AdkError) as caught:
        ev.encode_eval_set({"id": "x"})  # type: ignore[arg-type]
    assert caught.value.reason == "invalid_eval_set"
