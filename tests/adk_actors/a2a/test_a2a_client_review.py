"""Regressions of the client review (/issue 19, review_client.md 1-6 and nits) against
the scripted loopback peer of test_a2a_client.py and raw HTTP/1.1 servers on
127.0.0.1. Non-loopback and private destinations come only from resolver stubs."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from starlette.responses import Response, StreamingResponse

from adk_actors.a2a import client_sse
from adk_actors.a2a.client import StreamTimeout, connect
from adk_actors.a2a.client_http import Exchange, Route, Transport
from adk_actors.a2a.client_options import A2A_REASONS
from adk_actors.a2a.client_sse import SseDecoder
from adk_actors.outbound import HttpPolicy, parse_endpoint
from tests.adk_actors.a2a.test_a2a_client import (
    FixturePeer,
    local,
    make_peer,
    peer,
    plain_card,
    reason,
    rpc_result,
    task_json,
)
from tests.adk_actors.a2a.test_a2a_client_security import Calls, StubResolver
from tests.adk_actors.mcp.pki import write_test_pki

__all__ = ["make_peer", "peer"]  # the fixtures, shared with test_a2a_client.py

PEER_TASK = "projects/p1/tasks/7f3a+Zm9v="


def test_a_compressed_answer_is_refused_and_identity_is_asked_for(peer: FixturePeer) -> None:
    """Review client 1: max_response_bytes bounds the bytes the client reads, so the
    client asks for identity and refuses a gzip body (which would decode unbounded)."""
    encoded = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"task": task_json()}})
    bomb = gzip.compress(encoded.encode())

    def answer(request: dict[str, Any]) -> Response:
        return Response(bomb, media_type="application/json", headers={"content-encoding": "gzip"})

    remote = local(peer)
    peer.answer = answer
    assert reason(lambda: remote.send("hi")) == "a2a_unsupported_content_encoding"
    assert reason(lambda: remote.stream("hi")) == "a2a_unsupported_content_encoding"
    assert {request["accept_encoding"] for request in peer.requests} == {"identity"}


def test_undeclared_auth_is_checked_on_every_connection(
    make_peer: Callable[..., FixturePeer], tmp_path: Path
) -> None:
    """Review client 2: allow_undeclared_auth's loopback rule holds per connection: a
    later DNS answer to a non-loopback address (rebinding) never gets the credential."""
    trust = write_test_pki(tmp_path, "agent.local", x509.DNSName("agent.local"))
    files = (str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
    peer = make_peer(plain_card, tls=files, host="agent.local")
    # discovery, the connect-time loopback check, the first RPC, then a rebinding answer
    resolver = StubResolver(["127.0.0.1"], ["127.0.0.1"], ["127.0.0.1"], ["192.0.2.10"])
    credential = Calls("Bearer s3cret-token")
    remote = connect(
        peer.base,
        auth=credential,
        allow_undeclared_auth=True,
        allowed_private_hosts=["agent.local"],
        resolver=resolver,
        ssl_context=trust,
        request_timeout=5.0,
    )
    assert remote.get_task("task-1")["id"] == "task-1"
    assert reason(lambda: remote.get_task("task-1")) == "a2a_undeclared_auth_not_allowed"
    assert [request["authorization"] for request in peer.seen("rpc")] == ["Bearer s3cret-token"]
    assert len(resolver.asked) == 4


def test_sse_decoding_scans_each_byte_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Review client 4: a long line split into small chunks is not rescanned per chunk
    (the line-end search sees each input byte once), and still decodes whole."""
    scanned: list[int] = []
    line_end = client_sse._LINE_END

    class Counting:
        def finditer(self, buffer: bytes) -> Any:
            scanned.append(len(buffer))
            return line_end.finditer(buffer)

    monkeypatch.setattr(client_sse, "_LINE_END", Counting())
    decoder = SseDecoder()
    payload = b"data: " + b"x" * 256 * 1024
    events = []
    for start in range(0, len(payload), 1024):
        events += decoder.feed(payload[start : start + 1024])
    events += decoder.feed(b"\r")
    events += decoder.feed(b"\n\r\n")
    assert [len(event.data) for event in events] == [256 * 1024]
    assert sum(scanned) <= len(payload) + 8


