"""The default adapter: a real agent (scripted model), Runner and session per sample,
torn down after; trajectories from the run's events; agent config files."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import adk_actors as adk
from adk_actors import evaluation as ev
from adk_actors.agents import list_agents
from adk_actors.app import AGENT_SUPERVISOR
from examples.agent_tools import PublishRelease
from providers import AdkError, Content, ScriptedProvider
from supervision import DynamicSupervisor

ROOT = Path(__file__).resolve().parents[3]
seen_state: list[dict[str, Any]] = []


@adk.tool
def get_weather(city: str, ctx: adk.ToolContext | None = None) -> dict[str, Any]:
    """Get the weather for a city."""
    assert ctx is not None
    seen_state.append(dict(ctx.state))
    return {"city": city, "forecast": "sunny"}


def baseline() -> tuple[list[str], int]:
    return list_agents(), DynamicSupervisor.count_children(AGENT_SUPERVISOR)["active"]


def weather_set(**case: Any) -> ev.EvalSet:
    return ev.load_eval_set(
        {
            "schema_version": 2,
            "id": "weather",
            "version": "1",
            "cases": [
                {
                    "id": "tokyo",
                    "expected_trajectory": [{"name": "get_weather", "args": {"city": "Tokyo"}}],
                    "turns": [
                        {
                            "id": "t1",
                            "input": "Weather in Tokyo?",
                            "expected_response": "Sunny in Tokyo.",
                        }
                    ],
                    **case,
                }
            ],
        }
    )


def weather_agent() -> ev.AgentAdapter:
    script = [
        {"tool_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]},
        "Sunny in Tokyo.",
    ]
    return ev.AgentAdapter("Weather", {"provider": "scripted", "script": script}, [get_weather])


METRICS = ev.load_metrics(
    [
        {"id": "answer", "criterion": "exact_response"},
        {"id": "tools", "criterion": "trajectory_exact", "config": {"args": "exact"}},
    ]
)


def test_an_agent_is_evaluated_on_answer_and_trajectory_and_torn_down() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_agent_adapter_test.erl:
    successful_agent_turn_is_isolated_and_cleaned_up (a fresh agent per sample, tool
    trajectory captured, nothing left running after the evaluation)."""
    before = baseline()
    seen_state.clear()
    result = ev.run(
        weather_agent(),
        weather_set(session_state={"units": "metric", "api_key": "sk"}),
        METRICS,
        ev.EvalOptions(sample_count=3, sample_concurrency=3),
    )
    assert result.passed, ev.encode_result(result)
    sample = result.cases[0].samples[0]
    assert [(s.kind, s.tool, s.turn_id, s.args) for s in sample.trajectory] == [
        ("tool_call", "get_weather", "t1", None),
        ("tool_response", "get_weather", "t1", None),
    ]
    assert sample.trajectory[0].call_id == sample.trajectory[1].call_id
    assert sample.turns[0].actual == "Sunny in Tokyo."
    assert seen_state == [{"units": "metric"}] * 3  # each sample's own seeded session
    assert baseline() == before  # every sample's agent stopped


def test_tool_content_is_captured_only_when_asked() -> None:
    result = ev.run(
        weather_agent(),
        weather_set(),
        METRICS,
        ev.EvalOptions(capture_tool_content=True, capture_events=True),
    )
    call, response = result.cases[0].samples[0].trajectory
    assert call.args == {"city": "Tokyo"}
    assert response.response == {"city": "Tokyo", "forecast": "sunny"}
    events = result.cases[0].samples[0].events
    assert events and all(isinstance(event, dict) for event in events)
    assert json.loads(json.dumps(ev.encode_result(result)))["passed"] is True


def count_user_turns(history: Sequence[Content], tools: Sequence[Any]) -> Any:
    users = sum(1 for content in history if content.role == "user")
    return f"user turns: {users}"


def test_samples_never_share_conversation_state() -> None:
    """Every sample starts a new session, whatever ran before or alongside it (the
    spec's fresh-runtime isolation)."""
    before = baseline()
    eval_set = ev.load_eval_set(
        {
            "id": "iso",
            "version": "1",
            "cases": [
                {
                    "id": f"c{i}",
                    "turns": [
                        {"id": "a", "input": "one", "expected_response": "user turns: 1"},
                        {"id": "b", "input": "two", "expected_response": "user turns: 2"},
                    ],
                }
                for i in range(3)
            ],
        }
    )
    adapter = ev.AgentAdapter("Counter", {"provider": ScriptedProvider(fn=count_user_turns)})
    result = ev.run(
        adapter,
        eval_set,
        ev.default_metrics(),
        ev.EvalOptions(sample_count=3, concurrency=2, sample_concurrency=2),
    )
    assert result.passed, [t.actual for c in result.cases for s in c.samples for t in s.turns]
    assert result.metrics[0].evaluated_count == 9
    assert baseline() == before


release = threading.Event()


@adk.tool
def stall() -> str:
    """Stall until released."""
    release.wait(10)
    return "late"


