"""Saved results: any result the engine writes reads back (at the engine's ceilings
too), and `decode_result` refuses one whose parts contradict each other."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from adk_actors import evaluation as ev
from adk_actors.evaluation.limits import MAX_CASES
from adk_actors.evaluation.report import render
from providers import AdkError


class Echo:
    """A deterministic stand-in system: answers every turn with its input, or with
    `wrong` for the listed turn ids."""

    def __init__(self, wrong: frozenset[str] = frozenset()) -> None:
        self.wrong = wrong

    def open_sample(self, case: ev.EvalCase, sample_index: int) -> str:
        return case.id

    def run_turn(self, handle: str, turn: ev.EvalTurn, deadline: float) -> ev.TurnOutput:
        return ev.TurnOutput(text="no" if turn.id in self.wrong else turn.input)

    def close_sample(self, handle: str) -> None:
        return None


def rows(count: int) -> ev.EvalSet:
    return ev.load_eval_set(
        [{"input": f"q{i}", "expected": f"q{i}", "metadata": {}} for i in range(count)]
    )


def saved(result: ev.EvalResult) -> Any:
    return json.loads(json.dumps(ev.encode_result(result)))


def test_a_result_at_the_case_ceiling_reads_back_compares_and_renders() -> None:
    """Follows the README's promise ``decode_result(encode_result(x)) == x`` at the
    engine's own ceiling (`MAX_CASES`): the node bound scales with the byte bound."""
    result = ev.run(Echo(), rows(MAX_CASES), ev.default_metrics(), ev.EvalOptions(concurrency=64))
    data = saved(result)
    assert ev.decode_result(data) == result
    comparison = ev.compare(data, data)
    assert comparison.passed and len(comparison.case_diffs) == MAX_CASES
    assert render(data, "markdown").startswith("# Evaluation report")


def test_adapter_metadata_too_deep_to_read_back_is_a_sample_error() -> None:
    """Nested adapter output would put the saved result past the decoder's depth: the
    engine refuses it at the boundary (the sample's error), so the result still reads
    back."""

    class Deep(Echo):
        def run_turn(self, handle: str, turn: ev.EvalTurn, deadline: float) -> ev.TurnOutput:
            nested: Any = "leaf"
            for _ in range(60 if turn.input == "q0" else 20):
                nested = {"k": nested}
            return ev.TurnOutput(text=turn.input, metadata={"deep": nested})

    result = ev.run(Deep(), rows(2), ev.default_metrics(), ev.EvalOptions(pass_rate_threshold=0))
    assert [case.samples[0].error for case in result.cases] == ["invalid_adapter_result", None]
    assert ev.decode_result(saved(result)) == result


def test_a_lone_surrogate_is_refused_as_typed_data() -> None:
    """JSON text can spell a lone surrogate (``"\\ud800"``), which no encoder writes:
    every reader refuses it as ``eval_data_not_json`` instead of crashing later."""
    with pytest.raises(AdkError) as caught:
        ev.load_eval_set([{"input": "\ud800", "expected": "x", "metadata": {}}])
    assert caught.value.reason == ("invalid_eval_set", "eval_data_not_json")
    with pytest.raises(AdkError) as caught:
        ev.load_metrics([{"id": "m\udfff", "criterion": "exact_response"}])
    assert caught.value.reason == ("invalid_eval_metrics", "eval_data_not_json")
    with pytest.raises(AdkError) as caught:
        ev.run(Echo(), rows(1), ev.default_metrics(), {"metadata": {"build": "\ud800"}})
    assert caught.value.reason == ("invalid_eval_options", "eval_data_not_json")
    data = saved(ev.run(Echo(), rows(1), ev.default_metrics()))
    data["eval_set_version"] = "\ud800"
    with pytest.raises(AdkError) as caught:
        ev.decode_result(data)
    assert caught.value.reason == ("invalid_eval_result", "eval_data_not_json")


