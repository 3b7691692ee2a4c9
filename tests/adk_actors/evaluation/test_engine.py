"""The engine with a custom adapter (a deterministic stand-in for a remote system):
accounting, gates, bounds, timeouts, the result codec and deterministic sample ids."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from adk_actors import evaluation as ev
from adk_actors.evaluation.limits import MAX_CONCURRENCY, MAX_SAMPLES, MAX_TOTAL_SAMPLES
from providers import AdkError, ScriptedProvider

Answer = Callable[[str, int, str], ev.TurnOutput]


class Remote:
    """A fixture 'remote system': `answer(case_id, sample_index, input)` per turn; it
    records every open/close, the samples active at once and each sample's turn order."""

    def __init__(self, answer: Answer, *, gate: int = 0) -> None:
        self.answer = answer
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0
        self.opened: list[tuple[str, int]] = []
        self.closed: list[tuple[str, int]] = []
        self.turns: dict[tuple[str, int], list[str]] = {}
        self.per_case_active: dict[str, int] = {}
        self.per_case_peak: dict[str, int] = {}
        self.gate = gate
        self.reached = threading.Event()

    def open_sample(self, case: ev.EvalCase, sample_index: int) -> tuple[str, int]:
        key = (case.id, sample_index)
        with self.lock:
            self.opened.append(key)
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.per_case_active[case.id] = self.per_case_active.get(case.id, 0) + 1
            self.per_case_peak[case.id] = max(
                self.per_case_peak.get(case.id, 0), self.per_case_active[case.id]
            )
            if self.gate and self.active >= self.gate:
                self.reached.set()
        if self.gate:  # hold until `gate` samples overlap (or give up: the bound test fails)
            self.reached.wait(5.0)
        return key

    def run_turn(
        self, handle: tuple[str, int], turn: ev.EvalTurn, deadline: float
    ) -> ev.TurnOutput:
        with self.lock:
            self.turns.setdefault(handle, []).append(turn.id)
        return self.answer(handle[0], handle[1], turn.input)

    def close_sample(self, handle: tuple[str, int]) -> None:
        with self.lock:
            self.closed.append(handle)
            self.active -= 1
            self.per_case_active[handle[0]] -= 1


def echo(case_id: str, sample_index: int, text: str) -> ev.TurnOutput:
    return ev.TurnOutput(text=text.upper())


def build(cases: list[dict[str, Any]]) -> ev.EvalSet:
    return ev.load_eval_set({"schema_version": 2, "id": "set", "version": "7", "cases": cases})


def single(case_id: str, text: str, expected: str | None) -> dict[str, Any]:
    turn: dict[str, Any] = {"id": "t1", "input": text}
    if expected is not None:
        turn["expected_response"] = expected
    return {"id": case_id, "turns": [turn]}


EXACT = ev.default_metrics()


def roundtrip(result: ev.EvalResult) -> ev.EvalResult:
    decoded = ev.decode_result(json.loads(json.dumps(ev.encode_result(result))))
    assert decoded == result
    return decoded


