"""Fork/join: bounded branches, declared-order merges, per-branch checkpoints (a
finished branch is skipped on resume, an uncommitted one runs again), pauses inside
a fork, and a failing branch stopping its siblings."""

from __future__ import annotations

import asyncio
import collections
import queue
import threading

import adk_actors as adk
import supervision as sv
from adk_actors.workflows import Completed, Error, Failed, Output, Pause, Paused
from adk_actors.workflows.engine_state import Branches
from tests.helpers import wait_until


def graph_spec(entry: str, nodes: list, edges: dict, max_steps: int) -> dict:
    return {
        "version": 1,
        "id": "graph-extension-test",
        "kind": "graph",
        "entry": entry,
        "nodes": nodes,
        "edges": edges,
        "max_steps": max_steps,
    }


def fork_node(branches: list[str], merge: str, max_concurrency: int) -> dict:
    return {
        "id": "fork",
        "type": "fork",
        "branches": branches,
        "join": "join",
        "merge": merge,
        "max_concurrency": max_concurrency,
    }


def test_fork_fan_in_is_bounded_and_declared_order_wins() -> None:
    """Follows adk_workflow_graph_test: fork_fan_in_is_bounded_and_declared_order_wins."""
    started: queue.Queue[str] = queue.Queue()
    release = {"left": threading.Event(), "right": threading.Event()}
    order: list[str] = []

    def branch(name: str):
        def run(state: dict) -> Output:
            started.put(name)
            assert release[name].wait(10)
            order.append(name)
            return Output({"branch": name}, {"winner": name})

        return run

    def join(state: dict, context: dict) -> Output:
        inputs = context["input"]
        assert inputs == {"left": {"branch": "left"}, "right": {"branch": "right"}}
        return Output(inputs, {"join_saw_outputs": True})

    wf = adk.compile_workflow(
        graph_spec(
            "fork",
            [
                fork_node(["left", "right"], "ordered_last_wins", 2),
                {"id": "left", "run": branch("left")},
                {"id": "right", "run": branch("right")},
                {"id": "join", "type": "join", "run": join},
            ],
            {"left": "join", "right": "join", "join": "end"},
            8,
        )
    )
    ref = adk.workflows.start(wf, {})
    assert {started.get(timeout=10), started.get(timeout=10)} == {"left", "right"}
    release["right"].set()  # completion order is the opposite of declaration order
    wait_until(lambda: order == ["right"])
    release["left"].set()
    outcome = adk.workflows.wait(ref, timeout=10)
    assert isinstance(outcome, Completed)
    assert outcome.state["winner"] == "right"
    assert outcome.state["join_saw_outputs"] is True
    assert outcome.checkpoint.output == {"left": {"branch": "left"}, "right": {"branch": "right"}}


def test_completed_fork_branch_is_skipped_after_resume() -> None:
    """Follows adk_workflow_graph_test: completed_fork_branch_is_skipped_after_resume."""
    calls: collections.Counter[str] = collections.Counter()
    allow_right = threading.Event()
    right_blocked: queue.Queue[bool] = queue.Queue()
    stop_blocking = threading.Event()

    def left(state: dict) -> dict:
        calls["left"] += 1
        return {"left_done": True}

    def right(state: dict) -> dict:
        calls["right"] += 1
        if not allow_right.is_set():
            right_blocked.put(True)
            stop_blocking.wait(10)
        return {"right_done": True}

    wf = adk.compile_workflow(
        graph_spec(
            "fork",
            [
                fork_node(["left", "right"], "reject_conflicts", 1),
                {"id": "left", "run": left},
                {"id": "right", "run": right},
                {"id": "join", "type": "join"},
            ],
            {"left": "join", "right": "join", "join": "end"},
            10,
        )
    )
    ref = adk.workflows.start(wf, {}, max_concurrency=1)
    assert right_blocked.get(timeout=10)

    def left_committed() -> object:
        cp = adk.workflows.checkpoint(ref)
        cursor = cp.cursor
        return cp if cursor.phase == "fork" and "left" in (cursor.results or {}) else None

    observed = wait_until(left_committed)
    adk.workflows.cancel(ref, "test_resume")
    cancelled = adk.workflows.wait(ref, timeout=10)
    assert cancelled.reason == "test_resume"
    assert cancelled.checkpoint.cursor == observed.cursor
    stop_blocking.set()
    allow_right.set()
    resumed = adk.workflows.resume(wf, cancelled.checkpoint, max_concurrency=1)
    outcome = adk.workflows.wait(resumed, timeout=10)
    assert isinstance(outcome, Completed)
    assert outcome.state == {"left_done": True, "right_done": True}
    assert calls["left"] == 1
    assert calls["right"] == 2  # only an uncommitted, in-flight branch is at-least-once


