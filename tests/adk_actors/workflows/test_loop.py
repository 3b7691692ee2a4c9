"""Loop workflows: `until` ends the loop, exhausting `max_iterations` completes (it
does not fail), the body's output is the workflow's, predicates are strict."""

from __future__ import annotations

import adk_actors as adk
from adk_actors.workflows import Completed, Failed, Output
from adk_actors.workflows.checkpoint import CompleteCursor


def loop_spec(**extra: object) -> dict[str, object]:
    return {"version": 1, "id": "workflow-test", "kind": "loop", **extra}


def increment(state: dict) -> dict:
    return {"count": state.get("count", 0) + 1}


def test_until_stops_and_exhaustion_completes() -> None:
    """Follows adk_workflow_test: loop_budget_and_completion_case."""
    until = adk.compile_workflow(
        loop_spec(body=increment, until=lambda s: s["count"] >= 3, max_iterations=3, max_steps=4)
    )
    outcome = adk.run_workflow(until, {"count": 0})
    assert isinstance(outcome, Completed)
    assert outcome.state["count"] == 3

    exhausted = adk.compile_workflow(
        loop_spec(body=increment, until=lambda s: False, max_iterations=2, max_steps=4)
    )
    outcome = adk.run_workflow(exhausted, {"count": 0})
    assert isinstance(outcome, Completed)
    assert outcome.state["count"] == 2
    assert outcome.checkpoint.completed is True
    assert outcome.checkpoint.cursor == CompleteCursor()

    none = adk.compile_workflow(loop_spec(body=increment, until=lambda s: False, max_iterations=0))
    outcome = adk.run_workflow(none, {"count": 0})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"count": 0}


def test_the_last_body_output_is_the_output() -> None:
    """Follows readme_workflow_examples_test: loop_transfer_and_graph_workflows (the loop)."""

    def body(state: dict) -> Output:
        attempt = state.get("attempt", 0) + 1
        return Output(attempt, {"attempt": attempt})

    wf = adk.compile_workflow(
        loop_spec(
            id="readme-loop-v1",
            max_iterations=3,
            body=body,
            until=lambda s: s["attempt"] >= 2,
        )
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"attempt": 2}
    assert outcome.checkpoint.output == 2


def test_predicate_and_body_failures_are_reported() -> None:
    """Follows adk_workflow_test: loop_budget_and_completion_case (the reference
    engine's loop failure tags: loop_body_failed, loop_predicate_failed,
    invalid_loop_predicate_result)."""
    invalid = adk.compile_workflow(
        loop_spec(body=increment, until=lambda s: "maybe", max_iterations=3)
    )
    outcome = adk.run_workflow(invalid, {})
    assert isinstance(outcome, Failed)
    assert outcome.reason == "invalid_loop_predicate_result"

    def crash(state: dict) -> bool:
        raise RuntimeError("secret predicate text")

    crashing = adk.compile_workflow(loop_spec(body=increment, until=crash, max_iterations=3))
    outcome = adk.run_workflow(crashing, {})
    assert isinstance(outcome, Failed)
    tag, failure = outcome.reason
    assert tag == "loop_predicate_failed"
    assert failure["class"] == "RuntimeError"
    assert "secret" not in repr(outcome)

    failing = adk.compile_workflow(
        loop_spec(
            body=lambda s: adk.workflows.Error("nope"), until=lambda s: True, max_iterations=3
        )
    )
    outcome = adk.run_workflow(failing, {})
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("loop_body_failed", "nope")


def test_a_loop_checkpoints_each_iteration_and_keeps_its_budget() -> None:
    """Follows adk_workflow_test: loop_budget_and_completion_case (the step budget:
    one step per body run)."""
    wf = adk.compile_workflow(
        loop_spec(body=increment, until=lambda s: False, max_iterations=10, max_steps=3)
    )
    outcome = adk.run_workflow(wf, {"count": 0})
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("budget_exhausted", "steps")
    assert outcome.checkpoint.state["count"] == 3
    assert outcome.checkpoint.cursor.iteration == 3