def test_passing_and_failing_cases_are_counted_and_gated() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_v2_test.erl:
    full_case_builtins_and_repeated_samples_test."""
    eval_set = build(
        [single("good", "a", "A"), single("bad", "b", "nope"), single("none", "c", None)]
    )
    result = ev.run(Remote(echo), eval_set, EXACT, ev.EvalOptions(pass_rate_threshold=0.3))
    assert [(c.case_id, c.status, c.passed) for c in result.cases] == [
        ("good", "passed", True),
        ("bad", "failed", False),
        ("none", "failed", False),
    ]
    none_criterion = result.cases[2].samples[0].criteria[0]
    assert (none_criterion.status, none_criterion.score, none_criterion.passed) == (
        "not_evaluated",
        None,
        False,
    )
    assert result.passed is True and result.pass_rate == pytest.approx(1 / 3)
    assert (result.case_count, result.passed_case_count, result.error_case_count) == (3, 1, 0)
    [summary] = result.metrics
    assert (summary.evaluated_count, summary.not_evaluated_count, summary.error_count) == (2, 1, 0)
    assert summary.average_score == 0.5 and summary.passed is False
    assert summary.statistics is not None and summary.statistics.maximum == 1.0
    assert (result.eval_set_id, result.eval_set_version, result.eval_set_schema_version) == (
        "set",
        "7",
        2,
    )
    strict = ev.run(Remote(echo), eval_set, EXACT)
    assert strict.passed is False  # the default threshold is every case
    roundtrip(result)


def test_turns_run_in_order_and_the_final_response_is_the_last_turn() -> None:
    eval_set = build(
        [
            {
                "id": "chat",
                "expected_final_response": "THREE",
                "turns": [
                    {"id": f"t{i}", "input": word} for i, word in enumerate(["one", "two", "three"])
                ],
            }
        ]
    )
    remote = Remote(echo)
    result = ev.run(remote, eval_set, EXACT, ev.EvalOptions(sample_count=3, sample_concurrency=3))
    assert result.passed
    assert all(order == ["t0", "t1", "t2"] for order in remote.turns.values())
    sample = result.cases[0].samples[0]
    assert [(t.turn_index, t.input, t.actual, t.status) for t in sample.turns] == [
        (0, "one", "ONE", "ok"),
        (1, "two", "TWO", "ok"),
        (2, "three", "THREE", "ok"),
    ]


def test_error_samples_make_partial_and_error_cases() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_v2_test.erl:
    custom_full_case_metric_and_error_accounting_test."""

    def flaky(case_id: str, sample_index: int, text: str) -> ev.TurnOutput:
        if case_id == "broken" or (case_id == "flaky" and sample_index == 1):
            raise AdkError(("remote_unavailable", 503), "down")
        return ev.TurnOutput(text=text.upper())

    eval_set = build(
        [single("ok", "a", "A"), single("flaky", "b", "B"), single("broken", "c", "C")]
    )
    remote = Remote(flaky)
    options = ev.EvalOptions(sample_count=3, min_successful_samples=2, pass_rate_threshold=0.0)
    result = ev.run(remote, eval_set, EXACT, options)
    ok, flaky_case, broken = result.cases
    assert (ok.status, ok.passed, ok.sample_pass_rate) == ("passed", True, 1.0)
    assert (flaky_case.status, flaky_case.passed) == ("partial", True)
    assert (flaky_case.successful_sample_count, flaky_case.error_sample_count) == (2, 1)
    failed_sample = flaky_case.samples[1]
    assert (failed_sample.status, failed_sample.error, failed_sample.criteria) == (
        "error",
        "remote_unavailable",
        (),
    )
    assert failed_sample.turns[0].status == "error"
    assert (broken.status, broken.passed, broken.successful_sample_count) == ("error", False, 0)
    assert (result.error_case_count, result.partial_case_count, result.passed_case_count) == (
        1,
        1,
        2,
    )
    assert sorted(remote.opened) == sorted(remote.closed)  # every sample closed, errors too
    strict = ev.run(Remote(flaky), eval_set, EXACT, ev.EvalOptions(sample_count=3))
    assert strict.cases[1].passed is False  # min_successful_samples defaults to every sample
    roundtrip(result)


