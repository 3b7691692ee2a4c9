"""Sequential workflows, the root tree's workflow supervisor, schema contracts and the
result contract (output continues, stop ends)."""

from __future__ import annotations

import threading
import time

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.app import WORKFLOW_SUPERVISOR
from adk_actors.workflows import Completed, Failed, Output, Stop, WorkflowSpecError
from adk_actors.workflows.checkpoint import Remaining
from adk_actors.workflows.launch import fresh_launch
from providers.errors import AdkError


def base_spec(kind: str, **extra: object) -> dict[str, object]:
    return {"version": 1, "id": "workflow-test", "kind": kind, **extra}


def step(step_id: str, run: object, **extra: object) -> dict[str, object]:
    return {"id": step_id, "run": run, **extra}


def test_root_tree_has_the_workflow_supervisor_and_the_facade_runs() -> None:
    """Follows adk_workflow_test: supervisor_and_public_facade_case."""
    supervisor = sv.whereis(WORKFLOW_SUPERVISOR)
    assert supervisor is not None
    children = sv.Supervisor.which_children(adk.app.APP_NAME)
    ids = [child.id for child in children]
    # the design's order: admission control, then the ambient supervisor, then workflows
    assert ids.index("workflow_supervisor") > ids.index("admission_control")
    assert children[ids.index("workflow_supervisor")].type == "supervisor"
    assert sv.get_state(supervisor).intensity.intensity == 20
    wf = adk.compile_workflow(
        base_spec("sequential", steps=[step("facade", lambda s: {"facade": True})])
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.state["facade"] is True


def test_schemas_are_checked_before_and_after_the_run() -> None:
    """Follows adk_workflow_test: workflow_schema_contracts_case."""
    ran = threading.Event()

    def contract(state: dict) -> Output:
        ran.set()
        return Output("valid-output")

    input_schema = {
        "type": "object",
        "required": ["topic"],
        "properties": {"topic": {"type": "string"}},
    }
    valid = adk.compile_workflow(
        base_spec(
            "sequential",
            input_schema=input_schema,
            output_schema={"type": "string"},
            steps=[step("contract", contract)],
        )
    )
    with pytest.raises(AdkError) as refused:
        adk.workflows.start(valid, {})
    assert refused.value.reason[0] == "input_schema_validation_failed"
    assert refused.value.reason[1][0] == "schema_validation_failed"
    assert not ran.is_set()
    outcome = adk.run_workflow(valid, {"topic": "Erlang"})
    assert isinstance(outcome, Completed)
    assert outcome.checkpoint.output == "valid-output"

    wrong = adk.compile_workflow(
        base_spec(
            "sequential",
            output_schema={"type": "string"},
            steps=[step("wrong-output", lambda s: Output(42, {"ran": True}))],
        )
    )
    failed = adk.run_workflow(wrong, {})
    assert isinstance(failed, Failed)
    assert failed.reason == (
        "output_schema_validation_failed",
        ("schema_validation_failed", [], ("expected_type", "string")),
    )
    assert failed.checkpoint.completed is False
    assert failed.checkpoint.state["ran"] is True

    with pytest.raises(WorkflowSpecError) as bad_schema:
        adk.compile_workflow(
            base_spec(
                "sequential",
                output_schema={"type": 12},
                steps=[step("noop", lambda s: None)],
            )
        )
    assert bad_schema.value.path == ("output_schema",)


def test_steps_merge_deltas_in_order() -> None:
    """Follows adk_workflow_test: sequential_delta_case."""
    seen: list[str] = []

    def first(state: dict, context: dict) -> dict:
        seen.append(context["step_id"])
        return {"count": state.get("count", 0) + 1}

    def second(state: dict) -> Stop:
        return Stop("finished", {"count": state["count"] + 1, "done": True})

    wf = adk.compile_workflow(
        base_spec("sequential", max_steps=4, steps=[step("one", first), step("two", second)])
    )
    outcome = adk.run_workflow(wf, {"initial": True})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"initial": True, "count": 2, "done": True}
    assert outcome.checkpoint.completed is True
    assert outcome.checkpoint.output == "finished"
    assert seen == ["one"]


def test_output_continues_and_stop_ends_the_workflow() -> None:
    """Follows adk_workflow_test: output_stop_and_legacy_complete_contract_case (the
    legacy `complete` result is the reference's alias of stop; Python has `Stop` only)."""
    never = threading.Event()

    def stop(state: dict) -> Stop:
        assert state["first"] is True
        return Stop("stopped", {"second": True})

    def must_not_run(state: dict) -> dict:
        never.set()
        return {"third": True}

    wf = adk.compile_workflow(
        base_spec(
            "sequential",
            max_steps=4,
            steps=[
                step("first", lambda s: Output("intermediate", {"first": True})),
                step("stop", stop),
                step("never", must_not_run),
            ],
        )
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"first": True, "second": True}
    assert outcome.checkpoint.output == "stopped"
    assert not never.is_set()


