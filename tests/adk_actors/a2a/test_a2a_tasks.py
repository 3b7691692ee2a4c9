"""The A2A task store driven directly (no HTTP): lifecycle, principals, cancel, lists, bounds.

Each test starts a store for a scripted agent under the root tree and drives it from an
asyncio event loop, as the HTTP layer does.
"""

from __future__ import annotations

import pytest
from a2a.types import a2a_pb2 as pb

import adk_actors as adk
from adk_actors.a2a import errors, wire
from adk_actors.a2a.server_options import A2AServerOptions, server_options
from adk_actors.a2a.tasks import principal_scope
from adk_actors.tools.suspension import request_human_approval
from tests.adk_actors.a2a.store_helpers import (
    ALICE,
    BOB,
    echo,
    refusal,
    request,
    run,
    start_store,
    stopped_after,
    texts,
)
from tests.helpers import wait_until


@pytest.fixture
def stores():
    yield from stopped_after()


def test_options_have_the_spec_defaults_and_refuse_bad_values():
    options = server_options(None)
    assert options == A2AServerOptions()
    assert (options.task_timeout, options.max_active, options.max_subscriber_queue) == (
        60.0,
        100,
        8,
    )
    for bad in ({"max_active": True}, {"max_active": 0}, {"task_timeout": 1e9}, {"nope": 1}):
        with pytest.raises(adk.AdkError) as info:
            server_options(bad)
        assert info.value.reason[0] == "invalid_a2a_server_option"
    assert server_options(options) is not None


def test_principal_scope_is_a_hash():
    scope = principal_scope(ALICE)
    assert scope.startswith("p-") and len(scope) == 34 and ALICE not in scope
    assert scope == principal_scope(ALICE) != principal_scope(BOB)


def test_working_to_completed_with_history_and_artifact(stores):
    """Follows adk_a2a_v1_server_test: lifecycle_history_and_artifact_case."""
    store = start_store(stores, adk.ScriptedProvider(fn=echo))
    first = run(store.send(ALICE, request("write", immediately=True)))
    assert first.status.state in (pb.TASK_STATE_WORKING, pb.TASK_STATE_COMPLETED)
    assert first.id.startswith("task-") and first.context_id.startswith("ctx-")
    task = run(store.send(ALICE, request("write a poem")))
    assert task.status.state == pb.TASK_STATE_COMPLETED
    user, agent = task.history
    assert (user.role, agent.role) == (pb.ROLE_USER, pb.ROLE_AGENT)
    assert user.task_id == task.id and user.context_id == task.context_id
    assert texts(agent) == ["echo: write a poem"]
    (artifact,) = task.artifacts
    assert texts(artifact) == ["echo: write a poem"]
    got = run(store.get(ALICE, task.id, history_length=1))
    assert list(got.history) == [agent] and got.artifacts == task.artifacts
    assert run(store.get(ALICE, task.id, history_length=0)).history == []
    wait_until(lambda: store.stats()["runs"] == 0)
    assert store.stats()["active"] == 0


def test_a_context_id_is_kept_and_runs_share_its_session(stores):
    store = start_store(
        stores, adk.ScriptedProvider(fn=lambda history, tools: {"text": str(len(history))})
    )
    one = run(store.send(ALICE, request("one", context_id="ctx-shared")))
    two = run(store.send(ALICE, request("two", context_id="ctx-shared")))
    assert one.context_id == two.context_id == "ctx-shared" and one.id != two.id
    assert texts(two.artifacts[0]) != texts(one.artifacts[0])  # the second run saw more history


def test_unknown_and_foreign_tasks_are_the_same_not_found(stores):
    """Follows adk_a2a_v1_server_test: cross_principal_visibility_case."""
    store = start_store(stores, adk.ScriptedProvider(fn=echo))
    task = run(store.send(ALICE, request("private")))
    for task_id in (task.id, "task-unknown"):
        for call in (
            store.get(BOB, task_id),
            store.cancel(BOB, task_id),
            store.subscribe(BOB, task_id),
            store.send(BOB, request("more", task_id=task_id)),
        ):
            error = refusal(call)
            assert (error.code, error.message) == (errors.TASK_NOT_FOUND, "task not found")
    listed = run(store.list(BOB, pb.ListTasksRequest()))
    assert list(listed.tasks) == [] and listed.total_size == 0
    assert [t.id for t in run(store.list(ALICE, pb.ListTasksRequest())).tasks] == [task.id]


def test_cancel_then_not_cancelable(stores):
    """Follows adk_a2a_v1_server_test: cancellation_stops_execution_case."""
    store = start_store(stores, adk.ScriptedProvider([{"text": "late", "delay": 30}]))
    task = run(store.send(ALICE, request("block", immediately=True)))
    wait_until(lambda: store.stats()["runs"] == 1)
    canceled = run(store.cancel(ALICE, task.id))
    assert canceled.status.state == pb.TASK_STATE_CANCELED
    wait_until(lambda: store.stats()["runs"] == 0)  # the run was cancelled and ended
    error = refusal(store.cancel(ALICE, task.id))
    assert error.code == errors.TASK_NOT_CANCELABLE
    assert error.data == {"state": "TASK_STATE_CANCELED"}
    assert run(store.get(ALICE, task.id)).status.state == pb.TASK_STATE_CANCELED
    follow_up = refusal(store.send(ALICE, request("more", task_id=task.id)))
    assert follow_up.code == errors.UNSUPPORTED_OPERATION


