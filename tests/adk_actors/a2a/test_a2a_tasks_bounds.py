"""A2A task store bounds and supervision: active tasks, retention, payload bounds, a killed store."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb

import adk_actors as adk
import supervision as sv
from adk_actors.a2a import errors, wire
from adk_actors.a2a.server_options import server_options
from adk_actors.a2a.tasks import TaskStore, start_task_store, stop_task_store
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
def stores():
    yield from stopped_after()


def store_for(stores, provider: Any, tools=(), **options: Any) -> TaskStore:
    return start_store(stores, provider, tools, name="Bounded", **options)


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
    assert model.calls == 0  # no run was started


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


def test_list_and_parts_options_have_their_bounds():
    """Review F10 (``max_list_bytes``: 4 MiB, at most 64 MiB) and W7
    (``max_parts_per_message`` at most 64, what the wire accepts)."""
    assert server_options(None).max_list_bytes == 4 << 20
    assert server_options({"max_list_bytes": 64 << 20}).max_list_bytes == 64 << 20
    assert server_options({"max_parts_per_message": 64}).max_parts_per_message == wire.MAX_PARTS
    for bad in ({"max_list_bytes": (64 << 20) + 1}, {"max_parts_per_message": 65}):
        with pytest.raises(adk.AdkError) as info:
            server_options(bad)
        assert info.value.reason == ("invalid_a2a_server_option", next(iter(bad)))


def test_a_list_page_is_bounded_by_bytes(stores):
    """Review F10: a ListTasks page ends early, with a nextPageToken, before its tasks
    pass ``max_list_bytes``; a page always holds one task, however large."""
    store = store_for(stores, adk.ScriptedProvider(fn=echo), max_list_bytes=4096)
    ids = [run(store.send(ALICE, request(f"{i}" * 1500))).id for i in range(4)]
    ids.append(run(store.send(ALICE, request("L" * 6000))).id)  # alone past the budget
    pages, token = [], ""
    while True:
        page = run(store.list(ALICE, pb.ListTasksRequest(page_size=100, page_token=token)))
        pages.append([task.id for task in page.tasks])
        assert page.total_size == 5 and page.tasks
        if len(page.tasks) > 1:
            assert sum(wire.json_bytes(task) for task in page.tasks) <= 4096
        token = page.next_page_token
        if not token:
            break
    assert pages[0] == [ids[4]]  # the newest is larger than the budget: alone
    assert 3 <= len(pages) <= 5
    assert [task_id for page in pages for task_id in page] == ids[::-1]
    small = run(store.list(ALICE, pb.ListTasksRequest(page_size=100, history_length=0)))
    assert len(small.tasks) == 5 and not small.next_page_token  # without history all fit


def test_tracked_sizes_bound_the_rendered_task(stores):
    """Review F3: the store tracks a task's sizes as it changes (never re-rendering the
    whole task per event); the tracked total bounds the real rendering, so
    ``max_task_bytes`` holds."""
    script = [APPROVAL, APPROVAL, APPROVAL, {"text": "z" * 3000}]
    store = store_for(
        stores,
        adk.ScriptedProvider(script),
        tools=[request_human_approval],
        max_task_bytes=8192,
        max_history_bytes=6000,
    )
    task = run(store.send(ALICE, request("a" * 2500, context_id="c" * 128)))
    for text in ("b" * 2500, "c" * 2500, "d" * 2500):
        task = run(store.send(ALICE, request(text, task_id=task.id)))
        (entry,) = sv.get_state(store.name).tasks.values()
        assert entry.sizes.task_bytes() >= wire.json_bytes(entry.task)
        assert entry.sizes.history_total == sum(entry.sizes.history)
        assert len(entry.sizes.history) == len(entry.task.history)
    assert task.status.state == pb.TASK_STATE_COMPLETED
    assert wire.json_bytes(task) <= 8192
    assert sum(wire.json_bytes(message) for message in task.history) <= 6000
    assert task.history[-1].parts[0].text == "z" * 3000