def test_each_step_sees_the_last_committed_output_as_input() -> None:
    """Follows readme_workflow_examples_test: sequential_and_parallel_workflows (the
    sequential part: step 2 sees ``input == "counted"``)."""

    def add_one(state: dict, context: dict) -> Output:
        assert context["input"] is None
        return Output("counted", {"count": state.get("count", 0) + 1})

    def mark_done(state: dict, context: dict) -> Output:
        assert context["input"] == "counted"
        return Output("ready", {"done": True})

    wf = adk.compile_workflow(
        base_spec(
            "sequential",
            id="readme-sequential-v1",
            max_steps=4,
            input_schema={"type": "object", "required": ["count"]},
            output_schema={"type": "string"},
            steps=[step("increment", add_one), step("finish", mark_done)],
        )
    )
    outcome = adk.run_workflow(wf, {"count": 0})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"count": 1, "done": True}
    assert outcome.checkpoint.output == "ready"


def test_the_action_context_names_the_run() -> None:
    """Follows adk_workflow_graph_test: workflow_agent_invocations_are_fresh_and_receive_context
    (the context keys, for a plain action)."""
    contexts: list[dict] = []

    def probe(state: dict, context: dict) -> None:
        contexts.append(context)
        state["mutated"] = True  # a private copy: the run's state does not change

    wf = adk.compile_workflow(base_spec("sequential", steps=[step("probe", probe)]))
    outcome = adk.run_workflow(wf, {"a": 1})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"a": 1}
    (context,) = contexts
    assert context["workflow_id"] == "workflow-test"
    assert context["kind"] == "sequential"
    assert context["step_id"] == "probe"
    assert context["app_name"] == "adk_workflow"
    assert context["user_id"] == "workflow-test"
    assert context["session_id"].startswith("workflow-")
    assert context["attempt"] == 1
    assert context["input"] is None
    assert context["budgets"] == {"steps_remaining": 999, "transfers_remaining": 0}
    assert context["checkpoint_cursor"] == {"type": "sequential", "next_index": 0}
    assert isinstance(context["deadline"], float)
    assert "invocation_id" not in context


def test_a_step_budget_and_invalid_results_fail_the_run() -> None:
    """Follows adk_workflow_test: graph_route_and_step_budget_case (the budget, for
    steps) and the result contract's refusals."""
    wf = adk.compile_workflow(
        base_spec(
            "sequential",
            max_steps=1,
            steps=[step("one", lambda s: {"one": 1}), step("two", lambda s: {"two": 2})],
        )
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("budget_exhausted", "steps")
    assert outcome.checkpoint.state == {"one": 1}
    assert outcome.checkpoint.remaining.steps == 0

    bad = adk.compile_workflow(base_spec("sequential", steps=[step("bad", lambda s: 42)]))
    failed = adk.run_workflow(bad, {})
    assert isinstance(failed, Failed)
    assert failed.reason == ("step_failed", "bad", ("invalid_control", "int"))
    pausing = adk.compile_workflow(
        base_spec("sequential", steps=[step("pause", lambda s: adk.workflows.Pause("why"))])
    )
    refused = adk.run_workflow(pausing, {})
    assert isinstance(refused, Failed)
    assert refused.reason == ("step_failed", "pause", ("invalid_control", "pause"))


def test_a_run_defaults_to_a_30_second_deadline_and_a_60_second_retention() -> None:
    """Follows adk_workflow_test: supervisor_and_public_facade_case (behaviors §7's
    defaults at run time: the whole-run timeout 30 s, retention 60 s, the spec's
    budgets; ``timeout=None`` means no deadline)."""
    wf = adk.compile_workflow(base_spec("sequential", steps=[step("a", lambda s: {})]))
    before = time.monotonic()
    launch = fresh_launch(wf, {})
    assert launch.runtime.deadline is not None
    assert 30.0 <= launch.runtime.deadline - before <= 31.0
    assert launch.runtime.retention == 60.0
    assert launch.checkpoint.remaining == Remaining(steps=1000, transfers=0)
    assert fresh_launch(wf, {}, timeout=None).runtime.deadline is None
    ref = adk.workflows.start(wf, {})
    adk.workflows.wait(ref, timeout=5)
    assert 29.0 <= adk.workflows.status(ref)["deadline"] - before <= 31.0
    assert adk.workflows.status(ref)["state"] == "completed"  # retained after its end
