"""`adk.a2a.serve`'s SSE answers over loopback: SendStreamingMessage and SubscribeToTask,
event ids and ``Last-Event-ID``, the end on a terminal state, and a client that leaves
mid-stream (the task goes on).

Follows adk_a2a_v1_http_test (stream_client_closes_on_terminal_case,
resubscribe_replays_then_closes_case); behaviors.md §12 ("SSE starts with a task
snapshot and strictly increasing sequence").
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import httpx
from starlette.routing import Router

import adk_actors as adk
from adk_actors.a2a.server import A2AServer, serve
from adk_actors.a2a.server_http import CardSlot, a2a_routes
from adk_actors.a2a.server_options import server_options
from adk_actors.a2a.tasks import start_task_store, stop_task_store
from adk_actors.serving import BearerAuth, UvicornOptions, start_listener, stop_listener
from tests.adk_actors.a2a.conftest import ALICE, BOB, Rpc, envelope, message, slow, sse_events

SSE = {"Accept": "text/event-stream"}
POLL_SECONDS = 10.0


def payload(event: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = event["result"]
    return result


def state_of(event: dict[str, Any]) -> str | None:
    result = payload(event)
    if "task" in result:
        state: str = result["task"]["status"]["state"]
        return state
    if "statusUpdate" in result:
        state = result["statusUpdate"]["status"]["state"]
        return state
    return None


def wait_for_state(rpc: Rpc, task_id: str, state: str) -> dict[str, Any]:
    deadline = time.monotonic() + POLL_SECONDS
    while True:
        task = rpc.result("GetTask", {"id": task_id})
        if task["status"]["state"] == state or time.monotonic() > deadline:
            return task
        time.sleep(0.05)


def test_a_stream_starts_with_the_snapshot_and_ends_on_completion(echo_server: A2AServer) -> None:
    """Follows adk_a2a_v1_http_test: stream_client_closes_on_terminal_case. The answer is
    text/event-stream; each event has an integer id, strictly increasing, and a JSON-RPC
    result envelope with the request's id; the first is the task snapshot, an artifact
    update carries the answer, the last is COMPLETED and the server ends the response."""
    response, events = Rpc(echo_server).stream(
        "SendStreamingMessage", {"message": message("stream me")}
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache, no-transform"
    ids = [seq for seq, _ in events]
    assert ids == sorted(set(ids)) and len(ids) >= 3
    assert all(event["jsonrpc"] == "2.0" and event["id"] == 1 for _, event in events)
    first = payload(events[0][1])
    assert "task" in first
    task_id = first["task"]["id"]
    artifacts = [payload(e)["artifactUpdate"] for _, e in events if "artifactUpdate" in payload(e)]
    assert [part["text"] for a in artifacts for part in a["artifact"]["parts"]] == [
        "echo: stream me"
    ]
    assert all(a["taskId"] == task_id for a in artifacts)
    assert state_of(events[-1][1]) == "TASK_STATE_COMPLETED"


def test_resubscribe_replays_after_the_last_event_id_then_closes(slow_server: A2AServer) -> None:
    """Follows adk_a2a_v1_http_test: resubscribe_replays_then_closes_case. A task started
    with returnImmediately is followed with SubscribeToTask: the snapshot first, then live
    events to the terminal one. Subscribing again with ``Last-Event-ID`` of the first
    snapshot gives a new snapshot and exactly the events after that id; from 0, one
    snapshot and then updates only (a replayed creation event is not sent)."""
    rpc = Rpc(slow_server)
    params = {"message": message("slow"), "configuration": {"returnImmediately": True}}
    task = rpc.result("SendMessage", params)["task"]
    assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    _, live = rpc.stream("SubscribeToTask", {"id": task["id"]})
    assert payload(live[0][1])["task"]["id"] == task["id"]
    assert state_of(live[-1][1]) == "TASK_STATE_COMPLETED"
    cursor = live[0][0]
    _, replay = rpc.stream("SubscribeToTask", {"id": task["id"]}, {"Last-Event-ID": str(cursor)})
    assert "task" in payload(replay[0][1])
    after = [seq for seq, _ in replay[1:]]
    assert after == [seq for seq, _ in live if seq > cursor]
    assert state_of(replay[-1][1]) == "TASK_STATE_COMPLETED"
    _, whole = rpc.stream("SubscribeToTask", {"id": task["id"]}, {"Last-Event-ID": "0"})
    ids = [seq for seq, _ in whole]
    assert ids == sorted(set(ids)) and "task" in payload(whole[0][1])
    assert all("task" not in payload(event) for _, event in whole[1:])  # updates only
    assert state_of(whole[-1][1]) == "TASK_STATE_COMPLETED"


def test_a_bad_last_event_id_is_invalid_params(echo_server: A2AServer) -> None:
    """``Last-Event-ID`` is a non-negative integer: anything else is HTTP 400 with
    -32602, before the task is looked up."""
    rpc = Rpc(echo_server)
    for value in ("-1", "abc", "1.5", "99999999999999999999"):
        response = rpc.post(
            envelope("SubscribeToTask", {"id": "task-x"}),
            headers={**SSE, "Last-Event-ID": value},
        )
        assert response.status_code == 400, value
        assert response.json()["error"]["code"] == -32602


def test_subscribing_to_an_unknown_or_foreign_task_is_not_found(echo_server: A2AServer) -> None:
    """SubscribeToTask answers JSON (not a stream) when the task is unknown or another
    principal's: -32001."""
    task = Rpc(echo_server).result("SendMessage", {"message": message("mine")})["task"]
    for rpc, task_id in ((Rpc(echo_server, BOB), task["id"]), (Rpc(echo_server), "task-none")):
        response = rpc.post(envelope("SubscribeToTask", {"id": task_id}), headers=SSE)
        assert response.headers["content-type"] == "application/json"
        assert response.json()["error"]["code"] == -32001


