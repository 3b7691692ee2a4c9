"""`workflows.run_async`: the start registers the caller's wait, so a run that ends
before the await reaches it still answers it (the stress harness's ``workflows`` kind
once lost runs this way: start, then `wait_async` more than `retention` later said
``not_found``)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.app import WORKFLOW_SUPERVISOR
from adk_actors.workflows import Completed, Output
from providers.errors import AdkError
from tests.helpers import wait_until

SLOW_LOOP_S = 0.3
"""How long the caller is held up between the start and its wait (a busy event loop)."""


def _workflow(run: object) -> adk.workflows.CompiledWorkflow:
    return adk.compile_workflow(
        {"version": 1, "id": "run-async", "kind": "sequential", "steps": [{"id": "a", "run": run}]}
    )


def _coordinators() -> int:
    return sv.DynamicSupervisor.count_children(WORKFLOW_SUPERVISOR)["active"]


def test_a_start_then_a_late_wait_loses_the_outcome() -> None:
    """The race itself: a run that ended more than `retention` before its wait is gone."""
    ref = adk.workflows.start(_workflow(lambda s: Output("done")), {}, retention=0.05)
    time.sleep(SLOW_LOOP_S)
    with pytest.raises(AdkError) as raised:
        asyncio.run(adk.workflows.wait_async(ref, timeout=5))
    assert raised.value.reason == "not_found"


def test_run_async_answers_a_caller_held_up_past_the_retention() -> None:
    """The same delay inside `run_async` (its `on_start` blocks the loop): the outcome
    waits for the caller, and the retention counts from the answer."""
    refs: list[str] = []

    def held_up(ref: str) -> None:
        refs.append(ref)
        time.sleep(SLOW_LOOP_S)  # the run ends meanwhile

    async def main() -> tuple[object, dict[str, object]]:
        outcome = await adk.workflows.run_async(
            _workflow(lambda s: Output("done")), {}, retention=0.2, on_start=held_up
        )
        return outcome, adk.workflows.status(refs[0])

    outcome, view = asyncio.run(main())
    assert isinstance(outcome, Completed) and outcome.checkpoint.output == "done"
    assert view["state"] == "completed"  # still retained: counted from the answer
    wait_until(lambda: _coordinators() == 0, timeout=5)


def test_run_async_that_gives_up_leaves_the_run_retained_as_usual() -> None:
    """A wait that times out withdraws the claim: the run goes on, and once it ends it
    is retained for its own retention only (not held for a caller who left)."""
    gate = threading.Event()

    def slow(state: dict[str, object]) -> Output:
        gate.wait(5)
        return Output("late")

    refs: list[str] = []

    async def main() -> None:
        await adk.workflows.run_async(
            _workflow(slow), {}, retention=0.1, wait_timeout=0.05, on_start=refs.append
        )

    with pytest.raises(AdkError) as raised:
        asyncio.run(main())
    assert raised.value.reason == "timeout"
    assert adk.workflows.status(refs[0])["state"] == "running"
    gate.set()
    wait_until(lambda: _coordinators() == 0, timeout=5)


def test_run_async_refuses_bad_input_before_anything_runs() -> None:
    with pytest.raises(AdkError) as raised:
        asyncio.run(adk.workflows.run_async(_workflow(lambda s: Output(1)), ["not", "a", "dict"]))
    assert raised.value.reason == ("invalid_initial_state", "expected_object")
    assert _coordinators() == 0