def test_fork_pause_replays_uncommitted_sibling_at_least_once() -> None:
    """Follows adk_workflow_graph_test: fork_pause_replays_uncommitted_sibling_at_least_once."""
    calls: collections.Counter[str] = collections.Counter()
    sibling_started = threading.Event()
    first_sibling: queue.Queue[sv.Pid] = queue.Queue()
    never = threading.Event()

    def sibling(state: dict) -> Output | dict:
        calls["sibling"] += 1
        if calls["sibling"] == 1:
            first_sibling.put(sv.self_pid())
            sibling_started.set()
            never.wait(10)
            return {}
        return Output("sibling-output", {"sibling_done": True})

    def pause(state: dict) -> Pause:
        assert sibling_started.wait(10)
        return Pause("approval", "Approve fork branch", {"pause_started": True})

    wf = adk.compile_workflow(
        graph_spec(
            "fork",
            [
                fork_node(["pause", "sibling"], "reject_conflicts", 2),
                {"id": "pause", "run": pause},
                {"id": "sibling", "run": sibling},
                {"id": "join", "type": "join"},
            ],
            {"pause": "join", "sibling": "join", "join": "end"},
            8,
        )
    )
    outcome = adk.run_workflow(wf, {}, max_concurrency=2)
    assert isinstance(outcome, Paused)
    killed = first_sibling.get(timeout=5)
    wait_until(lambda: not killed.is_alive())
    cursor = outcome.checkpoint.cursor
    assert "sibling" not in cursor.fork_results
    assert cursor.paused_branch == "pause"
    assert calls["sibling"] == 1
    never.set()
    resumed = adk.workflows.resume(
        wf, outcome.checkpoint, resume_input={"approved": True}, max_concurrency=2
    )
    final = adk.workflows.wait(resumed, timeout=10)
    assert isinstance(final, Completed)
    assert final.state["pause_started"] is True
    assert final.state["sibling_done"] is True
    assert calls["sibling"] == 2  # restarted from its action boundary: at-least-once


def test_fork_resume_input_becomes_paused_branch_output() -> None:
    """Follows adk_workflow_graph_test: fork_resume_input_becomes_paused_branch_output."""
    calls: collections.Counter[str] = collections.Counter()

    def pause(state: dict) -> Pause:
        calls["pause"] += 1
        return Pause("approval", "Approve fork branch", {"pause_delta": True})

    def other(state: dict) -> Output:
        calls["other"] += 1
        return Output("other-output", {"other_delta": True})

    def join(state: dict, context: dict) -> Output:
        inputs = context["input"]
        assert inputs == {"pause": {"approved": True}, "other": "other-output"}
        return Output(inputs, {"joined": True})

    wf = adk.compile_workflow(
        graph_spec(
            "fork",
            [
                fork_node(["pause", "other"], "reject_conflicts", 1),
                {"id": "pause", "run": pause},
                {"id": "other", "run": other},
                {"id": "join", "type": "join", "run": join},
            ],
            {"pause": "join", "other": "join", "join": "end"},
            8,
        )
    )
    outcome = adk.run_workflow(wf, {}, max_concurrency=1)
    assert isinstance(outcome, Paused)
    assert outcome.details["node_id"] == "pause"
    assert outcome.details["fork_id"] == "fork"
    assert outcome.details["reason"] == "approval"
    assert (calls["pause"], calls["other"]) == (1, 0)
    resumed = adk.workflows.resume(
        wf, outcome.checkpoint, resume_input={"approved": True}, max_concurrency=1
    )
    final = adk.workflows.wait(resumed, timeout=10)
    assert isinstance(final, Completed)
    assert final.state == {"pause_delta": True, "other_delta": True, "joined": True}
    assert (calls["pause"], calls["other"]) == (1, 1)
    assert final.checkpoint.output == {"pause": {"approved": True}, "other": "other-output"}


