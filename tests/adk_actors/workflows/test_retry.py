"""Retry: a step's attempts (fresh tasks, per-attempt timeouts, backoff, the
``attempt`` context, ``retry_exhausted``), cancellation during a backoff, and the
standalone `retry.execute` (the spec's ``adk_retry``)."""

from __future__ import annotations

import asyncio
import itertools
import queue
import threading
import time

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.workflows import Completed, Error, Failed, Output, retry
from providers.errors import AdkError
from tests.helpers import wait_until


def graph_spec(entry: str, nodes: list, edges: dict, max_steps: int) -> dict:
    return {
        "version": 1,
        "id": "graph-extension-test",
        "kind": "graph",
        "entry": entry,
        "nodes": nodes,
        "edges": edges,
        "max_steps": max_steps,
    }


def test_node_retry_succeeds_and_exposes_the_attempt() -> None:
    """Follows adk_workflow_graph_test: node_retry_succeeds_and_exposes_attempt_context."""
    counter = itertools.count(1)
    attempts: list[int] = []

    def action(state: dict, context: dict) -> Output | Error:
        count = next(counter)
        attempts.append(context["attempt"])
        assert count == context["attempt"]
        return Output("retried-output", {"retried": True}) if count == 3 else Error("transient")

    wf = adk.compile_workflow(
        graph_spec(
            "retry",
            [{"id": "retry", "run": action, "retry": {"max_attempts": 3, "backoff": 0}}],
            {"retry": "end"},
            2,
        )
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"retried": True}
    assert outcome.checkpoint.output == "retried-output"
    assert attempts == [1, 2, 3]


def test_each_timed_out_attempt_is_killed_and_retried() -> None:
    """Follows adk_workflow_graph_test: node_timeout_retries_and_kills_each_attempt. A
    sync attempt cannot be killed mid-call: its task is, and its ``cancelled`` signal is
    set; this action honours it, so the next attempt may start."""
    started: queue.Queue[tuple[int, sv.Pid]] = queue.Queue()
    never = threading.Event()

    def blocking(state: dict, context: dict) -> dict:
        started.put((context["attempt"], sv.self_pid()))
        context["cancelled"].wait(5)
        return {}

    wf = adk.compile_workflow(
        graph_spec(
            "timeout",
            [
                {
                    "id": "timeout",
                    "run": blocking,
                    "timeout": 0.025,
                    "retry": {"max_attempts": 2, "backoff": 0},
                }
            ],
            {"timeout": "end"},
            2,
        )
    )
    outcome = adk.run_workflow(wf, {}, timeout=10)
    assert isinstance(outcome, Failed)
    assert outcome.reason == (
        "node_failed",
        "timeout",
        ("retry_exhausted", 2, ("action_timed_out", 0.025)),
    )
    first, second = started.get(timeout=5), started.get(timeout=5)
    assert (first[0], second[0]) == (1, 2)
    assert not first[1].is_alive()
    assert not second[1].is_alive()
    never.set()


