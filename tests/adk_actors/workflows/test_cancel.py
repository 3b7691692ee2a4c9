"""Cancel, the coordinator's death and the deadline: each kills the workers, keeps the
last committed checkpoint, and ends the run once; budgets are never replenished."""

from __future__ import annotations

import asyncio
import queue
import threading
import time

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.workflows import Cancelled, Completed, Failed, api
from adk_actors.workflows.launch import workflow_name
from providers.errors import AdkError
from tests.helpers import wait_until


def sequential(steps: list, **extra: object) -> dict:
    return {"version": 1, "id": "workflow-test", "kind": "sequential", "steps": steps, **extra}


def blocking_step(workers: queue.Queue, never: threading.Event):
    def block(state: dict) -> dict:
        workers.put(sv.self_pid())
        never.wait(10)
        return {"late": True}

    return block


def test_cancel_stops_a_blocked_worker() -> None:
    """Follows adk_workflow_test: cancellation_stops_blocked_worker_case."""
    workers: queue.Queue[sv.Pid] = queue.Queue()
    never = threading.Event()
    wf = adk.compile_workflow(sequential([{"id": "block", "run": blocking_step(workers, never)}]))
    ref = adk.workflows.start(wf, {}, timeout=5)
    worker = workers.get(timeout=5)
    assert adk.workflows.status(ref)["state"] == "running"
    adk.workflows.cancel(ref, "test_cancel")
    outcome = adk.workflows.wait(ref, timeout=5)
    assert isinstance(outcome, Cancelled)
    assert outcome.reason == "test_cancel"
    assert outcome.checkpoint.completed is False
    wait_until(lambda: not worker.is_alive())
    with pytest.raises(AdkError) as second:
        adk.workflows.cancel(ref, "second_cancel")
    assert second.value.reason == "already_terminal"
    assert adk.workflows.status(ref)["state"] == "cancelled"
    never.set()


def test_the_coordinator_death_stops_a_blocked_worker() -> None:
    """Follows adk_workflow_test: coordinator_death_stops_blocked_worker_case."""
    workers: queue.Queue[sv.Pid] = queue.Queue()
    never = threading.Event()
    wf = adk.compile_workflow(sequential([{"id": "block", "run": blocking_step(workers, never)}]))
    ref = adk.workflows.start(wf, {}, timeout=5)
    worker = workers.get(timeout=5)
    coordinator = sv.whereis(workflow_name(ref))
    assert coordinator is not None
    sv.exit(coordinator, "kill")
    wait_until(lambda: not worker.is_alive())
    with pytest.raises(AdkError) as gone:
        adk.workflows.status(ref)
    assert gone.value.reason == "not_found"
    never.set()


def test_the_absolute_deadline_stops_a_blocked_worker() -> None:
    """Follows adk_workflow_test: absolute_deadline_stops_blocked_worker_case."""
    workers: queue.Queue[sv.Pid] = queue.Queue()
    never = threading.Event()
    wf = adk.compile_workflow(sequential([{"id": "block", "run": blocking_step(workers, never)}]))
    ref = adk.workflows.start(wf, {}, timeout=0.03)
    worker = workers.get(timeout=5)
    outcome = adk.workflows.wait(ref, timeout=5)
    assert isinstance(outcome, Failed)
    assert outcome.reason == "timed_out"
    assert adk.workflows.status(ref)["state"] == "timed_out"
    wait_until(lambda: not worker.is_alive())
    never.set()

    started = threading.Event()

    def expired(state: dict) -> dict:
        started.set()
        return {}

    past = adk.compile_workflow(sequential([{"id": "expired", "run": expired}]))
    outcome = adk.run_workflow(past, {}, deadline=time.monotonic() - 0.001)
    assert isinstance(outcome, Failed)
    assert outcome.reason == "timed_out"
    assert not started.is_set()  # a past deadline starts nothing


def test_cancel_keeps_the_checkpoint_and_resume_finishes() -> None:
    """Follows readme_workflow_examples_test: workflow_cancel_checkpoint_and_resume."""
    waiting: queue.Queue[tuple[sv.Pid, threading.Event]] = queue.Queue()

    def wait_for_release(state: dict) -> dict:
        release = threading.Event()
        waiting.put((sv.self_pid(), release))
        assert release.wait(10)
        return {"released": True}

    wf = adk.compile_workflow(
        sequential([{"id": "wait", "run": wait_for_release}], id="readme-resume-v1", max_steps=2)
    )
    ref = adk.workflows.start(wf, {})
    first_worker, first_release = waiting.get(timeout=5)
    assert adk.workflows.status(ref)["state"] == "running"
    checkpoint = adk.workflows.checkpoint(ref)
    adk.workflows.cancel(ref, "revise_later")
    outcome = adk.workflows.wait(ref, timeout=5)
    assert outcome == Cancelled("revise_later", checkpoint)
    wait_until(lambda: not first_worker.is_alive())
    first_release.set()
    resumed = adk.workflows.resume(wf, checkpoint)
    _second_worker, second_release = waiting.get(timeout=5)
    second_release.set()
    final = adk.workflows.wait(resumed, timeout=5)
    assert isinstance(final, Completed)
    assert final.state == {"released": True}