def test_a_peers_opaque_task_and_context_ids_can_be_used(peer: FixturePeer) -> None:
    """Review client 5 / wire W8: the peer's ids are opaque (any bounded printable
    string): a task it named "projects/p1/tasks/7f3a+Zm9v=" can be fetched, cancelled,
    listed by context and continued; our server's id pattern is for our own ids."""

    def answer(request: dict[str, Any]) -> Response:
        if request["method"] == "SendMessage":
            return rpc_result(request, {"task": task_json(PEER_TASK, "TASK_STATE_INPUT_REQUIRED")})
        if request["method"] == "ListTasks":
            return rpc_result(request, {"tasks": [], "nextPageToken": "", "pageSize": 50})
        return rpc_result(request, task_json(PEER_TASK))

    peer.answer = answer
    remote = local(peer)
    assert remote.send("hi")["task"]["id"] == PEER_TASK
    assert remote.get_task(PEER_TASK)["id"] == PEER_TASK
    assert remote.cancel(PEER_TASK)["id"] == PEER_TASK
    remote.list_tasks(context_id="ctx/a b==")
    remote.send("tuesday", task_id=PEER_TASK, context_id="ctx/a b==")
    bodies = [request["body"]["params"] for request in peer.seen("rpc")]
    assert bodies[1]["id"] == PEER_TASK and bodies[2]["id"] == PEER_TASK
    assert bodies[3]["contextId"] == "ctx/a b=="
    assert bodies[4]["message"]["taskId"] == PEER_TASK
    assert bodies[4]["message"]["contextId"] == "ctx/a b=="
    bad_ids: list[Any] = ["", "a\x00b", "line\nbreak", "x" * 4097, 7]
    for bad in bad_ids:

        def fetch(bad: Any = bad) -> Any:
            return remote.get_task(bad)

        assert reason(fetch) == ("invalid_a2a_request", "task_id")
    assert len(peer.seen("rpc")) == 5


def test_unicode_digit_event_ids_are_a_typed_refusal(peer: FixturePeer) -> None:
    """Review client 6: an SSE ``id:`` of non-ASCII digits ('²' passes str.isdigit, int()
    refuses it) is the typed sse_id refusal, never a bare ValueError nor a number."""
    remote = local(peer)
    for event_id in ("²", "١٢"):

        def answer(request: dict[str, Any], event_id: str = event_id) -> Response:
            data = json.dumps(
                {"jsonrpc": "2.0", "id": request["id"], "result": {"task": task_json()}}
            )
            return Response(f"id: {event_id}\ndata: {data}\n\n", media_type="text/event-stream")

        peer.answer = answer
        assert reason(lambda: remote.stream("hi")) == ("a2a_invalid_response", "sse_id")


def test_an_interface_url_the_http_client_refuses_is_typed(
    make_peer: Callable[..., FixturePeer],
) -> None:
    """Review client 6: a card interface URL with a control character (httpx2 raises
    InvalidURL, not an HTTPError) is refused up front, typed; nothing is sent."""

    def card(rpc_url: str) -> dict[str, Any]:
        made = plain_card(rpc_url)
        made["supportedInterfaces"][0]["url"] = rpc_url.replace("/a2a/v1", "/a2a\x7f/v1")
        return made

    peer = make_peer(card)
    refused = reason(lambda: local(peer))
    assert refused == ("invalid_a2a_url", "unparsable") or refused[0] == "a2a_invalid_agent_card"
    assert peer.seen("rpc") == []
    assert reason(lambda: parse_endpoint("http://h/a\x7f", A2A_REASONS)) == (
        "invalid_a2a_url",
        "unparsable",
    )


def test_an_exchange_repr_never_shows_credentials() -> None:
    """Review client nit 6: frame-capturing error reporters serialise locals; neither an
    Exchange (the values sent) nor a Route (the auth callback) shows a credential."""
    endpoint = parse_endpoint("http://127.0.0.1:9/a2a/v1", A2A_REASONS)
    call = Exchange(
        Route(endpoint, lambda: {"Authorization": "Bearer s3cret"}),
        Transport(HttpPolicy(reasons=A2A_REASONS), 1024, 1.0),
    )
    call.sent.append("Bearer s3cret")
    assert "s3cret" not in repr(call) and "lambda" not in repr(call)