def test_one_attempt_reports_its_own_failure() -> None:
    """Follows adk_workflow_graph_test: node_timeout_retries_and_kills_each_attempt
    (with ``max_attempts`` 1 the raw failure is reported, not ``retry_exhausted``)."""
    never = threading.Event()

    def blocking(state: dict) -> dict:
        never.wait(5)
        return {}

    wf = adk.compile_workflow(
        {
            "version": 1,
            "id": "workflow-test",
            "kind": "sequential",
            "steps": [{"id": "slow", "run": blocking, "timeout": 0.02}],
        }
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("step_failed", "slow", ("action_timed_out", 0.02))
    never.set()

    flaky = adk.compile_workflow(
        {
            "version": 1,
            "id": "workflow-test",
            "kind": "sequential",
            "steps": [
                {"id": "flaky", "run": lambda s: Error("flaky"), "retry": {"max_attempts": 2}}
            ],
        }
    )
    outcome = adk.run_workflow(flaky, {})
    assert isinstance(outcome, Failed)
    assert outcome.reason == (
        "step_failed",
        "flaky",
        ("retry_exhausted", 2, ("returned_error", "flaky")),
    )


def test_cancel_during_a_backoff_stops_further_attempts() -> None:
    """Follows adk_workflow_graph_test: cancellation_interrupts_retry_backoff_without_orphans."""
    attempts: queue.Queue[tuple[int, sv.Pid]] = queue.Queue()

    def failure(state: dict, context: dict) -> Error:
        attempts.put((context["attempt"], sv.self_pid()))
        return Error("retry_me")

    wf = adk.compile_workflow(
        graph_spec(
            "retry",
            [{"id": "retry", "run": failure, "retry": {"max_attempts": 3, "backoff": 5.0}}],
            {"retry": "end"},
            2,
        )
    )
    before = sv.DynamicSupervisor.count_children(adk.app.WORKFLOW_SUPERVISOR)["workers"]
    ref = adk.workflows.start(wf, {}, timeout=10, retention=0)
    attempt, pid = attempts.get(timeout=5)
    assert attempt == 1
    wait_until(lambda: not pid.is_alive())
    adk.workflows.cancel(ref, "cancel_backoff")
    wait_until(
        lambda: (
            sv.DynamicSupervisor.count_children(adk.app.WORKFLOW_SUPERVISOR)["workers"] == before
        )
    )
    with pytest.raises(queue.Empty):
        attempts.get(timeout=0.3)  # no second attempt: the backoff ended with the run


def test_retry_readme_example() -> None:
    """Follows readme_workflow_examples_test: sequential_and_parallel_workflows (the retry)."""
    counter = itertools.count(1)

    def action(state: dict, context: dict) -> Output | Error:
        attempt = next(counter)
        assert attempt == context["attempt"]
        return (
            Error("transient_failure") if attempt == 1 else Output("recovered", {"retried": True})
        )

    wf = adk.compile_workflow(
        {
            "version": 1,
            "id": "readme-workflow-retry-v1",
            "kind": "sequential",
            "max_steps": 1,
            "steps": [
                {
                    "id": "retryable",
                    "run": action,
                    "timeout": 1.0,
                    "retry": {"max_attempts": 2, "backoff": 0.01},
                }
            ],
        }
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"retried": True}
    assert outcome.checkpoint.output == "recovered"


def test_backoff_grows_is_capped_and_jitters_within_its_delay() -> None:
    """Follows adk_retry_test (the delay rule ``d(n+1) = min(max, d(n) * factor)`` and
    full jitter in ``[0, d]``)."""
    waits = retry.delays(1.0, 2.0, 5.0)
    assert [next(waits) for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    constant = retry.delays(0.01, 1.0, 0.01)
    assert [next(constant) for _ in range(3)] == [0.01, 0.01, 0.01]
    for _ in range(200):
        assert 0.0 <= retry.jittered(0.5, "full") <= 0.5
    assert retry.jittered(0.0, "full") == 0.0
    assert retry.jittered(0.5, "none") == 0.5


def one_step(run: object, retry_policy: dict, **extra: object) -> dict:
    return {
        "version": 1,
        "id": "retry-step",
        "kind": "sequential",
        "steps": [{"id": "step", "run": run, "retry": retry_policy, **extra}],
    }


def test_a_steps_backoff_grows_by_its_factor_up_to_its_cap() -> None:
    """Follows adk_retry_test: deadline_bounds_backoff (the spec's retry rule: backoff
    with a factor and a cap, applied between a workflow step's attempts)."""
    starts: list[float] = []

    def flaky(state: dict, context: dict) -> Output | Error:
        starts.append(time.monotonic())
        return Output("ok") if context["attempt"] == 4 else Error("again")

    policy = {"max_attempts": 4, "backoff": 0.02, "backoff_factor": 100, "max_backoff": 0.05}
    outcome = adk.run_workflow(adk.compile_workflow(one_step(flaky, policy)), {}, timeout=10)
    assert isinstance(outcome, Completed)
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert len(gaps) == 3
    assert gaps[0] >= 0.02 and gaps[1] >= 0.05 and gaps[2] >= 0.05
    assert all(gap < 1.0 for gap in gaps)  # uncapped, the second wait would be 2 s


def test_full_jitter_waits_a_random_part_of_the_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Follows adk_retry_test: retry_success (with ``jitter => full``: each wait is
    uniform in ``[0, delay]``, drawn from the retry module's generator)."""
    drawn: list[tuple[float, float]] = []

    class LowDraw:
        def uniform(self, low: float, high: float) -> float:
            drawn.append((low, high))
            return low + (high - low) * 0.01

    monkeypatch.setattr(retry, "_rng", LowDraw())
    starts: list[float] = []

    def flaky(state: dict, context: dict) -> Output | Error:
        starts.append(time.monotonic())
        return Output("ok") if context["attempt"] == 2 else Error("again")

    policy = {"max_attempts": 2, "backoff": 3.0, "jitter": "full"}
    outcome = adk.run_workflow(adk.compile_workflow(one_step(flaky, policy)), {}, timeout=10)
    assert isinstance(outcome, Completed)
    assert drawn == [(0.0, 3.0)]
    assert starts[1] - starts[0] < 1.5  # 0.03 s, not the 3 s backoff


def test_a_deadline_inside_a_backoff_times_out_without_another_attempt() -> None:
    """Follows adk_retry_test: deadline_bounds_backoff (behaviors §7: a run deadline
    -> timed out; nothing starts past it)."""
    attempts: list[int] = []

    def failing(state: dict, context: dict) -> Error:
        attempts.append(context["attempt"])
        return Error("temporary")

    wf = adk.compile_workflow(one_step(failing, {"max_attempts": 3, "backoff": 5.0}))
    began = time.monotonic()
    outcome = adk.run_workflow(wf, {}, timeout=0.2)
    assert isinstance(outcome, Failed)
    assert outcome.reason == "timed_out"
    assert time.monotonic() - began < 2.0
    assert attempts == [1]


def test_retry_exhausted_names_the_last_attempts_reason() -> None:
    """Follows adk_retry_test: exhaust_retries (the spec: ``retry_exhausted`` with the
    last reason, whatever the earlier attempts failed with)."""

    def raise_then_error(state: dict, context: dict) -> Error:
        if context["attempt"] == 1:
            raise RuntimeError("first attempt, secret text")
        return Error("second_reason")

    def error_then_raise(state: dict, context: dict) -> Error:
        if context["attempt"] == 1:
            return Error("first_reason")
        raise RuntimeError("second attempt, secret text")

    policy = {"max_attempts": 2}
    first = adk.run_workflow(adk.compile_workflow(one_step(raise_then_error, policy)), {})
    assert first == Failed(
        ("step_failed", "step", ("retry_exhausted", 2, ("returned_error", "second_reason"))),
        first.checkpoint,
    )
    second = adk.run_workflow(adk.compile_workflow(one_step(error_then_raise, policy)), {})
    assert isinstance(second, Failed)
    assert second.reason == (
        "step_failed",
        "step",
        (
            "retry_exhausted",
            2,
            (
                "action_exception",
                {
                    "component": "adk_workflow_action",
                    "operation": "execute",
                    "reason": "exception",
                    "class": "RuntimeError",
                },
            ),
        ),
    )


def test_a_refused_result_is_not_retried() -> None:
    """Follows adk_retry_test: invalid_result (in a workflow step: a result that is
    not a delta or a control fails the step at once, whatever the attempts left)."""
    attempts: list[int] = []

    def wrong(state: dict, context: dict) -> int:
        attempts.append(context["attempt"])
        return 42

    wf = adk.compile_workflow(one_step(wrong, {"max_attempts": 5}))
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("step_failed", "step", ("invalid_control", "int"))
    assert attempts == [1]


def test_retry_counts_start_again_when_a_step_resumes_from_a_checkpoint() -> None:
    """Follows adk_workflow_graph_test: cancellation_interrupts_retry_backoff_without_orphans
    (the spec: retry counts cover one live execution of an uncommitted node and reset
    when it is rebuilt from a checkpoint; the step budget is not replenished)."""
    seen: queue.Queue[int] = queue.Queue()
    resumed = threading.Event()
    never = threading.Event()

    def flaky(state: dict, context: dict) -> Output | Error:
        seen.put(context["attempt"])
        if resumed.is_set():
            return Output("recovered")
        if context["attempt"] < 3:
            return Error("transient")
        never.wait(10)
        return Error("late")

    wf = adk.compile_workflow(one_step(flaky, {"max_attempts": 3}))
    ref = adk.workflows.start(wf, {})
    assert [seen.get(timeout=5) for _ in range(3)] == [1, 2, 3]
    adk.workflows.cancel(ref, "interrupted")
    cancelled = adk.workflows.wait(ref, timeout=5)
    assert cancelled.checkpoint.remaining.steps == 999
    resumed.set()
    outcome = adk.workflows.wait(adk.workflows.resume(wf, cancelled.checkpoint), timeout=5)
    assert isinstance(outcome, Completed)
    assert seen.get(timeout=5) == 1
    assert outcome.checkpoint.remaining.steps == 998
    never.set()


# -- the standalone retry (adk_retry_test) ---------------------------------------------------------


def test_retry_success_first_time() -> None:
    """Follows adk_retry_test: success."""
    assert retry.execute(lambda: "success") == "success"


def test_retry_then_success() -> None:
    """Follows adk_retry_test: retry_success."""
    counter = itertools.count(1)

    def fn() -> object:
        return Error("fail") if next(counter) < 3 else "success"

    assert retry.execute(fn, max_attempts=3, initial_delay=0.001, backoff_factor=1.0) == "success"
    assert next(counter) == 4


def test_retry_exhausted_raises_the_last_reason() -> None:
    """Follows adk_retry_test: exhaust_retries."""
    counter = itertools.count(1)

    def fn() -> Error:
        next(counter)
        return Error("fail")

    with pytest.raises(AdkError) as failed:
        retry.execute(fn, max_attempts=3, initial_delay=0.001, backoff_factor=1.0)
    assert failed.value.reason == "fail"
    assert next(counter) == 4


def test_a_crashing_attempt_is_isolated_and_retried() -> None:
    """Follows adk_retry_test: crash_isolated."""
    counter = itertools.count(1)

    def fn() -> str:
        if next(counter) == 1:
            raise RuntimeError("transient crash")
        return "recovered"

    assert retry.execute(fn, max_attempts=2, initial_delay=0, timeout=1.0) == "recovered"


def test_a_blocked_attempt_times_out_and_is_retried() -> None:
    """Follows adk_retry_test: timeout_isolated."""
    counter = itertools.count(1)
    never = threading.Event()

    def fn() -> str:
        if next(counter) == 1:
            never.wait(5)
            return "too late"
        return "recovered"

    assert (
        retry.execute(fn, max_attempts=2, initial_delay=0, attempt_timeout=0.005, timeout=2.0)
        == "recovered"
    )
    assert next(counter) == 3
    never.set()


def test_the_deadline_bounds_the_backoff() -> None:
    """Follows adk_retry_test: deadline_bounds_backoff (without its timing assertion)."""
    with pytest.raises(AdkError) as failed:
        retry.execute(
            lambda: Error("temporary"),
            max_attempts=10,
            initial_delay=0.1,
            max_delay=0.1,
            timeout=0.01,
        )
    assert failed.value.reason == "retry_deadline_exceeded"


def test_an_invalid_result_is_not_retried() -> None:
    """Follows adk_retry_test: invalid_result (in Python: an un-awaited coroutine)."""
    counter = itertools.count(1)

    async def later() -> str:
        return "never"

    def fn() -> object:
        next(counter)
        return later()

    with pytest.raises(AdkError) as failed:
        retry.execute(fn, max_attempts=5)
    assert failed.value.reason == ("invalid_retry_result", "coroutine")
    assert next(counter) == 2


def test_invalid_retry_options_are_refused() -> None:
    """Follows adk_retry_test: invalid_options."""
    for options in ({"max_attempts": 0}, {"unknown": True}, {"initial_delay": 2, "max_delay": 1}):
        with pytest.raises(AdkError) as refused:
            retry.execute(lambda: "never", **options)
        assert refused.value.reason[0] == "invalid_retry_options"


def test_the_async_retry_follows_the_same_rules() -> None:
    """Follows adk_retry_test: retry_success (awaited, with a coroutine callable)."""
    counter = itertools.count(1)

    async def fn() -> object:
        return Error("fail") if next(counter) < 2 else "success"

    assert asyncio.run(retry.execute_async(fn, max_attempts=2, initial_delay=0)) == "success"
