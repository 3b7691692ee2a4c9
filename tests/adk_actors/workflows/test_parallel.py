"""Parallel workflows: bounded concurrency, merges in declared order, outputs by branch
id, conflicts, and a failing branch stopping its siblings."""

from __future__ import annotations

import queue
import threading
import time

import adk_actors as adk
import supervision as sv
from adk_actors.workflows import Completed, Error, Failed, Output
from tests.helpers import Recorder, wait_until


def parallel_spec(branches: list[dict], **extra: object) -> dict[str, object]:
    return {"version": 1, "id": "workflow-test", "kind": "parallel", "branches": branches, **extra}


def test_parallel_is_bounded_and_merges_in_declared_order() -> None:
    """Follows adk_workflow_test: parallel_is_bounded_and_merge_is_ordered_case."""
    log = Recorder()
    started: queue.Queue[int] = queue.Queue()
    release = {index: threading.Event() for index in (1, 2, 3)}

    def branch(index: int):
        def run(state: dict) -> dict:
            log.add(("start", index))
            started.put(index)
            assert release[index].wait(10)
            log.add(("end", index))
            return {"winner": index}

        return run

    wf = adk.compile_workflow(
        parallel_spec(
            [{"id": str(i), "run": branch(i)} for i in (1, 2, 3)],
            merge="ordered_last_wins",
            max_concurrency=2,
            max_steps=3,
        )
    )
    ref = adk.workflows.start(wf, {})
    first_two = {started.get(timeout=5), started.get(timeout=5)}
    assert first_two == {1, 2}
    release[2].set()  # branch 2 ends first, then 1, then 3
    assert started.get(timeout=5) == 3
    release[1].set()
    release[3].set()
    outcome = adk.workflows.wait(ref, timeout=10)
    assert isinstance(outcome, Completed)
    assert outcome.state["winner"] == 3  # declared order, not completion order
    events = log.events
    assert events.index(("start", 3)) > events.index(("end", 2))  # never 3 at once
    assert outcome.checkpoint.output == {"1": None, "2": None, "3": None}


def test_parallel_outputs_are_collected_by_branch_id() -> None:
    """Follows adk_workflow_test: parallel_outputs_are_collected_by_branch_id_case."""
    wf = adk.compile_workflow(
        parallel_spec(
            [
                {"id": "left", "run": lambda s: Output({"answer": 1}, {"left_done": True})},
                {"id": "right", "run": lambda s: Output({"answer": 2}, {"right_done": True})},
            ],
            merge="reject_conflicts",
            max_concurrency=2,
        )
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"left_done": True, "right_done": True}
    assert outcome.checkpoint.output == {"left": {"answer": 1}, "right": {"answer": 2}}


def test_parallel_readme_example() -> None:
    """Follows readme_workflow_examples_test: sequential_and_parallel_workflows (the
    parallel part)."""
    wf = adk.compile_workflow(
        parallel_spec(
            [
                {"id": "left", "run": lambda s: Output("left-output", {"left": 1})},
                {"id": "right", "run": lambda s: Output("right-output", {"right": 2})},
            ],
            id="readme-parallel-v1",
            max_concurrency=2,
            merge="reject_conflicts",
        )
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"left": 1, "right": 2}
    assert outcome.checkpoint.output == {"left": "left-output", "right": "right-output"}


def test_parallel_conflict_is_deterministic() -> None:
    """Follows adk_workflow_test: parallel_conflict_is_deterministic_case."""
    wf = adk.compile_workflow(
        parallel_spec(
            [
                {"id": "left", "run": lambda s: {"shared": 1}},
                {"id": "right", "run": lambda s: {"shared": 2}},
                {"id": "same", "run": lambda s: {"equal": 1}},
                {"id": "again", "run": lambda s: {"equal": 1}},
            ],
            merge="reject_conflicts",
            max_concurrency=4,
        )
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Failed)
    tag, failure, owners = outcome.reason
    assert tag == "state_conflict"
    assert failure["operation"] == "state_conflict"
    assert owners == ["left", "right"]
    assert outcome.checkpoint.state == {}  # nothing merged