def test_sample_pass_rate_threshold_gates_a_case() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_set_test.erl:
    threshold_and_metric_failure_test."""

    def alternating(case_id: str, sample_index: int, text: str) -> ev.TurnOutput:
        return ev.TurnOutput(text="A" if sample_index % 2 == 0 else "x")

    eval_set = build([single("c", "a", "A")])
    lenient = ev.run(
        Remote(alternating),
        eval_set,
        EXACT,
        ev.EvalOptions(sample_count=4, sample_pass_rate_threshold=0.5),
    )
    assert (lenient.cases[0].passed, lenient.cases[0].sample_pass_rate) == (True, 0.5)
    assert lenient.cases[0].criteria[0].score == 0.5
    strict = ev.run(
        Remote(alternating),
        eval_set,
        EXACT,
        ev.EvalOptions(sample_count=4, sample_pass_rate_threshold=0.75),
    )
    assert strict.cases[0].status == "failed"


def test_empty_criteria_fail_unless_explicitly_allowed() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_v2_test.erl:
    empty_criteria_requires_explicit_policy_test."""
    eval_set = build([single("c", "a", "A")])
    remote = Remote(echo)
    with pytest.raises(AdkError) as caught:
        ev.run(remote, eval_set, [])
    assert caught.value.reason == "empty_eval_criteria"
    assert remote.opened == []
    result = ev.run(remote, eval_set, [], {"empty_criteria": "pass"})
    assert result.passed and result.metrics == () and result.cases[0].criteria == ()


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"concurrency": MAX_CONCURRENCY + 1}, ("invalid_eval_options", "concurrency")),
        ({"sample_concurrency": 0}, ("invalid_eval_options", "sample_concurrency")),
        ({"sample_count": MAX_SAMPLES + 1}, ("invalid_eval_options", "sample_count")),
        (
            {"sample_count": 2, "min_successful_samples": 3},
            ("invalid_eval_options", "min_successful_samples"),
        ),
        ({"pass_rate_threshold": 1.01}, ("invalid_eval_options", "pass_rate_threshold")),
        ({"timeout": 0}, ("invalid_eval_options", "timeout")),
        ({"case_timeout": 3601}, ("invalid_eval_options", "case_timeout")),
        ({"max_report_bytes": 17 * 1024 * 1024}, ("invalid_eval_options", "max_report_bytes")),
        ({"empty_criteria": "skip"}, ("invalid_eval_options", "empty_criteria")),
        ({"capture_events": 1}, ("invalid_eval_options", "capture_events")),
        ({"samples": 2}, ("invalid_eval_options", ("unknown_keys", ["samples"]))),
        (
            {"metadata": {"blob": "x" * 70_000}},
            ("invalid_eval_options", "eval_string_budget_exceeded"),
        ),
    ],
)
def test_options_are_bounded(options: dict[str, Any], reason: Any) -> None:
    """Follows erlang_adk test/evaluation/adk_eval_v2_test.erl:
    hard_concurrency_and_fanout_limits_test."""
    with pytest.raises(AdkError) as caught:
        ev.run(Remote(echo), build([single("c", "a", "A")]), EXACT, options)
    assert caught.value.reason == reason


def test_total_samples_are_bounded_before_anything_runs() -> None:
    eval_set = build([single(f"c{i}", "a", "A") for i in range(101)])
    remote = Remote(echo)
    with pytest.raises(AdkError) as caught:
        ev.run(remote, eval_set, EXACT, {"sample_count": 100})
    assert caught.value.reason == ("eval_sample_limit_exceeded", 10_100, MAX_TOTAL_SAMPLES)
    assert remote.opened == []


def test_bad_arguments_are_refused() -> None:
    eval_set = build([single("c", "a", "A")])
    with pytest.raises(AdkError) as caught:
        ev.run(object(), eval_set, EXACT)  # type: ignore[arg-type]
    assert caught.value.reason == "invalid_eval_adapter"
    with pytest.raises(AdkError) as caught:
        ev.run(Remote(echo), {"id": "raw"}, EXACT)  # type: ignore[arg-type]
    assert caught.value.reason == "invalid_eval_set"
    with pytest.raises(AdkError) as caught:
        raw: Any = [{"id": "m", "criterion": "exact_response"}]
        ev.run(Remote(echo), eval_set, raw)
    assert caught.value.reason == "invalid_eval_metrics"
    half_made = ev.MetricSpec(id="j", kind="judge", threshold=1.0)
    with pytest.raises(AdkError) as caught:
        ev.run(Remote(echo), eval_set, [half_made])
    assert caught.value.reason == "invalid_eval_metrics"
    with pytest.raises(AdkError) as caught:
        ev.run(Remote(echo), eval_set, EXACT * 2)
    assert caught.value.reason == "invalid_eval_metrics"


