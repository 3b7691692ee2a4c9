"""The ``workflows`` stress kind: a small two-agent sequential workflow, run to its end.

`open` spawns a few agents on the scenario's scripted model and compiles one workflow
per agent pair (``draft`` by one agent, then ``review`` by the next); `run_one` starts a
run with the item's deadline and awaits its outcome in one call
(`adk.workflows.run_async`: the wait is registered with the start, so a run that ends
before the await reaches it still answers), then asks the run's status, so a run whose status disagrees with the outcome it gave (two
terminals) is caught. `close` checks that every started run reached exactly one terminal
with both agents' answers, and that the workflow supervisor is back to its baseline.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from adk_actors import workflows
from adk_actors.agents import spawn_agent, stop_agent
from adk_actors.app import WORKFLOW_SUPERVISOR
from adk_actors.stress.invariants import tally
from adk_actors.stress.records import InvariantResult, Outcome, outcome_of
from adk_actors.stress.scenario import Scenario
from adk_actors.stress.workloads.base import (
    DEFAULT_SETTLE_S,
    ItemsInFlight,
    invariant,
    remaining,
    settle_seconds,
    wait_until,
)
from providers import ScriptedProvider
from providers.errors import AdkError
from supervision import DynamicSupervisor
from supervision.aio import run_blocking
from supervision.logs import get_logger

MAX_AGENTS = 8
"""At most this many agents (so as many compiled workflows) however many the scenario
asks for: each agent runs up to 32 invocations side by side already."""
RETENTION_S = 1.0
"""How long a finished run stays queryable: long enough for the status cross-check,
short enough for the supervisor to be back to its baseline soon after `close`."""
WAIT_GRACE_S = 5.0
"""How long past its deadline a run may take to report its (timed-out) outcome."""
_STATES = {
    workflows.Completed: ("completed",),
    workflows.Failed: ("failed", "timed_out"),
    workflows.Cancelled: ("cancelled",),
    workflows.Paused: ("paused",),
}
_log = get_logger("adk_actors.stress")


class WorkflowsWorkload:
    """Two agent steps in sequence per item; counters only, never per-run histories."""

    kind = "workflows"

    def __init__(self, *, settle_s: float = DEFAULT_SETTLE_S) -> None:
        self._settle_s = settle_seconds(settle_s)
        self._agents: list[str] = []
        self._compiled: list[tuple[workflows.CompiledWorkflow, str]] = []
        self._baseline = 0
        self._in_flight = ItemsInFlight()
        """Items under way -> their run's ref once started (bounded by the concurrency)."""
        self._started = 0
        self._terminals: Counter[str] = Counter()
        self._refused: Counter[str] = Counter()
        self._mismatches = 0
        self._wrong_outputs = 0
        self._unanswered: Counter[str] = Counter()
        """Started runs whose wait gave no outcome, by the wait's error reason."""

    async def open(self, scenario: Scenario, provider: ScriptedProvider) -> None:
        tag = uuid.uuid4().hex[:8]
        count = max(1, min(scenario.agents, MAX_AGENTS))
        self._agents = [f"stress_wf_{tag}_{n}" for n in range(count)]
        for name in self._agents:
            await run_blocking(spawn_agent, name, {"provider": provider})
        self._compiled = [
            (_compile(f"stress-wf-{tag}-{n}", self._agents[n], reviewer), reviewer)
            for n in range(count)
            for reviewer in [self._agents[(n + 1) % count]]
        ]
        self._baseline = await _active_children()

    async def run_one(self, index: int, deadline: float) -> Outcome:
        return await self._in_flight.run(lambda key: self._run(key, index, deadline))

    async def _run(self, key: int, index: int, deadline: float) -> Outcome:
        compiled, reviewer = self._compiled[index % len(self._compiled)]

        def started(ref: str) -> None:
            self._started += 1
            self._in_flight[key] = ref

        try:
            outcome = await workflows.run_async(
                compiled,
                {"item": index},
                deadline=deadline,
                retention=RETENTION_S,
                wait_timeout=remaining(deadline) + WAIT_GRACE_S,
                on_start=started,
            )
        except AdkError as error:
            reason = str(error.reason)[:64]
            ref = self._in_flight[key]
            if ref is None:
                self._refused[reason] += 1
                return Outcome.REJECTED  # refused before anything ran, as the runs kind counts it
            self._unanswered[reason] += 1
            _log.warning("stress.workflow_unanswered", ref=ref, reason=reason)
            await _cancel(ref)
            return Outcome.FAILED
        ref = self._in_flight[key]
        assert ref is not None
        self._terminals[type(outcome).__name__] += 1
        await self._cross_check(ref, outcome)
        result = outcome_of(outcome)
        if result is Outcome.COMPLETED and isinstance(outcome, workflows.Completed):
            state = outcome.state
            if state.get("item") != index or state.get("last_agent") != reviewer:
                self._wrong_outputs += 1
                return Outcome.FAILED
        return result

    async def _cross_check(self, ref: str, outcome: workflows.Outcome) -> None:
        """The run's status must name the terminal `wait_async` returned."""
        try:
            view: dict[str, Any] = await run_blocking(workflows.status, ref)
        except AdkError:
            return  # its retention is over already: nothing left to disagree
        if view.get("state") not in _STATES[type(outcome)]:
            self._mismatches += 1

    async def close(self) -> list[InvariantResult]:
        async def settled() -> bool:
            return not self._in_flight

        await wait_until(settled, self._settle_s)
        left = len(self._in_flight)
        for ref in list(self._in_flight.values()):
            if ref is not None:
                await _cancel(ref)
        results = [self.terminal_invariant(left)]

        async def back_to_baseline() -> bool:
            return await _active_children() <= self._baseline

        await wait_until(back_to_baseline, RETENTION_S + self._settle_s)
        active = await _active_children()
        results.append(children_invariant(active, self._baseline))
        for name in self._agents:
            await _stop(name)
        self._agents = []
        return results

    def terminal_invariant(self, in_flight: int) -> InvariantResult:
        """Every started run reached exactly one terminal, with both agents' answers."""
        terminals = sum(self._terminals.values())
        unanswered = sum(self._unanswered.values())
        held = (
            in_flight == 0
            and terminals + unanswered == self._started
            and unanswered == 0
            and self._mismatches == 0
            and self._wrong_outputs == 0
        )
        outcomes = tally(self._terminals)
        refused = tally(self._refused)
        why = tally(self._unanswered)
        return invariant(
            "workflows_one_terminal_each",
            held,
            f"{self._started} started, {terminals} terminals ({outcomes}), "
            f"{in_flight} still in flight after settling, {unanswered} without an "
            f"outcome ({why}), {self._mismatches} whose status disagreed, {self._wrong_outputs} "
            f"completed without both answers; refused at start: {refused}",
        )