def test_an_adapter_answering_a_lone_surrogate_fails_only_its_sample() -> None:
    class Broken(Echo):
        def run_turn(self, handle: str, turn: ev.EvalTurn, deadline: float) -> ev.TurnOutput:
            if turn.input == "q0":
                return ev.TurnOutput(text="\ud800")
            if turn.input == "q1":
                return ev.TurnOutput(text="q1", metadata={"\udc00": 1})
            return super().run_turn(handle, turn, deadline)

    result = ev.run(Broken(), rows(3), ev.default_metrics(), {"pass_rate_threshold": 0.0})
    assert [case.samples[0].error for case in result.cases] == [
        "invalid_adapter_result",
        "invalid_adapter_result",
        None,
    ]
    assert ev.decode_result(saved(result)) == result


# -- consistency -------------------------------------------------------------------------------


@pytest.fixture
def two_turn_result() -> Any:
    """One case, two turns; the second answer is wrong: the criterion scores 0.5."""
    eval_set = ev.load_eval_set(
        {
            "schema_version": 2,
            "id": "s",
            "version": "1",
            "cases": [
                {
                    "id": "c",
                    "turns": [
                        {"id": "t1", "input": "a", "expected_response": "a"},
                        {"id": "t2", "input": "b", "expected_response": "b"},
                    ],
                }
            ],
        }
    )
    metrics = ev.load_metrics([{"id": "m", "criterion": "exact_response", "threshold": 0.5}])
    return saved(ev.run(Echo(frozenset({"t2"})), eval_set, metrics))


def refused(data: Any, change: Callable[[dict[str, Any]], None]) -> Any:
    copy = json.loads(json.dumps(data))
    change(copy)
    with pytest.raises(AdkError) as caught:
        ev.decode_result(copy)
    return caught.value.reason


def test_decode_result_ties_summaries_and_aggregates_to_the_sample_criteria(
    two_turn_result: Any,
) -> None:
    """Follows erlang_adk test/evaluation/adk_eval_v2_test.erl:
    strict_result_count_validation_test, extended to what `compare` reads: the metric
    summaries, the case aggregates and each sample's ``passed``."""
    data = two_turn_result
    assert ev.decode_result(data).passed

    def summary(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
        return lambda d: d["metrics"][0].update({field: value})

    assert refused(data, summary("average_score", 1.0)) == ("invalid_eval_result", "metric_summary")
    assert refused(data, summary("evaluated_count", 999)) == (
        "invalid_eval_result",
        "metric_summary",
    )
    assert refused(data, lambda d: d["metrics"].append(d["metrics"][0])) == (
        "invalid_eval_result",
        "duplicate_metric_id",
    )
    assert refused(data, lambda d: d.update(metrics=[])) == (
        "invalid_eval_result",
        "unknown_metric_id",
    )
    assert refused(data, lambda d: d["cases"][0]["criteria"][0].update(score=1.0)) == (
        "invalid_eval_result",
        "case_criteria",
    )

    def failed_criterion(d: dict[str, Any]) -> None:
        criterion = d["cases"][0]["samples"][0]["criteria"][0]
        criterion.update(score=0.0, passed=False)

    assert refused(data, failed_criterion) == ("invalid_eval_result", "sample_passed")

    def failed_with_error(d: dict[str, Any]) -> None:
        d["cases"][0]["samples"][0].update(error="boom")

    assert refused(data, failed_with_error) == ("invalid_eval_result", "sample_error")


def test_a_schema_1_result_renders_but_never_compares() -> None:
    """Follows erlang_adk src/evaluation/adk_eval_set.erl validate_saved_result (the
    legacy version: set id and version, cases, passed) and the spec's /dev routes table
    ("Validate and render one supplied v1/v2 evaluation result")."""
    legacy = {
        "result_schema_version": 1,
        "eval_set_id": "legacy",
        "eval_set_version": "3",
        "passed": False,
        "cases": [{"case_id": "a", "status": "failed", "passed": False}],
    }
    assert json.loads(render(legacy, "json")) == legacy
    markdown = render(legacy, "markdown")
    assert "legacy" in markdown and "| a | failed |" in markdown
    for broken in ({**legacy, "passed": "no"}, {**legacy, "cases": {}}):
        with pytest.raises(AdkError) as caught:
            render(broken, "json")
        assert caught.value.reason == ("invalid_eval_result", "schema")
    with pytest.raises(AdkError) as caught:
        ev.compare(legacy, legacy)
    assert caught.value.reason == "invalid_baseline"
