"""The official a2a-sdk client sending everything a 1.0 message can carry to our server:
file parts (``raw`` bytes and ``url`` references, with ``filename`` and ``mediaType``),
data parts, part / message / request ``metadata``, ``extensions`` (in the message and
the ``A2A-Extensions`` header), ``referenceTaskIds``, a request ``configuration``; and
every answer of ours, recorded on the wire, re-parsed strictly with the SDK's types
(`ParseDict(..., ignore_unknown_fields=False)`), so a stray or missing member fails.

Review W11 (the SDK-client tests sent only text and data, and parsed our answers
leniently), W5 (a non-http(s) ``url`` part from the SDK client was refused) and W2
(ListTasks' four REQUIRED members). Follows adk_a2a_v1_server_test:
lifecycle_history_and_artifact_case (the user's message kept in the history as sent).
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, NamedTuple, TypeVar

import httpx
import pytest
from a2a.client import ClientCallContext, ClientConfig, create_client
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf import json_format, struct_pb2, timestamp_pb2

import adk_actors as adk
from adk_actors.a2a.server import A2AServer, serve
from providers.content import FileDataPart, InlineDataPart, TextPart

T = TypeVar("T")
TOKEN = "sdk-parts-interop-token-0123456789abcdef"
EXTENSION = "https://example.com/a2a/ext/trace/v1"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"

ANSWER_TYPES: dict[str, type[Any]] = {
    "SendMessage": pb.SendMessageResponse,
    "GetTask": pb.Task,
    "CancelTask": pb.Task,
    "ListTasks": pb.ListTasksResponse,
}
"""The 1.0 type of each unary method's result (the streaming ones: StreamResponse)."""
LIST_REQUIRED = ("tasks", "nextPageToken", "pageSize", "totalSize")
"""ListTasksResponse's members the 1.0 proto marks REQUIRED."""


async def collect(events: AsyncIterator[T]) -> list[T]:
    return [event async for event in events]


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def seen_part(part: Any) -> str:
    """One part of the user's content as the served agent's model received it."""
    match part:
        case TextPart(text=text):
            return f"text {text}"
        case InlineDataPart(mime_type=mime_type, data=data):
            return f"inline {mime_type} {data}"
        case FileDataPart(file_uri=uri, mime_type=mime_type):
            return f"file {mime_type} {uri}"
    return f"other {type(part).__name__}"


def describe(history: Any, tools: Any) -> dict[str, Any]:
    """A scripted model answering with what it received, one line per part."""
    return {"text": "\n".join(seen_part(part) for part in history[-1].parts)}


class Exchange(NamedTuple):
    """One JSON-RPC call as it was on the wire."""

    request: dict[str, Any]
    extensions: str | None
    """The request's ``A2A-Extensions`` header."""
    content_type: str
    body: bytes


