"""A2A task store bounds and supervision: active tasks, retention, payload bounds, a killed store."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest
from a2a.types import a2a_pb2 as pb

import adk_actors as adk
import supervision as sv
from adk_actors.a2a import errors, wire
from adk_actors.a2a.server_options import server_options
from adk_actors.a2a.tasks import TaskStore, start_task_store, stop_task_store
from adk_actors.tools.suspension import request_human_approval
from tests.helpers import wait_until

T = TypeVar("T")
ALICE = "alice@example.com"
SLOW = {"text": "late", "delay": 30}


def run(awaitable: Awaitable[T]) -> T:
    async def main() -> T:
        return await awaitable

    return asyncio.run(main())


@pytest.fixture
def stores():
    started: list[TaskStore] = []
    yield started
    for store in started:
        stop_task_store(store)


def store_for(stores, provider: Any, tools=(), **options: Any) -> TaskStore:
    agent = adk.spawn_agent("Bounded", {"provider": provider}, tools=list(tools))
    store = start_task_store(agent, server_options(options), child_id="a2a-test-bounds")
    stores.append(store)
    return store


def request(text: str = "hello", *, immediately: bool = False, **ids: str) -> pb.SendMessageRequest:
    config = pb.SendMessageConfiguration(return_immediately=immediately)
    return pb.SendMessageRequest(message=wire.user_message(text, **ids), configuration=config)


def refusal(awaitable: Awaitable[Any]) -> errors.RpcError:
    with pytest.raises(errors.RpcError) as info:
        run(awaitable)
    return info.value


def echo(history, tools):
    return {"text": f"echo: {history[-1].text_value()}"}


def test_active_tasks_are_bounded(stores):
    """Follows adk_a2a_v1_server_test: active_admission_is_bounded_case."""
    store = store_for(stores, adk.ScriptedProvider([SLOW, {"text": "second"}]), max_active=1)
    first = run(store.send(ALICE, request("one", immediately=True)))
    error = refusal(store.send(ALICE, request("two")))
    assert (error.code, error.message) == (errors.UNSUPPORTED_OPERATION, "too many active tasks")
    assert run(store.list(ALICE, pb.ListTasksRequest())).total_size == 1
    run(store.cancel(ALICE, first.id))
    assert run(store.send(ALICE, request("two"))).status.state == pb.TASK_STATE_COMPLETED


def test_retained_tasks_are_bounded_oldest_settled_first(stores):
    store = store_for(stores, adk.ScriptedProvider(fn=echo), max_tasks=2)
    ids = [run(store.send(ALICE, request(f"n{i}"))).id for i in range(3)]
    assert refusal(store.get(ALICE, ids[0])).code == errors.TASK_NOT_FOUND  # evicted
    assert [t.id for t in run(store.list(ALICE, pb.ListTasksRequest())).tasks] == ids[:0:-1]
    assert store.stats()["tasks"] == 2


def test_with_every_retained_task_active_a_new_one_is_refused(stores):
    store = store_for(stores, adk.ScriptedProvider([SLOW]), max_tasks=1)
    first = run(store.send(ALICE, request(immediately=True)))
    error = refusal(store.send(ALICE, request("two")))
    assert (error.code, error.message) == (errors.UNSUPPORTED_OPERATION, "too many retained tasks")
    run(store.cancel(ALICE, first.id))


def test_retention_forgets_settled_tasks(stores):
    store = store_for(stores, adk.ScriptedProvider(fn=echo), retention=0.05)
    task = run(store.send(ALICE, request()))
    wait_until(lambda: _gone(store, task.id))
    assert store.stats()["tasks"] == 0


def _gone(store: TaskStore, task_id: str) -> bool:
    try:
        run(store.get(ALICE, task_id))
    except errors.RpcError as error:
        return error.code == errors.TASK_NOT_FOUND
    return False


def test_a_message_too_large_is_refused_before_a_task_exists(stores):
    """Follows adk_a2a_v1_server_test: direct_input_bytes_are_bounded_before_task_creation_case."""
    model = adk.ScriptedProvider(fn=echo)
    store = store_for(stores, model, max_message_bytes=512)
    error = refusal(store.send(ALICE, request("x" * 700)))
    assert error.code == errors.INVALID_PARAMS and error.data == {"reason": "message too large"}
    assert run(store.list(ALICE, pb.ListTasksRequest())).total_size == 0
    assert model.histories == []  # no run was started


def test_history_keeps_the_newest_messages(stores):
    """Follows adk_a2a_v1_server_test: retained_history_count_is_bounded_case (the oldest
    messages are dropped here instead of refusing the follow-up)."""
    script = [
        {"tool_calls": [{"name": "request_human_approval", "args": {"summary": "Go?"}}]},
        {"text": "done"},
    ]
    store = store_for(
        stores, adk.ScriptedProvider(script), tools=[request_human_approval], max_history_messages=2
    )
    paused = run(store.send(ALICE, request("first")))
    done = run(store.send(ALICE, request("second", task_id=paused.id)))
    assert done.status.state == pb.TASK_STATE_COMPLETED
    assert [(m.role, m.parts[0].text) for m in done.history] == [
        (pb.ROLE_USER, "second"),
        (pb.ROLE_AGENT, "done"),
    ]


def test_history_bytes_are_bounded(stores):
    store = store_for(stores, adk.ScriptedProvider(fn=echo), max_history_bytes=600)
    task = run(store.send(ALICE, request("y" * 400)))
    assert task.status.state == pb.TASK_STATE_COMPLETED
    assert sum(wire.json_bytes(m) for m in task.history) <= 600 or len(task.history) == 1
    assert task.history[-1].role == pb.ROLE_AGENT


def test_an_oversized_answer_fails_the_task_and_is_not_kept(stores):
    """Follows adk_a2a_v1_server_test: oversized_executor_output_is_not_retained_case."""
    large = "a" * 900
    store = store_for(stores, adk.ScriptedProvider([{"text": large}]), max_artifact_bytes=512)
    task = run(store.send(ALICE, request("bounded")))
    assert task.status.state == pb.TASK_STATE_FAILED and list(task.artifacts) == []
    assert large not in str(wire.render(task))
    assert [p.text for p in task.status.message.parts] == [
        "agent response exceeded configured limits"
    ]


def test_a_killed_store_is_restarted_empty_and_its_runs_are_cancelled(stores):
    """The root tree restarts a killed store; the successor cancels the runs its
    predecessor left (they are in the ledger its child spec keeps), so none is orphaned,
    and the old task ids are unknown."""
    store = store_for(stores, adk.ScriptedProvider([SLOW]))
    task = run(store.send(ALICE, request(immediately=True)))
    wait_until(lambda: store.stats()["runs"] == 1)
    (running,) = adk.runs.list(state="running")["runs"]
    old = sv.whereis(store.name)
    sv.exit(old, "kill")
    wait_until(lambda: sv.whereis(store.name) not in (None, old))
    wait_until(lambda: adk.runs.status(running["run_id"])["state"] == "cancelled")
    outcome = adk.runs.wait(running["run_id"], timeout=5)
    assert outcome == adk.Cancelled("a2a_task_store_restarted")
    assert refusal(store.get(ALICE, task.id)).code == errors.TASK_NOT_FOUND
    assert store.stats() == {"tasks": 0, "active": 0, "subscribers": 0, "runs": 0}
    assert run(store.send(ALICE, request(immediately=True))).status.state == pb.TASK_STATE_WORKING


def test_stopping_the_store_cancels_its_runs(stores):
    store = store_for(stores, adk.ScriptedProvider([SLOW]))
    run(store.send(ALICE, request(immediately=True)))
    wait_until(lambda: store.stats()["runs"] == 1)
    (running,) = adk.runs.list(state="running")["runs"]
    stop_task_store(store)
    assert adk.runs.wait(running["run_id"], timeout=5) == adk.Cancelled("a2a_task_store_stopped")
    assert sv.whereis(store.name) is None
    assert refusal(store.get(ALICE, "task-x")).code == errors.INTERNAL_ERROR
    stop_task_store(store)  # idempotent


def test_a_follow_up_at_max_tasks_never_evicts_its_own_task(stores):
    script = [
        {"tool_calls": [{"name": "request_human_approval", "args": {"summary": "Go?"}}]},
        {"text": "done"},
    ]
    store = store_for(
        stores, adk.ScriptedProvider(script), tools=[request_human_approval], max_tasks=1
    )
    paused = run(store.send(ALICE, request("first")))
    assert paused.status.state == pb.TASK_STATE_INPUT_REQUIRED
    done = run(store.send(ALICE, request("yes", task_id=paused.id)))
    assert done.id == paused.id and done.status.state == pb.TASK_STATE_COMPLETED


def test_a_live_subscription_ends_when_its_store_is_killed(stores):
    store = store_for(stores, adk.ScriptedProvider([SLOW]))

    async def main() -> list[Any]:
        subscription = await store.send_streaming(ALICE, request())
        old = sv.whereis(store.name)
        sv.exit(old, "kill")
        return [frame async for frame in subscription]

    frames = run(main())
    assert [event.WhichOneof("payload") for _, event in frames] == ["task"]
    wait_until(lambda: store.stats() == {"tasks": 0, "active": 0, "subscribers": 0, "runs": 0})


@pytest.fixture
def kernel_runtime():
    """The kernel's runtime (reactor, task supervisor) runs before the leak baseline: it
    starts on first use and stays, by design."""
    sv.reactor_loop()
    sv.default_task_supervisor()


def test_a_store_leaves_nothing_behind(kernel_runtime, leak_check):
    """Tasks, streams, leaving a stream early and a stop: afterwards no process, name,
    monitor, timer or link of the store, its bridges, its subscriptions or its runs is left."""
    agent = adk.spawn_agent("Leaky", {"provider": adk.ScriptedProvider(fn=echo)})
    store = start_task_store(agent, server_options({"retention": 0.0}), child_id="a2a-leaks")

    async def main() -> None:
        await store.send(ALICE, request("one"))
        [frame async for frame in await store.send_streaming(ALICE, request("two"))]
        left = await store.send_streaming(ALICE, request("three"))
        await left.aclose()

    run(main())
    stop_task_store(store)
    adk.stop_agent(agent)