def test_a_timed_out_sample_stops_its_agent() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_agent_adapter_test.erl:
    owner_death_cleans_up_an_active_turn (a timed-out sample cannot orphan its agent)."""
    before = baseline()
    release.clear()
    adapter = ev.AgentAdapter(
        "Staller",
        {
            "provider": "scripted",
            "script": [{"tool_calls": [{"name": "stall", "args": {}}]}, "never"],
        },
        [stall],
    )
    eval_set = ev.load_eval_set(
        {
            "id": "slow",
            "version": "1",
            "cases": [
                {"id": "c", "turns": [{"id": "t", "input": "go", "expected_response": "never"}]}
            ],
        }
    )
    try:
        result = ev.run(adapter, eval_set, ev.default_metrics(), ev.EvalOptions(case_timeout=0.3))
        sample = result.cases[0].samples[0]
        assert (sample.status, sample.error) == ("error", "timeout")
        assert result.cases[0].status == "error" and result.passed is False
        assert baseline() == before  # stopped although its tool still hangs
    finally:
        release.set()


def test_a_paused_run_is_a_sample_error() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_agent_adapter_test.erl:
    paused_agent_turn_is_rejected."""
    before = baseline()
    script = [{"tool_calls": [{"name": "publish_release", "args": {"version": "1.0.0"}}]}, "done"]
    adapter = ev.AgentAdapter(
        "Publisher", {"provider": "scripted", "script": script}, [PublishRelease()]
    )
    result = ev.run(adapter, weather_set(), METRICS)
    sample = result.cases[0].samples[0]
    assert (sample.status, sample.error) == ("error", "evaluation_paused")
    assert baseline() == before


def test_a_failing_model_is_a_sample_error_and_still_torn_down() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_agent_adapter_test.erl:
    provider_failure_is_reduced_to_runner_failed."""
    before = baseline()
    adapter = ev.AgentAdapter(
        "Failing", {"provider": "scripted", "script": [{"error": "quota_exhausted"}]}
    )
    result = ev.run(adapter, weather_set(), METRICS)
    sample = result.cases[0].samples[0]
    assert sample.status == "error" and sample.error
    assert sample.turns[0].status == "error"
    assert baseline() == before


def test_bad_targets_are_refused_when_the_adapter_is_made() -> None:
    with pytest.raises(AdkError) as caught:
        ev.AgentAdapter("not a name", {"provider": "scripted"})
    assert caught.value.reason == "invalid_identifier"
    with pytest.raises(AdkError) as caught:
        ev.AgentAdapter("Ok", {"provider": "scripted"}, runner_options={"run_timeout": -1})
    assert caught.value.reason == "invalid_run_timeout"


def test_an_agent_that_cannot_start_is_a_sample_error() -> None:
    adapter = ev.AgentAdapter("Broken", {"provider": "no-such-provider"})
    result = ev.run(adapter, weather_set(), METRICS)
    assert result.cases[0].samples[0].status == "error"
    assert "Broken" not in " ".join(list_agents())


def test_an_agent_config_file_is_evaluated_as_adk_run_loads_it(tmp_path: Path) -> None:
    config = {
        "name": "FileAgent",
        "provider": "scripted",
        "tools": ["examples.agent_tools:get_weather"],
        "script": [
            {"tool_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]},
            {"text": "Sunny in Tokyo."},
        ],
        "runner_options": {"max_llm_calls": 4},
    }
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(config))
    before = baseline()
    adapter = ev.agent_adapter_from_file(path)
    assert adapter.name == "FileAgent"
    result = ev.run(adapter, weather_set(), METRICS, ev.EvalOptions(sample_count=2))
    assert result.passed, ev.encode_result(result)  # each sample's script starts afresh
    assert baseline() == before
    with pytest.raises(AdkError):
        ev.agent_adapter_from_file(tmp_path / "missing.json")


def hello_set(cases: int) -> ev.EvalSet:
    return ev.load_eval_set(
        [{"input": f"hi {i}", "expected": "hello", "metadata": {}} for i in range(cases)]
    )


def test_a_step_script_instance_starts_over_for_every_sample() -> None:
    """A `ScriptedProvider` made from steps, given as an instance in the config (the
    documented pattern), is rebuilt per sample: no sample sees another's script
    position, concurrent samples included, and the caller's instance is untouched."""
    shared = ScriptedProvider([{"text": "hello"}])
    adapter = ev.AgentAdapter("Hello", {"provider": shared})
    result = ev.run(
        adapter, hello_set(3), ev.default_metrics(), {"sample_count": 2, "sample_concurrency": 2}
    )
    assert [s.status for c in result.cases for s in c.samples] == ["passed"] * 6
    assert result.passed and shared.remaining() == 1 and shared.calls == 0


def test_a_config_factory_makes_each_sample_its_own_provider() -> None:
    """For any other stateful provider, a config factory is called once per sample."""
    made: list[ScriptedProvider] = []

    def config() -> dict[str, Any]:
        made.append(ScriptedProvider(fn=lambda history, tools: {"text": "hello"}))
        return {"provider": made[-1]}

    adapter = ev.AgentAdapter("Hello", config)
    result = ev.run(adapter, hello_set(2), ev.default_metrics(), {"sample_count": 2})
    assert result.passed and len(made) == 4
    assert [provider.calls for provider in made] == [1, 1, 1, 1]
    with pytest.raises(AdkError) as caught:
        ev.AgentAdapter("Hello", 42)  # type: ignore[arg-type]
    assert caught.value.reason == "invalid_agent_eval_target"
    bad = ev.run(ev.AgentAdapter("Hello", lambda: 42), hello_set(1), ev.default_metrics(), {})  # type: ignore[arg-type, return-value]
    assert bad.cases[0].samples[0].error == "invalid_agent_eval_target"
