"""Review F1 (and Review2 1, 7): a task waiting for input holds a paused run; the store releases it (drops
its continuation: nothing can resume it, its pause is no longer pending) when the task
is cancelled, expires, is evicted, or the store stops or is restarted."""

from __future__ import annotations

import pytest
from a2a.types import a2a_pb2 as pb

import adk_actors as adk
import supervision as sv
from adk_actors.a2a import errors
from adk_actors.a2a.tasks import TaskStore, principal_scope, stop_task_store
from adk_actors.a2a.tasks_protocol import StoreStopping
from adk_actors.outcomes import Completed
from adk_actors.runner import Runner
from adk_actors.sessions import InMemorySessionService
from adk_actors.tools.suspension import request_human_approval
from tests.adk_actors.a2a.store_helpers import (
    ALICE,
    APPROVAL,
    SLOW,
    echo,
    refusal,
    request,
    run,
    start_store,
    stopped_after,
)
from tests.helpers import wait_until


@pytest.fixture
def sessions():
    """The sessions of the store's runs, read after the store is gone (closed last)."""
    service = InMemorySessionService()
    yield service
    service.close()


@pytest.fixture
def stores(sessions):
    yield from stopped_after()


@pytest.fixture
def pending(sessions):
    """The pauses left in the sessions of the store's runs (`adk.runs.pending`)."""
    runner = Runner("Pauser", "a2a.a2a-test-Pauser", sessions)
    return lambda: [item["run_id"] for item in adk.runs.pending(runner, principal_scope(ALICE))]


def paused_store(stores, sessions, script=(APPROVAL, {"text": "done"}), **options) -> TaskStore:
    provider = adk.ScriptedProvider(list(script))
    tools = [request_human_approval]
    return start_store(stores, provider, tools, "Pauser", sessions, **options)


def paused_ids() -> set[str]:
    return {run["run_id"] for run in adk.runs.list(state="paused")["runs"]}


def pause_one(store: TaskStore) -> tuple[pb.Task, str]:
    """A new INPUT_REQUIRED task and the id of the paused run behind it."""
    before = paused_ids()
    task = run(store.send(ALICE, request("go")))
    assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED
    (run_id,) = paused_ids() - before
    return task, run_id


def released(run_id: str, store: TaskStore, pending) -> bool:
    """Whether the paused run is released: the store's ledger no longer holds it, its
    pause is gone from the sessions, and nothing can resume it."""
    wait_until(lambda: store.stats()["runs"] == 0)
    assert run_id not in pending()
    with pytest.raises(adk.AdkError) as refused:
        adk.runs.resume(run_id, {"answer": "yes"})
    return refused.value.reason != "already_resumed"


def test_cancel_of_an_input_required_task_cancels_its_paused_run(stores, sessions, pending):
    """Review F1: CancelTask on INPUT_REQUIRED leaves nothing resumable."""
    store = paused_store(stores, sessions)
    task, run_id = pause_one(store)
    assert store.stats()["runs"] == 1  # the paused run is in the ledger
    assert run(store.cancel(ALICE, task.id)).status.state == pb.TASK_STATE_CANCELED
    assert released(run_id, store, pending)


def test_an_evicted_input_required_task_releases_its_paused_run(stores, sessions, pending):
    """Review F1: eviction under ``max_tasks``."""
    store = paused_store(stores, sessions, [APPROVAL, APPROVAL], max_tasks=1)
    task, _ = pause_one(store)
    second, second_run = pause_one(store)  # evicts the first task
    assert refusal(store.get(ALICE, task.id)).code == errors.TASK_NOT_FOUND
    wait_until(lambda: store.stats()["runs"] == 1)  # the second task's run only
    assert pending() == [second_run]
    assert adk.runs.status(second_run)["state"] == "paused"
    assert run(store.get(ALICE, second.id)).status.state == pb.TASK_STATE_INPUT_REQUIRED


def test_an_expired_input_required_task_releases_its_paused_run(stores, sessions, pending):
    """Review F1: retention expiry."""
    store = paused_store(stores, sessions, retention=0.05)
    _, run_id = pause_one(store)
    wait_until(lambda: store.stats()["tasks"] == 0)  # every call prunes
    assert released(run_id, store, pending)