def test_resume_never_replenishes_budgets() -> None:
    """Follows adk_workflow_test: checkpoint_resume_does_not_replay_committed_step_case
    (the design's rule: a resume keeps the checkpoint's remaining budgets)."""
    workers: queue.Queue[sv.Pid] = queue.Queue()
    never = threading.Event()
    steps = [
        {"id": "one", "run": lambda s: {"one": True}},
        {"id": "two", "run": blocking_step(workers, never)},
        {"id": "three", "run": lambda s: {"three": True}},
    ]
    wf = adk.compile_workflow(sequential(steps, max_steps=2))
    ref = adk.workflows.start(wf, {})
    workers.get(timeout=5)
    adk.workflows.cancel(ref)
    cancelled = adk.workflows.wait(ref, timeout=5)
    assert cancelled.reason == "user_cancelled"
    assert cancelled.checkpoint.remaining.steps == 0  # two steps taken: "two" was under way
    never.set()
    resumed = adk.workflows.resume(wf, cancelled.checkpoint, max_steps=100)
    outcome = adk.workflows.wait(resumed, timeout=5)
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("budget_exhausted", "steps")
    assert outcome.checkpoint.state == {"one": True}


def test_calls_on_unknown_runs_and_bad_options_are_refused() -> None:
    """Follows adk_workflow_test: supervisor_and_public_facade_case (the facade's
    refusals: unknown references, invalid options and states)."""
    wf = adk.compile_workflow(sequential([{"id": "a", "run": lambda s: {}}]))
    for call in (adk.workflows.status, adk.workflows.checkpoint, adk.workflows.wait):
        with pytest.raises(AdkError) as unknown:
            call("wf-nobody")
        assert unknown.value.reason == "not_found"
    with pytest.raises(AdkError) as bad_ref:
        adk.workflows.cancel(42)  # type: ignore[arg-type]
    assert bad_ref.value.reason == "invalid_workflow_ref"
    with pytest.raises(AdkError) as bad_option:
        adk.workflows.start(wf, {}, max_steps=0)
    assert bad_option.value.reason == ("invalid_workflow_options", "max_steps")
    with pytest.raises(AdkError) as unknown_option:
        adk.workflows.start(wf, {}, retention_ms=5)
    assert unknown_option.value.reason[0] == "invalid_workflow_options"
    with pytest.raises(AdkError) as bad_state:
        adk.workflows.start(wf, {"pid": object()})
    assert bad_state.value.reason[0] == "invalid_initial_state"
    with pytest.raises(AdkError) as not_compiled:
        adk.workflows.start({"kind": "sequential"}, {})  # type: ignore[arg-type]
    assert not_compiled.value.reason == "invalid_compiled_workflow"
    with pytest.raises(AdkError) as timeout:
        blocked = threading.Event()
        slow = adk.compile_workflow(sequential([{"id": "s", "run": lambda s: blocked.wait(5)}]))
        ref = adk.workflows.start(slow, {})
        adk.workflows.wait(ref, timeout=0.01)
    assert timeout.value.reason == "timeout"
    blocked.set()


def test_cancelling_a_parent_cancels_its_nested_child() -> None:
    """Follows adk_workflow_graph_test: nested_workflow_pause_resumes_child_without_replay
    (the reference engine's nested guardian: a parent that stops cancels its child
    with ``parent_workflow_stopped``)."""
    workers: queue.Queue[sv.Pid] = queue.Queue()
    never = threading.Event()
    child = adk.compile_workflow(
        sequential([{"id": "block", "run": blocking_step(workers, never)}], id="child")
    )
    parent = adk.compile_workflow(sequential([{"id": "child", "run": child}], id="parent"))
    baseline = sv.DynamicSupervisor.count_children(adk.app.WORKFLOW_SUPERVISOR)["workers"]
    ref = adk.workflows.start(parent, {}, retention=0)
    worker = workers.get(timeout=5)
    assert (
        sv.DynamicSupervisor.count_children(adk.app.WORKFLOW_SUPERVISOR)["workers"] == baseline + 2
    )
    adk.workflows.cancel(ref, "stop_family")
    wait_until(lambda: not worker.is_alive())
    wait_until(
        lambda: (
            sv.DynamicSupervisor.count_children(adk.app.WORKFLOW_SUPERVISOR)["workers"] == baseline
        )
    )
    never.set()