@pytest.mark.parametrize(("concurrency", "sample_concurrency"), [(1, 3), (2, 2), (3, 1)])
def test_concurrency_bounds_are_reached_and_never_exceeded(
    concurrency: int, sample_concurrency: int
) -> None:
    """Follows erlang_adk test/evaluation/adk_eval_set_test.erl: concurrency_is_bounded_test
    (cases overlap up to `concurrency`, samples of a case up to `sample_concurrency`,
    turns stay ordered)."""
    bound = concurrency * sample_concurrency
    remote = Remote(echo, gate=bound)
    eval_set = build(
        [
            {
                "id": f"c{i}",
                "turns": [
                    {"id": f"t{j}", "input": "x", "expected_response": "X"} for j in range(3)
                ],
            }
            for i in range(4)
        ]
    )
    options = ev.EvalOptions(
        sample_count=3, concurrency=concurrency, sample_concurrency=sample_concurrency
    )
    result = ev.run(remote, eval_set, EXACT, options)
    assert result.passed
    assert remote.peak == bound  # the gate held samples until the bound was reached
    assert max(remote.per_case_peak.values()) <= sample_concurrency
    assert len(remote.opened) == 12 and sorted(remote.closed) == sorted(remote.opened)
    assert all(order == ["t0", "t1", "t2"] for order in remote.turns.values())


class Stuck(Remote):
    """A remote whose turns hang until the sample is closed (as a cancelled run does)."""

    def __init__(self, *, hang_open: bool = False) -> None:
        super().__init__(echo)
        self.released: dict[tuple[str, int], threading.Event] = {}
        self.returned: list[tuple[str, int]] = []
        self.hang_open = hang_open
        self.open_release = threading.Event()

    def open_sample(self, case: ev.EvalCase, sample_index: int) -> tuple[str, int]:
        if self.hang_open:
            self.open_release.wait(5.0)
        key = super().open_sample(case, sample_index)
        self.released[key] = threading.Event()
        return key

    def run_turn(
        self, handle: tuple[str, int], turn: ev.EvalTurn, deadline: float
    ) -> ev.TurnOutput:
        if handle[0].startswith("slow"):
            self.released[handle].wait(5.0)
            with self.lock:
                self.returned.append(handle)
            raise AdkError("cancelled", "closed under me")
        return super().run_turn(handle, turn, deadline)

    def close_sample(self, handle: tuple[str, int]) -> None:
        self.released[handle].set()
        super().close_sample(handle)


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    stop = time.monotonic() + timeout
    while time.monotonic() < stop:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def test_a_timed_out_sample_is_an_error_and_is_still_torn_down() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_set_test.erl: case_deadline_is_enforced_test
    (a timed-out sample is an error and its adapter resources are still released)."""
    remote = Stuck()
    eval_set = build([single("fast", "a", "A"), single("slow", "b", "B")])
    result = ev.run(
        remote, eval_set, EXACT, ev.EvalOptions(case_timeout=0.2, pass_rate_threshold=0.5)
    )
    fast, slow = result.cases
    assert fast.passed and slow.status == "error"
    assert (slow.samples[0].status, slow.samples[0].error) == ("error", "timeout")
    assert result.passed and result.error_case_count == 1
    assert sorted(remote.closed) == sorted(remote.opened) == [("fast", 0), ("slow", 0)]
    assert wait_until(lambda: remote.returned == [("slow", 0)])  # the hung turn was released
    roundtrip(result)


def test_a_sample_opened_after_its_deadline_is_closed_by_the_engine() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_agent_adapter_test.erl:
    init_timeout_does_not_orphan_a_late_agent."""
    remote = Stuck(hang_open=True)
    eval_set = build([single("c", "a", "A")])
    threading.Timer(0.4, remote.open_release.set).start()
    result = ev.run(remote, eval_set, EXACT, ev.EvalOptions(case_timeout=0.1))
    assert result.cases[0].samples[0].error == "timeout"
    assert wait_until(lambda: remote.closed == [("c", 0)])  # opened late, closed anyway
    assert remote.opened == [("c", 0)]


def test_the_overall_timeout_fails_samples_not_started() -> None:
    remote = Stuck()
    eval_set = build([single("slow", "a", "A"), single("later", "b", "B")])
    result = ev.run(remote, eval_set, EXACT, ev.EvalOptions(timeout=0.2, case_timeout=60))
    assert [c.samples[0].error for c in result.cases] == ["timeout", "timeout"]
    assert remote.opened == [("slow", 0)] and remote.closed == [("slow", 0)]
    assert result.passed is False and result.error_case_count == 2