def test_stopping_the_store_cancels_its_paused_runs(stores, sessions, pending):
    """Review F1: stop (A2AServer.stop, adk.stop) releases paused runs too: the pause is
    no longer pending in the sessions (which outlive the store here, as the daemon's)."""
    store = paused_store(stores, sessions)
    _, run_id = pause_one(store)
    assert pending() == [run_id]
    stop_task_store(store)
    assert pending() == []
    with pytest.raises(adk.AdkError):
        adk.runs.resume(run_id, {"answer": "yes"})


def test_a_restarted_store_cancels_the_paused_runs_it_inherits(stores, sessions, pending):
    """Review F1 (and F5: the successor releases them in tasks, not in its init)."""
    store = paused_store(stores, sessions)
    _, run_id = pause_one(store)
    old = sv.whereis(store.name)
    sv.exit(old, "kill")
    wait_until(lambda: sv.whereis(store.name) not in (None, old))
    assert released(run_id, store, pending)


def test_a_resumed_task_leaves_no_run_in_the_ledger(stores, sessions):
    """The ledger keeps a paused run (Review F1) only while its task waits: once resumed
    and completed, nothing is left to release."""
    store = paused_store(stores, sessions)
    task, _ = pause_one(store)
    done = run(store.send(ALICE, request("yes", task_id=task.id)))
    assert done.status.state == pb.TASK_STATE_COMPLETED
    wait_until(lambda: store.stats()["runs"] == 0)


def test_a_completed_task_leaves_no_run_behind(stores):
    store = start_store(stores, adk.ScriptedProvider(fn=echo), name="Plain")
    assert run(store.send(ALICE, request())).status.state == pb.TASK_STATE_COMPLETED
    wait_until(lambda: store.stats()["runs"] == 0)


def test_a_task_canceled_while_it_resumes_leaves_no_run(stores, sessions):
    """Review F1: a cancel that lands while a follow-up resumes the paused run cancels
    the resumed run, and the paused one leaves the ledger."""
    store = paused_store(stores, sessions, [APPROVAL, SLOW])
    task, _ = pause_one(store)
    follow_up = request("yes", task_id=task.id, immediately=True)
    assert run(store.send(ALICE, follow_up)).status.state == pb.TASK_STATE_WORKING
    assert run(store.cancel(ALICE, task.id)).status.state == pb.TASK_STATE_CANCELED
    wait_until(lambda: store.stats()["runs"] == 0)
    wait_until(lambda: not adk.runs.list(state="running", agent="Pauser")["runs"])


def test_an_expired_input_required_task_is_released_without_another_request(
    stores, sessions, pending
):
    """Review2 7: expiry is a timer in the store, not the next request's prune: the
    paused run's pause leaves the sessions once the retention ends, with no call to
    the store in between."""
    store = paused_store(stores, sessions, retention=0.05)
    _, run_id = pause_one(store)
    wait_until(lambda: pending() == [])  # reads the sessions only, never the store
    with pytest.raises(adk.AdkError):
        adk.runs.resume(run_id, {"answer": "yes"})


def test_releasing_a_paused_run_leaves_a_resume_under_way_alone(stores, sessions, pending):
    """Review2 7: the store drops the paused continuation with its own token, so a
    resume that already claimed it (here one made outside the store) is not ended by
    the release: it completes and stores its answer."""
    store = paused_store(stores, sessions, [APPROVAL, {"text": "resumed", "delay": 0.5}])
    task, run_id = pause_one(store)
    resumed = adk.runs.resume(run_id, {"answer": "yes"})
    wait_until(lambda: adk.runs.status(resumed)["state"] == "running")
    assert run(store.cancel(ALICE, task.id)).status.state == pb.TASK_STATE_CANCELED
    wait_until(lambda: store.stats()["runs"] == 0)  # released: the claimed pause is let be
    outcome = adk.runs.wait(resumed, timeout=10)
    assert isinstance(outcome, Completed), outcome


def test_a_drained_store_refuses_new_work(stores):
    """Review2 1: after `drain` the store answers a new task and a follow-up with
    -32603 "server stopping" (`StoreStopping`), while its tasks stay readable."""
    store = start_store(stores, adk.ScriptedProvider(fn=echo), name="Drained")
    done = run(store.send(ALICE, request()))
    assert store.drain(5.0)
    for refused in (
        refusal(store.send(ALICE, request())),
        refusal(store.send(ALICE, request(task_id=done.id))),
    ):
        assert isinstance(refused, StoreStopping)
        assert (refused.code, refused.message) == (errors.INTERNAL_ERROR, "server stopping")
    assert run(store.get(ALICE, done.id)).status.state == pb.TASK_STATE_COMPLETED
    assert store.stats()["runs"] == 0
