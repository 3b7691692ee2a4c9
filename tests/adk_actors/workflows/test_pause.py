"""Pause and resume: a pause commits its delta first; the resume input goes to the
paused node's router; nothing committed runs again; nested workflows pause with their
parent and resume without replay; checkpoints validate before anything runs."""

from __future__ import annotations

import collections
import queue
import threading

import msgspec
import pytest

import adk_actors as adk
from adk_actors.workflows import (
    Completed,
    Output,
    Pause,
    Paused,
    Route,
    decode_checkpoint,
    encode_checkpoint,
)
from providers.errors import AdkError
from tests.helpers import wait_until


def graph_spec(entry: str, nodes: list, edges: dict, max_steps: int, **extra: object) -> dict:
    return {
        "version": 1,
        "id": "graph-extension-test",
        "kind": "graph",
        "entry": entry,
        "nodes": nodes,
        "edges": edges,
        "max_steps": max_steps,
        **extra,
    }


def test_pause_resume_routes_without_replaying_the_node() -> None:
    """Follows adk_workflow_graph_test: pause_resume_routes_without_replaying_node."""
    calls: collections.Counter[str] = collections.Counter()

    def pause(state: dict) -> Pause:
        calls["pause"] += 1
        return Pause("human_approval", "Approve this graph node", {"approval_requested": True})

    def route(state: dict, context: dict) -> str:
        return "accepted" if context["input"]["approved"] else "rejected"

    wf = adk.compile_workflow(
        graph_spec(
            "approval",
            [
                {"id": "approval", "run": pause},
                {"id": "accepted", "run": lambda s: {"accepted": True}},
                {"id": "rejected", "run": lambda s: {"accepted": False}},
            ],
            {"approval": Route(route), "accepted": "end", "rejected": "end"},
            6,
        )
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Paused)
    assert outcome.details == {
        "reason": "human_approval",
        "details": "Approve this graph node",
        "node_id": "approval",
    }
    assert outcome.checkpoint.state["approval_requested"] is True
    with pytest.raises(AdkError) as missing:
        adk.workflows.resume(wf, outcome.checkpoint)
    assert missing.value.reason == "resume_input_required"
    with pytest.raises(AdkError) as not_json:
        adk.workflows.resume(wf, outcome.checkpoint, resume_input=object())
    assert not_json.value.reason[0] == "invalid_resume_input"
    ref = adk.workflows.resume(wf, outcome.checkpoint, resume_input={"approved": True})
    final = adk.workflows.wait(ref, timeout=10)
    assert isinstance(final, Completed)
    assert final.state["accepted"] is True
    assert calls["pause"] == 1


def test_checkpoint_resume_does_not_replay_a_committed_step() -> None:
    """Follows adk_workflow_test: checkpoint_resume_does_not_replay_committed_step_case."""
    calls: collections.Counter[str] = collections.Counter()
    allow_second = threading.Event()
    blocked: queue.Queue[bool] = queue.Queue()
    unblock = threading.Event()

    def first(state: dict) -> Output:
        calls["first"] += 1
        return Output("first-output", {"first_committed": True})

    def second(state: dict, context: dict) -> dict:
        assert context["input"] == "first-output"
        if not allow_second.is_set():
            blocked.put(True)
            unblock.wait(10)
        return {"second_committed": True}

    wf = adk.compile_workflow(
        {
            "version": 1,
            "id": "workflow-test",
            "kind": "sequential",
            "max_steps": 4,
            "steps": [{"id": "first", "run": first}, {"id": "second", "run": second}],
        }
    )
    ref = adk.workflows.start(wf, {})
    assert blocked.get(timeout=10)

    def at_second() -> object:
        cp = adk.workflows.checkpoint(ref)
        return cp if cp.cursor.next_index == 1 and cp.state.get("first_committed") else None

    observed = wait_until(at_second)
    tampered = msgspec.structs.replace(observed, output=object())
    with pytest.raises(AdkError) as invalid:
        adk.workflows.resume(wf, tampered)
    assert invalid.value.reason == "invalid_checkpoint"
    adk.workflows.cancel(ref, "checkpoint_test")
    cancelled = adk.workflows.wait(ref, timeout=10)
    assert cancelled.reason == "checkpoint_test"
    assert cancelled.checkpoint.state == observed.state
    assert cancelled.checkpoint.output == "first-output"
    unblock.set()
    allow_second.set()
    encoded = encode_checkpoint(cancelled.checkpoint)  # a checkpoint survives as bytes
    resumed = adk.workflows.resume(wf, encoded)
    final = adk.workflows.wait(resumed, timeout=10)
    assert isinstance(final, Completed)
    assert final.state["second_committed"] is True
    assert final.checkpoint.output == "first-output"
    assert calls["first"] == 1
    with pytest.raises(AdkError) as complete:
        adk.workflows.resume(wf, decode_checkpoint(encode_checkpoint(final.checkpoint)))
    assert complete.value.reason == "checkpoint_complete"


