"""A step's budget is committed with the boundary before it: the commit of a step's
result (a node's entry, a branch's result, an iteration, a transfer) also takes the
step of the action that starts next, so every action is charged once, before it
starts, without a commit of its own (behaviors §7: checkpoints at deterministic
boundaries only, with the remaining budgets; resume never re-runs a committed step
nor replenishes a budget).

The crash windows: each durable run is "crashed" right after each of its commits
reached the ledger, before the engine heard of it (so before the next action could
start): the coordinator is killed while the ledger write returns. Resumed from that
record, no step whose result it holds runs again, every other step runs exactly once,
the budget it took is never given back, and the resumed run charges each action it
starts exactly once (an action whose step a crashed run took is charged again: it may
have started).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

import adk_actors as adk
from adk_actors import workflows
from adk_actors.workflows import Completed, Failed, MemoryLedger, Output, Transfer
from adk_actors.workflows.checkpoint import Checkpoint, GraphCursor, SequentialCursor
from adk_actors.workflows.coordinator import Begun
from adk_actors.workflows.launch import fresh_launch, start_supervised, workflow_name
from adk_actors.workflows.spec import CompiledWorkflow
from supervision import Pid, exit, whereis

from ._durable_support import eventually

WAIT = 10.0
BUDGET = 100


class Recorder:
    """A `coordinator.Persistence` keeping every committed checkpoint and the finish."""

    renew_interval = None

    def __init__(self) -> None:
        self.commits: list[Checkpoint] = []
        self.finished: Checkpoint | None = None

    def begin(self, workflow: CompiledWorkflow, checkpoint: Checkpoint, owner: Pid) -> Begun:
        return Begun(checkpoint, "budget-commits")

    def commit(self, checkpoint: Checkpoint) -> None:
        self.commits.append(checkpoint)

    def renew(self) -> None:
        pass

    def finish(self, phase: str, outcome: Any, checkpoint: Checkpoint) -> None:
        self.finished = checkpoint


class Calls:
    """Counts the actions that ran, by id, and the budget each saw as it started; with
    a `recorder`, also the budget of the last checkpoint committed by then."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.budgets: list[int] = []
        self.recorder: Recorder | None = None
        self.committed: list[int] = []
        self._lock = threading.Lock()

    def tick(self, name: str, context: dict[str, Any]) -> None:
        with self._lock:
            self.counts[name] += 1
            self.budgets.append(context["budgets"]["steps_remaining"])
            if self.recorder is not None:
                self.committed.append(self.recorder.commits[-1].remaining.steps)

    def take(self) -> tuple[Counter[str], list[int]]:
        with self._lock:
            taken = (self.counts, self.budgets)
            self.counts, self.budgets = Counter(), []
            return taken


def sequential(calls: Calls) -> CompiledWorkflow:
    def step(name: str) -> Any:
        def run(state: dict, context: dict) -> Any:
            calls.tick(name, context)
            return Output(name, {name: True})

        return run

    steps = [{"id": name, "run": step(name)} for name in ("s0", "s1", "s2")]
    return adk.compile_workflow(
        {"id": "budget-seq", "kind": "sequential", "max_steps": BUDGET, "steps": steps}
    )


def fork_join(calls: Calls, max_concurrency: int = 4) -> CompiledWorkflow:
    def node(name: str) -> Any:
        def run(state: dict, context: dict) -> Any:
            calls.tick(name, context)
            return Output(name, {name: True})

        return run

    branches = ["b0", "b1", "b2"]
    nodes: list[dict[str, Any]] = [
        {"id": "a", "run": node("a")},
        {
            "id": "fork",
            "type": "fork",
            "branches": branches,
            "join": "j",
            "max_concurrency": max_concurrency,
        },
        *({"id": name, "run": node(name)} for name in branches),
        {"id": "j", "type": "join", "run": node("j")},
        {"id": "z", "run": node("z")},
    ]
    edges = {"a": "fork", "j": "z", "z": "end", **dict.fromkeys(branches, "j")}
    return adk.compile_workflow(
        {
            "id": f"budget-fork-{max_concurrency}",
            "kind": "graph",
            "entry": "a",
            "max_steps": BUDGET,
            "nodes": nodes,
            "edges": edges,
        }
    )


