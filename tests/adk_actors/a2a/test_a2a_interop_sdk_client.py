"""The official a2a-sdk client (`a2a.client.create_client`, not ours) against our server
(`adk.a2a.serve`), over HTTP on 127.0.0.1: discovery of our card, send, stream, get,
cancel, the input-required round trip, bearer auth and principal scoping.

Follows adk_a2a_v1_http_test: well_known_and_unary_client_case,
stream_client_closes_on_terminal_case, cross_principal_http_scope_case, and
adk_a2a_v1_server_test: lifecycle_history_and_artifact_case, cancellation_stops_execution_case.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.errors import A2AClientError
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from google.protobuf import json_format, struct_pb2

import adk_actors as adk
from adk_actors.a2a.server import A2AServer, serve

T = TypeVar("T")
TOKEN = "sdk-client-interop-token-0123456789abcdef"
ALICE, BOB = "alice-token-0123456789abcdef0123", "bob-token-0123456789abcdef012345"


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def echo(history: Any, tools: Any) -> dict[str, Any]:
    return {"text": "echo: " + history[-1].text_value()}


def user_message(
    text: str | None = None,
    *,
    data: dict[str, Any] | None = None,
    task_id: str = "",
    context_id: str = "",
) -> Message:
    part = (
        Part(text=text)
        if data is None
        else Part(data=json_format.ParseDict(data, struct_pb2.Value()))
    )
    return Message(
        message_id=f"sdk-{uuid.uuid4().hex}",
        role=Role.ROLE_USER,
        parts=[part],
        task_id=task_id,
        context_id=context_id,
    )


async def send(
    server: A2AServer,
    message: Message,
    *,
    streaming: bool = False,
    token: str | None = TOKEN,
    return_immediately: bool = False,
) -> list[StreamResponse]:
    """Everything the SDK client yields for one SendMessage (or SendStreamingMessage)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        client = await create_client(
            server.url, ClientConfig(httpx_client=http, streaming=streaming)
        )
        request = SendMessageRequest(message=message)
        request.configuration.return_immediately = return_immediately
        return [event async for event in client.send_message(request)]


async def call(server: A2AServer, method: str, request: Any, token: str = TOKEN) -> Any:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        client = await create_client(server.url, ClientConfig(httpx_client=http))
        return await getattr(client, method)(request)


