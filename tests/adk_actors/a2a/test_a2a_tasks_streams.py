"""A2A task streams from the store: snapshot first, increasing seq, Last-Event-ID, credit."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest
from a2a.types import a2a_pb2 as pb

import adk_actors as adk
from adk_actors.a2a import errors, wire
from adk_actors.a2a.server_options import server_options
from adk_actors.a2a.tasks import TaskStore, TaskSubscription, start_task_store, stop_task_store
from adk_actors.tools.suspension import request_human_approval
from tests.helpers import wait_until

T = TypeVar("T")
ALICE = "alice@example.com"
APPROVAL = {"tool_calls": [{"name": "request_human_approval", "args": {"summary": "Go?"}}]}


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


def store_for(stores, script, tools=(), **options: Any) -> TaskStore:
    agent = adk.spawn_agent(
        "Streamer", {"provider": adk.ScriptedProvider(script)}, tools=list(tools)
    )
    store = start_task_store(agent, server_options(options), child_id="a2a-test-streams")
    stores.append(store)
    return store


def request(text: str = "hello", **ids: str) -> pb.SendMessageRequest:
    return pb.SendMessageRequest(message=wire.user_message(text, **ids))


def kinds(frames: list[tuple[int, pb.StreamResponse]]) -> list[str]:
    out = []
    for _, event in frames:
        kind = event.WhichOneof("payload")
        if kind == "status_update":
            kind = wire.state_name(event.status_update.status.state)
        out.append(kind)
    return out


async def drain(subscription: TaskSubscription) -> list[tuple[int, pb.StreamResponse]]:
    return [frame async for frame in subscription]


def assert_increasing(frames: list[tuple[int, Any]]) -> None:
    seqs = [seq for seq, _ in frames]
    assert seqs == sorted(set(seqs)), seqs


def test_send_streaming_starts_with_a_snapshot_and_ends_at_completion(stores):
    """Follows adk_a2a_v1_server_test: replay_is_ordered_and_bounded_case (order)."""
    store = store_for(stores, [{"text": "streamed", "delay": 0.1}])

    async def main() -> list[tuple[int, pb.StreamResponse]]:
        return await drain(await store.send_streaming(ALICE, request()))

    frames = run(main())
    assert kinds(frames) == ["task", "artifact_update", "TASK_STATE_COMPLETED"]
    assert_increasing(frames)
    snapshot = frames[0][1].task
    assert snapshot.status.state == pb.TASK_STATE_WORKING and frames[0][0] == 2
    assert [p.text for p in frames[1][1].artifact_update.artifact.parts] == ["streamed"]
    assert store.stats()["subscribers"] == 0


def test_subscribe_replays_inside_the_window_and_refuses_a_terminal_task_otherwise(stores):
    store = store_for(stores, [{"text": "done"}])
    task = run(store.send(ALICE, request()))
    error_fresh = None
    try:
        run(store.subscribe(ALICE, task.id))
    except errors.RpcError as error:
        error_fresh = error
    assert error_fresh is not None and error_fresh.code == errors.UNSUPPORTED_OPERATION

    async def resume(after: int) -> list[tuple[int, pb.StreamResponse]]:
        return await drain(await store.subscribe(ALICE, task.id, after=after))

    frames = run(resume(1))
    assert [seq for seq, _ in frames] == [1, 2, 3, 4]
    assert kinds(frames) == [
        "task",
        "TASK_STATE_WORKING",
        "artifact_update",
        "TASK_STATE_COMPLETED",
    ]
    assert frames[0][1].task.status.state == pb.TASK_STATE_COMPLETED
    assert kinds(run(resume(3))) == ["task", "TASK_STATE_COMPLETED"]
    with pytest.raises(errors.RpcError) as ahead:
        run(resume(99))
    assert ahead.value.code == errors.INVALID_PARAMS


def test_last_event_id_in_the_window_and_an_expired_cursor(stores):
    """Follows adk_a2a_v1_server_test: replay_is_ordered_and_bounded_case (window)."""
    script = [APPROVAL, {"text": "approved", "delay": 0.4}]
    store = store_for(stores, script, tools=[request_human_approval], max_events=2)
    paused = run(store.send(ALICE, request("go")))
    assert paused.status.state == pb.TASK_STATE_INPUT_REQUIRED  # events 1..3

    async def main() -> tuple[list[Any], list[Any]]:
        follow_up = pb.SendMessageRequest(
            message=wire.user_message("yes", task_id=paused.id),
            configuration=pb.SendMessageConfiguration(return_immediately=True),
        )
        await store.send(ALICE, follow_up)  # event 4: WORKING; the window is [3, 4]
        inside = await store.subscribe(ALICE, paused.id, after=3)
        expired = await store.subscribe(ALICE, paused.id, after=1)
        return await drain(inside), await drain(expired)

    inside, expired = run(main())
    assert [seq for seq, _ in inside] == [3, 4, 5, 6]
    assert kinds(inside) == [
        "task",
        "TASK_STATE_WORKING",
        "artifact_update",
        "TASK_STATE_COMPLETED",
    ]
    assert [seq for seq, _ in expired] == [4, 5, 6]  # the snapshot at the current seq, then live
    assert kinds(expired) == ["task", "artifact_update", "TASK_STATE_COMPLETED"]


def test_an_input_required_event_ends_the_stream(stores):
    store = store_for(stores, [APPROVAL, {"text": "ok"}], tools=[request_human_approval])

    async def main() -> list[tuple[int, pb.StreamResponse]]:
        return await drain(await store.send_streaming(ALICE, request("go")))

    frames = run(main())
    assert kinds(frames) == ["task", "TASK_STATE_INPUT_REQUIRED"]
    message = frames[-1][1].status_update.status.message
    assert [p.text for p in message.parts if p.text] == ["Go?"]


def test_a_slow_subscriber_is_detached_while_the_run_completes(stores):
    """Follows adk_a2a_v1_server_test: slow_subscriber_mailbox_is_bounded_and_detached_case."""
    store = store_for(stores, [{"text": "fast"}], max_subscriber_queue=1)

    async def main() -> tuple[TaskSubscription, list[Any], list[Any]]:
        subscription = await store.send_streaming(ALICE, request())
        await asyncio.to_thread(wait_until, lambda: store.stats()["active"] == 0)
        frames = await drain(subscription)  # read only now: it fell behind meanwhile
        last = frames[-1][0]
        resumed = await drain(await store.subscribe(ALICE, subscription.task_id, after=last))
        return subscription, frames, resumed

    subscription, frames, resumed = run(main())
    assert subscription.detached
    assert kinds(frames) == ["task", "artifact_update"]  # one queued event, then cut
    assert kinds(resumed) == ["task", "TASK_STATE_COMPLETED"]  # reconnected with Last-Event-ID
    assert resumed[0][0] == frames[-1][0] and resumed[1][0] > frames[-1][0]
    assert store.stats()["subscribers"] == 0


def test_leaving_early_detaches_and_the_task_goes_on(stores):
    store = store_for(stores, [{"text": "later", "delay": 0.3}])

    async def main() -> str:
        subscription = await store.send_streaming(ALICE, request())
        async for _seq, event in subscription:
            assert event.WhichOneof("payload") == "task"
            break
        await subscription.aclose()
        return subscription.task_id

    task_id = run(main())
    wait_until(lambda: store.stats()["subscribers"] == 0)
    wait_until(lambda: run(store.get(ALICE, task_id)).status.state == pb.TASK_STATE_COMPLETED)


def test_subscribers_per_task_are_bounded(stores):
    store = store_for(stores, [{"text": "later", "delay": 5}], max_subscribers_per_task=1)

    async def main() -> errors.RpcError:
        first = await store.send_streaming(ALICE, request())
        try:
            await store.subscribe(ALICE, first.task_id)
        except errors.RpcError as error:
            await store.cancel(ALICE, first.task_id)
            frames = await drain(first)
            assert kinds(frames)[-1] == "TASK_STATE_CANCELED"
            return error
        raise AssertionError("a second subscriber was admitted")

    error = run(main())
    assert error.code == errors.UNSUPPORTED_OPERATION