def children_invariant(active: int, baseline: int) -> InvariantResult:
    """The workflow supervisor holds no more coordinators than before the load."""
    return invariant(
        "workflows_supervisor_baseline",
        active <= baseline,
        f"{active} workflow coordinators after close, baseline {baseline}",
    )


def _compile(workflow_id: str, drafter: str, reviewer: str) -> workflows.CompiledWorkflow:
    return workflows.compile_workflow(
        {
            "version": 1,
            "id": workflow_id,
            "kind": "sequential",
            "max_steps": 2,
            "input_schema": {"type": "object", "required": ["item"]},
            "steps": [
                {"id": "draft", "run": workflows.Agent(drafter, _draft_prompt)},
                {"id": "review", "run": workflows.Agent(reviewer, _review_prompt)},
            ],
        }
    )


def _draft_prompt(state: dict[str, Any]) -> str:
    return f"Draft item {state['item']}."


def _review_prompt(state: dict[str, Any]) -> str:
    return f"Review item {state['item']}: {str(state.get('last_response'))[:200]}"


async def _active_children() -> int:
    counts: dict[str, int] = await run_blocking(
        DynamicSupervisor.count_children, WORKFLOW_SUPERVISOR
    )
    return counts["active"]


async def _cancel(ref: str) -> None:
    try:
        await run_blocking(workflows.cancel, ref, "stress_closed")
    except AdkError:
        pass  # it ended (or expired) meanwhile


async def _stop(name: str) -> None:
    try:
        await run_blocking(stop_agent, name)
    except AdkError:
        pass  # already gone (a chaos kill, say)