async def subscribe(server: A2AServer, task_id: str) -> list[StreamResponse]:
    """Everything the SDK client yields for SubscribeToTask."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
        client = await create_client(server.url, ClientConfig(httpx_client=http))
        request = SubscribeToTaskRequest(id=task_id)
        return [event async for event in client.subscribe(request)]


def text_of(parts: Any) -> str:
    return "".join(part.text for part in parts if part.HasField("text"))


@pytest.fixture
def echo_server() -> Iterator[A2AServer]:
    agent = adk.spawn_agent("Echo", {"provider": adk.ScriptedProvider(fn=echo, inline=True)})
    with serve(agent, auth_token=TOKEN) as server:
        yield server


def test_sdk_client_sends_and_gets_a_completed_task(echo_server: A2AServer) -> None:
    """SendMessage answers the completed task with the user's message in its history and
    one text artifact; GetTask returns the same task."""
    (answer,) = run(send(echo_server, user_message("hello")))
    task = answer.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(task.artifacts[0].parts) == "echo: hello"
    assert task.history[0].role == Role.ROLE_USER and text_of(task.history[0].parts) == "hello"
    fetched: Task = run(call(echo_server, "get_task", GetTaskRequest(id=task.id)))
    assert fetched.id == task.id and fetched.context_id == task.context_id
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(fetched.artifacts[0].parts) == "echo: hello"


def test_sdk_client_streams_snapshot_first_then_terminal(echo_server: A2AServer) -> None:
    """SendStreamingMessage: the SDK's SSE reader takes our event ids; the task snapshot
    comes first, an artifact update carries the answer, the last event is COMPLETED."""
    events = run(send(echo_server, user_message("stream me"), streaming=True))
    assert events[0].HasField("task")
    task_id = events[0].task.id
    last = events[-1]
    assert last.HasField("status_update") and last.status_update.task_id == task_id
    assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    artifacts = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert [text_of(a.parts) for a in artifacts] == ["echo: stream me"]


def test_sdk_client_resubscribes_to_a_working_task_and_lists_it() -> None:
    """SubscribeToTask on a task still working: the snapshot first, then the events to
    COMPLETED; ListTasks by context finds it. Follows adk_a2a_v1_http_test:
    resubscribe_replays_then_closes_case."""
    agent = adk.spawn_agent(
        "Slowish", {"provider": "scripted", "script": [{"text": "done at last", "delay": 0.3}]}
    )
    with serve(agent, auth_token=TOKEN) as server:
        (answer,) = run(send(server, user_message("slow"), return_immediately=True))
        task = answer.task
        events = run(subscribe(server, task.id))
        assert events[0].HasField("task") and events[0].task.id == task.id
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        request = ListTasksRequest(context_id=task.context_id, include_artifacts=True)
        listed: ListTasksResponse = run(call(server, "list_tasks", request))
        assert [t.id for t in listed.tasks] == [task.id]
        assert text_of(listed.tasks[0].artifacts[0].parts) == "done at last"


def test_sdk_client_cancels_then_task_is_not_cancelable() -> None:
    """A working task cancels to CANCELED; a second cancel is -32002 (the SDK's
    TaskNotCancelableError); an unknown task is -32001 (TaskNotFoundError)."""
    slow = adk.spawn_agent(
        "Slow", {"provider": "scripted", "script": [{"text": "late", "delay": 30}]}
    )
    with serve(slow, auth_token=TOKEN) as server:
        (answer,) = run(send(server, user_message("take your time"), return_immediately=True))
        task_id = answer.task.id
        assert answer.task.status.state in (
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
        )
        cancelled: Task = run(call(server, "cancel_task", CancelTaskRequest(id=task_id)))
        assert cancelled.id == task_id
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError):
            run(call(server, "cancel_task", CancelTaskRequest(id=task_id)))
        with pytest.raises(TaskNotFoundError):
            run(call(server, "get_task", GetTaskRequest(id="task-unknown")))


def test_sdk_client_input_required_round_trip() -> None:
    """An agent asking for approval puts the task in INPUT_REQUIRED, its status message
    saying what needs approval; the follow-up message naming the task resumes it and the
    agent's model sees the human's answer."""
    model = adk.ScriptedProvider(
        [
            {
                "tool_calls": [
                    {"name": "request_human_approval", "args": {"summary": "Delete old deploy"}}
                ]
            },
            {"text": "deleted"},
        ],
        record_histories=10,
    )
    agent = adk.spawn_agent("Approver", {"provider": model}, tools=[adk.request_human_approval])
    with serve(agent, auth_token=TOKEN) as server:
        (paused,) = run(send(server, user_message("Delete the obsolete deployment.")))
        task = paused.task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "Delete old deploy" in text_of(task.status.message.parts)
        answer = {"approved": True, "approver": "operator"}
        follow_up = user_message(data=answer, task_id=task.id, context_id=task.context_id)
        events = run(send(server, follow_up, streaming=True))
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        done: Task = run(call(server, "get_task", GetTaskRequest(id=task.id)))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert text_of(done.artifacts[-1].parts) == "deleted"
    (seen,) = model.histories[1][-1].parts
    assert seen.response == answer


def test_sdk_client_without_token_is_refused(echo_server: A2AServer) -> None:
    """No bearer token: HTTP 401 (the SDK client raises its HTTP error); the card stays
    public, so discovery itself succeeds."""
    with pytest.raises(A2AClientError) as refused:
        run(send(echo_server, user_message("hello"), token=None))
    assert "401" in str(refused.value)


def test_sdk_clients_of_two_principals_see_only_their_tasks() -> None:
    """With a verifier, each token is a principal: bob cannot get or cancel alice's
    task (-32001, as for an unknown task)."""
    principals = {ALICE: "alice", BOB: "bob"}
    agent = adk.spawn_agent("Echo", {"provider": adk.ScriptedProvider(fn=echo, inline=True)})
    with serve(agent, verifier=principals.get) as server:
        (answer,) = run(send(server, user_message("private"), token=ALICE))
        task_id = answer.task.id
        mine: Task = run(call(server, "get_task", GetTaskRequest(id=task_id), token=ALICE))
        assert mine.status.state == TaskState.TASK_STATE_COMPLETED
        with pytest.raises(TaskNotFoundError):
            run(call(server, "get_task", GetTaskRequest(id=task_id), token=BOB))
        with pytest.raises(TaskNotFoundError):
            run(call(server, "cancel_task", CancelTaskRequest(id=task_id), token=BOB))