def test_input_required_on_approval_then_resumed_by_a_follow_up(stores):
    script = [
        {
            "tool_calls": [
                {"name": "request_human_approval", "args": {"summary": "Delete old deploy"}}
            ]
        },
        {"text": "deleted"},
    ]
    store = start_store(stores, adk.ScriptedProvider(script), tools=[request_human_approval])
    paused = run(store.send(ALICE, request("Delete the obsolete deployment.")))
    assert paused.status.state == pb.TASK_STATE_INPUT_REQUIRED
    status = paused.status.message
    assert texts(status) == ["Delete old deploy"]
    (data,) = [p for p in status.parts if p.WhichOneof("content") == "data"]
    pause = wire.render(data)["data"]["pause"]
    assert pause["kind"] == "human_in_the_loop" and pause["tool"] == "request_human_approval"
    assert store.stats()["active"] == 0
    working = refusal(store.send(ALICE, request("x", task_id=paused.id, context_id="ctx-other")))
    assert working.code == errors.INVALID_PARAMS
    done = run(store.send(ALICE, request("yes, approved", task_id=paused.id)))
    assert done.id == paused.id and done.status.state == pb.TASK_STATE_COMPLETED
    assert texts(done.artifacts[0]) == ["deleted"]
    assert [m.role for m in done.history] == [pb.ROLE_USER, pb.ROLE_USER, pb.ROLE_AGENT]
    again = refusal(store.send(ALICE, request("again", task_id=paused.id)))
    assert again.code == errors.UNSUPPORTED_OPERATION


def test_a_follow_up_to_a_working_task_is_refused(stores):
    store = start_store(stores, adk.ScriptedProvider([{"text": "late", "delay": 30}]))
    task = run(store.send(ALICE, request("block", immediately=True)))
    error = refusal(store.send(ALICE, request("more", task_id=task.id)))
    assert error.code == errors.INVALID_PARAMS
    assert error.data == {"reason": "task is not awaiting input"}
    run(store.cancel(ALICE, task.id))


def test_task_timeout_fails_the_task_and_cancels_its_run(stores):
    store = start_store(
        stores, adk.ScriptedProvider([{"text": "late", "delay": 30}]), task_timeout=0.3
    )
    task = run(store.send(ALICE, request("slow")))
    assert task.status.state == pb.TASK_STATE_FAILED
    assert texts(task.status.message) == ["task_timeout"]
    wait_until(lambda: store.stats()["runs"] == 0)


def test_a_failing_agent_fails_the_task_with_its_reason_only(stores):
    store = start_store(stores, adk.ScriptedProvider([{"error": "model_exploded"}]))
    task = run(store.send(ALICE, request("boom")))
    assert task.status.state == pb.TASK_STATE_FAILED
    (text,) = texts(task.status.message)
    assert "Traceback" not in text and len(text) <= 200


def test_list_newest_first_with_paging(stores):
    """Follows adk_a2a_v1_server_test: list_tasks_cursor_case."""
    store = start_store(stores, adk.ScriptedProvider(fn=echo))
    ids = [run(store.send(ALICE, request(f"n{i}", context_id=f"ctx-{i % 2}"))).id for i in range(5)]
    first = run(store.list(ALICE, pb.ListTasksRequest(page_size=2)))
    assert [t.id for t in first.tasks] == ids[::-1][:2]
    assert first.total_size == 5 and first.page_size == 2 and first.next_page_token
    assert all(len(t.artifacts) == 0 for t in first.tasks)  # only with includeArtifacts
    seen = [t.id for t in first.tasks]
    token = first.next_page_token
    while token:
        page = run(store.list(ALICE, pb.ListTasksRequest(page_size=2, page_token=token)))
        seen += [t.id for t in page.tasks]
        token = page.next_page_token
    assert seen == ids[::-1]
    filtered = run(
        store.list(ALICE, pb.ListTasksRequest(context_id="ctx-0", include_artifacts=True))
    )
    assert [t.id for t in filtered.tasks] == [ids[4], ids[2], ids[0]]
    assert all(len(t.artifacts) == 1 for t in filtered.tasks)
    done = run(store.list(ALICE, pb.ListTasksRequest(status=pb.TASK_STATE_COMPLETED)))
    assert done.total_size == 5
    for bad in (pb.ListTasksRequest(page_token="forged"), pb.ListTasksRequest(page_size=101)):
        assert refusal(store.list(ALICE, bad)).code == errors.INVALID_PARAMS
    bobs = run(store.list(BOB, pb.ListTasksRequest(page_size=2, page_token=first.next_page_token)))
    assert list(bobs.tasks) == []


class Publish(adk.Tool):
    name = "publish"
    description = "Publish the release."
    parameters = {"type": "object", "properties": {}}
    require_confirmation = True

    def execute(self, args, ctx):
        return {"published": True}


def test_a_refused_answer_leaves_the_task_waiting_and_a_data_part_confirms(stores):
    """A tool confirmation needs ``{"confirmed": bool}`` (one data part); a text answer is
    refused by the run (-32602) and the task waits as before."""
    script = [{"tool_calls": [{"name": "publish", "args": {}}]}, {"text": "published"}]
    store = start_store(stores, adk.ScriptedProvider(script), tools=[Publish()], name="Releaser")
    paused = run(store.send(ALICE, request("Publish it.")))
    assert paused.status.state == pb.TASK_STATE_INPUT_REQUIRED
    error = refusal(store.send(ALICE, request("sure", task_id=paused.id)))
    assert error.code == errors.INVALID_PARAMS
    waiting = run(store.get(ALICE, paused.id))
    assert waiting.status.state == pb.TASK_STATE_INPUT_REQUIRED
    assert waiting.status.message == paused.status.message
    confirm = wire.user_message({"parts": [{"data": {"confirmed": True}}]}, task_id=paused.id)
    done = run(store.send(ALICE, pb.SendMessageRequest(message=confirm)))
    assert done.status.state == pb.TASK_STATE_COMPLETED
    assert texts(done.artifacts[0]) == ["published"]
