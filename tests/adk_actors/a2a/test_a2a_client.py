"""The A2A client (`adk_actors.a2a.client`) against real loopback servers: a small
starlette fixture peer whose answers each test scripts (card, JSON-RPC results and
errors, SSE streams), and `adk.a2a.serve` end to end.

`FixturePeer` is shared with test_a2a_client_security.py and test_a2a_remote_agent.py.
Follows erlang_adk test/protocols/a2a/v1/adk_a2a_v1_client_fixture_handler.erl (the
fixture's endpoints: card, rpc, slow, redirect).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import adk_actors as adk
from adk_actors.a2a.card import build_card, card_json
from adk_actors.a2a.client import A2AClient, aconnect, connect
from adk_actors.a2a.client_sse import SseDecoder
from adk_actors.a2a.server import serve
from providers.errors import AdkError

CARD_PATH = "/.well-known/agent-card.json"
Answer = Callable[[dict[str, Any]], Response]


def task_json(
    task_id: str = "task-1", state: str = "TASK_STATE_COMPLETED", text: str = "done"
) -> dict[str, Any]:
    return {
        "id": task_id,
        "contextId": "ctx-1",
        "status": {"state": state},
        "artifacts": [{"artifactId": "a-1", "parts": [{"text": text}]}],
    }


def rpc_result(request: dict[str, Any], result: Any) -> JSONResponse:
    return JSONResponse({"jsonrpc": "2.0", "id": request["id"], "result": result})


def rpc_failure(request: dict[str, Any], code: int, message: str) -> JSONResponse:
    return JSONResponse(
        {"jsonrpc": "2.0", "id": request["id"], "error": {"code": code, "message": message}}
    )


def sse(
    request: dict[str, Any], results: list[Any], ids: list[Any] | None = None, *, eol: str = "\n"
) -> Response:
    """An SSE answer: one event per result (with the ids given, else 1, 2, ...)."""
    chunks = [": a comment" + eol + eol]
    for index, result in enumerate(results):
        event_id = (ids or list(range(1, len(results) + 1)))[index]
        data = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result})
        head = "" if event_id is None else f"id: {event_id}{eol}"
        chunks.append(f"{head}event: message{eol}data: {data}{eol}{eol}")
    return Response("".join(chunks), media_type="text/event-stream")


def default_answer(request: dict[str, Any]) -> Response:
    """Valid results for every method (a completed task)."""
    method = request["method"]
    if method == "SendMessage":
        return rpc_result(request, {"task": task_json()})
    if method == "ListTasks":
        return rpc_result(
            request, {"tasks": [task_json()], "nextPageToken": "", "pageSize": 50, "totalSize": 1}
        )
    if method in ("SendStreamingMessage", "SubscribeToTask"):
        working = task_json(state="TASK_STATE_WORKING")
        final = {
            "statusUpdate": {
                "taskId": "task-1",
                "contextId": "ctx-1",
                "status": {"state": "TASK_STATE_COMPLETED"},
            }
        }
        return sse(request, [{"task": working}, final])
    return rpc_result(request, task_json())


class FixturePeer:
    """A scripted A2A peer on 127.0.0.1 (uvicorn on a thread): the card at the
    well-known path, JSON-RPC at /a2a/v1 (answered by `answer`), a redirect, a slow
    body and an oversized body; every request is recorded."""

    def __init__(
        self,
        card: Callable[[str], dict[str, Any]] | None = None,
        *,
        tls: tuple[str, str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        """`tls`: (certfile, keyfile) to serve https; `host`: the name the URLs use."""
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.base = f"{'https' if tls else 'http'}://{host}:{self.port}"
        self.rpc_url = self.base + "/a2a/v1"
        self.card = (card or plain_card)(self.rpc_url)
        self.answer: Answer = default_answer
        self.card_delay = 0.0
        self.rpc_delay = 0.0
        self.card_status = 200
        self.card_type = "application/json"
        self.requests: list[dict[str, Any]] = []
        app = Starlette(
            routes=[
                Route(CARD_PATH, self._card, methods=["GET"]),
                Route("/a2a/v1", self._rpc, methods=["POST"]),
                Route("/a2a/v1/redirect", self._redirect, methods=["POST"]),
                Route("/a2a/v1/slow", self._slow, methods=["POST"]),
                Route("/a2a/v1/big", self._big, methods=["POST"]),
                Route("/a2a/v1/locked", self._locked, methods=["POST"]),
            ]
        )
        files = {"ssl_certfile": tls[0], "ssl_keyfile": tls[1]} if tls else {}
        config = uvicorn.Config(
            app, log_level="error", lifespan="off", timeout_graceful_shutdown=0.2, **files
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )
        self.thread.start()
        for _ in range(500):
            if self.server.started:
                break
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()

    def _record(self, endpoint: str, request: Request, body: Any = None) -> None:
        headers = request.headers
        self.requests.append(
            {
                "endpoint": endpoint,
                "authorization": headers.get("authorization"),
                "api_key": headers.get("x-api-key"),
                "extensions": headers.get("a2a-extensions"),
                "version": headers.get("a2a-version"),
                "last_event_id": headers.get("last-event-id"),
                "accept": headers.get("accept"),
                "accept_encoding": headers.get("accept-encoding"),
                "host": headers.get("host"),
                "body": body,
            }
        )

    def seen(self, endpoint: str) -> list[dict[str, Any]]:
        return [request for request in self.requests if request["endpoint"] == endpoint]

    async def _card(self, request: Request) -> Response:
        self._record("card", request)
        await asyncio.sleep(self.card_delay)
        return Response(
            json.dumps(self.card), status_code=self.card_status, media_type=self.card_type
        )

    async def _rpc(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self._record("rpc", request, body)
        await asyncio.sleep(self.rpc_delay)
        return self.answer(body)

    async def _redirect(self, request: Request) -> Response:
        self._record("redirect", request)
        return Response(status_code=302, headers={"location": self.rpc_url})

    async def _slow(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self._record("slow", request, body)
        encoded = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": task_json()}).encode()
        third = len(encoded) // 3

        async def chunks() -> Any:
            for start in (0, third, 2 * third):
                yield encoded[start : start + third if start < 2 * third else None]
                await asyncio.sleep(0.3)

        return StreamingResponse(chunks(), media_type="application/json")

    async def _big(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self._record("big", request, body)
        return rpc_result(body, task_json(text="x" * 200_000))

    async def _locked(self, request: Request) -> Response:
        self._record("locked", request)
        return JSONResponse(
            {"error": "unauthorized"},
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )


def plain_card(rpc_url: str, **overrides: Any) -> dict[str, Any]:
    return card_json(
        build_card(
            **{"name": "Peer", "description": "A scripted peer.", "url": rpc_url, **overrides}
        )
    )


@pytest.fixture
def peer() -> Iterator[FixturePeer]:
    made = FixturePeer()
    yield made
    made.stop()


@pytest.fixture
def make_peer() -> Iterator[Callable[..., FixturePeer]]:
    made: list[FixturePeer] = []

    def start(card: Callable[[str], dict[str, Any]] | None = None, **options: Any) -> FixturePeer:
        made.append(FixturePeer(card, **options))
        return made[-1]

    yield start
    for each in made:
        each.stop()


def reason(fn: Callable[[], Any]) -> Any:
    """The `AdkError` reason `fn()` raises (it must raise one)."""
    with pytest.raises(AdkError) as info:
        fn()
    return info.value.reason


def local(peer: FixturePeer, **options: Any) -> A2AClient:
    return connect(peer.base, **{"allow_http_loopback": True, "request_timeout": 5.0, **options})


# -- discovery ----------------------------------------------------------------------------


def test_connect_discovers_the_card_under_a_base_url_or_at_its_url(peer: FixturePeer) -> None:
    """A base URL gets the well-known card path; a card URL is used as given."""
    remote = local(peer)
    assert remote.card["name"] == "Peer"
    assert remote.rpc_url == peer.rpc_url
    again = connect(peer.base + CARD_PATH, allow_http_loopback=True)
    assert again.card == remote.card
    assert [request["accept"] for request in peer.seen("card")] == ["application/json"] * 2


def test_a_card_that_is_not_json_or_not_a_card_is_refused(peer: FixturePeer) -> None:
    peer.card_type = "text/html"
    assert reason(lambda: local(peer)) == ("a2a_invalid_agent_card", "content_type")
    peer.card_type = "application/json"
    peer.card = {"name": "Peer", "kind": "agent"}  # a pre-1.0 member
    assert reason(lambda: local(peer)) == ("a2a_invalid_agent_card", "invalid_shape")
    peer.card = plain_card(peer.rpc_url)
    peer.card_status = 404
    assert reason(lambda: local(peer)) == ("a2a_http_error", 404)


# -- unary calls --------------------------------------------------------------------------


def test_send_posts_json_rpc_with_the_version_header_and_returns_the_parsed_task(
    peer: FixturePeer,
) -> None:
    remote = local(peer)
    answer = remote.send("hello", context_id="ctx-1", return_immediately=True)
    assert answer == {"task": task_json()}
    [request] = peer.seen("rpc")
    assert request["version"] == "1.0"
    body = request["body"]
    assert body["jsonrpc"] == "2.0" and body["method"] == "SendMessage"
    assert isinstance(body["id"], int)
    message = body["params"]["message"]
    assert message["role"] == "ROLE_USER" and message["contextId"] == "ctx-1"
    assert message["parts"] == [{"text": "hello", "mediaType": "text/plain"}]
    assert message["messageId"]
    assert body["params"]["configuration"] == {"returnImmediately": True}


def test_get_list_and_cancel_send_their_params(peer: FixturePeer) -> None:
    remote = local(peer)
    assert remote.get_task("task-1", history_length=2)["id"] == "task-1"
    listed = remote.list_tasks(context_id="ctx-1", page_size=10, page_token="next")
    assert listed["tasks"][0]["id"] == "task-1" and listed["totalSize"] == 1
    assert remote.cancel("task-1")["status"]["state"] == "TASK_STATE_COMPLETED"
    params = [
        (request["body"]["method"], request["body"]["params"]) for request in peer.seen("rpc")
    ]
    assert params == [
        ("GetTask", {"id": "task-1", "historyLength": 2}),
        ("ListTasks", {"contextId": "ctx-1", "pageSize": 10, "pageToken": "next"}),
        ("CancelTask", {"id": "task-1"}),
    ]


def test_results_are_strictly_parsed(peer: FixturePeer) -> None:
    """Unknown (pre-1.0) members, a wrong id, a missing result or a non-JSON answer are
    refused, not passed on."""
    remote = local(peer)
    peer.answer = lambda request: rpc_result(request, {**task_json(), "kind": "task"})
    assert reason(lambda: remote.get_task("task-1")) == ("a2a_invalid_response", "invalid_shape")
    peer.answer = lambda request: JSONResponse(
        {"jsonrpc": "2.0", "id": request["id"] + 1, "result": task_json()}
    )
    assert reason(lambda: remote.get_task("task-1")) == ("a2a_invalid_response", "id")
    peer.answer = lambda request: JSONResponse({"jsonrpc": "2.0", "id": request["id"]})
    assert reason(lambda: remote.get_task("task-1")) == ("a2a_invalid_response", "envelope")
    peer.answer = lambda request: Response("{not json", media_type="application/json")
    assert reason(lambda: remote.get_task("task-1")) == ("a2a_invalid_response", "json")
    peer.answer = lambda request: Response("hi", media_type="text/plain")
    assert reason(lambda: remote.get_task("task-1")) == ("a2a_invalid_response", "content_type")


def test_a_json_rpc_error_is_typed_by_its_code(peer: FixturePeer) -> None:
    remote = local(peer)
    peer.answer = lambda request: rpc_failure(request, -32001, "task not found")
    with pytest.raises(AdkError) as info:
        remote.get_task("task-9")
    assert info.value.reason == ("a2a_rpc_error", -32001)
    assert "task not found" in str(info.value)
    peer.answer = lambda request: JSONResponse(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}},
        status_code=400,
    )
    assert reason(lambda: remote.get_task("task-1")) == ("a2a_rpc_error", -32700)
    peer.answer = lambda request: Response("busy", status_code=503)
    assert reason(lambda: remote.get_task("task-1")) == ("a2a_http_error", 503)


def test_bad_call_arguments_and_options_are_refused_before_sending(peer: FixturePeer) -> None:
    remote = local(peer)
    assert reason(lambda: remote.get_task("a\nb")) == ("invalid_a2a_request", "task_id")
    assert reason(lambda: remote.get_task("")) == ("invalid_a2a_request", "task_id")
    assert reason(lambda: remote.cancel("t" * 4097)) == ("invalid_a2a_request", "task_id")
    assert reason(lambda: remote.get_task("task-1", timeout=0)) == (
        "invalid_a2a_request",
        "timeout",
    )
    assert reason(lambda: remote.list_tasks(page_size=0)) == ("invalid_a2a_request", "page_size")
    assert reason(lambda: remote.send({"parts": [], "kind": "message"}))[0] == "invalid_a2a_message"
    assert peer.seen("rpc") == []
    assert reason(lambda: local(peer, max_stream_events=0)) == (
        "invalid_a2a_client_option",
        "max_stream_events",
    )
    assert reason(lambda: local(peer, colour="red"))[0] == "invalid_a2a_client_option"  # type: ignore[call-arg]
    assert (
        reason(lambda: local(peer, headers={"Authorization": "x"}))
        == "static_headers_not_supported"
    )  # type: ignore[call-arg]
    assert reason(lambda: connect(peer.base, allow_http_loopback=True, auth="token")) == (  # type: ignore[arg-type]
        "invalid_a2a_client_option",
        "auth",
    )


def test_a_closed_client_refuses_calls(peer: FixturePeer) -> None:
    with local(peer) as remote:
        remote.get_task("task-1")
    assert reason(lambda: remote.get_task("task-1")) == "a2a_client_closed"


def test_a_sync_call_inside_a_running_event_loop_is_refused_naming_its_async_twin(
    peer: FixturePeer,
) -> None:
    """Review client 3: a sync call made where an event loop runs would freeze that loop
    for the whole call (a peer it serves could never answer), so it is refused with the
    async twin to await; the twins work there."""

    async def main() -> tuple[Any, Any, dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
        refused_connect = reason(lambda: local(peer))
        remote = await aconnect(peer.base, allow_http_loopback=True, request_timeout=5.0)
        refused_send = reason(lambda: remote.send("hi"))
        sent = await remote.asend("hi")
        listed = await remote.alist_tasks()
        events = await remote.astream("hi")
        await remote.aclose()
        return refused_connect, refused_send, sent, listed, events

    refused_connect, refused_send, sent, listed, events = asyncio.run(main())
    assert refused_connect == ("a2a_sync_call_in_event_loop", "aconnect")
    assert refused_send == ("a2a_sync_call_in_event_loop", "asend")
    assert sent["task"]["id"] == "task-1" and listed["tasks"] and len(events) == 2
    assert len(peer.seen("card")) == 1 and len(peer.seen("rpc")) == 3  # refusals sent nothing
    assert A2AClient.send.__name__ == "send" and "SendMessage" in (A2AClient.send.__doc__ or "")


def test_a_sync_call_from_a_thread_without_a_loop_runs_on_its_own_loop(peer: FixturePeer) -> None:
    """Review client 3: the sync API from a plain thread (no loop running there) works,
    each call on its own loop, its deadline starting when it is made (no shared pool)."""
    remote = local(peer)
    answers: list[str] = []

    def worker() -> None:
        answers.append(remote.get_task("task-1", timeout=5.0)["id"])

    threads = [threading.Thread(target=worker) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert answers == ["task-1"] * 12


# -- streams ------------------------------------------------------------------------------


def test_stream_returns_the_events_with_their_sequence_ids(peer: FixturePeer) -> None:
    """Follows adk_a2a_v1_http_test: stream_client_closes_on_terminal_case."""
    remote = local(peer)
    events = remote.stream("hello")
    assert [event["seq"] for event in events] == [1, 2]
    assert events[0]["event"]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert events[1]["event"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert peer.seen("rpc")[0]["accept"] == "text/event-stream"


def test_subscribe_sends_last_event_id_and_reads_crlf_framed_events(peer: FixturePeer) -> None:
    remote = local(peer)
    final = {
        "statusUpdate": {
            "taskId": "task-1",
            "contextId": "ctx-1",
            "status": {"state": "TASK_STATE_CANCELED"},
        }
    }
    peer.answer = lambda request: sse(
        request, [{"task": task_json(state="TASK_STATE_WORKING")}, final], [7, 9], eol="\r\n"
    )
    events = remote.subscribe("task-1", last_event_id=6)
    assert [event["seq"] for event in events] == [7, 9]
    assert peer.seen("rpc")[0]["last_event_id"] == "6"
    assert peer.seen("rpc")[0]["body"]["params"] == {"id": "task-1"}


def test_events_without_ids_and_a_message_answer_are_accepted(peer: FixturePeer) -> None:
    remote = local(peer)
    reply = {"message": {"messageId": "m-1", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}}
    peer.answer = lambda request: sse(request, [reply], [None])
    assert remote.stream("hello") == [{"seq": None, "event": reply}]


def test_stream_rules_are_enforced(peer: FixturePeer) -> None:
    """Ids must increase, a stream starts with a task or message, events are bounded in
    number, an error event is typed, and an empty stream is refused."""
    remote = local(peer)
    working = {"task": task_json(state="TASK_STATE_WORKING")}
    update = {
        "statusUpdate": {
            "taskId": "task-1",
            "contextId": "ctx-1",
            "status": {"state": "TASK_STATE_WORKING"},
        }
    }
    peer.answer = lambda request: sse(request, [working, update], [5, 5])
    assert reason(lambda: remote.stream("x")) == ("a2a_invalid_response", "sse_order")
    peer.answer = lambda request: sse(request, [working, update], ["1", "two"])
    assert reason(lambda: remote.stream("x")) == ("a2a_invalid_response", "sse_id")
    peer.answer = lambda request: sse(request, [update])
    assert reason(lambda: remote.stream("x")) == ("a2a_invalid_response", "stream_order")
    reply = {"message": {"messageId": "m-1", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}}
    peer.answer = lambda request: sse(request, [working, reply])
    assert reason(lambda: remote.stream("x")) == ("a2a_invalid_response", "stream_order")
    peer.answer = lambda request: sse(request, [working, working, update])  # snapshots may repeat
    assert len(remote.stream("x")) == 3
    peer.answer = lambda request: sse(request, [working] + [update] * 5)
    assert reason(lambda: local(peer, max_stream_events=3).stream("x")) == "a2a_response_too_large"
    peer.answer = lambda request: Response(": nothing\n\n", media_type="text/event-stream")
    assert reason(lambda: remote.stream("x")) == ("a2a_invalid_response", "empty_stream")
    peer.answer = lambda request: rpc_failure(request, -32001, "task not found")
    assert reason(lambda: remote.subscribe("task-2")) == ("a2a_rpc_error", -32001)


def test_sse_decoder_joins_data_lines_and_handles_split_line_ends() -> None:
    decoder = SseDecoder()
    stream = b'id: 3\r\ndata: {"a":\r\ndata: 1}\r\n\r\n:c\n\ndata: x\r'
    events = [
        event for index in range(len(stream)) for event in decoder.feed(stream[index : index + 1])
    ]
    events += decoder.feed(b"\n\n")
    assert [(event.data, event.event_id) for event in events] == [('{"a":\n1}', "3"), ("x", None)]


# -- end to end ---------------------------------------------------------------------------


def test_end_to_end_against_adk_a2a_serve() -> None:
    """Follows adk_a2a_v1_http_test: well_known_and_unary_client_case and
    stream_client_closes_on_terminal_case. Our client against our server: the card
    declares the bearer scheme, so
    auth_scheme="bearer" sends the token; send, stream, get, list and cancel."""
    token = "client-test-token-0123456789abcdef"
    agent = adk.spawn_agent(
        "Echo",
        {
            "provider": adk.ScriptedProvider(
                fn=lambda history, tools: {"text": "echo: " + history[-1].text_value()}, inline=True
            )
        },
    )
    server = serve(agent, auth_token=token)
    try:
        assert reason(lambda: connect(server.url, allow_http_loopback=True)) == "a2a_auth_required"
        remote = connect(
            server.url,
            auth=lambda: {"Authorization": f"Bearer {token}"},
            auth_scheme="bearer",
            allow_http_loopback=True,
        )
        task = remote.send("hi")["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"][0]["text"] == "echo: hi"
        events = remote.stream("again")
        assert events[-1]["event"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        seqs = [event["seq"] for event in events]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        assert remote.get_task(task["id"])["id"] == task["id"]
        assert {item["id"] for item in remote.list_tasks()["tasks"]} >= {task["id"]}
        assert reason(lambda: remote.cancel(task["id"])) == ("a2a_rpc_error", -32002)
        assert reason(lambda: remote.get_task("task-unknown")) == ("a2a_rpc_error", -32001)
        wrong = connect(
            server.url,
            auth=lambda: {"Authorization": "Bearer wrong-token-0123456789abcdef"},
            auth_scheme="bearer",
            allow_http_loopback=True,
        )
        assert reason(lambda: wrong.get_task(task["id"]))[0] == "a2a_unauthorized"
    finally:
        server.stop()


def echo_after(delay: float) -> adk.ScriptedProvider:
    return adk.ScriptedProvider(
        fn=lambda history, tools: {"text": "echo: " + history[-1].text_value(), "delay": delay},
        inline=True,
    )


def bearer(token: str) -> dict[str, Any]:
    """connect options for our server as the principal of `token`."""
    return {
        "auth": lambda: {"Authorization": f"Bearer {token}"},
        "auth_scheme": "bearer",
        "allow_http_loopback": True,
    }


ALICE, BOB = "alice-token-0123456789abcdef0123", "bob-token-0123456789abcdef012345"


def test_cross_principal_scope_over_http() -> None:
    """Follows adk_a2a_v1_http_test: cross_principal_http_scope_case (another
    principal's task is not found, -32001)."""
    agent = adk.spawn_agent("Scoped", {"provider": echo_after(0.0)})
    server = serve(agent, verifier={ALICE: "alice", BOB: "bob"}.get)
    try:
        task = connect(server.url, **bearer(ALICE)).send("private", return_immediately=True)["task"]
        bob = connect(server.url, **bearer(BOB))
        assert reason(lambda: bob.get_task(task["id"])) == ("a2a_rpc_error", -32001)
        assert task["id"] not in {item["id"] for item in bob.list_tasks()["tasks"]}
    finally:
        server.stop()


def test_resubscribe_replays_then_closes() -> None:
    """Follows adk_a2a_v1_http_test: resubscribe_replays_then_closes_case (the snapshot
    first, then events up to the terminal one, from Last-Event-ID 0)."""
    agent = adk.spawn_agent("Slow", {"provider": echo_after(0.3)})
    server = serve(agent, auth_token=ALICE)
    try:
        remote = connect(server.url, **bearer(ALICE))
        task = remote.send("slow", return_immediately=True)["task"]
        events = remote.subscribe(task["id"], last_event_id=0, timeout=10.0)
        assert events[0]["event"]["task"]["id"] == task["id"]
        last = events[-1]["event"]
        state = (last.get("statusUpdate") or last.get("task"))["status"]["state"]
        assert state == "TASK_STATE_COMPLETED"
        seqs = [event["seq"] for event in events]
        assert all(isinstance(seq, int) for seq in seqs) and seqs == sorted(set(seqs))
    finally:
        server.stop()
