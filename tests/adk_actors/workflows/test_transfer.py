"""Transfer workflows: ownership handoffs that emit `transfer_to_agent` events and
consume the transfer budget; agents resolved by name at dispatch."""

from __future__ import annotations

import queue
import threading

import pytest

import adk_actors as adk
from adk_actors import workflows
from adk_actors.workflows import (
    Agent,
    Completed,
    Failed,
    MemoryLedger,
    Stop,
    Transfer,
    WorkflowEvent,
)
from adk_actors.workflows.checkpoint import TransferCursor, encode_checkpoint


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
    # refused before the source's delta is merged: the checkpoint is the committed one
    assert outcome.checkpoint.state == {}


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


@pytest.mark.parametrize(
    "target",
    [
        "sk-live-0123456789abcdefghijklmnop",
        "x" * 65,
        "two words",
        "password",
        "line\nbreak",
        "AIzaSyA0123456789abcdefghijklmnopqrstuvw",
    ],
)
def test_an_unknown_transfer_target_is_named_only_when_short_and_clean(target: str) -> None:
    """The target is action-chosen text: the failure names it only as a short
    identifier that looks like no credential; anything else is redacted."""
    wf = adk.compile_workflow(
        transfer_spec(entry="a", members={"a": {"run": lambda s: Transfer(target)}})
    )
    outcome = adk.run_workflow(wf, {})
    assert outcome == Failed(("unknown_transfer_target", "redacted_identifier"), outcome.checkpoint)
    assert target not in repr(outcome)
    assert target.encode() not in encode_checkpoint(outcome.checkpoint)


def chain_spec() -> tuple[dict[str, object], threading.Event, threading.Event]:
    """a -> b -> c, where b says it `started`, then blocks until `release` (the run is
    cancelled there)."""
    started, release = threading.Event(), threading.Event()

    def b(state: dict) -> Transfer:
        started.set()
        release.wait(10)
        return Transfer("c", None, {})

    spec = transfer_spec(
        id="transfer-index",
        entry="a",
        members={
            "a": {"run": lambda s: Transfer("b", None, {})},
            "b": {"run": b},
            "c": {"run": lambda s: Stop("done", {})},
        },
    )
    return spec, started, release


@pytest.mark.parametrize("durable", [False, True])
def test_transfer_indexes_go_on_counting_after_a_resume(durable: bool) -> None:
    """The checkpoint records the transfers used, so the first handoff after a resume
    is numbered 2, whatever ``max_transfers`` the first run was given."""
    spec, started, release = chain_spec()
    wf = adk.compile_workflow(spec)
    first_events: queue.Queue[WorkflowEvent] = queue.Queue()
    ledger = MemoryLedger()
    if durable:
        iid, ref = workflows.start_durable(
            wf, {}, ledger=ledger, max_transfers=100, event_receiver=first_events
        )
    else:
        ref = workflows.start(wf, {}, max_transfers=100, event_receiver=first_events)
    assert started.wait(5)
    workflows.cancel(ref, "later")
    cancelled = workflows.wait(ref, 5)
    release.set()
    assert first_events.get(timeout=5).event.actions.transfer_index == 1
    assert cancelled.checkpoint.cursor == TransferCursor(member="b", input=None, transfers_used=1)
    assert cancelled.checkpoint.remaining.transfers == 99
    again: queue.Queue[WorkflowEvent] = queue.Queue()
    if durable:
        resumed = workflows.resume_durable(iid, wf, ledger=ledger, event_receiver=again)
    else:
        resumed = workflows.resume(wf, cancelled.checkpoint, event_receiver=again)
    outcome = workflows.wait(resumed, 5)
    assert isinstance(outcome, Completed)
    assert again.get(timeout=5).event.actions.transfer_index == 2
    assert outcome.checkpoint.remaining.transfers == 98


def test_a_version_1_transfer_checkpoint_resumes_with_an_inferred_index() -> None:
    """A checkpoint written before transfers were counted (schema version 1) resumes;
    its count is taken from the workflow's own budget less the transfers left."""
    spec, _started, release = chain_spec()
    release.set()
    wf = adk.compile_workflow({**spec, "max_transfers": 16})
    v1 = (
        b'{"completed":false,"cursor":{"input":null,"member":"b","type":"transfer"},'
        b'"kind":"transfer","remaining":{"steps":998,"transfers":15},"schema_version":1,'
        b'"state":{},"workflow_id":"transfer-index","workflow_version":1}'
    )
    events: queue.Queue[WorkflowEvent] = queue.Queue()
    outcome = workflows.wait(workflows.resume(wf, v1, event_receiver=events), 5)
    assert isinstance(outcome, Completed)
    assert events.get(timeout=5).event.actions.transfer_index == 2