class Recording(httpx.AsyncBaseTransport):
    """A loopback transport that keeps every JSON-RPC exchange (`Exchange`)."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        body = await response.aread()
        await response.aclose()
        if request.method == "POST":
            self.exchanges.append(
                Exchange(
                    json.loads(request.content),
                    request.headers.get("a2a-extensions"),
                    response.headers.get("content-type", ""),
                    body,
                )
            )
        headers = [
            (name, value)
            for name, value in response.headers.multi_items()
            if name.lower() not in ("content-length", "transfer-encoding", "content-encoding")
        ]
        return httpx.Response(response.status_code, headers=headers, content=body)

    async def aclose(self) -> None:
        await self._inner.aclose()


def strict(cls: type[Any], value: Any) -> Any:
    """`value` parsed into the SDK type `cls`, refusing any member the type lacks."""
    return json_format.ParseDict(value, cls(), ignore_unknown_fields=False)


def sse_results(body: bytes) -> list[Any]:
    return [
        json.loads(line[len("data:") :])["result"]
        for line in body.decode().splitlines()
        if line.startswith("data:")
    ]


def check_strictly(exchanges: list[Exchange]) -> list[str]:
    """Every recorded answer re-parsed with the SDK's 1.0 types (each call declared
    `EXTENSION`); the methods seen."""
    methods = []
    for request, extensions, content_type, body in exchanges:
        method = request["method"]
        methods.append(method)
        assert extensions == EXTENSION, request
        if content_type.startswith("text/event-stream"):
            results = sse_results(body)
            assert results, method
            for result in results:
                strict(pb.StreamResponse, result)
            continue
        answer = json.loads(body)
        if "error" in answer:  # a JSON-RPC 2.0 error object, nothing more
            assert set(answer) == {"jsonrpc", "id", "error"}, answer
            assert set(answer["error"]) <= {"code", "message", "data"}, answer
            assert isinstance(answer["error"]["code"], int), answer
            assert isinstance(answer["error"]["message"], str), answer
            continue
        assert set(answer) == {"jsonrpc", "id", "result"}, answer
        strict(ANSWER_TYPES[method], answer["result"])
        if method == "ListTasks":
            assert all(member in answer["result"] for member in LIST_REQUIRED), answer
    return methods


def metadata(**values: Any) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(values)
    return struct


def rich_message(parts: list[pb.Part], *, references: list[str]) -> pb.Message:
    """A user message with every optional member a 1.0 message has."""
    return pb.Message(
        message_id=f"sdk-{uuid.uuid4().hex}",
        role=pb.ROLE_USER,
        parts=parts,
        metadata=metadata(trace="t-1", attempt=2),
        extensions=[EXTENSION],
        reference_task_ids=references,
    )


def rich_request(message: pb.Message) -> pb.SendMessageRequest:
    request = pb.SendMessageRequest(message=message, metadata=metadata(origin="sdk"))
    request.configuration.accepted_output_modes.extend(["text/plain", "application/json"])
    request.configuration.history_length = 10
    return request


class SdkCaller:
    """The SDK's client on a recording transport, bearer-authenticated, declaring
    `EXTENSION` in the ``A2A-Extensions`` header of every call."""

    def __init__(self, server: A2AServer) -> None:
        self.server = server
        self.transport = Recording()
        self.context = ClientCallContext(
            service_parameters=ServiceParametersFactory.create([with_a2a_extensions([EXTENSION])])
        )

    async def send(self, request: pb.SendMessageRequest, *, streaming: bool) -> list[Any]:
        async with self._http() as http:
            client = await create_client(
                self.server.url, ClientConfig(httpx_client=http, streaming=streaming)
            )
            return [e async for e in client.send_message(request, context=self.context)]

    async def call(self, method: str, request: Any) -> Any:
        async with self._http() as http:
            client = await create_client(self.server.url, ClientConfig(httpx_client=http))
            return await getattr(client, method)(request, context=self.context)

    async def subscribe(self, task_id: str) -> AsyncIterator[Any]:
        async with self._http() as http:
            client = await create_client(self.server.url, ClientConfig(httpx_client=http))
            request = pb.SubscribeToTaskRequest(id=task_id)
            async for event in client.subscribe(request, context=self.context):
                yield event

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=self.transport, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        )


@pytest.fixture
def describing() -> Iterator[A2AServer]:
    agent = adk.spawn_agent(
        "Describer", {"provider": adk.ScriptedProvider(fn=describe, inline=True)}
    )
    with serve(agent, auth_token=TOKEN) as server:
        yield server


def data_value(value: Any) -> struct_pb2.Value:
    return json_format.ParseDict(value, struct_pb2.Value())


PART_CASES = {
    "raw file": (
        [pb.Part(raw=PNG, media_type="image/png", filename="logo.png", metadata=metadata(n=1))],
        f"inline image/png {base64.b64encode(PNG).decode()}",
    ),
    "https url file": (
        [pb.Part(url="https://example.com/r.pdf", media_type="application/pdf", filename="r.pdf")],
        "file application/pdf https://example.com/r.pdf",
    ),
    "gs url file": (
        [pb.Part(url="gs://bucket/r.pdf", media_type="application/pdf", filename="r.pdf")],
        "text [file (r.pdf): gs://bucket/r.pdf]",
    ),
    "data": (
        [pb.Part(data=data_value({"b": [1, 2.5], "a": {"ok": True}}))],
        'text {"a":{"ok":true},"b":[1,2.5]}',
    ),
    "text with metadata": (
        [pb.Part(text="hello", media_type="text/plain", metadata=metadata(lang="en"))],
        "text hello",
    ),
}


@pytest.mark.parametrize("streaming", [False, True], ids=["SendMessage", "SendStreamingMessage"])
@pytest.mark.parametrize("case", list(PART_CASES))
def test_sdk_client_parts_reach_the_agent_and_answers_parse_strictly(
    describing: A2AServer, case: str, streaming: bool
) -> None:
    """Each kind of part the SDK client sends (with metadata, extensions, a reference to
    an earlier task and a configuration) completes; the agent receives it as the
    matching content part (a non-https url as a text mention); the task's history keeps
    the user's message as sent; every answer parses strictly."""
    caller = SdkCaller(describing)
    (earlier,) = run(
        caller.send(
            rich_request(rich_message([pb.Part(text="first")], references=[])), streaming=False
        )
    )
    parts, seen = PART_CASES[case]
    message = rich_message(parts, references=[earlier.task.id])
    events = run(caller.send(rich_request(message), streaming=streaming))
    task_id = events[0].task.id
    task: pb.Task = run(caller.call("get_task", pb.GetTaskRequest(id=task_id)))
    assert task.status.state == pb.TASK_STATE_COMPLETED, task.status
    assert [p.text for p in task.artifacts[0].parts] == [seen]
    user = task.history[0]
    assert user.role == pb.ROLE_USER and user.message_id == message.message_id
    assert list(user.parts) == list(message.parts)
    assert user.metadata == message.metadata
    assert list(user.extensions) == [EXTENSION]
    assert list(user.reference_task_ids) == [earlier.task.id]
    methods = check_strictly(caller.transport.exchanges)
    expected = "SendStreamingMessage" if streaming else "SendMessage"
    assert methods == ["SendMessage", expected, "GetTask"]
    sent = caller.transport.exchanges[1].request["params"]  # what the SDK put on the wire
    assert sent["message"]["parts"] == json_format.MessageToDict(message)["parts"]
    assert sent["message"]["extensions"] == [EXTENSION]
    assert sent["metadata"] == {"origin": "sdk"}
    assert sent["configuration"]["acceptedOutputModes"] == ["text/plain", "application/json"]


