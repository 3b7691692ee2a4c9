"""Failures and diagnostics are bounded and secret-free: action errors, exceptions and
cancel reasons become structural failures; nothing of a run (its state, closures,
checkpoints) shows in supervisor metadata or a server's state view; the launch
crosses a one-shot handoff."""

from __future__ import annotations

import queue
import threading

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.app import WORKFLOW_SUPERVISOR
from adk_actors.workflows import Cancelled, Error, Failed, encode_checkpoint
from adk_actors.workflows import launch as launch_module
from adk_actors.workflows.coordinator import WorkflowCoordinator
from adk_actors.workflows.launch import Launch, fresh_launch, handoffs, workflow_name
from adk_actors.workflows.spec import CompiledWorkflow
from providers.errors import AdkError

SEED = "seeded-secret-4f1d9b"


def sequential(steps: list) -> dict:
    return {"version": 1, "id": "workflow-test", "kind": "sequential", "steps": steps}


def _no_seed(*values: object) -> None:
    for value in values:
        assert SEED not in repr(value)


def test_public_failures_are_sanitized() -> None:
    """Follows adk_workflow_test: public_failures_are_sanitized_case."""
    me = sv.self_pid()

    def crash(state: dict) -> dict:
        raise RuntimeError((SEED, me))

    outcome = adk.run_workflow(
        adk.compile_workflow(sequential([{"id": "crash", "run": crash}])), {}
    )
    assert isinstance(outcome, Failed)
    assert outcome.reason == (
        "step_failed",
        "crash",
        (
            "action_exception",
            {
                "component": "adk_workflow_action",
                "operation": "execute",
                "reason": "exception",
                "class": "RuntimeError",
            },
        ),
    )
    _no_seed(outcome)
    assert repr(me) not in repr(outcome)

    def tagged(state: dict) -> dict:
        raise AdkError("seeded_secret", f"detail with {SEED}")

    outcome = adk.run_workflow(
        adk.compile_workflow(sequential([{"id": "crash", "run": tagged}])), {}
    )
    assert outcome.reason[2][1]["reason"] == "seeded_secret"
    _no_seed(outcome)


def test_failure_and_cancel_outcomes_hide_the_seed() -> None:
    """Follows adk_workflow_failure_security_test: public_failure_and_cancel_outcomes_hide_seed."""
    wf = adk.compile_workflow(
        sequential([{"id": "step", "run": lambda s: Error(("http_error", 503, {"body": SEED}))}])
    )
    ref = adk.workflows.start(wf, {})
    outcome = adk.workflows.wait(ref, timeout=5)
    assert isinstance(outcome, Failed)
    assert outcome.reason == (
        "step_failed",
        "step",
        {
            "component": "adk_workflow_action",
            "operation": "action",
            "reason": "http_error",
            "status": 503,
        },
    )
    _no_seed(outcome, adk.workflows.status(ref), encode_checkpoint(outcome.checkpoint))

    never = threading.Event()
    blocked = adk.compile_workflow(
        sequential([{"id": "block", "run": lambda s: never.wait(5) and {}}])
    )
    ref = adk.workflows.start(blocked, {})
    adk.workflows.cancel(ref, {"token": SEED, "why": SEED})
    cancelled = adk.workflows.wait(ref, timeout=5)
    assert isinstance(cancelled, Cancelled)
    assert cancelled.reason == {
        "component": "adk_workflow",
        "operation": "cancel",
        "reason": "cancelled",
    }
    _no_seed(cancelled, adk.workflows.status(ref))
    never.set()


def test_supervisor_metadata_and_state_views_hide_launch_data() -> None:
    """Follows adk_workflow_failure_security_test:
    supervisor_metadata_and_sys_status_hide_launch_data."""
    started: queue.Queue[bool] = queue.Queue()
    never = threading.Event()

    def block(state: dict) -> dict:
        assert state["seed"] == SEED
        started.put(True)
        never.wait(5)
        return {}

    wf = adk.compile_workflow(sequential([{"id": SEED[:10], "run": block}]))
    ref = adk.workflows.start(wf, {"seed": SEED})
    assert started.get(timeout=5)
    coordinator = sv.whereis(workflow_name(ref))
    assert coordinator is not None
    spec = sv.DynamicSupervisor.get_childspec(WORKFLOW_SUPERVISOR, coordinator)
    assert spec.restart == "temporary"
    assert isinstance(spec.id, str) and spec.id.startswith("handoff-")  # an opaque reference
    cells = [cell.cell_contents for cell in spec.start.__closure__ or ()]  # type: ignore[attr-defined]
    assert spec.id in cells
    assert not any(isinstance(cell, Launch | dict | CompiledWorkflow) for cell in cells)
    children = sv.DynamicSupervisor.which_children(WORKFLOW_SUPERVISOR)
    _no_seed(spec, children, sv.get_state(coordinator), str(sv.get_state(coordinator)))
    assert "phase=running" in repr(sv.get_state(coordinator))
    adk.workflows.cancel(ref)
    never.set()


def test_the_one_shot_handoff_refuses_wrong_and_repeated_references() -> None:
    """Follows adk_workflow_failure_security_test: one_shot_handoff_rejects_secret_payloads."""
    wf = adk.compile_workflow(sequential([{"id": "a", "run": lambda s: {"ok": True}}]))

    def start(handoff: str) -> sv.Pid:
        spec = sv.ChildSpec(
            handoff, lambda: WorkflowCoordinator.start_link(handoff), restart="temporary"
        )
        return sv.DynamicSupervisor.start_child(WORKFLOW_SUPERVISOR, spec)

    with pytest.raises(sv.SupervisorError) as wrong:
        start("handoff-not-a-real-reference")
    assert wrong.value.reason == ("shutdown", "invalid_workflow_handoff")

    launch = fresh_launch(wf, {"seed": SEED}, retention=0)
    handoff = handoffs.put(launch)
    try:
        first = start(handoff)
        assert first is not None
        with pytest.raises(sv.SupervisorError) as repeated:
            start(handoff)
        assert repeated.value.reason == ("shutdown", "handoff_already_completed")
        _no_seed(wrong.value, repeated.value)
    finally:
        handoffs.discard(handoff)
    assert handoffs.pending() == 0


def test_a_full_handoff_table_refuses_a_start_as_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The launch table is the kernel's bounded one-shot table: full, a start is refused
    ``busy`` before any process exists, and nothing is left behind."""
    small: sv.OneShotHandoffs[Launch] = sv.OneShotHandoffs(1, prefix="handoff")
    monkeypatch.setattr(launch_module, "handoffs", small)
    wf = adk.compile_workflow(sequential([{"id": "a", "run": lambda s: {"ok": True}}]))
    held = small.put(fresh_launch(wf, {}))
    before = sv.DynamicSupervisor.count_children(WORKFLOW_SUPERVISOR)["active"]
    with pytest.raises(AdkError) as busy:
        adk.workflows.start(wf, {})
    assert busy.value.reason == "busy"
    assert sv.DynamicSupervisor.count_children(WORKFLOW_SUPERVISOR)["active"] == before
    small.discard(held)
    assert isinstance(adk.run_workflow(wf, {}), adk.workflows.Completed)
    assert small.pending() == 0
