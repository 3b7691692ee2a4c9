"""The engine's boundaries: adapter output checked strictly (a bad answer fails its
sample, never the run), a sample's accumulated steps bounded, a report budget too
small refused before running, and a cancelled run that returns only after teardown."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import msgspec
import pytest

from adk_actors import evaluation as ev
from adk_actors.evaluation.limits import MAX_SAMPLE_STEPS, MAX_TRAJECTORY_STEPS
from adk_actors.evaluation.results import TrajectoryStep
from providers import AdkError


class Fixed:
    """A stand-in system answering each case with ``answers[case_id]`` (per turn)."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.opened: list[str] = []
        self.closed: list[str] = []

    def open_sample(self, case: ev.EvalCase, sample_index: int) -> str:
        self.opened.append(case.id)
        return case.id

    def run_turn(self, handle: str, turn: ev.EvalTurn, deadline: float) -> Any:
        return self.answers[handle]

    def close_sample(self, handle: str) -> None:
        self.closed.append(handle)


def cases(*ids: str, turns: int = 1) -> ev.EvalSet:
    return ev.load_eval_set(
        {
            "schema_version": 2,
            "id": "set",
            "version": "1",
            "cases": [
                {
                    "id": case_id,
                    "expected_trajectory": ["f"],
                    "turns": [{"id": f"t{i}", "input": "x"} for i in range(turns)],
                }
                for case_id in ids
            ],
        }
    )


TOOLS = ev.load_metrics([{"id": "tools", "criterion": "trajectory_subset"}])


def step(**fields: Any) -> TrajectoryStep:
    """A step built the way user code can build one: msgspec does not check types
    when a struct is made."""
    return TrajectoryStep(**{"kind": "tool_call", "tool": "f", **fields})


