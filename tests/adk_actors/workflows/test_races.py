"""Concurrency: cancel racing completion ends a run once; many concurrent runs leave
nothing behind; a late result of a killed worker never changes a checkpoint."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.app import WORKFLOW_SUPERVISOR
from adk_actors.workflows import Cancelled, Completed, Failed, Output
from providers.errors import AdkError
from tests.helpers import wait_until


def sequential(steps: list) -> dict:
    return {"version": 1, "id": "workflow-test", "kind": "sequential", "steps": steps}


def _workers() -> int:
    return sv.DynamicSupervisor.count_children(WORKFLOW_SUPERVISOR)["workers"]


def test_cancel_racing_completion_yields_one_terminal() -> None:
    """Follows adk_workflow_test: cancellation_stops_blocked_worker_case (cancel and
    completion racing: exactly one of them ends the run, and the answers agree)."""
    wf = adk.compile_workflow(
        sequential(
            [{"id": "a", "run": lambda s: {"a": 1}}, {"id": "b", "run": lambda s: Output("b")}]
        )
    )
    seen = set()
    for _ in range(60):
        ref = adk.workflows.start(wf, {})
        try:
            adk.workflows.cancel(ref, "raced")
            cancelled = True
        except AdkError as error:
            assert error.reason == "already_terminal"
            cancelled = False
        outcome = adk.workflows.wait(ref, timeout=5)
        again = adk.workflows.wait(ref, timeout=5)
        assert outcome == again  # one terminal, answered the same to everyone
        if cancelled:
            assert isinstance(outcome, Cancelled) and outcome.reason == "raced"
        else:
            assert isinstance(outcome, Completed) and outcome.checkpoint.output == "b"
        seen.add(type(outcome))
        with pytest.raises(AdkError):
            adk.workflows.cancel(ref, "again")
    assert seen  # at least one kind observed; both are legal


def test_two_hundred_concurrent_workflows_leave_nothing_behind(leak_check: None) -> None:
    """Follows adk_workflow_test: supervisor_and_public_facade_case (the design's
    concurrency check: 200 runs at once return the supervisor's children to baseline)."""
    baseline = _workers()
    barrier = threading.Barrier(50, timeout=30)

    def step(state: dict, context: dict) -> Output:
        return Output(state["n"] * 2, {"double": state["n"] * 2})

    wf = adk.compile_workflow(
        {
            "version": 1,
            "id": "many",
            "kind": "graph",
            "entry": "fork",
            "max_steps": 10,
            "nodes": [
                {"id": "fork", "type": "fork", "branches": ["x", "y"], "join": "join"},
                {"id": "x", "run": step},
                {"id": "y", "run": lambda s: Output("y", {"y": True})},
                {"id": "join", "type": "join"},
            ],
            "edges": {"x": "join", "y": "join", "join": "end"},
        }
    )

    def one(n: int) -> object:
        if n < 50:
            barrier.wait()  # the first 50 start together
        return adk.run_workflow(wf, {"n": n}, timeout=60)

    with ThreadPoolExecutor(max_workers=50) as pool:
        outcomes = list(pool.map(one, range(200)))
    assert all(isinstance(outcome, Completed) for outcome in outcomes)
    assert [o.state["double"] for o in outcomes] == [n * 2 for n in range(200)]
    wait_until(lambda: _workers() == baseline, timeout=20)


def test_a_late_result_after_cancel_never_changes_the_checkpoint() -> None:
    """Follows adk_workflow_test: cancellation_stops_blocked_worker_case (the killed
    worker's late result is dropped)."""
    release = threading.Event()
    returned = threading.Event()
    started = threading.Event()

    def slow(state: dict) -> Output:
        started.set()
        release.wait(10)
        returned.set()
        return Output("late", {"late": True})

    wf = adk.compile_workflow(
        sequential([{"id": "first", "run": lambda s: {"first": 1}}, {"id": "slow", "run": slow}])
    )
    ref = adk.workflows.start(wf, {})
    assert started.wait(5)
    adk.workflows.cancel(ref, "stop_now")
    outcome = adk.workflows.wait(ref, timeout=5)
    assert isinstance(outcome, Cancelled)
    release.set()
    assert returned.wait(5)
    status = adk.workflows.status(ref)  # the coordinator handled anything sent before this
    assert status["state"] == "cancelled"
    assert adk.workflows.checkpoint(ref) == outcome.checkpoint
    assert outcome.checkpoint.state == {"first": 1}
    assert adk.workflows.wait(ref, timeout=5) == outcome


def test_concurrent_cancels_have_one_winner() -> None:
    """Follows adk_workflow_test: cancellation_stops_blocked_worker_case (behaviors §7:
    a second cancel is ``already_terminal``, also when the cancels race each other)."""
    started = threading.Event()
    never = threading.Event()

    def block(state: dict) -> dict:
        started.set()
        never.wait(10)
        return {}

    wf = adk.compile_workflow(sequential([{"id": "block", "run": block}]))
    for _ in range(10):
        started.clear()
        ref = adk.workflows.start(wf, {})
        assert started.wait(5)
        barrier = threading.Barrier(8, timeout=10)

        def cancel(n: int, ref: str = ref, barrier: threading.Barrier = barrier) -> str:
            barrier.wait()
            try:
                adk.workflows.cancel(ref, f"cancel_{n}")
            except AdkError as error:
                return str(error.reason)
            return f"cancel_{n}"

        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(cancel, range(8)))
        winners = [answer for answer in answers if answer != "already_terminal"]
        assert len(winners) == 1
        outcome = adk.workflows.wait(ref, timeout=5)
        assert outcome == Cancelled(winners[0], outcome.checkpoint)
    never.set()


