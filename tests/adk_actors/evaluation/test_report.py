"""Reports and baseline comparison of real evaluation results (scripted agents through
the default agent adapter): deterministic JSON and Markdown, bounds, the pass-drop and
per-metric tolerance policy, metrics and cases missing from one side, and checked
saved comparisons."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

import adk_actors as adk
from adk_actors import evaluation as ev
from adk_actors.evaluation.compare import (
    Comparison,
    compare,
    decode_comparison,
    encode_comparison,
)
from adk_actors.evaluation.report import render, render_json
from providers.errors import AdkError
from providers.scripted import ScriptedProvider

EXACT = [{"id": "exact-response", "criterion": "exact_response", "threshold": 1.0}]


def eval_set(*cases: tuple[str, str], set_id: str = "greetings", version: str = "1") -> Any:
    return ev.load_eval_set(
        {
            "schema_version": 2,
            "id": set_id,
            "version": version,
            "cases": [
                {"id": case_id, "turns": [{"id": "t1", "input": "hi", "expected_response": want}]}
                for case_id, want in cases
            ],
        }
    )


def evaluate(
    answer: str,
    the_set: Any,
    criteria: list[dict[str, Any]] | None = None,
    tools: list[Any] | None = None,
    model: Any = None,
) -> ev.EvalResult:
    """A real evaluation: a fresh scripted agent per sample answering `answer`."""
    provider = model or {"provider": "scripted", "script": [{"text": answer}]}
    adapter = ev.AgentAdapter("Greeter", provider, tools or [])
    return ev.run(adapter, the_set, ev.load_metrics(criteria or EXACT))


BOTH = eval_set(("hello-case", "hello"), ("bye-case", "bye"))


def test_json_report_is_deterministic_and_round_trips() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_v2_test.erl: report(json) twice is
    identical and decodes back to the saved result."""
    result = evaluate("hello", BOTH)
    first = render(result, "json")
    assert first == render(result, "json")
    saved = json.loads(first)
    assert saved["result_schema_version"] == 2
    assert saved["passed"] is False and saved["pass_rate"] == 0.5
    assert ev.decode_result(saved) == result
    assert render(saved, "json") == first  # the saved JSON renders the same


def test_markdown_report_has_summary_metric_and_case_tables() -> None:
    result = evaluate("hello", BOTH)
    text = render(result, "markdown")
    assert text.startswith("# Evaluation report\n")
    assert "Status: **FAIL**" in text
    assert "| Pass rate | 0.5000 (1/2 cases; threshold 1.0000) |" in text
    assert "| exact-response | criterion | case | 0.5000 | 1.0000 | 2 | 0 | 0 | FAIL |" in text
    assert "| hello-case | passed | 1 | 1 | 0 |" in text
    assert "| bye-case | failed | 0 | 1 | 0 |" in text
    assert "- case bye-case, sample 0: exact-response scored 0.0000 (threshold 1.0000)" in text
    assert render(result, "markdown") == text
    passing = render(evaluate("hello", eval_set(("hello-case", "hello"))), "markdown")
    assert "Status: **PASS**" in passing and "## Failures" not in passing


def test_markdown_escapes_what_came_from_the_data() -> None:
    """A case id cannot add a table column, a line, a link or HTML."""
    tricky = "a|b <script>`x`</script> [l](http://e)"
    result = evaluate("hello", eval_set((tricky, "hello")))
    text = render(result, "markdown")
    row = next(line for line in text.splitlines() if line.startswith("| a"))
    assert row.count(" | ") == 5  # six cells, as the header
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "a\\|b" in text and "\\[l\\]" in text


def test_render_is_bounded_and_refuses_bad_arguments() -> None:
    result = evaluate("hello", BOTH)
    with pytest.raises(AdkError) as too_large:
        render(result, "json", max_bytes=100)
    assert too_large.value.reason[0] == "eval_report_too_large"
    with pytest.raises(AdkError) as markdown_large:
        render(result, "markdown", max_bytes=100)
    assert markdown_large.value.reason[0] == "eval_report_too_large"
    for bad in (0, -1, True, 64 * 1024 * 1024):
        with pytest.raises(AdkError) as limit:
            render(result, "json", max_bytes=bad)
        assert limit.value.reason == "invalid_eval_report_limit"
    with pytest.raises(AdkError) as fmt:
        render(result, "html")
    assert fmt.value.reason == "invalid_eval_report_format"
    with pytest.raises(AdkError) as bad_json:
        render_json({"x": 1}, max_bytes=3)
    assert bad_json.value.reason[0] == "eval_report_too_large"