def test_an_answer_with_a_float_id_is_for_another_request(peer: FixturePeer) -> None:
    """Review client nit 7: JSON-RPC id 1.0 is not the integer id 1."""

    def answer(request: dict[str, Any]) -> Response:
        body = {"jsonrpc": "2.0", "id": float(request["id"]), "result": {"task": task_json()}}
        return Response(json.dumps(body), media_type="application/json")

    remote = local(peer)
    peer.answer = answer
    assert reason(lambda: remote.send("hi")) == ("a2a_invalid_response", "id")


def test_a_stream_past_its_deadline_keeps_the_events_received(peer: FixturePeer) -> None:
    """Review client nit 14: the typed timeout of a stream carries the events that
    arrived and the last event id, so the caller can resubscribe from it."""

    def answer(request: dict[str, Any]) -> Response:
        data = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": request["id"],
                "result": {"task": task_json(state="TASK_STATE_WORKING")},
            }
        )

        async def body() -> AsyncIterator[bytes]:
            yield f"id: 41\ndata: {data}\n\n".encode()
            await asyncio.sleep(3)

        return StreamingResponse(body(), media_type="text/event-stream")

    remote = local(peer)
    peer.answer = answer
    with pytest.raises(StreamTimeout) as info:
        remote.stream("hi", timeout=0.5)
    assert info.value.reason == ("a2a_timeout", "stream")
    assert info.value.last_event_id == 41
    assert [event["seq"] for event in info.value.events] == [41]
    assert info.value.events[0]["event"]["task"]["status"]["state"] == "TASK_STATE_WORKING"


def test_answers_are_read_as_strict_json(peer: FixturePeer) -> None:
    """Review wire W3/W4 on the client: an answer is read with `wire.loads` (a member
    name twice, NaN, or a byte order mark is refused, typed), not the lenient json.loads."""
    remote = local(peer)
    for text in (
        '{"jsonrpc": "2.0", "id": 1, "id": 1, "result": {}}',
        '{"jsonrpc": "2.0", "id": 1, "result": {"task": {"id": "t", "metadata": {"n": NaN}}}}',
        '\ufeff{"jsonrpc": "2.0", "id": 1, "result": {}}',
    ):

        def answer(request: dict[str, Any], text: str = text) -> Response:
            body = text.replace('"id": 1', f'"id": {request["id"]}')
            return Response(body, media_type="application/json")

        peer.answer = answer
        assert reason(lambda: remote.send("hi")) == ("a2a_invalid_response", "json")


@pytest.mark.parametrize("host", ["localhost.", "bücher.example", "Agent.Test"])
def test_trailing_dot_and_idna_hosts_reach_their_own_origin(
    make_peer: Callable[..., FixturePeer], host: str
) -> None:
    """Review client nit 5: a host with a trailing dot, in Unicode or in capitals is
    compared in one normal form (IDNA A-labels, lowercase, no dot) by the pinned
    backend and the origin check, so it is not refused as "another origin"."""
    peer = make_peer(lambda rpc_url: plain_card(rpc_url.replace("127.0.0.1", host)))
    resolver = StubResolver(["127.0.0.1"])
    remote = connect(f"http://{host}:{peer.port}", resolver=resolver, allow_http_loopback=True)
    assert remote.get_task("task-1")["id"] == "task-1"
    expected = host.lower().rstrip(".").encode("idna").decode()
    assert {asked for asked, _ in resolver.asked} == {expected}


def test_a_sync_call_leaves_the_threads_own_event_loop_in_place(peer: FixturePeer) -> None:
    """Review2 3: a thread that set an event loop it
    is not running keeps it as its current loop after a sync call (the call runs on a
    private loop, closed after; ``asyncio.run`` would unset the thread's loop)."""
    seen: list[Any] = []

    def worker() -> None:
        mine = asyncio.new_event_loop()
        asyncio.set_event_loop(mine)
        try:
            remote = local(peer)
            seen.append(remote.get_task("task-1")["id"])
            seen.append(asyncio.get_event_loop() is mine)
            seen.append(mine.run_until_complete(asyncio.sleep(0, "still usable")))
            seen.append(mine.is_closed())
        finally:
            asyncio.set_event_loop(None)
            mine.close()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(10)
    assert seen == ["task-1", True, "still usable", False]