def test_cancel_racing_the_deadline_yields_one_terminal() -> None:
    """Follows adk_workflow_test: absolute_deadline_stops_blocked_worker_case (the
    deadline and a cancel racing: one ends the run and every answer agrees)."""
    never = threading.Event()
    wf = adk.compile_workflow(sequential([{"id": "block", "run": lambda s: never.wait(10)}]))
    seen = set()
    for attempt in range(30):
        ref = adk.workflows.start(wf, {}, timeout=0.005 * (attempt % 4))
        try:
            adk.workflows.cancel(ref, "raced")
        except AdkError as error:
            assert error.reason == "already_terminal"
        outcome = adk.workflows.wait(ref, timeout=5)
        assert adk.workflows.wait(ref, timeout=5) == outcome
        assert adk.workflows.status(ref)["outcome"] == outcome
        assert outcome in (
            Cancelled("raced", outcome.checkpoint),
            Failed("timed_out", outcome.checkpoint),
        )
        seen.add(type(outcome))
    assert seen  # either may win; each run had exactly one terminal
    never.set()


def test_run_workflow_finds_its_run_however_short_the_retention(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Follows adk_workflow_test: supervisor_and_public_facade_case (the blocking
    facade: a run that ends before `run_workflow` asks for it, with ``retention=0``,
    is still answered, and its coordinator stops once it has answered)."""
    from adk_actors.workflows import api

    real_start = api.start

    def slow_start(*args: object, **options: object) -> str:
        ref = real_start(*args, **options)  # type: ignore[arg-type]
        time.sleep(0.2)  # the caller is descheduled: the run ends first
        return ref

    monkeypatch.setattr(api, "start", slow_start)
    baseline = _workers()
    wf = adk.compile_workflow(sequential([{"id": "a", "run": lambda s: Output("done")}]))
    outcome = adk.run_workflow(wf, {}, retention=0)
    assert isinstance(outcome, Completed)
    assert outcome.checkpoint.output == "done"
    wait_until(lambda: _workers() == baseline)
    with pytest.raises(AdkError) as invalid:
        adk.run_workflow(wf, {}, retention=-1)
    assert invalid.value.reason == ("invalid_workflow_options", "retention")


@pytest.mark.parametrize("ending", ["cancel", "deadline"])
def test_a_commit_racing_the_terminal_lands_in_the_outcome_or_is_refused(ending: str) -> None:
    """A run without persistence commits straight into its coordinator's commit cell,
    which the terminal closes first: a commit either lands before the terminal, and is
    in its outcome, or is refused, and nothing after it starts. So a step that started
    always has its predecessor's result in the cancelled (or timed-out) checkpoint, and
    the resume runs every other step once, no committed one again."""
    steps = [f"s{n}" for n in range(8)]
    started: list[str] = []
    lock = threading.Lock()

    def step(name: str):  # type: ignore[no-untyped-def]
        def run(state: dict) -> dict:
            with lock:
                started.append(name)
            return {"log": [*state["log"], name]}

        return run

    wf = adk.compile_workflow(sequential([{"id": name, "run": step(name)} for name in steps]))
    ended = set()
    for attempt in range(60):
        with lock:
            started.clear()
        options = {"timeout": 0.0005 * (attempt % 8)} if ending == "deadline" else {}
        ref = adk.workflows.start(wf, {"log": []}, **options)
        if ending == "cancel":
            time.sleep(0.0002 * (attempt % 8))
            try:
                adk.workflows.cancel(ref, "raced")
            except AdkError as error:
                assert error.reason == "already_terminal"
        outcome = adk.workflows.wait(ref, timeout=5)
        ended.add(type(outcome))
        if isinstance(outcome, Completed):
            assert outcome.state["log"] == steps
            continue
        checkpoint = outcome.checkpoint
        with lock:
            ran = list(started)
        committed = checkpoint.state["log"]
        assert committed == steps[: checkpoint.cursor.next_index]  # type: ignore[union-attr]
        # a step starts only once the step before it is committed: in the outcome
        if ran:
            assert steps.index(ran[-1]) <= checkpoint.cursor.next_index  # type: ignore[union-attr]
        resumed = adk.workflows.wait(adk.workflows.resume(wf, checkpoint), timeout=5)
        assert isinstance(resumed, Completed)
        assert resumed.state["log"] == steps  # no committed step ran again
    assert ended - {Completed}  # the terminal won some races


def test_the_commit_cell_refuses_every_commit_after_it_closed() -> None:
    """`CommitCell`: the last commit that was accepted is what `close` returns; none is
    accepted after it, however the two threads interleave (the coordinator's
    terminal against the engine's commits)."""
    from adk_actors.workflows.checkpoint import Checkpoint, Remaining, SequentialCursor
    from adk_actors.workflows.engine_state import CommitCell

    def checkpoint(n: int) -> Checkpoint:
        return Checkpoint(
            workflow_id="cell",
            workflow_version=1,
            kind="sequential",
            cursor=SequentialCursor(next_index=0),
            state={"n": n},
            remaining=Remaining(steps=n, transfers=0),
        )

    for round_ in range(50):
        cell = CommitCell(checkpoint(0))
        accepted: list[int] = []
        go = threading.Event()

        def engine(
            cell: CommitCell = cell, accepted: list[int] = accepted, go: threading.Event = go
        ) -> None:
            go.wait()
            for n in range(1, 2000):
                if not cell.commit(checkpoint(n)):
                    return
                accepted.append(n)

        thread = threading.Thread(target=engine)
        thread.start()
        go.set()
        time.sleep(0.0001 * (round_ % 5))
        closed = cell.close()
        thread.join(5)
        assert closed.state["n"] == (accepted[-1] if accepted else 0)
        assert not cell.commit(checkpoint(9999))
        assert cell.checkpoint == closed