def test_sdk_client_task_queries_answer_strictly(describing: A2AServer) -> None:
    """GetTask with historyLength, ListTasks with every filter the SDK has (contextId,
    status, statusTimestampAfter, includeArtifacts, historyLength, pageSize), CancelTask
    of a settled task (-32002), SubscribeToTask of a settled one (-32004), an unknown
    task (-32001): each answer parses strictly (an error is a bare JSON-RPC error
    object), and ListTasks always carries its four REQUIRED members, an empty page
    included."""
    caller = SdkCaller(describing)
    (sent,) = run(
        caller.send(rich_request(rich_message([pb.Part(text="q")], references=[])), streaming=False)
    )
    task = sent.task
    short: pb.Task = run(caller.call("get_task", pb.GetTaskRequest(id=task.id, history_length=1)))
    assert len(short.history) == 1 and short.history[0].role == pb.ROLE_AGENT

    since = timestamp_pb2.Timestamp(seconds=1)
    listing = pb.ListTasksRequest(
        context_id=task.context_id,
        status=pb.TASK_STATE_COMPLETED,
        status_timestamp_after=since,
        include_artifacts=True,
        history_length=0,
        page_size=5,
    )
    listed: pb.ListTasksResponse = run(caller.call("list_tasks", listing))
    assert [t.id for t in listed.tasks] == [task.id]
    assert [p.text for p in listed.tasks[0].artifacts[0].parts] == ["text q"]
    assert list(listed.tasks[0].history) == []
    nothing = pb.ListTasksRequest(context_id="ctx-none", page_size=5)
    empty: pb.ListTasksResponse = run(caller.call("list_tasks", nothing))
    assert list(empty.tasks) == [] and empty.next_page_token == ""

    with pytest.raises(TaskNotCancelableError):
        run(caller.call("cancel_task", pb.CancelTaskRequest(id=task.id)))
    with pytest.raises(UnsupportedOperationError):
        run(collect(caller.subscribe(task.id)))
    with pytest.raises(TaskNotFoundError):
        run(caller.call("get_task", pb.GetTaskRequest(id="task-unknown")))

    methods = check_strictly(caller.transport.exchanges)
    assert methods == [
        "SendMessage",
        "GetTask",
        "ListTasks",
        "ListTasks",
        "CancelTask",
        "SubscribeToTask",
        "GetTask",
    ]