def test_a_client_leaving_mid_stream_does_not_cancel_the_task() -> None:
    """The client reads the first event of SendStreamingMessage and closes the socket:
    the server notices (the store forgets the subscriber while the task still works),
    and the task still completes with its artifact."""
    agent = adk.spawn_agent(
        "Slower", {"provider": adk.ScriptedProvider(fn=lambda h, t: {"text": "late", "delay": 2.0})}
    )
    with serve(agent, auth_token=ALICE) as server:
        port = int(server.url.rsplit(":", 1)[1])
        body = json.dumps(envelope("SendStreamingMessage", {"message": message("leave")})).encode()
        request = (
            f"POST /a2a/v1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ALICE}\r\n"
            "A2A-Version: 1.0\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(request)
            received = b""
            while b"\n\n" not in received.partition(b"\ndata: ")[2]:
                chunk = sock.recv(65536)
                assert chunk, received
                received += chunk
            assert server.store.stats()["subscribers"] == 1
        head, _, stream = received.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ")
        chunk = stream.split(b"\r\n", 1)[1]  # chunked: the size line, then the event
        (_, first), *_ = sse_events(chunk.decode())
        task_id = payload(first)["task"]["id"]
        deadline = time.monotonic() + POLL_SECONDS
        while server.store.stats()["subscribers"] and time.monotonic() < deadline:
            time.sleep(0.02)
        stats = server.store.stats()
        assert (stats["subscribers"], stats["active"]) == (0, 1)  # left; the task goes on
        done = wait_for_state(Rpc(server), task_id, "TASK_STATE_COMPLETED")
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        assert [part["text"] for part in done["artifacts"][0]["parts"]] == ["late"]


def test_a_card_without_streaming_refuses_streams() -> None:
    """A server whose card says ``streaming: false`` answers streaming methods -32004;
    unary ones still work."""
    agent = adk.spawn_agent("Echo", {"provider": "scripted", "script": [{"text": "ok"}]})
    with serve(agent, auth_token=ALICE, card={"streaming": False}) as server:
        rpc = Rpc(server)
        params = {"message": message("hi")}
        assert rpc.error_code("SendStreamingMessage", params, headers=SSE) == -32004
        assert rpc.result("SendMessage", params)["task"]["status"]["state"] == (
            "TASK_STATE_COMPLETED"
        )


def test_an_idle_stream_carries_heartbeats() -> None:
    """While the agent works, the stream sends SSE comments every ``heartbeat`` seconds
    (proxies keep it open, a vanished client is noticed); the events around them are
    unchanged. The routes are mounted on `serving`'s listener with a short heartbeat."""
    agent = adk.spawn_agent("Quiet", {"provider": adk.ScriptedProvider(fn=slow)})
    store = start_task_store(agent, server_options(None), child_id="a2a_heartbeat_tasks")
    auth = BearerAuth(auth_token=ALICE, verifier=None, callback_timeout=1.0)
    slot = CardSlot()
    routes = a2a_routes(store, slot, auth, server_options(None), heartbeat=0.1)
    listener = start_listener(
        lambda: Router(routes), UvicornOptions(), host="127.0.0.1", port=0, child_id="a2a_heartbeat"
    )
    try:
        response = httpx.post(
            listener.url + "/a2a/v1",
            json=envelope("SendStreamingMessage", {"message": message("wait")}),
            headers={**SSE, "A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}"},
            timeout=30,
        )
        assert response.text.count(": keepalive\n\n") >= 3
        events = sse_events(response.text)
        assert "task" in payload(events[0][1])
        assert state_of(events[-1][1]) == "TASK_STATE_COMPLETED"
    finally:
        stop_listener(listener)
        stop_task_store(store)
