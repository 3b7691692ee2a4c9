"""A2A task streams from the store: snapshot first, increasing seq, Last-Event-ID, credit."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb

import adk_actors as adk
import supervision as sv
from adk_actors.a2a import errors, wire
from adk_actors.a2a import tasks_model as model
from adk_actors.a2a.server_options import server_options
from adk_actors.a2a.task_runs import RunLedger
from adk_actors.a2a.tasks import TaskStore, TaskSubscription
from adk_actors.a2a.tasks_protocol import Detached, Entry, State, TaskEvent
from adk_actors.a2a.tasks_server import TaskStoreServer
from adk_actors.tools.suspension import request_human_approval
from supervision import Inbox
from tests.adk_actors.a2a.store_helpers import (
    ALICE,
    APPROVAL,
    request,
    run,
    start_store,
    stopped_after,
)
from tests.helpers import wait_until


@pytest.fixture
def stores():
    yield from stopped_after()


def store_for(stores, script, tools=(), **options: Any) -> TaskStore:
    return start_store(stores, adk.ScriptedProvider(script), tools, name="Streamer", **options)


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


def test_a_reader_one_event_behind_still_gets_the_terminal_event(stores):
    """Review F6: at ``max_subscriber_queue=1`` the artifact and the terminal status are
    published back to back while the reader still writes the artifact; the terminal
    event reaches it anyway (it is never detached for it)."""
    store = store_for(stores, [{"text": "fast"}], max_subscriber_queue=1)

    async def main() -> tuple[TaskSubscription, list[Any]]:
        subscription = await store.send_streaming(ALICE, request())
        await asyncio.to_thread(wait_until, lambda: store.stats()["active"] == 0)
        return subscription, await drain(subscription)  # read only now: one behind

    subscription, frames = run(main())
    assert not subscription.detached
    assert kinds(frames) == ["task", "artifact_update", "TASK_STATE_COMPLETED"]
    assert_increasing(frames)
    assert store.stats()["subscribers"] == 0


def test_a_subscriber_at_its_ceiling_is_detached_by_an_event_that_is_not_final():
    """Follows adk_a2a_v1_server_test: slow_subscriber_mailbox_is_bounded_and_detached_case.
    A run publishes one event that is not final (its artifact), so the ceiling is driven
    on the store server's own state: a second unacknowledged event detaches the
    subscriber, which then resumes with Last-Event-ID."""
    server = TaskStoreServer()
    state = State(None, server_options({"max_subscriber_queue": 1}), RunLedger(), 1, b"key")
    entry = Entry(pb.Task(id="task-1", context_id="ctx-1"), "scope", 1)
    state.tasks["task-1"] = entry
    with Inbox(label="slow reader") as inbox:
        sub_id = server._add_subscriber(state, entry, inbox.pid, 1)
        event = model.status_event(entry.task)
        server._publish(state, entry, event)
        server._publish(state, entry, event)
        first, second = inbox.receive(timeout=1), inbox.receive(timeout=1)
    assert first == TaskEvent(sub_id, 1, event, False)
    assert second == Detached(sub_id)
    assert entry.subscribers == {} and state.watches == {}


def test_the_creation_snapshot_is_not_kept_in_the_replay_window(stores):
    """Review F7: the creation's snapshot (with the first message) goes to its creator
    only; the replay window holds the events after it, and a replay from the creation
    starts with the current snapshot."""
    store = store_for(stores, [{"text": "done"}])
    task = run(store.send(ALICE, request("x" * 2000)))
    frames = run(drain_after(store, task.id, 1))
    assert [seq for seq, _ in frames] == [1, 2, 3, 4]
    assert kinds(frames) == [
        "task",
        "TASK_STATE_WORKING",
        "artifact_update",
        "TASK_STATE_COMPLETED",
    ]
    server_state = sv.get_state(store.name)
    (entry,) = server_state.tasks.values()
    assert [event.WhichOneof("payload") for _, event in entry.events] == [
        "status_update",
        "artifact_update",
        "status_update",
    ]


async def drain_after(store: TaskStore, task_id: str, after: int) -> list[Any]:
    return await drain(await store.subscribe(ALICE, task_id, after=after))


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