def test_adapter_contract_violations_are_sample_errors() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_set_test.erl:
    adapter_failure_is_structured_test."""

    def wrong(case_id: str, sample_index: int, text: str) -> Any:
        if case_id == "dict":
            return {"text": "A"}
        if case_id == "crash":
            raise RuntimeError("boom")
        return ev.TurnOutput(text="x" * (1_048_576 + 1))

    remote = Remote(wrong)
    eval_set = build(
        [single("dict", "a", "A"), single("crash", "a", "A"), single("huge", "a", "A")]
    )
    result = ev.run(remote, eval_set, EXACT, ev.EvalOptions(pass_rate_threshold=0.0))
    assert [c.samples[0].error for c in result.cases] == [
        "invalid_adapter_result",
        "adapter_turn_failed",
        "invalid_adapter_result",
    ]
    assert sorted(remote.closed) == sorted(remote.opened)


def test_sample_ids_are_deterministic_and_distinct() -> None:
    eval_set = build([single("a", "x", "X"), single("b", "x", "X")])
    first = ev.run(Remote(echo), eval_set, EXACT, ev.EvalOptions(sample_count=2))
    second = ev.run(
        Remote(echo), eval_set, EXACT, ev.EvalOptions(sample_count=2, sample_concurrency=2)
    )
    ids = [[s.sample_id for s in c.samples] for c in first.cases]
    assert ids == [[s.sample_id for s in c.samples] for c in second.cases]
    flat = [i for row in ids for i in row]
    assert len(set(flat)) == 4 and all(i.startswith("sample-") for i in flat)
    assert ev.sample_id(eval_set, eval_set.cases[0], 1) == ids[0][1]
    other_revision = build([single("a", "x", "X")])
    other_revision = ev.load_eval_set({**ev.encode_eval_set(other_revision), "version": "8"})
    assert ev.sample_id(other_revision, other_revision.cases[0], 0) != ids[0][0]


def tooling(case_id: str, sample_index: int, text: str) -> ev.TurnOutput:
    steps = [
        ev.TrajectoryStep(
            kind="tool_call", tool="lookup", call_id="1", args={"q": text, "api_key": "k"}
        ),
        ev.TrajectoryStep(kind="tool_response", tool="lookup", call_id="1", response={"v": 1}),
    ]
    return ev.TurnOutput(
        text="ok",
        trajectory=steps,
        metadata={"region": "eu", "token": "t"},
        events=[{"kind": "fixture"}],
    )


def test_trajectory_content_and_events_only_when_captured() -> None:
    eval_set = build(
        [
            {
                "id": "c",
                "expected_trajectory": [{"name": "lookup", "args": {"q": "x"}}],
                "turns": [{"id": "t1", "input": "x"}],
            }
        ]
    )
    tools = ev.load_metrics([{"id": "tools", "criterion": "trajectory_exact"}])
    plain = ev.run(Remote(tooling), eval_set, tools)
    sample = plain.cases[0].samples[0]
    assert plain.passed  # scored with the arguments, which the result leaves out
    assert [(s.kind, s.tool, s.turn_id, s.args, s.response) for s in sample.trajectory] == [
        ("tool_call", "lookup", None, None, None),
        ("tool_response", "lookup", None, None, None),
    ]
    assert sample.events == () and sample.adapter_metadata == {"region": "eu"}
    captured = ev.run(
        Remote(tooling),
        eval_set,
        tools,
        ev.EvalOptions(capture_tool_content=True, capture_events=True),
    )
    sample = captured.cases[0].samples[0]
    assert sample.trajectory[0].args == {"q": "x"}  # the secret-named key is pruned
    assert sample.trajectory[1].response == {"v": 1}
    assert sample.events == ({"kind": "fixture"},)
    roundtrip(captured)


def test_the_report_budget_stops_an_oversized_run() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_v2_test.erl:
    incremental_report_budget_stops_new_samples_test."""

    def wordy(case_id: str, sample_index: int, text: str) -> ev.TurnOutput:
        return ev.TurnOutput(text="w" * 4000)

    eval_set = build([single(f"c{i}", "a", "A") for i in range(5)])
    with pytest.raises(AdkError) as caught:
        ev.run(Remote(wordy), eval_set, EXACT, ev.EvalOptions(max_report_bytes=16_384))
    assert caught.value.reason == "eval_report_budget_exceeded"


