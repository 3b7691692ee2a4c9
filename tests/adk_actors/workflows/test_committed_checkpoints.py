"""A run that does not complete keeps only its last committed checkpoint: no delta (or
output) merged after that commit reaches the outcome, the status or the ledger, so a
resume applies every delta exactly once. A completion whose output the output schema
refuses commits its last delta first (behaviors §7: the failed checkpoint still holds
the step's delta), as a finished cursor: a resume runs nothing again.

Each case runs plainly and durably (the ledger must record the very same checkpoint),
then resumes (`resume` / `resume_durable`) and counts the actions that ran."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from msgspec import UNSET

import adk_actors as adk
from adk_actors import workflows
from adk_actors.workflows import (
    Cancelled,
    Completed,
    Failed,
    Goto,
    MemoryLedger,
    Output,
    Pause,
    Paused,
    Route,
    Stop,
    Transfer,
)
from adk_actors.workflows.checkpoint import (
    GraphCursor,
    LoopCursor,
    ParallelCursor,
    SequentialCursor,
    TransferCursor,
)
from adk_actors.workflows.launch import NOT_GIVEN
from adk_actors.workflows.outcomes import Outcome
from adk_actors.workflows.spec import END, CompiledWorkflow

WAIT = 10.0
MODES = ["plain", "durable"]
SCHEMA_REFUSED = "output_schema_validation_failed"


def first_and_resumed(
    wf: CompiledWorkflow,
    state: dict[str, Any],
    mode: str,
    resume_input: Any = NOT_GIVEN,
    **options: Any,
) -> tuple[Outcome, Outcome]:
    """Run `wf`, then resume it from the outcome's checkpoint (durably: from the
    ledger, after checking that it recorded exactly that checkpoint)."""
    if mode == "durable":
        ledger = MemoryLedger()
        iid, ref = workflows.start_durable(wf, state, ledger=ledger, **options)
        first = workflows.wait(ref, WAIT)
        assert workflows.durable_status(iid, ledger=ledger).checkpoint == first.checkpoint
        again = workflows.resume_durable(iid, wf, ledger=ledger, resume_input=resume_input)
    else:
        first = workflows.wait(workflows.start(wf, state, **options), WAIT)
        again = workflows.resume(wf, first.checkpoint, resume_input)
    return first, workflows.wait(again, WAIT)


def counting(calls: Counter[str], name: str, result: Any) -> Any:
    """An action that counts its calls and returns `result(state)`."""

    def action(state: dict[str, Any]) -> Any:
        calls[name] += 1
        return result(state)

    return action


def bump(key: str) -> Any:
    return lambda state: {key: state.get(key, 0) + 1}


# -- failures after a merge: only the committed checkpoint -------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_loop_predicate_keeps_the_committed_body_result(mode: str) -> None:
    """The body's result is committed before `until` runs: `until` raising fails the
    run with that checkpoint (``phase "until"``), and the resume asks `until` again
    without running the body a second time."""
    calls: Counter[str] = Counter()

    def until(state: dict[str, Any]) -> bool:
        calls["until"] += 1
        if calls["until"] == 1:
            raise ConnectionError("flaky predicate")
        return True

    wf = adk.compile_workflow(
        {
            "id": f"committed-loop-{mode}",
            "kind": "loop",
            "body": counting(calls, "body", bump("charged")),
            "until": until,
            "max_iterations": 5,
        }
    )
    first, again = first_and_resumed(wf, {"charged": 0}, mode)
    assert isinstance(first, Failed) and first.reason[0] == "loop_predicate_failed"
    assert first.checkpoint.cursor == LoopCursor(iteration=0, phase="until")
    assert first.checkpoint.state == {"charged": 1}
    assert isinstance(again, Completed) and again.state == {"charged": 1}
    assert calls == {"body": 1, "until": 2}


@pytest.mark.parametrize("mode", MODES)
def test_a_loop_timed_out_in_its_predicate_resumes_without_the_body(mode: str) -> None:
    """Whether the engine or the coordinator sees the deadline first, the timed-out
    checkpoint is the committed one."""
    calls: Counter[str] = Counter()
    release = threading.Event()

    def until(state: dict[str, Any]) -> bool:
        calls["until"] += 1
        if calls["until"] == 1:
            release.wait(2.0)
        return True

    wf = adk.compile_workflow(
        {
            "id": f"committed-loop-deadline-{mode}",
            "kind": "loop",
            "body": counting(calls, "body", bump("charged")),
            "until": until,
            "max_iterations": 5,
        }
    )
    try:
        first, again = first_and_resumed(wf, {"charged": 0}, mode, timeout=0.3)
    finally:
        release.set()
    assert first == Failed("timed_out", first.checkpoint)
    assert first.checkpoint.cursor == LoopCursor(iteration=0, phase="until")
    assert first.checkpoint.state == {"charged": 1}
    assert isinstance(again, Completed) and again.state == {"charged": 1}
    assert calls["body"] == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_loop_cancelled_in_its_predicate_resumes_without_the_body(mode: str) -> None:
    calls: Counter[str] = Counter()
    deciding = threading.Event()
    release = threading.Event()

    def until(state: dict[str, Any]) -> bool:
        calls["until"] += 1
        if calls["until"] == 1:
            deciding.set()
            release.wait(5.0)
        return True

    wf = adk.compile_workflow(
        {
            "id": f"committed-loop-cancel-{mode}",
            "kind": "loop",
            "body": counting(calls, "body", bump("charged")),
            "until": until,
            "max_iterations": 5,
        }
    )
    ledger = MemoryLedger()
    if mode == "durable":
        iid, ref = workflows.start_durable(wf, {"charged": 0}, ledger=ledger)
    else:
        ref = workflows.start(wf, {"charged": 0})
    assert deciding.wait(5)
    workflows.cancel(ref, "later")
    first = workflows.wait(ref, WAIT)
    release.set()
    assert isinstance(first, Cancelled)
    assert first.checkpoint.cursor == LoopCursor(iteration=0, phase="until")
    assert first.checkpoint.state == {"charged": 1}
    if mode == "durable":
        assert workflows.durable_status(iid, ledger=ledger).checkpoint == first.checkpoint
        again = workflows.wait(workflows.resume_durable(iid, wf, ledger=ledger), WAIT)
    else:
        again = workflows.wait(workflows.resume(wf, first.checkpoint), WAIT)
    assert isinstance(again, Completed) and again.state == {"charged": 1}
    assert calls["body"] == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_refused_transfer_never_applies_the_members_delta(mode: str) -> None:
    """The transfer budget is checked before the member's delta is merged: the failed
    checkpoint is the committed one (the member did not commit), and its resume runs the
    member again without the delta of its first run."""
    calls: Counter[str] = Counter()
    wf = adk.compile_workflow(
        {
            "id": f"committed-transfer-{mode}",
            "kind": "transfer",
            "entry": "triage",
            "max_transfers": 0,
            "members": {
                "triage": {
                    "run": counting(
                        calls, "triage", lambda s: Transfer("spec", None, bump("triaged")(s))
                    )
                },
                "spec": {"run": lambda s: Output("ok", {})},
            },
        }
    )
    first, again = first_and_resumed(wf, {}, mode)
    for outcome in (first, again):
        assert isinstance(outcome, Failed)
        assert outcome.reason == ("budget_exhausted", "transfers")
        assert outcome.checkpoint.state == {}
        assert outcome.checkpoint.cursor == TransferCursor(
            member="triage", input=None, transfers_used=0
        )
    assert calls["triage"] == 2  # never committed: it ran again, its delta applied never


@pytest.mark.parametrize("mode", MODES)
def test_a_merge_that_fails_after_an_output_keeps_no_uncommitted_output(mode: str) -> None:
    """A graph node's output is recorded before its delta is merged; a merge refused
    (``state_too_large``) fails the run with the committed checkpoint: without that
    output."""
    big = "x" * (9 << 20)
    wf = adk.compile_workflow(
        {
            "id": f"committed-too-large-{mode}",
            "kind": "graph",
            "entry": "grow",
            "nodes": [{"id": "grow", "run": lambda s: Output("new-output", {"b": big})}],
            "edges": {"grow": "end"},
        }
    )
    first, again = first_and_resumed(wf, {"a": big}, mode)
    for outcome in (first, again):
        assert isinstance(outcome, Failed)
        assert outcome == Failed("state_too_large", outcome.checkpoint)
        assert outcome.checkpoint.output is UNSET
        assert set(outcome.checkpoint.state) == {"a"}
        assert outcome.checkpoint.cursor == GraphCursor(node="grow")


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_route_resumes_from_the_committed_node(mode: str) -> None:
    """A node's delta is committed (routing) before its route runs: a route that fails
    fails the run with that delta, and the resume routes again, never runs the node."""
    calls: Counter[str] = Counter()

    def route(state: dict[str, Any], context: dict[str, Any]) -> str:
        calls["route"] += 1
        if calls["route"] == 1:
            raise RuntimeError("flaky route")
        return "end"

    def bad_router(state: dict[str, Any]) -> Goto:
        calls["router"] += 1
        return Goto("elsewhere", {"routed": True})

    wf = adk.compile_workflow(
        {
            "id": f"committed-route-{mode}",
            "kind": "graph",
            "entry": "charge",
            "nodes": [{"id": "charge", "run": counting(calls, "charge", bump("charged"))}],
            "edges": {"charge": Route(route)},
        }
    )
    first, again = first_and_resumed(wf, {}, mode)
    assert isinstance(first, Failed) and first.reason[:2] == ("route_failed", "charge")
    assert first.checkpoint.state == {"charged": 1}
    assert isinstance(again, Completed) and again.state == {"charged": 1}
    assert calls["charge"] == 1

    router = adk.compile_workflow(
        {
            "id": f"committed-router-{mode}",
            "kind": "graph",
            "entry": "pick",
            "nodes": [{"id": "pick", "type": "branch", "choose": bad_router, "targets": ["end"]}],
            "edges": {},
        }
    )
    first, again = first_and_resumed(router, {}, mode)
    for outcome in (first, again):
        assert outcome == Failed(("route_failed", "pick", "target_not_allowed"), outcome.checkpoint)
        assert outcome.checkpoint.state == {}  # the router's delta was never merged


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_fork_merge_keeps_the_branch_results_unmerged(mode: str) -> None:
    """Fork branches commit their results as they come; a custom merge that fails
    fails the run with those results committed and no branch delta in the state; the
    resume merges again without running a branch."""
    calls: Counter[str] = Counter()

    def merge(deltas: list[Any], state: dict[str, Any]) -> dict[str, Any]:
        calls["merge"] += 1
        if calls["merge"] == 1:
            raise RuntimeError("flaky merge")
        merged: dict[str, Any] = {}
        for _branch, delta in deltas:
            merged.update(delta)
        return merged

    wf = adk.compile_workflow(
        {
            "id": f"committed-fork-{mode}",
            "kind": "graph",
            "entry": "fork",
            "nodes": [
                {
                    "id": "fork",
                    "type": "fork",
                    "branches": ["l", "r"],
                    "join": "join",
                    "merge": merge,
                },
                {"id": "l", "run": counting(calls, "l", bump("left"))},
                {"id": "r", "run": counting(calls, "r", bump("right"))},
                {"id": "join", "type": "join"},
            ],
            "edges": {"l": "join", "r": "join", "join": "end"},
        }
    )
    first, again = first_and_resumed(wf, {}, mode)
    assert isinstance(first, Failed) and first.reason[:2] == ("fork_merge_failed", "fork")
    assert first.checkpoint.state == {}
    assert set(first.checkpoint.cursor.results) == {"l", "r"}  # type: ignore[union-attr]
    assert isinstance(again, Completed) and again.state == {"left": 1, "right": 1}
    assert (calls["l"], calls["r"]) == (1, 1)


def fork_of_two(workflow_id: str, left: Any, right: Any, max_concurrency: int) -> CompiledWorkflow:
    return adk.compile_workflow(
        {
            "id": workflow_id,
            "kind": "graph",
            "entry": "fork",
            "nodes": [
                {
                    "id": "fork",
                    "type": "fork",
                    "branches": ["l", "r"],
                    "join": "join",
                    "max_concurrency": max_concurrency,
                },
                {"id": "l", "run": left},
                {"id": "r", "run": right},
                {"id": "join", "type": "join"},
            ],
            "edges": {"l": "join", "r": "join", "join": "end"},
        }
    )


@pytest.mark.parametrize("max_concurrency", [1, 2])
@pytest.mark.parametrize("mode", MODES)
def test_a_refused_builtin_merge_commits_the_last_branch_first(
    mode: str, max_concurrency: int
) -> None:
    """The last branch's result is committed with the merge, at the join's entry; when
    the (built-in) merge refuses (``reject_conflicts``), it is committed alone first:
    the failed checkpoint holds every finished branch, and the resume runs none again."""
    calls: Counter[str] = Counter()
    wf = fork_of_two(
        f"committed-conflict-{mode}-{max_concurrency}",
        counting(calls, "l", lambda state: {"k": 1}),
        counting(calls, "r", lambda state: {"k": 2}),
        max_concurrency,
    )
    first, again = first_and_resumed(wf, {}, mode)
    for outcome in (first, again):
        assert isinstance(outcome, Failed)
        assert outcome.reason[:2] == ("fork_merge_failed", "fork")
        assert outcome.checkpoint.state == {}
        cursor = outcome.checkpoint.cursor
        assert isinstance(cursor, GraphCursor) and cursor.phase == "fork"
        assert {b: r.delta for b, r in cursor.results.items()} == {"l": {"k": 1}, "r": {"k": 2}}  # type: ignore[union-attr]
    assert (calls["l"], calls["r"]) == (1, 1)


@pytest.mark.parametrize("mode", MODES)
def test_a_join_merge_too_large_commits_the_last_branch_first(mode: str) -> None:
    """``state_too_large`` at the join: the last branch's result, not committed yet,
    is committed alone before the run fails; the resume runs no branch again."""
    calls: Counter[str] = Counter()
    big = "x" * (9 << 20)
    wf = fork_of_two(
        f"committed-fork-too-large-{mode}",
        counting(calls, "l", lambda state: {"l": 1}),
        counting(calls, "r", lambda state: {"r": big}),
        1,
    )
    first, again = first_and_resumed(wf, {"a": big}, mode)
    for outcome in (first, again):
        assert outcome == Failed("state_too_large", outcome.checkpoint)
        assert set(outcome.checkpoint.state) == {"a"}
        assert set(outcome.checkpoint.cursor.results) == {"l", "r"}  # type: ignore[union-attr]
    assert (calls["l"], calls["r"]) == (1, 1)


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_parallel_merge_keeps_no_branch_delta(mode: str) -> None:
    """A parallel workflow commits at once or not at all: a custom merge that fails
    leaves the checkpoint it started from (no branch delta), and the resume runs the
    branches again, each delta applied once."""
    calls: Counter[str] = Counter()

    def merge(deltas: list[Any], state: dict[str, Any]) -> dict[str, Any]:
        calls["merge"] += 1
        if calls["merge"] == 1:
            raise RuntimeError("flaky merge")
        return {key: value for _branch, delta in deltas for key, value in delta.items()}

    wf = adk.compile_workflow(
        {
            "id": f"committed-parallel-merge-{mode}",
            "kind": "parallel",
            "merge": merge,
            "branches": [
                {"id": "l", "run": counting(calls, "l", bump("left"))},
                {"id": "r", "run": counting(calls, "r", bump("right"))},
            ],
        }
    )
    first, again = first_and_resumed(wf, {}, mode)
    assert isinstance(first, Failed) and first.reason[0] == "merge_failed"
    assert first.checkpoint.state == {}
    assert first.checkpoint.cursor == ParallelCursor()
    assert isinstance(again, Completed) and again.state == {"left": 1, "right": 1}


@pytest.mark.parametrize("mode", MODES)
def test_a_pause_commits_its_delta_once(mode: str) -> None:
    calls: Counter[str] = Counter()
    wf = adk.compile_workflow(
        {
            "id": f"committed-pause-{mode}",
            "kind": "graph",
            "entry": "ask",
            "nodes": [
                {
                    "id": "ask",
                    "run": counting(
                        calls, "ask", lambda s: Pause("approval", None, bump("asked")(s))
                    ),
                }
            ],
            "edges": {"ask": "end"},
        }
    )
    first, again = first_and_resumed(wf, {}, mode, resume_input={"ok": True})
    assert isinstance(first, Paused) and first.checkpoint.state == {"asked": 1}
    assert isinstance(again, Completed) and again.state == {"asked": 1}
    assert calls["ask"] == 1


# -- an output the schema refuses: the last delta committed as finished ------------------------

STRING_OUTPUT = {"output_schema": {"type": "string"}}


def finished_cases(calls: Counter[str], mode: str) -> list[tuple[CompiledWorkflow, Any]]:
    """(workflow, the finished cursor its refused completion commits): each ends on an
    action whose result is not committed before the output check."""
    stop = counting(calls, "last", lambda s: Stop(123, bump("charged")(s)))
    output = counting(calls, "last", lambda s: Output(123, bump("charged")(s)))
    return [
        (
            adk.compile_workflow(
                {
                    "id": f"finished-sequential-{mode}",
                    "kind": "sequential",
                    **STRING_OUTPUT,
                    "steps": [
                        {"id": "prep", "run": lambda s: {"prep": True}},
                        {"id": "charge", "run": stop},
                        {"id": "never", "run": counting(calls, "never", lambda s: {})},
                    ],
                }
            ),
            SequentialCursor(next_index=3),
        ),
        (
            adk.compile_workflow(
                {
                    "id": f"finished-graph-{mode}",
                    "kind": "graph",
                    **STRING_OUTPUT,
                    "entry": "charge",
                    "nodes": [
                        {"id": "charge", "run": stop},
                        {"id": "never", "run": counting(calls, "never", lambda s: {})},
                    ],
                    "edges": {"charge": "never", "never": "end"},
                }
            ),
            GraphCursor(node="charge", phase="routing", node_output=123, route_target=END),
        ),
        (
            adk.compile_workflow(
                {
                    "id": f"finished-parallel-{mode}",
                    "kind": "parallel",
                    **STRING_OUTPUT,
                    "branches": [
                        {"id": "charge", "run": output},
                        {"id": "other", "run": counting(calls, "other", lambda s: {"o": 1})},
                    ],
                }
            ),
            ParallelCursor(status="merged"),
        ),
        (
            adk.compile_workflow(
                {
                    "id": f"finished-loop-{mode}",
                    "kind": "loop",
                    **STRING_OUTPUT,
                    "body": stop,
                    "until": lambda s: False,
                    "max_iterations": 3,
                }
            ),
            LoopCursor(iteration=0, phase="done"),
        ),
        (
            adk.compile_workflow(
                {
                    "id": f"finished-transfer-{mode}",
                    "kind": "transfer",
                    **STRING_OUTPUT,
                    "entry": "charge",
                    "members": {"charge": {"run": output}},
                }
            ),
            TransferCursor(member="charge", input=None, transfers_used=0, phase="done"),
        ),
    ]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "case", range(5), ids=["sequential", "graph", "parallel", "loop", "transfer"]
)
def test_a_refused_output_commits_the_last_delta_as_finished(mode: str, case: int) -> None:
    """behaviors §7: an output schema failure fails the run with the checkpoint still
    holding the step's delta; that checkpoint is committed (durably: in the ledger) at a
    finished cursor, so the resume runs nothing again and fails the same way."""
    calls: Counter[str] = Counter()
    wf, finished = finished_cases(calls, mode)[case]
    first, again = first_and_resumed(wf, {}, mode)
    for outcome in (first, again):
        assert isinstance(outcome, Failed) and outcome.reason[0] == SCHEMA_REFUSED
        assert outcome.checkpoint.cursor == finished
        assert outcome.checkpoint.state.get("charged") == 1
        assert not outcome.checkpoint.completed
    assert calls["last"] == 1
    assert calls["never"] == 0 and calls["other"] <= 1