def _child_graph(calls: collections.Counter[str], final_input: object) -> dict:
    def before(state: dict) -> Output:
        calls["before"] += 1
        return Output("child-intermediate", {"before": True})

    def pause(state: dict) -> Pause:
        calls["pause"] += 1
        assert state["before"] is True
        return Pause("approval", "Approve the child", {"requested": True})

    def after(state: dict, context: dict) -> Output:
        calls["after"] += 1
        assert state["requested"] is True
        assert context["input"] == final_input
        return Output("child-final", {"child_done": True})

    return graph_spec(
        "before",
        [
            {"id": "before", "run": before},
            {"id": "approval", "run": pause},
            {"id": "after", "run": after},
        ],
        {"before": "approval", "approval": "after", "after": "end"},
        6,
        id="child-graph",
    )


def test_sequential_nested_pause_resumes_the_child_without_replay() -> None:
    """Follows adk_workflow_test: sequential_nested_pause_resumes_child_without_replay_case."""
    calls: collections.Counter[str] = collections.Counter()
    child = adk.compile_workflow(_child_graph(calls, "approved"))

    def final(state: dict, context: dict) -> Output:
        assert state["child_done"] is True
        assert context["input"] == "child-final"
        return Output("parent-final", {"parent_done": True})

    parent = adk.compile_workflow(
        {
            "version": 1,
            "id": "parent",
            "kind": "sequential",
            "max_steps": 4,
            "steps": [{"id": "child", "run": child}, {"id": "final", "run": final}],
        }
    )
    outcome = adk.run_workflow(parent, {})
    assert isinstance(outcome, Paused)
    assert outcome.details["step_id"] == "child"
    assert outcome.details["nested_node_id"] == "approval"
    assert (calls["before"], calls["pause"], calls["after"]) == (1, 1, 0)
    ref = adk.workflows.resume(parent, outcome.checkpoint, resume_input="approved")
    completed = adk.workflows.wait(ref, timeout=10)
    assert isinstance(completed, Completed)
    assert completed.state["parent_done"] is True
    assert completed.checkpoint.output == "parent-final"
    assert (calls["before"], calls["pause"], calls["after"]) == (1, 1, 1)


def test_nested_workflow_pause_resumes_the_child_without_replay() -> None:
    """Follows adk_workflow_graph_test: nested_workflow_pause_resumes_child_without_replay."""
    calls: collections.Counter[str] = collections.Counter()
    child = adk.compile_workflow(_child_graph(calls, {"approved": True}))

    def parent_after(state: dict, context: dict) -> Output:
        assert state["child_done"] is True
        assert context["input"] == "child-final"
        return Output("parent-final", {"parent_done": True})

    parent = adk.compile_workflow(
        graph_spec(
            "child",
            [
                {"id": "child", "type": "workflow", "workflow": child},
                {"id": "parent-after", "run": parent_after},
            ],
            {"child": "parent-after", "parent-after": "end"},
            4,
        )
    )
    outcome = adk.run_workflow(parent, {})
    assert isinstance(outcome, Paused)
    assert outcome.details["node_id"] == "child"
    assert outcome.details["nested_node_id"] == "approval"
    cursor = outcome.checkpoint.cursor
    assert cursor.resume_kind == "nested_workflow"
    assert cursor.nested_checkpoint.output == "child-intermediate"
    assert (calls["before"], calls["pause"], calls["after"]) == (1, 1, 0)
    ref = adk.workflows.resume(parent, outcome.checkpoint, resume_input={"approved": True})
    completed = adk.workflows.wait(ref, timeout=10)
    assert isinstance(completed, Completed)
    assert completed.state["before"] is True
    assert completed.state["requested"] is True
    assert completed.state["parent_done"] is True
    assert completed.checkpoint.output == "parent-final"
    assert (calls["before"], calls["pause"], calls["after"]) == (1, 1, 1)


