"""The stress workloads (`workflows`, `ambient`, `approvals`) driven directly against a
fresh runtime: open, N items concurrently, close; the invariants hold, and each can be
broken (so none is vacuous)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

import supervision as sv
from adk_actors import ambient
from adk_actors.stress.records import InvariantResult, Outcome
from adk_actors.stress.scenario import Scenario, load_scenario
from adk_actors.stress.workloads import WORKLOADS, Workload
from adk_actors.stress.workloads.ambient import AmbientWorkload, counters_invariant, peak_invariant
from adk_actors.stress.workloads.approvals import ApprovalsWorkload
from adk_actors.stress.workloads.workflows import WorkflowsWorkload, children_invariant
from providers import Content, ScriptedProvider
from providers.errors import AdkError
from providers.outputs import ToolDeclaration

ITEMS = 24
CONCURRENCY = 12


def scenario(kind: str, **overrides: Any) -> Scenario:
    data: dict[str, Any] = {
        "kind": kind,
        "count": ITEMS,
        "concurrency": CONCURRENCY,
        "agents": 2,
        "run_timeout_s": 20.0,
        "model": {"latency": [0.001, 0.004]},
        **overrides,
    }
    return load_scenario(data)


def echo(delay: float = 0.002) -> ScriptedProvider:
    """The text-only scripted model the in-process target hands every workload."""

    def answer(history: Sequence[Content], tools: Sequence[ToolDeclaration]) -> Any:
        return {"text": f"ok: {history[-1].text_value()[:40]}", "delay": delay}

    return ScriptedProvider(fn=answer)


class Gate:
    """A model that holds every call until released (at most 10 s)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def provider(self) -> ScriptedProvider:
        def answer(history: Sequence[Content], tools: Sequence[ToolDeclaration]) -> Any:
            self.calls += 1
            self.release.wait(10)
            return {"text": "late"}

        return ScriptedProvider(fn=answer)


async def drive(
    workload: Workload, kind: str, provider: ScriptedProvider
) -> tuple[list[Outcome], list[InvariantResult]]:
    """What the in-process target does: open, ITEMS items CONCURRENCY at a time, close."""
    await workload.open(scenario(kind), provider)
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(index: int) -> Outcome:
        async with limit:
            return await workload.run_one(index, time.monotonic() + 20.0)

    outcomes = await asyncio.gather(*(one(index) for index in range(ITEMS)))
    return list(outcomes), await workload.close()


async def close_early(
    workload: Workload, kind: str, provider: ScriptedProvider, gate: Gate, **overrides: Any
) -> tuple[list[Outcome], list[InvariantResult]]:
    """Close while items are still under way (their model calls held), then release."""
    await workload.open(scenario(kind, **overrides), provider)
    tasks = [
        asyncio.ensure_future(workload.run_one(index, time.monotonic() + 20.0))
        for index in range(4)
    ]
    deadline = time.monotonic() + 5.0
    while gate.calls == 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert gate.calls > 0
    try:
        results = await workload.close()
    finally:
        gate.release.set()
    outcomes = await asyncio.wait_for(asyncio.gather(*tasks), 15.0)
    return list(outcomes), results


def by_name(results: list[InvariantResult]) -> dict[str, InvariantResult]:
    return {result.name: result for result in results}


def test_registry_names_the_three_kinds() -> None:
    assert sorted(WORKLOADS) == ["ambient", "approvals", "workflows"]
    for kind, factory in WORKLOADS.items():
        workload = factory()
        assert workload.kind == kind
        assert factory() is not workload  # a fresh workload per call


def test_workflows_complete_and_hold() -> None:
    outcomes, results = asyncio.run(drive(WorkflowsWorkload(), "workflows", echo()))
    assert outcomes == [Outcome.COMPLETED] * ITEMS
    checks = by_name(results)
    assert set(checks) == {"workflows_one_terminal_each", "workflows_supervisor_baseline"}
    assert all(result.held for result in results), results
    assert (
        f"{ITEMS} started, {ITEMS} terminals (Completed {ITEMS})"
        in checks["workflows_one_terminal_each"].detail
    )


def test_workflows_closed_early_report_runs_in_flight() -> None:
    gate = Gate()
    workload = WorkflowsWorkload(settle_s=0.2)
    outcomes, results = asyncio.run(close_early(workload, "workflows", gate.provider(), gate))
    terminal = by_name(results)["workflows_one_terminal_each"]
    assert not terminal.held
    assert "4 still in flight after settling" in terminal.detail
    assert outcomes == [Outcome.CANCELLED] * 4  # close cancelled what it left behind
    assert not children_invariant(3, 1).held and children_invariant(1, 1).held


def test_a_workflow_without_an_outcome_names_why() -> None:
    """A run whose coordinator is killed gives no outcome: the item fails, and the
    invariant says why (the wait's error reason), not only how many."""
    gate = Gate()
    workload = WorkflowsWorkload(settle_s=0.2)

    async def main() -> tuple[Outcome, list[InvariantResult]]:
        await workload.open(scenario("workflows"), gate.provider())
        task = asyncio.ensure_future(workload.run_one(0, time.monotonic() + 20.0))
        deadline = time.monotonic() + 5.0
        while gate.calls == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        (ref,) = [ref for ref in workload._in_flight.values() if ref is not None]
        coordinator = sv.whereis(("adk.workflow", ref))
        assert coordinator is not None
        sv.exit(coordinator, "kill")
        outcome = await asyncio.wait_for(task, 10.0)
        gate.release.set()
        return outcome, await workload.close()

    outcome, results = asyncio.run(main())
    assert outcome is Outcome.FAILED
    terminal = by_name(results)["workflows_one_terminal_each"]
    assert not terminal.held
    assert "1 without an outcome (coordinator_stopped 1)" in terminal.detail


