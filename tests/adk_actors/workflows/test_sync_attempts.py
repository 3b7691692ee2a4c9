"""Sync actions run on pool threads that cannot be killed. A timed-out or cancelled
sync attempt is fenced (its result is dropped) and signalled (``context["cancelled"]``
is set); the next attempt of the same step never overlaps it: it waits for that
thread (bounded by the step's timeout and the run's deadline) or the step fails
``attempt_still_running``; a cancel or the deadline ends the run at once, without
waiting for the thread."""

from __future__ import annotations

import threading
import time
from typing import Any

import adk_actors as adk
from adk_actors.workflows import Agent, Cancelled, Completed, Error, Failed, Output
from tests.helpers import wait_until


class Overlap:
    """Counts the attempts of one step running at once (`peak`) and those that ran
    to their end (`finished`, by attempt number)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0
        self.finished: list[int] = []
        self.signals: list[threading.Event] = []

    def enter(self, context: dict[str, Any]) -> None:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.signals.append(context["cancelled"])

    def leave(self, context: dict[str, Any]) -> None:
        with self.lock:
            self.active -= 1
            self.finished.append(context["attempt"])


def one_step(run: Any, **policy: Any) -> Any:
    return adk.compile_workflow(
        {"id": "sync-attempts", "kind": "sequential", "steps": [{"id": "s", "run": run, **policy}]}
    )


RETRY_3 = {"timeout": 0.1, "retry": {"max_attempts": 3, "backoff": 0.0}}


def test_a_sync_attempt_that_ignores_its_signal_is_never_overlapped() -> None:
    """Attempt 1 overruns its timeout and ignores the signal: attempt 2 waits for its
    thread (at most the step's timeout), then the step fails ``attempt_still_running``
    instead of starting a second thread of the same step."""
    overlap = Overlap()

    def slow(state: dict[str, Any], context: dict[str, Any]) -> Output:
        overlap.enter(context)
        time.sleep(0.5)
        overlap.leave(context)
        return Output("late", {"late": True})

    outcome = adk.run_workflow(one_step(slow, **RETRY_3), {})
    assert outcome == Failed(
        ("step_failed", "s", ("attempt_still_running", 1, ("action_timed_out", 0.1))),
        outcome.checkpoint,
    )
    assert outcome.checkpoint.state == {}  # the late result was fenced
    wait_until(lambda: overlap.finished == [1])
    time.sleep(0.2)
    assert overlap.peak == 1 and overlap.finished == [1]  # attempt 2 never started
    assert overlap.signals[0].is_set()


def test_a_sync_attempt_that_honours_its_signal_lets_the_retry_run_after_it() -> None:
    overlap = Overlap()

    def cooperative(state: dict[str, Any], context: dict[str, Any]) -> Any:
        overlap.enter(context)
        try:
            if context["attempt"] < 3:
                assert context["cancelled"].wait(5)  # stopped at the attempt's timeout
                time.sleep(0.02)  # cleaning up: the next attempt must wait for this
                return Error("too_late")
            return Output("recovered", {"attempt": context["attempt"]})
        finally:
            overlap.leave(context)

    outcome = adk.run_workflow(one_step(cooperative, **RETRY_3), {})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"attempt": 3}
    assert overlap.peak == 1
    assert overlap.finished == [1, 2, 3]
    assert [signal.is_set() for signal in overlap.signals] == [True, True, False]


def test_the_wait_for_a_stopped_thread_ends_at_the_run_deadline() -> None:
    """The retry waits for the old thread, but never past the run's deadline."""
    release = threading.Event()

    def stuck(state: dict[str, Any]) -> dict[str, Any]:
        release.wait(5)
        return {}

    began = time.monotonic()  # attempt 1 times out at 0.2 s; the wait for it ends at 0.3 s
    policy = {"timeout": 0.2, "retry": {"max_attempts": 3, "backoff": 0.0}}
    outcome = adk.run_workflow(one_step(stuck, **policy), {}, timeout=0.3)
    release.set()
    assert outcome == Failed("timed_out", outcome.checkpoint)
    assert time.monotonic() - began < 1.5


def test_cancel_signals_a_sync_action_and_does_not_wait_for_it() -> None:
    running = threading.Event()
    release = threading.Event()
    seen: list[threading.Event] = []

    def blocking(state: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        seen.append(context["cancelled"])
        running.set()
        release.wait(5)  # ignores the signal: the cancel must not wait for it
        return {"late": True}

    ref = adk.workflows.start(one_step(blocking), {})
    assert running.wait(5)
    began = time.monotonic()
    adk.workflows.cancel(ref, "stop_now")
    outcome = adk.workflows.wait(ref, timeout=5)
    assert time.monotonic() - began < 1.0
    assert isinstance(outcome, Cancelled) and outcome.checkpoint.state == {}
    wait_until(lambda: seen[0].is_set())
    release.set()


def test_the_deadline_signals_sync_actions_and_predicates() -> None:
    signals: list[threading.Event] = []

    def body(state: dict[str, Any]) -> dict[str, Any]:
        return {"n": state.get("n", 0) + 1}

    def until(state: dict[str, Any], context: dict[str, Any]) -> bool:
        signals.append(context["cancelled"])
        context["cancelled"].wait(5)
        return True

    wf = adk.compile_workflow(
        {"id": "sync-until", "kind": "loop", "body": body, "until": until, "max_iterations": 2}
    )
    outcome = adk.run_workflow(wf, {}, timeout=0.2)
    assert outcome == Failed("timed_out", outcome.checkpoint)
    wait_until(lambda: bool(signals) and signals[0].is_set())


def test_an_agent_call_ends_with_its_attempt_so_the_retry_can_start() -> None:
    """An agent step's call is bounded by its attempt's own deadline: its thread is
    free again right after the attempt times out, so the retry runs (it is not
    refused as ``attempt_still_running``) and never overlaps it."""
    calls: list[float] = []

    def model(history: Any, tools: Any) -> dict[str, str]:
        calls.append(time.monotonic())
        time.sleep(0.5)
        return {"text": "slow"}

    adk.spawn_agent("wf_slow_agent", {"provider": adk.ScriptedProvider(fn=model)})
    wf = one_step(
        Agent("wf_slow_agent", "hi"), timeout=0.1, retry={"max_attempts": 2, "backoff": 0.0}
    )
    began = time.monotonic()
    outcome = adk.run_workflow(wf, {})
    assert outcome == Failed(
        ("step_failed", "s", ("retry_exhausted", 2, ("action_timed_out", 0.1))),
        outcome.checkpoint,
    )
    assert time.monotonic() - began < 1.0
    wait_until(lambda: len(calls) == 2)