def transfer(calls: Calls) -> CompiledWorkflow:
    def member(name: str, target: str | None) -> Any:
        def run(state: dict, context: dict) -> Any:
            calls.tick(name, context)
            if target is None:
                return Output(name, {name: True})
            return Transfer(target, None, {name: True})

        return {"run": run}

    return adk.compile_workflow(
        {
            "id": "budget-transfer",
            "kind": "transfer",
            "entry": "m0",
            "max_steps": BUDGET,
            "max_transfers": 5,
            "members": {
                "m0": member("m0", "m1"),
                "m1": member("m1", "m2"),
                "m2": member("m2", None),
            },
        }
    )


def loop(calls: Calls) -> CompiledWorkflow:
    def body(state: dict, context: dict) -> Any:
        calls.tick("body", context)
        count = state.get("count", 0) + 1
        return Output(count, {"count": count, f"i{count}": True})

    return adk.compile_workflow(
        {
            "id": "budget-loop",
            "kind": "loop",
            "max_steps": BUDGET,
            "max_iterations": 3,
            "body": body,
            "until": lambda state: False,
        }
    )


KINDS = {
    "sequential": (sequential, {"s0": 1, "s1": 1, "s2": 1}),
    "fork": (fork_join, {"a": 1, "b0": 1, "b1": 1, "b2": 1, "j": 1, "z": 1}),
    "fork-serial": (
        lambda calls: fork_join(calls, max_concurrency=1),
        {"a": 1, "b0": 1, "b1": 1, "b2": 1, "j": 1, "z": 1},
    ),
    "transfer": (transfer, {"m0": 1, "m1": 1, "m2": 1}),
    "loop": (loop, {"body": 3}),
}


def steps_charged(expected_calls: dict[str, int]) -> int:
    """The steps a whole run takes: one per action; a join takes one too."""
    return sum(expected_calls.values())


def committed_actions(checkpoint: Checkpoint) -> set[str]:
    """The actions whose results `checkpoint` holds: each writes its own key (the loop
    body ``i<n>``), a committed fork branch's delta counts too."""
    names = set(checkpoint.state)
    cursor = checkpoint.cursor
    if isinstance(cursor, GraphCursor) and cursor.results:
        for result in cursor.results.values():
            names |= set(result.delta)
    return names


def action_of(key: str) -> str:
    return "body" if key.startswith("i") and key[1:].isdigit() else key


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_action_is_charged_once_in_the_commit_before_it(kind: str) -> None:
    """An uninterrupted run takes exactly one step per action (nothing twice), and
    each step is committed before its action starts: a step's result and the next
    step's budget are one commit; the last result is the completion's."""
    build, expected = KINDS[kind]
    calls = Calls()
    wf = build(calls)
    recorder = calls.recorder = Recorder()
    launch = fresh_launch(wf, {}, persistence=recorder)
    start_supervised(launch)
    outcome = workflows.wait(launch.ref, WAIT)
    assert isinstance(outcome, Completed)
    counts, budgets = calls.take()
    assert dict(counts) == expected
    charged = steps_charged(expected)
    assert outcome.checkpoint.remaining.steps == BUDGET - charged
    assert recorder.finished == outcome.checkpoint
    # each action's step was committed before it started: what it saw was committed
    assert calls.committed == budgets
    # every action saw its own step taken already, and the commits never give any back
    remaining = [cp.remaining.steps for cp in recorder.commits]
    assert remaining == sorted(remaining, reverse=True)
    assert min(budgets) == BUDGET - charged
    if kind == "sequential":
        assert budgets == [BUDGET - 1, BUDGET - 2, BUDGET - 3]
        # one commit per step: the first step's budget, then each result with the
        # next step's budget; the last result is in the completion
        assert [(cp.cursor, cp.remaining.steps) for cp in recorder.commits] == [
            (SequentialCursor(next_index=0), BUDGET - 1),
            (SequentialCursor(next_index=1), BUDGET - 2),
            (SequentialCursor(next_index=2), BUDGET - 3),
        ]
    if kind == "fork":
        # a's entry and step; the fork's entry with its 3 branches' steps; 2 branch
        # results; the last with the merge at the join's entry (and its step); z's
        assert len(recorder.commits) == 6


class CrashingLedger(MemoryLedger):
    """A ledger whose `crash_at`-th checkpoint write (1-based) is durable but blocks
    before returning, until `resume` is set: the test kills the coordinator meanwhile,
    so the engine never hears of that commit."""

    def __init__(self, crash_at: int) -> None:
        super().__init__()
        self.crash_at = crash_at
        self.writes = 0
        self.blocked = threading.Event()
        self.resume = threading.Event()

    def checkpoint(self, invocation_id, token, checkpoint, now, lease):  # type: ignore[no-untyped-def]
        super().checkpoint(invocation_id, token, checkpoint, now, lease)
        self.writes += 1
        if self.writes == self.crash_at:
            self.blocked.set()
            self.resume.wait(WAIT)