def test_ambient_caps_concurrency_and_settles() -> None:
    """Follows behaviors.md §13 (100 ambient events with max_concurrency 8: peak 8, all
    complete, counters back to zero), scaled down: 24 events, 12 at once, cap 4."""
    workload = AmbientWorkload(max_concurrency=4)
    outcomes, results = asyncio.run(drive(workload, "ambient", echo(0.01)))
    assert outcomes == [Outcome.COMPLETED] * ITEMS
    checks = by_name(results)
    assert set(checks) == {
        "ambient_peak_within_cap",
        "ambient_all_complete",
        "ambient_counters_zero",
    }
    assert all(result.held for result in results), results
    assert checks["ambient_peak_within_cap"].detail.endswith("max_concurrency 4")
    assert ambient.triggers() == []  # close unregistered its trigger


def test_ambient_checks_catch_a_breach() -> None:
    assert not peak_invariant(9, 8).held and peak_invariant(8, 8).held
    assert not peak_invariant(None, 8).held
    assert not counters_invariant({"active": 1, "queued": 0}).held
    assert not counters_invariant(None).held
    gate = Gate()
    workload = AmbientWorkload(max_concurrency=2, settle_s=0.2)
    outcomes, results = asyncio.run(close_early(workload, "ambient", gate.provider(), gate))
    checks = by_name(results)
    assert not checks["ambient_all_complete"].held
    assert not checks["ambient_counters_zero"].held
    assert "2 active and 2 queued" in checks["ambient_counters_zero"].detail
    assert checks["ambient_peak_within_cap"].held
    assert outcomes == [Outcome.CANCELLED] * 4


def test_ambient_queue_full_is_rejected() -> None:
    """A trigger sized for a load of 1 (cap 1, queue 1) refuses the other two items."""
    gate = Gate()
    workload = AmbientWorkload(max_concurrency=1, settle_s=0.2)
    outcomes, results = asyncio.run(
        close_early(workload, "ambient", gate.provider(), gate, concurrency=1)
    )
    assert sorted(outcomes) == sorted([Outcome.CANCELLED] * 2 + [Outcome.REJECTED] * 2)
    complete = by_name(results)["ambient_all_complete"]
    assert "2 accepted" in complete.detail and "ambient_queue_full 2" in complete.detail


def test_approvals_resume_each_pause_once() -> None:
    workload = ApprovalsWorkload()
    outcomes, results = asyncio.run(drive(workload, "approvals", echo()))
    assert outcomes == [Outcome.COMPLETED] * ITEMS
    checks = by_name(results)
    assert set(checks) == {"approvals_resumed_once", "approvals_none_pending"}
    assert all(result.held for result in results), results
    half = ITEMS // 2
    assert (
        f"{ITEMS} paused, {ITEMS} resumed ({half} approved, {half} of them completed)"
        in checks["approvals_resumed_once"].detail
    )
    assert f"tool ran {half} times" in checks["approvals_resumed_once"].detail


def test_approvals_closed_early_report_runs_in_flight() -> None:
    """Runs still waiting for the model (3 s) when `close` gives up settling: the check
    fails, and `close` cancels them."""
    workload = ApprovalsWorkload(settle_s=0.2)

    async def closed_early() -> tuple[list[Outcome], list[InvariantResult]]:
        await workload.open(scenario("approvals", model={"latency": [3.0, 3.0]}), echo())
        tasks = [
            asyncio.ensure_future(workload.run_one(index, time.monotonic() + 20.0))
            for index in range(3)
        ]
        await asyncio.sleep(0.05)
        results = await workload.close()
        outcomes = await asyncio.wait_for(asyncio.gather(*tasks), 15.0)
        return list(outcomes), results

    outcomes, results = asyncio.run(closed_early())
    checks = by_name(results)
    resumed = checks["approvals_resumed_once"]
    assert not resumed.held
    assert "3 started, 0 paused" in resumed.detail
    assert "3 in flight after settling" in resumed.detail
    assert checks["approvals_none_pending"].held  # nothing had paused yet
    assert outcomes == [Outcome.CANCELLED] * 3
    assert not workload.pending_invariant(1).held
    assert not workload.pending_invariant(None).held


@pytest.mark.parametrize("settle", [-1.0, 601.0, True])
def test_settle_bound_is_checked(settle: float) -> None:
    with pytest.raises(AdkError) as refused:
        WorkflowsWorkload(settle_s=settle)
    assert refused.value.reason == ("invalid_stress_workload", "settle_s")


@pytest.mark.parametrize("cap", [0, 1025])
def test_ambient_cap_is_checked(cap: int) -> None:
    with pytest.raises(AdkError) as refused:
        AmbientWorkload(max_concurrency=cap)
    assert refused.value.reason == ("invalid_stress_workload", "max_concurrency")