def test_fork_failure_stops_sibling() -> None:
    """Follows adk_workflow_graph_test: fork_failure_stops_sibling."""
    pids: queue.Queue[tuple[str, sv.Pid]] = queue.Queue()
    release_failure = threading.Event()
    done = threading.Event()

    def blocking(state: dict) -> dict:
        pids.put(("sibling", sv.self_pid()))
        done.wait(10)
        return {}

    def failure(state: dict) -> Error:
        pids.put(("failure", sv.self_pid()))
        assert release_failure.wait(10)
        return Error("expected_failure")

    wf = adk.compile_workflow(
        graph_spec(
            "fork",
            [
                fork_node(["blocking", "failure"], "reject_conflicts", 2),
                {"id": "blocking", "run": blocking},
                {"id": "failure", "run": failure},
                {"id": "join", "type": "join"},
            ],
            {"blocking": "join", "failure": "join", "join": "end"},
            8,
        )
    )
    ref = adk.workflows.start(wf, {}, max_concurrency=2)
    workers = dict([pids.get(timeout=10), pids.get(timeout=10)])
    release_failure.set()
    outcome = adk.workflows.wait(ref, timeout=10)
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("fork_branch_failed", "failure", "expected_failure")
    wait_until(lambda: not workers["sibling"].is_alive())
    done.set()


def test_a_fork_runs_its_own_concurrency_by_default() -> None:
    """Follows adk_workflow_graph_test: fork_fan_in_is_bounded_and_declared_order_wins
    (our decision: without a start option a fork runs up to its own declared bound,
    not the reference's runtime default of 1)."""
    barrier = threading.Barrier(3, timeout=10)

    def branch(state: dict) -> dict:
        barrier.wait()  # only passes when all three run at once
        return {}

    wf = adk.compile_workflow(
        graph_spec(
            "fork",
            [
                {"id": "fork", "type": "fork", "branches": ["a", "b", "c"], "join": "join"},
                {"id": "a", "run": branch},
                {"id": "b", "run": branch},
                {"id": "c", "run": branch},
                {"id": "join", "type": "join"},
            ],
            {"a": "join", "b": "join", "c": "join", "join": "end"},
            8,
        )
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.checkpoint.output == {"a": None, "b": None, "c": None}


def test_branches_that_end_together_are_taken_in_declared_order() -> None:
    """Follows adk_workflow_graph_test: fork_fan_in_is_bounded_and_declared_order_wins
    (the pool a fork and a parallel workflow share: among branches that ended by the
    time it looks, the first declared is taken first, whatever its id)."""

    async def ended(value: str) -> str:
        return value

    async def main() -> list[tuple[object, str]]:
        taken = []
        async with Branches(3) as pool:
            pool.start((2, "alpha"), ended("a"))
            pool.start((0, "zeta"), ended("z"))
            pool.start((1, "mid"), ended("m"))
            await asyncio.sleep(0.01)  # all three have ended
            while pool.active:
                taken.append(await pool.next())
        return taken

    assert asyncio.run(main()) == [((0, "zeta"), "z"), ((1, "mid"), "m"), ((2, "alpha"), "a")]