def commit_count(kind: str) -> int:
    build, _ = KINDS[kind]
    recorder = Recorder()
    launch = fresh_launch(build(Calls()), {}, persistence=recorder)
    start_supervised(launch)
    assert isinstance(workflows.wait(launch.ref, WAIT), Completed)
    return len(recorder.commits)


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_crash_after_each_commit_resumes_without_rerun_refund_or_double_charge(
    kind: str,
) -> None:
    build, expected = KINDS[kind]
    for crash_at in range(1, commit_count(kind) + 1):
        calls = Calls()
        wf = build(calls)
        ledger = CrashingLedger(crash_at)
        iid, ref = workflows.start_durable(wf, {}, ledger=ledger, timeout=WAIT)
        assert ledger.blocked.wait(WAIT), crash_at
        pid = whereis(workflow_name(ref))
        assert pid is not None
        exit(pid, "kill")
        eventually(lambda: not pid.is_alive())  # noqa: B023
        ledger.resume.set()
        first_counts, _ = calls.take()
        record = workflows.durable_status(iid, ledger=ledger)
        crashed = record.checkpoint
        held = {action_of(key) for key in committed_actions(crashed)}
        # every action that started before the crash had its step in the record
        assert crashed.remaining.steps <= BUDGET - sum(first_counts.values())
        # nothing ran more often than a whole run runs it
        assert all(first_counts[name] <= expected.get(name, 0) for name in first_counts)

        resumed = workflows.resume_durable(iid, wf, ledger=ledger, timeout=WAIT)
        outcome = workflows.wait(resumed, WAIT)
        assert isinstance(outcome, Completed), (crash_at, outcome)
        again, budgets = calls.take()
        where = (kind, crash_at, crashed.cursor)
        # no action whose result the record holds runs again; the others run once
        for name, count in expected.items():
            ran = first_counts[name] + again[name]
            if name in held and kind != "loop":
                assert again[name] == 0, where
            assert ran >= count, where
            assert again[name] <= count, where
        if kind == "loop":
            assert again["body"] == 3 - crashed.state.get("count", 0), where
        # the resumed run charges each action it starts once, from the record's
        # budget: nothing given back, nothing charged twice
        started = sum(again.values())
        assert outcome.checkpoint.remaining.steps == crashed.remaining.steps - started, where
        assert all(seen < crashed.remaining.steps for seen in budgets), where
        assert outcome.state == final_state(kind, expected), where


def final_state(kind: str, expected: dict[str, int]) -> dict[str, Any]:
    if kind == "loop":
        return {"count": 3, "i1": True, "i2": True, "i3": True}
    return dict.fromkeys(expected, True)


def test_a_resume_charges_the_action_a_crashed_run_took_the_step_of() -> None:
    """The crash between the commit of ``s0``'s result (with ``s1``'s step) and ``s1``'s
    start: ``s1`` may have started, so its step is not given back, and its run after
    the resume is charged again. With no step left, the resume fails
    ``budget_exhausted`` and keeps ``s0``'s committed result."""
    calls = Calls()

    def step(name: str) -> Any:
        def run(state: dict, context: dict) -> dict:
            calls.tick(name, context)
            return {name: True}

        return run

    wf = adk.compile_workflow(
        {
            "id": "budget-tight",
            "kind": "sequential",
            "max_steps": 2,
            "steps": [{"id": "s0", "run": step("s0")}, {"id": "s1", "run": step("s1")}],
        }
    )
    ledger = CrashingLedger(crash_at=2)
    iid, ref = workflows.start_durable(wf, {}, ledger=ledger, timeout=WAIT)
    assert ledger.blocked.wait(WAIT)
    pid = whereis(workflow_name(ref))
    assert pid is not None
    exit(pid, "kill")
    eventually(lambda: not pid.is_alive())
    ledger.resume.set()
    record = workflows.durable_status(iid, ledger=ledger)
    assert record.checkpoint.cursor == SequentialCursor(next_index=1)
    assert record.checkpoint.state == {"s0": True}
    assert record.checkpoint.remaining.steps == 0  # s1's step went with s0's result
    outcome = workflows.wait(workflows.resume_durable(iid, wf, ledger=ledger), WAIT)
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("budget_exhausted", "steps")
    assert outcome.checkpoint.state == {"s0": True}
    assert calls.take()[0] == Counter({"s0": 1})
