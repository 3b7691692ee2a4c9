"""Transfer workflows: ownership handoffs that emit `transfer_to_agent` events and
consume the transfer budget; agents resolved by name at dispatch."""

from __future__ import annotations

import queue
import threading

import adk_actors as adk
from adk_actors.workflows import Agent, Completed, Failed, Stop, Transfer, WorkflowEvent


def transfer_spec(**extra: object) -> dict[str, object]:
    return {"version": 1, "id": "workflow-test", "kind": "transfer", **extra}


def test_transfer_state_budget_and_event() -> None:
    """Follows adk_workflow_test: transfer_state_budget_and_event_case."""

    def a(state: dict, context: dict) -> Transfer:
        return Transfer("b", "handoff-input", {"a": 1})

    def b(state: dict, context: dict) -> Stop:
        assert state["a"] == 1
        assert context["input"] == "handoff-input"
        return Stop("done", {"b_saw_a": True})

    spec = transfer_spec(
        entry="a", members={"a": {"run": a}, "b": {"run": b}}, max_transfers=1, max_steps=3
    )
    wf = adk.compile_workflow(spec)
    events: queue.Queue[WorkflowEvent] = queue.Queue()
    ref = adk.workflows.start(wf, {}, event_receiver=events)
    outcome = adk.workflows.wait(ref, timeout=10)
    assert isinstance(outcome, Completed)
    assert outcome.state["b_saw_a"] is True
    assert outcome.checkpoint.output == "done"
    event = events.get(timeout=5)
    assert event.ref == ref
    assert event.event.author == "a"
    assert event.event.actions.transfer_to_agent == "b"
    assert event.event.actions.transfer_index == 1
    assert events.empty()
    assert adk.workflows.status(ref)["event_count"] == 1

    no_transfers = adk.compile_workflow({**spec, "max_transfers": 0})
    outcome = adk.run_workflow(no_transfers, {})
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("budget_exhausted", "transfers")
    assert outcome.checkpoint.state["a"] == 1  # the source's delta stands


def test_transfer_readme_example() -> None:
    """Follows readme_workflow_examples_test: loop_transfer_and_graph_workflows (the
    transfer)."""

    def specialist(state: dict, context: dict) -> Stop:
        assert state["triaged"] is True
        assert context["input"] == "handoff"
        return Stop("resolved", {"resolved": True})

    wf = adk.compile_workflow(
        transfer_spec(
            id="readme-transfer-v1",
            entry="triage",
            max_transfers=1,
            members={
                "triage": {
                    "run": lambda s, c: Transfer("specialist", "handoff", {"triaged": True})
                },
                "specialist": {"run": specialist},
            },
        )
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"triaged": True, "resolved": True}


def test_unknown_targets_and_plain_results() -> None:
    """Follows adk_workflow_test: transfer_state_budget_and_event_case (the reference
    engine's transfer rules: unknown targets fail; a plain result ends the workflow)."""
    unknown = adk.compile_workflow(
        transfer_spec(entry="a", members={"a": {"run": lambda s: Transfer("nobody")}})
    )
    outcome = adk.run_workflow(unknown, {})
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("unknown_transfer_target", "nobody")

    plain = adk.compile_workflow(
        transfer_spec(
            entry="a", members={"a": {"run": lambda s: {"x": 1}}, "b": {"run": lambda s: {}}}
        )
    )
    outcome = adk.run_workflow(plain, {})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"x": 1}


def test_transfer_resolves_a_restarted_agent_by_name() -> None:
    """Follows adk_workflow_test: transfer_resolves_restarted_agent_by_name_case."""
    deciding = threading.Event()
    go_on = threading.Event()
    adk.spawn_agent("wf_registry_a", {"provider": "scripted", "script": [{"text": "a-response"}]})
    adk.spawn_agent("wf_registry_b", {"provider": "scripted", "script": [{"text": "old-b"}]})

    def decide_a(response: str, state: dict, context: dict) -> Transfer:
        assert response == "a-response"
        deciding.set()
        assert go_on.wait(10)
        return Transfer("b", "from-a")

    wf = adk.compile_workflow(
        transfer_spec(
            entry="a",
            members={
                "a": {"run": Agent("wf_registry_a", "prompt-a", decide_a)},
                "b": {"run": Agent("wf_registry_b", "prompt-b")},
            },
            max_transfers=1,
            max_steps=3,
        )
    )
    ref = adk.workflows.start(wf, {})
    assert deciding.wait(10)
    adk.stop_agent("wf_registry_b")
    adk.spawn_agent("wf_registry_b", {"provider": "scripted", "script": [{"text": "new-b"}]})
    go_on.set()
    outcome = adk.workflows.wait(ref, timeout=10)
    assert isinstance(outcome, Completed)
    assert outcome.state["last_response"] == "new-b"
    assert outcome.state["last_agent"] == "wf_registry_b"