def _constant(n: int):
    return lambda state: {"n": n}


def test_equal_writes_merge_and_a_custom_merge_sees_declared_order() -> None:
    """Follows adk_workflow_test: parallel_conflict_is_deterministic_case (equal writes
    are not conflicts) and the custom merge of the reference's compile rules."""
    seen: list[list] = []

    def merge(ordered: list, state: dict) -> dict:
        seen.append([branch for branch, _delta in ordered])
        return {"total": sum(delta["n"] for _branch, delta in ordered)}

    wf = adk.compile_workflow(
        parallel_spec(
            [{"id": name, "run": _constant(n)} for n, name in enumerate("abc")],
            merge=merge,
        )
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"total": 3}
    assert seen == [["a", "b", "c"]]


def test_a_failing_branch_stops_its_sibling() -> None:
    """Follows adk_workflow_test: parallel_failure_stops_sibling_case."""
    pids: queue.Queue[tuple[str, sv.Pid]] = queue.Queue()
    release_failure = threading.Event()
    sibling_done = threading.Event()

    def blocking(state: dict) -> dict:
        pids.put(("sibling", sv.self_pid()))
        sibling_done.wait(10)
        return {}

    def failure(state: dict) -> Error:
        pids.put(("failure", sv.self_pid()))
        assert release_failure.wait(10)
        return Error("expected_failure")

    wf = adk.compile_workflow(
        parallel_spec(
            [{"id": "blocking", "run": blocking}, {"id": "failure", "run": failure}],
            max_concurrency=2,
        )
    )
    ref = adk.workflows.start(wf, {})
    workers = dict([pids.get(timeout=5), pids.get(timeout=5)])
    assert adk.workflows.status(ref)["state"] == "running"
    release_failure.set()
    outcome = adk.workflows.wait(ref, timeout=10)
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("branch_failed", "failure", "expected_failure")
    wait_until(lambda: not workers["sibling"].is_alive())
    sibling_done.set()


class Peak:
    """The most branches running at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0

    def branch(self, state: dict) -> dict:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(0.15)  # long enough for every branch allowed at once to start
        with self.lock:
            self.active -= 1
        return {}


def test_the_max_concurrency_option_is_a_ceiling_never_a_raise() -> None:
    """In a parallel workflow and a fork alike, the run option lowers the spec's own
    bound and never raises it: the smaller of the two applies."""
    for own, option, expected in ((1, 4, 1), (4, 2, 2), (3, None, 3)):
        peak = Peak()
        parallel = adk.compile_workflow(
            parallel_spec(
                [{"id": f"b{i}", "run": peak.branch} for i in range(4)],
                merge="ordered_last_wins",
                max_concurrency=own,
            )
        )
        options = {} if option is None else {"max_concurrency": option}
        assert isinstance(adk.run_workflow(parallel, {}, **options), Completed)
        assert peak.peak == expected, ("parallel", own, option)

        peak = Peak()
        names = [f"b{i}" for i in range(4)]
        fork = adk.compile_workflow(
            {
                "id": "fork-ceiling",
                "kind": "graph",
                "entry": "fork",
                "nodes": [
                    {
                        "id": "fork",
                        "type": "fork",
                        "branches": names,
                        "join": "join",
                        "merge": "ordered_last_wins",
                        "max_concurrency": own,
                    },
                    *({"id": name, "run": peak.branch} for name in names),
                    {"id": "join", "type": "join"},
                ],
                "edges": {**{name: "join" for name in names}, "join": "end"},
            }
        )
        assert isinstance(adk.run_workflow(fork, {}, **options), Completed)
        assert peak.peak == expected, ("fork", own, option)