def test_a_nested_child_runs_under_its_parent_deadline() -> None:
    """Follows adk_workflow_graph_test: nested_workflow_pause_resumes_child_without_replay
    (the child gets the parent's deadline; its timeout is the parent's failure)."""
    workers: queue.Queue[sv.Pid] = queue.Queue()
    never = threading.Event()
    child = adk.compile_workflow(
        sequential([{"id": "block", "run": blocking_step(workers, never)}], id="child")
    )
    parent = adk.compile_workflow(sequential([{"id": "child", "run": child}], id="parent"))
    outcome = adk.run_workflow(parent, {}, timeout=0.2)
    assert isinstance(outcome, Failed)
    assert outcome.reason in ("timed_out", ("step_failed", "child", "nested_workflow_timed_out"))
    worker = workers.get(timeout=5)
    wait_until(lambda: not worker.is_alive())
    never.set()


def test_a_timed_out_wait_withdraws_and_wait_async_gets_the_outcome() -> None:
    """Follows adk_workflow_test: supervisor_and_public_facade_case (the facade's wait:
    a timeout leaves the run going with no waiter behind; asyncio code awaits the
    same outcome without blocking its loop)."""
    release = threading.Event()
    wf = adk.compile_workflow(
        sequential([{"id": "s", "run": lambda s: {"released": release.wait(5)}}])
    )
    ref = adk.workflows.start(wf, {})
    with pytest.raises(AdkError) as timeout:
        adk.workflows.wait(ref, timeout=0.01)
    assert timeout.value.reason == "timeout"
    wait_until(lambda: adk.workflows.status(ref)["waiter_count"] == 0)
    assert adk.workflows.status(ref)["state"] == "running"

    async def main() -> object:
        waiting = asyncio.ensure_future(adk.workflows.wait_async(ref, timeout=5))
        await asyncio.sleep(0.05)  # the loop runs while the run is still going
        assert not waiting.done()
        release.set()
        return await waiting

    outcome = asyncio.run(main())
    assert isinstance(outcome, Completed)
    assert outcome.state == {"released": True}


def blocked_run(**options: object) -> tuple[str, threading.Event]:
    release = threading.Event()
    wf = adk.compile_workflow(
        sequential([{"id": "s", "run": lambda s: {"released": release.wait(10)}}])
    )
    return adk.workflows.start(wf, {}, timeout=None, **options), release


def test_an_abandoned_async_wait_withdraws_its_waiter() -> None:
    """``asyncio.wait_for`` and ``task.cancel()`` cancel a `wait_async`: each
    withdraws its waiter (none is left behind, whatever the number)."""
    ref, release = blocked_run()

    async def main() -> None:
        for _ in range(200):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(adk.workflows.wait_async(ref), 0.002)
        task = asyncio.ensure_future(adk.workflows.wait_async(ref))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    wait_until(lambda: adk.workflows.status(ref)["waiter_count"] == 0)
    release.set()
    assert isinstance(adk.workflows.wait(ref, timeout=5), Completed)


def test_an_interrupted_wait_withdraws_its_waiter(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync `wait` left by ``KeyboardInterrupt`` withdraws its waiter too."""
    ref, release = blocked_run()
    real_call = api.call

    def interrupted(server: sv.Pid, request: object, timeout: float | None) -> object:
        try:
            return real_call(server, request, 0.05)  # registered, then interrupted
        except sv.CallTimeout:
            raise KeyboardInterrupt from None

    with monkeypatch.context() as patched:
        patched.setattr(api, "call", interrupted)
        with pytest.raises(KeyboardInterrupt):
            adk.workflows.wait(ref)
    wait_until(lambda: adk.workflows.status(ref)["waiter_count"] == 0)
    release.set()


def test_waiters_are_capped_with_a_typed_refusal() -> None:
    """At most ``max_waiters`` calls wait at once (default 1024, at most 65 536): one
    more is refused ``too_many_waiters`` at once, and those waiting still get the
    outcome."""
    ref, release = blocked_run(max_waiters=2)
    outcomes: queue.Queue[object] = queue.Queue()
    waiters = [
        threading.Thread(target=lambda: outcomes.put(adk.workflows.wait(ref, timeout=10)))
        for _ in range(2)
    ]
    for thread in waiters:
        thread.start()
    wait_until(lambda: adk.workflows.status(ref)["waiter_count"] == 2)
    with pytest.raises(AdkError) as refused:
        adk.workflows.wait(ref, timeout=5)
    assert refused.value.reason == "too_many_waiters"

    async def refused_async() -> str:
        try:
            await adk.workflows.wait_async(ref, timeout=5)
        except AdkError as error:
            return str(error.reason)
        return "answered"

    assert asyncio.run(refused_async()) == "too_many_waiters"
    release.set()
    for thread in waiters:
        thread.join(5)
    assert [type(outcomes.get(timeout=1)) for _ in range(2)] == [Completed, Completed]
    wf = adk.compile_workflow(sequential([{"id": "s", "run": lambda s: {}}]))
    for bad in (0, 65_537, "2"):
        with pytest.raises(AdkError) as invalid:
            adk.workflows.start(wf, {}, max_waiters=bad)
        assert invalid.value.reason == ("invalid_workflow_options", "max_waiters")