def test_malformed_adapter_output_fails_its_sample_not_the_run() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_set_test.erl:
    adapter_failure_is_structured_test (each malformed answer is a typed sample error;
    the run completes, and its result reads back)."""
    answers: dict[str, Any] = {
        "args-list": ev.TurnOutput(text="x", trajectory=[step(args=[1])]),
        "args-text": ev.TurnOutput(text="x", trajectory=[step(args="x")]),
        "bogus-kind": ev.TurnOutput(text="x", trajectory=[step(kind="bogus")]),
        "no-tool": ev.TurnOutput(text="x", trajectory=[step(tool=None)]),
        "not-a-step": ev.TurnOutput(text="x", trajectory=[{"kind": "tool_call", "tool": "f"}]),
        "metadata-list": ev.TurnOutput(text="x", metadata=[1]),  # type: ignore[arg-type]
        "text-number": ev.TurnOutput(text=5),  # type: ignore[arg-type]
        "object-arg": ev.TurnOutput(text="x", trajectory=[step(args={"o": object()})]),
        "good": ev.TurnOutput(text="x", trajectory=[step(args={"a": 1})]),
    }
    adapter = Fixed(answers)
    result = ev.run(adapter, cases(*answers), TOOLS, {"pass_rate_threshold": 0.0})
    errors = {case.case_id: case.samples[0].error for case in result.cases}
    assert errors == {
        **{case_id: "invalid_adapter_result" for case_id in answers if case_id != "good"},
        "good": None,
    }
    assert result.cases[-1].passed
    assert sorted(adapter.closed) == sorted(adapter.opened)
    assert ev.decode_result(json.loads(json.dumps(ev.encode_result(result)))) == result


def test_a_sample_accumulates_a_bounded_trajectory() -> None:
    """Each turn may bring `MAX_TRAJECTORY_STEPS` steps; a sample keeps at most
    `MAX_SAMPLE_STEPS` across its turns (the reference bounds a sample worker's heap)."""
    turns = MAX_SAMPLE_STEPS // MAX_TRAJECTORY_STEPS + 1
    full = ev.TurnOutput(text="x", trajectory=[step()] * MAX_TRAJECTORY_STEPS)
    adapter = Fixed({"long": full, "short": full})
    eval_set = ev.load_eval_set(
        {
            "schema_version": 2,
            "id": "set",
            "version": "1",
            "cases": [
                {"id": "long", "turns": [{"id": f"t{i}", "input": "x"} for i in range(turns)]},
                {"id": "short", "turns": [{"id": "t0", "input": "x"}]},
            ],
        }
    )
    result = ev.run(adapter, eval_set, TOOLS, {"empty_criteria": "pass", "pass_rate_threshold": 0})
    long, short = result.cases
    assert long.samples[0].error == "eval_sample_too_large"
    assert len(long.samples[0].turns) == turns and long.samples[0].turns[-1].status == "error"
    assert short.samples[0].error is None


def test_a_report_budget_too_small_for_the_set_is_refused_before_running() -> None:
    adapter = Fixed({"a": ev.TurnOutput(text="x")})
    with pytest.raises(AdkError) as caught:
        ev.run(adapter, cases("a"), TOOLS, {"max_report_bytes": 4096})
    assert caught.value.reason == ("invalid_eval_options", "max_report_bytes")
    many = cases(*(f"c{i}" for i in range(8)))
    with pytest.raises(AdkError) as caught:
        ev.run(Fixed({}), many, TOOLS, {"max_report_bytes": 8192})
    assert caught.value.reason == ("invalid_eval_options", "max_report_bytes")
    result = ev.run(adapter, cases("a"), TOOLS, {"max_report_bytes": 8192})
    assert result.passed is False  # ran: nothing refused a usable budget


class Held:
    """Turns block until their sample is closed; closing takes a moment (a real
    agent's teardown), so a run that does not wait for it returns too early."""

    def __init__(self, count: int) -> None:
        self.lock = threading.Lock()
        self.started = threading.Semaphore(0)
        self.release: dict[str, threading.Event] = {}
        self.opened: list[str] = []
        self.closed: list[str] = []
        self.count = count

    def open_sample(self, case: ev.EvalCase, sample_index: int) -> str:
        with self.lock:
            self.opened.append(case.id)
            self.release[case.id] = threading.Event()
        return case.id

    def run_turn(self, handle: str, turn: ev.EvalTurn, deadline: float) -> ev.TurnOutput:
        self.started.release()
        self.release[handle].wait(10.0)
        raise AdkError("eval_sample_closed", "closed")

    def close_sample(self, handle: str) -> None:
        self.release[handle].set()
        time.sleep(0.05)
        with self.lock:
            self.closed.append(handle)


def test_a_cancelled_run_returns_after_every_sample_is_torn_down() -> None:
    held = Held(4)
    eval_set = cases("a", "b", "c", "d")

    async def main() -> None:
        task = asyncio.create_task(ev.run_async(held, eval_set, TOOLS, {"concurrency": 4}))
        for _ in range(4):
            assert await asyncio.to_thread(held.started.acquire, True, 10.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with held.lock:
            assert sorted(held.closed) == sorted(held.opened) == ["a", "b", "c", "d"]

    asyncio.run(main())


def test_checked_output_is_a_new_strict_value() -> None:
    """The engine scores what it checked: a step's tuple arguments become a list only
    through the strict round trip, and the original object is never kept."""
    output = ev.TurnOutput(text="x", trajectory=[step(args={"xs": (1, 2)})])
    result = ev.run(Fixed({"a": output}), cases("a"), TOOLS, {"capture_tool_content": True})
    [saved] = result.cases[0].samples[0].trajectory
    assert saved.args == {"xs": [1, 2]}
    assert msgspec.json.decode(msgspec.json.encode(saved), type=TrajectoryStep) == saved


def test_a_judge_failure_keeps_its_structural_sub_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """A judge that cannot call its provider fails its criterion (never a pass) and the
    criterion's error says why structurally: ``judge_provider_error:missing_api_key``."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    judged = ev.load_metrics(
        [
            {
                "id": "rubric",
                "kind": "judge",
                "config": {"rubric": "Score 1.", "rubric_id": "r", "rubric_version": "1"},
            }
        ]
    )
    result = ev.run(Fixed({"a": ev.TurnOutput(text="x")}), cases("a"), judged)
    [criterion] = result.cases[0].samples[0].criteria
    assert (criterion.status, criterion.passed) == ("error", False)
    assert criterion.error == "judge_provider_error:missing_api_key"