def test_render_refuses_invalid_or_ambiguous_saved_json() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_dev_view_test.erl
    (discriminator_errors) and adk_eval_report_legacy_test.erl (a malformed nested
    comparison is refused, never rendered)."""
    result = evaluate("hello", BOTH)
    saved = ev.encode_result(result)
    with pytest.raises(AdkError) as ambiguous:
        render({**saved, "report_type": "baseline_comparison"}, "markdown")
    assert ambiguous.value.reason == "ambiguous_report_kind"
    with pytest.raises(AdkError) as forged:
        render({**saved, "passed": True}, "json")
    assert forged.value.reason[0] == "invalid_eval_result"
    comparison = encode_comparison(compare(result, result))
    for broken in (
        {**comparison, "metric_diffs": [{}]},
        {**comparison, "case_diffs": [{}]},
        {**comparison, "extra": 1},
    ):
        with pytest.raises(AdkError) as refused:
            render(broken, "markdown")
        assert refused.value.reason == "invalid_eval_comparison"


def test_comparison_flags_a_case_that_no_longer_passes() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_dev_view_test.erl
    (strict_comparison): a failing candidate against a passing baseline regresses."""
    the_set = eval_set(("hello-case", "hello"))
    baseline = evaluate("hello", the_set)
    current = evaluate("goodbye", the_set)
    comparison = compare(baseline, current)
    assert comparison.passed is False
    assert comparison.pass_rate_drop == 1.0
    [metric] = comparison.metric_diffs
    assert (metric.metric_id, metric.baseline_score, metric.current_score) == (
        "exact-response",
        1.0,
        0.0,
    )
    assert metric.regression and metric.reason == "score_drop"
    [case] = comparison.case_diffs
    assert (case.baseline_status, case.current_status, case.reason) == (
        "passed",
        "failed",
        "case_no_longer_passes",
    )
    text = render(comparison, "markdown")
    assert text.startswith("# Evaluation baseline comparison\n")
    assert "Status: **FAIL**" in text
    assert "| hello-case | passed | failed | no | FAIL | case_no_longer_passes |" in text
    assert compare(baseline, baseline).passed is True


def test_metric_tolerance_and_pass_rate_drop_policy() -> None:
    """A metric's score may drop by its tolerance, the pass rate by the allowed drop."""
    lenient = [{"id": "exact-response", "criterion": "exact_response", "threshold": 0.0}]
    the_set = eval_set(("hello-case", "hello"))
    baseline = evaluate("hello", the_set, lenient)
    current = evaluate("goodbye", the_set, lenient)  # every case still passes
    assert baseline.passed and current.passed
    strict = compare(baseline, current)
    assert strict.passed is False
    assert strict.metric_diffs[0].reason == "score_drop"
    tolerated = compare(baseline, current, metric_tolerances={"exact-response": 1.0})
    assert tolerated.passed is True
    assert tolerated.metric_diffs[0].tolerance == 1.0
    assert tolerated.metric_diffs[0].reason == "none"
    assert compare(baseline, current, metric_tolerances={"exact-response": 0.5}).passed is False

    both = eval_set(("hello-case", "hello"), ("bye-case", "bye"))
    two_of_two = evaluate("hello", eval_set(("hello-case", "hello"), ("bye-case", "hello")))
    one_of_two = evaluate("hello", both)
    assert two_of_two.eval_set_id == one_of_two.eval_set_id
    drop = compare(
        two_of_two,
        one_of_two,
        max_pass_rate_drop=0.5,
        metric_tolerances={"exact-response": 0.5},
    )
    assert drop.pass_rate_drop == 0.5
    # within the pass-rate and score allowances, but one case no longer passes
    assert drop.passed is False
    assert [case.reason for case in drop.case_diffs] == ["case_no_longer_passes", "none"]