def test_result_metadata_is_bounded_and_pruned() -> None:
    result = ev.run(
        Remote(echo),
        build([single("c", "a", "A")]),
        EXACT,
        ev.EvalOptions(metadata={"commit": "abc", "password": "p"}),
    )
    assert result.metadata == {"commit": "abc"}


def test_decode_result_refuses_inconsistent_or_foreign_results() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_v2_test.erl:
    strict_result_count_validation_test."""
    result = ev.run(
        Remote(echo),
        build([single("a", "a", "A"), single("b", "b", "x")]),
        EXACT,
        ev.EvalOptions(pass_rate_threshold=0.5),
    )
    saved = ev.encode_result(result)

    def tampered(change: Callable[[dict[str, Any]], None]) -> Any:
        data = json.loads(json.dumps(saved))
        change(data)
        with pytest.raises(AdkError) as caught:
            ev.decode_result(data)
        return caught.value.reason

    assert tampered(lambda d: d.update(passed_case_count=2)) == (
        "invalid_eval_result",
        "passed_case_count",
    )
    assert tampered(lambda d: d.update(pass_rate=1.0)) == ("invalid_eval_result", "pass_rate")
    assert tampered(lambda d: d.update(passed=False)) == ("invalid_eval_result", "passed")
    assert tampered(lambda d: d["cases"][1].update(passed=True)) == (
        "invalid_eval_result",
        "passed_case_count",
    )
    assert tampered(lambda d: d["cases"][0]["samples"][0].update(status="failed")) == (
        "invalid_eval_result",
        "sample_status",
    )
    assert tampered(lambda d: d["cases"][0]["samples"][0]["criteria"][0].update(score=2.0)) == (
        "invalid_eval_result",
        "criterion_score",
    )
    assert tampered(lambda d: d.update(extra=1))[0] == "invalid_eval_result"
    assert tampered(lambda d: d.update(result_schema_version=3)) == (
        "unsupported_eval_result_schema_version",
        3,
    )
    with pytest.raises(AdkError) as caught:
        ev.decode_result(saved, max_bytes=1024)
    assert caught.value.reason == "eval_report_too_large"


def test_run_async_on_a_loop_and_run_refuses_one() -> None:
    eval_set = build([single("c", "a", "A")])

    async def main() -> ev.EvalResult:
        with pytest.raises(AdkError) as caught:
            ev.run(Remote(echo), eval_set, EXACT)
        assert caught.value.reason == "eval_run_in_event_loop"
        return await ev.run_async(Remote(echo), eval_set, EXACT)

    assert asyncio.run(main()).passed


def judged(score_text: str) -> list[ev.MetricSpec]:
    provider = ScriptedProvider([score_text])
    config = {
        "rubric": "Score 1 when correct.",
        "rubric_id": "r",
        "rubric_version": "1",
        "provider": provider,
        "request_timeout_ms": 2000,
    }
    return ev.load_metrics(
        [{"id": "rubric", "kind": "judge", "threshold": 0.8, "config": config}], trusted=True
    )


def test_judge_metrics_are_scored_and_their_failures_are_errors() -> None:
    eval_set = build([single("c", "a", "A")])
    good = ev.run(Remote(echo), eval_set, judged('{"score": 0.9, "rationale": "correct"}'))
    criterion = good.cases[0].samples[0].criteria[0]
    assert (criterion.kind, criterion.status, criterion.score, criterion.passed) == (
        "judge",
        "ok",
        0.9,
        True,
    )
    assert criterion.metadata["rationale"] == "correct"
    assert good.passed and good.metrics[0].kind == "judge"
    bad = ev.run(Remote(echo), eval_set, judged('{"score": 7, "rationale": "?"}'))
    criterion = bad.cases[0].samples[0].criteria[0]
    assert (criterion.status, criterion.passed, criterion.score) == ("error", False, None)
    assert criterion.error == "judge_score_out_of_range"
    assert bad.passed is False and bad.metrics[0].error_count == 1
    roundtrip(bad)