def test_fork_nested_workflow_pause_resumes_the_child_without_replay() -> None:
    """Follows adk_workflow_graph_test: fork_nested_workflow_pause_resumes_child_without_replay."""
    calls: collections.Counter[str] = collections.Counter()
    child = adk.compile_workflow(_child_graph(calls, "yes"))

    def other(state: dict) -> Output:
        calls["other"] += 1
        return Output("other-output", {"other_done": True})

    def join(state: dict, context: dict) -> Output:
        inputs = context["input"]
        assert inputs == {"nested": "child-final", "other": "other-output"}
        return Output(inputs, {"joined": True})

    parent = adk.compile_workflow(
        graph_spec(
            "fork",
            [
                {
                    "id": "fork",
                    "type": "fork",
                    "branches": ["nested", "other"],
                    "join": "join",
                    "max_concurrency": 1,
                },
                {"id": "nested", "type": "workflow", "workflow": child},
                {"id": "other", "run": other},
                {"id": "join", "type": "join", "run": join},
            ],
            {"nested": "join", "other": "join", "join": "end"},
            8,
        )
    )
    outcome = adk.run_workflow(parent, {}, max_concurrency=1)
    assert isinstance(outcome, Paused)
    assert outcome.details["fork_id"] == "fork"
    assert outcome.details["node_id"] == "nested"
    assert outcome.details["nested_node_id"] == "approval"
    assert (calls["before"], calls["pause"], calls["after"], calls["other"]) == (1, 1, 0, 0)
    ref = adk.workflows.resume(parent, outcome.checkpoint, resume_input="yes", max_concurrency=1)
    completed = adk.workflows.wait(ref, timeout=10)
    assert isinstance(completed, Completed)
    assert completed.state["child_done"] is True
    assert completed.state["other_done"] is True
    assert completed.state["joined"] is True
    assert completed.checkpoint.output == {"nested": "child-final", "other": "other-output"}
    assert (calls["before"], calls["pause"], calls["after"], calls["other"]) == (1, 1, 1, 1)


def test_graph_fork_join_and_pause_readme_example() -> None:
    """Follows readme_workflow_examples_test: graph_fork_join_and_pause_resume (the
    non-durable parts)."""

    def join(state: dict, context: dict) -> Output:
        outputs = context["input"]
        assert outputs == {"left": "left-output", "right": "right-output"}
        return Output(outputs, {"joined": True})

    fork_join = adk.compile_workflow(
        graph_spec(
            "fork",
            [
                {
                    "id": "fork",
                    "type": "fork",
                    "branches": ["left", "right"],
                    "join": "join",
                    "merge": "reject_conflicts",
                    "max_concurrency": 2,
                },
                {"id": "left", "run": lambda s: Output("left-output", {"left": 1})},
                {"id": "right", "run": lambda s: Output("right-output", {"right": 2})},
                {"id": "join", "type": "join", "run": join},
            ],
            {"left": "join", "right": "join", "join": "end"},
            6,
            id="readme-fork-join-v1",
        )
    )
    outcome = adk.run_workflow(fork_join, {})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"left": 1, "right": 2, "joined": True}
    assert outcome.checkpoint.output == {"left": "left-output", "right": "right-output"}

    def route(state: dict, context: dict) -> str:
        assert context["input"]["approved"] is True
        return "accepted"

    approval = adk.compile_workflow(
        graph_spec(
            "approval",
            [
                {
                    "id": "approval",
                    "run": lambda s: Pause(
                        "human_approval", "Approve this action", {"approval_requested": True}
                    ),
                },
                {"id": "accepted", "run": lambda s: {"accepted": True}},
            ],
            {"approval": Route(route), "accepted": "end"},
            3,
            id="readme-graph-approval-v1",
        )
    )
    paused = adk.run_workflow(approval, {})
    assert isinstance(paused, Paused)
    ref = adk.workflows.resume(approval, paused.checkpoint, resume_input={"approved": True})
    final = adk.workflows.wait(ref, timeout=10)
    assert isinstance(final, Completed)
    assert final.state == {"approval_requested": True, "accepted": True}