def test_metrics_and_cases_missing_from_one_side() -> None:
    tools = [{"id": "tools", "criterion": "trajectory_exact", "threshold": 0.0}]
    other = [{"id": "other", "criterion": "exact_response", "threshold": 0.0}]
    baseline = evaluate("hello", eval_set(("a", "hello"), ("b", "hello")), [*EXACT, *tools])
    current = evaluate("hello", eval_set(("a", "hello"), ("c", "hello")), [*EXACT, *other])
    comparison = compare(baseline, current)
    by_metric = {diff.metric_id: diff for diff in comparison.metric_diffs}
    assert [diff.metric_id for diff in comparison.metric_diffs] == sorted(by_metric)
    assert by_metric["exact-response"].reason == "none"
    assert by_metric["other"].reason == "new_metric" and not by_metric["other"].regression
    assert by_metric["tools"].reason == "missing_current_metric"
    assert by_metric["tools"].regression and by_metric["tools"].current_score == 0.0
    by_case = {diff.case_id: diff for diff in comparison.case_diffs}
    assert by_case["b"].reason == "missing_current_case" and by_case["b"].regression
    assert by_case["b"].current_status == "missing"
    assert by_case["c"].reason == "new_case" and not by_case["c"].regression
    assert comparison.passed is False
    assert decode_comparison(encode_comparison(comparison)) == comparison


def test_trajectory_change_is_reported() -> None:
    @adk.tool
    def get_weather(city: str) -> dict[str, Any]:
        """Get the weather for a city."""
        return {"city": city, "forecast": "sunny"}

    def asks_for(*cities: str) -> dict[str, Any]:
        calls = [{"name": "get_weather", "args": {"city": city}} for city in cities]
        return {"provider": ScriptedProvider([{"tool_calls": calls}, {"text": "sunny"}])}

    the_set = eval_set(("weather", "sunny"))
    baseline = evaluate("", the_set, tools=[get_weather], model=asks_for("Tokyo"))
    same = evaluate("", the_set, tools=[get_weather], model=asks_for("Tokyo"))
    more = evaluate("", the_set, tools=[get_weather], model=asks_for("Tokyo", "Paris"))
    assert compare(baseline, same).case_diffs[0].trajectory_changed is False  # call ids aside
    changed = compare(baseline, more).case_diffs[0]
    assert changed.trajectory_changed is True and changed.reason == "none"


def test_different_sets_are_refused() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_dev_view_test.erl
    (comparison_errors): results of another set are refused, as are bad options."""
    baseline = evaluate("hello", BOTH)
    other = evaluate("hello", eval_set(("hello-case", "hello"), set_id="other-set"))
    with pytest.raises(AdkError) as mismatch:
        compare(baseline, other)
    assert mismatch.value.reason == "eval_set_mismatch"
    for drop, tolerances in (
        (1.1, None),
        (-0.1, None),
        (True, None),
        (0.0, {"exact-response": -0.1}),
        (0.0, {"": 0.1}),
        (0.0, {"exact-response": "0.1"}),
        (0.0, {f"m{n}": 0.0 for n in range(1001)}),
    ):
        with pytest.raises(AdkError) as options:
            compare(baseline, baseline, max_pass_rate_drop=drop, metric_tolerances=tolerances)  # type: ignore[arg-type]
        assert options.value.reason[0] == "invalid_eval_comparison_options"
    with pytest.raises(AdkError) as invalid:
        compare({"result_schema_version": 2}, baseline)
    assert invalid.value.reason == "invalid_baseline"
    with pytest.raises(AdkError) as invalid_current:
        compare(baseline, {**ev.encode_result(baseline), "pass_rate": 2.0})
    assert invalid_current.value.reason == "invalid_current_result"


def test_saved_comparison_is_checked_when_read_back() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_dev_view_test.erl: a forged
    ``passed`` is refused; a real comparison round-trips through JSON."""
    the_set = eval_set(("hello-case", "hello"))
    comparison = compare(evaluate("hello", the_set), evaluate("goodbye", the_set))
    saved = json.loads(msgspec.json.encode(encode_comparison(comparison)))
    assert decode_comparison(saved) == comparison
    assert isinstance(decode_comparison(saved), Comparison)
    metric = saved["metric_diffs"][0]
    case = saved["case_diffs"][0]
    forgeries = [
        {**saved, "passed": True},
        {**saved, "pass_rate_drop": 0.0},
        {**saved, "metric_diffs": [{**metric, "regression": False}]},
        {**saved, "metric_diffs": [{**metric, "reason": "none", "regression": False}]},
        {**saved, "metric_diffs": [metric, metric]},
        {**saved, "case_diffs": [{**case, "reason": "none", "regression": False}]},
        {**saved, "case_diffs": [{**case, "current_status": "missing"}]},
        {**saved, "report_type": "other"},
        {**saved, "baseline_pass_rate": 1.5},
        {**saved, "current_pass_rate": "0.0"},
        "not an object",
    ]
    for forged in forgeries:
        with pytest.raises(AdkError) as refused:
            decode_comparison(forged)
        assert refused.value.reason == "invalid_eval_comparison"


class Answers:
    """A deterministic stand-in system: echoes each turn, except the listed turn ids."""

    def __init__(self, wrong: frozenset[str] = frozenset()) -> None:
        self.wrong = wrong

    def open_sample(self, case: ev.EvalCase, sample_index: int) -> str:
        return case.id

    def run_turn(self, handle: str, turn: ev.EvalTurn, deadline: float) -> ev.TurnOutput:
        return ev.TurnOutput(text="no" if turn.id in self.wrong else turn.input)

    def close_sample(self, handle: str) -> None:
        return None


def test_a_drop_exactly_at_its_tolerance_passes() -> None:
    """1.0 - 0.95 is 0.050000000000000044 in floats: a drop equal to the allowed one
    passes, in the comparison and when the saved comparison is read back."""
    twenty = ev.load_eval_set(
        {
            "schema_version": 2,
            "id": "s",
            "version": "1",
            "cases": [
                {
                    "id": "c",
                    "turns": [
                        {"id": f"t{i}", "input": f"q{i}", "expected_response": f"q{i}"}
                        for i in range(20)
                    ],
                }
            ],
        }
    )
    metrics = ev.load_metrics([{"id": "resp", "criterion": "exact_response", "threshold": 0.9}])
    base = ev.run(Answers(), twenty, metrics)
    current = ev.run(Answers(frozenset({"t3"})), twenty, metrics)
    comparison = compare(base, current, metric_tolerances={"resp": 0.05})
    [diff] = comparison.metric_diffs
    assert (diff.current_score, diff.reason, comparison.passed) == (0.95, "none", True)
    assert decode_comparison(encode_comparison(comparison)) == comparison
    two = ev.run(Answers(frozenset({"t3", "t4"})), twenty, metrics)
    assert compare(base, two, metric_tolerances={"resp": 0.05}).metric_diffs[0].regression


def test_a_case_that_stops_passing_regresses_whatever_the_allowed_drop() -> None:
    """Follows erlang_adk src/evaluation/adk_eval_report.erl case_diff (the reference's
    policy, documented in docs/evaluation.md): ``max_pass_rate_drop`` forgives a lower
    rate from new cases, never a case that passed and no longer does."""
    the_set = eval_set(*((f"c{i}", "hello") for i in range(4)))
    base = evaluate("hello", the_set)
    grown = eval_set(*((f"c{i}", "hello") for i in range(4)), ("new", "bye"))
    with_new_failure = evaluate("hello", grown)
    tolerances = {"exact-response": 0.2}  # the new failing case lowers the average too
    allowed = compare(base, with_new_failure, max_pass_rate_drop=0.2, metric_tolerances=tolerances)
    assert allowed.passed and allowed.pass_rate_drop == pytest.approx(0.2)
    assert not compare(
        base, with_new_failure, max_pass_rate_drop=0.1, metric_tolerances=tolerances
    ).passed
    flipped = evaluate("bye", the_set)
    comparison = compare(base, flipped, max_pass_rate_drop=1.0)
    assert not comparison.passed
    assert {diff.reason for diff in comparison.case_diffs} == {"case_no_longer_passes"}
