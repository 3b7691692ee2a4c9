"""`A2AServer.stop` with work under way: open SSE streams end cleanly and at once, and
the runs it cancels store their end before the sessions close.

Review F2: uvicorn's graceful shutdown used to wait for the streams of running tasks,
then cancel them mid-chunk (an "Exception in ASGI application" traceback per stream, a
truncated body for the client). Review F9: the store closed its sessions before the
runs it had just cancelled ended.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Any

import httpx
import pytest
from starlette.routing import Route

import adk_actors as adk
from adk_actors.a2a import wire
from adk_actors.a2a.server import end_runs, serve
from adk_actors.a2a.server_http import CardSlot, a2a_routes
from adk_actors.a2a.server_options import server_options
from adk_actors.a2a.server_sse import StreamsClosing
from adk_actors.a2a.tasks import start_task_store, stop_task_store
from adk_actors.serving import BearerAuth
from tests.adk_actors.a2a.conftest import ALICE, Rpc, envelope, message, sse_events

STREAMS = 3


def test_stop_ends_open_streams_cleanly(caplog: pytest.LogCaptureFixture) -> None:
    """Review F2. Three clients stream a task that takes 30 s; stop() ends each stream
    with its last chunk: every client reads a complete SSE body (the snapshot, no
    protocol error), and no ASGI exception is logged."""
    agent = adk.spawn_agent(
        "Long", {"provider": adk.ScriptedProvider(fn=lambda h, t: {"text": "x", "delay": 30.0})}
    )
    server = serve(agent, auth_token=ALICE)
    results: list[Any] = []
    started = threading.Semaphore(0)

    def stream() -> None:
        body = envelope("SendStreamingMessage", {"message": message("long")})
        headers = {
            "Authorization": f"Bearer {ALICE}",
            "A2A-Version": "1.0",
            "Accept": "text/event-stream",
        }
        try:
            with httpx.stream("POST", server.rpc_url, json=body, headers=headers, timeout=60) as r:
                text = ""
                for chunk in r.iter_text():
                    text += chunk
                    if "\n\n" in text:
                        started.release()
                results.append(text)
        except httpx.HTTPError as error:
            results.append(error)
            started.release()

    caplog.set_level(logging.ERROR)
    threads = [threading.Thread(target=stream) for _ in range(STREAMS)]
    try:
        for thread in threads:
            thread.start()
        for _ in range(STREAMS):
            assert started.acquire(timeout=20)
        time.sleep(0.1)  # each stream is now waiting for the next event
    finally:
        server.stop()
    for thread in threads:
        thread.join(30)
    assert len(results) == STREAMS
    for result in results:
        assert isinstance(result, str), result  # no RemoteProtocolError: the body ended
        events = sse_events(result)
        assert len(events) == 1 and "task" in events[0][1]["result"]
    assert not [r for r in caplog.records if "Exception in ASGI application" in r.getMessage()]


def test_stop_stores_the_end_of_the_runs_it_cancels(caplog: pytest.LogCaptureFixture) -> None:
    """Review F9. stop() with tasks still working: their runs are cancelled and have
    stored their end event before the store closes its sessions (no
    ``adk.invocation.end_not_stored``); nothing of the store's is left running."""
    agent = adk.spawn_agent(
        "Long", {"provider": adk.ScriptedProvider(fn=lambda h, t: {"text": "x", "delay": 30.0})}
    )
    server = serve(agent, auth_token=ALICE)
    caplog.set_level(logging.WARNING)
    try:
        rpc = Rpc(server)
        immediately = {"configuration": {"returnImmediately": True}}
        for text in ("one", "two"):
            task = rpc.result("SendMessage", {"message": message(text), **immediately})["task"]
            assert task["status"]["state"] == "TASK_STATE_WORKING"
        deadline = time.monotonic() + 10
        while server.store.stats()["runs"] < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.store.stats()["runs"] == 2
    finally:
        server.stop()
    left_running = adk.runs.list(state="running")["runs"]
    deadline = time.monotonic() + 10
    while adk.runs.list(state="running")["runs"] and time.monotonic() < deadline:
        time.sleep(0.02)  # (before the fix they ended only now, their sessions closed)
    assert not [r for r in caplog.records if "end_not_stored" in r.getMessage()]
    assert left_running == []


def test_stop_answers_a_blocking_send_in_flight(caplog: pytest.LogCaptureFixture) -> None:
    """Review F2 (the unary side). A blocking SendMessage waiting for a 30 s task when
    stop() is called is answered with its task as the stop left it (its run cancelled),
    not cut off after uvicorn's graceful timeout."""
    agent = adk.spawn_agent(
        "Long", {"provider": adk.ScriptedProvider(fn=lambda h, t: {"text": "x", "delay": 30.0})}
    )
    server = serve(agent, auth_token=ALICE)
    rpc = Rpc(server)
    answers: list[Any] = []

    def send() -> None:
        try:
            answers.append(rpc.post(envelope("SendMessage", {"message": message("wait")})))
        except httpx.HTTPError as error:
            answers.append(error)

    caplog.set_level(logging.ERROR)
    thread = threading.Thread(target=send)
    try:
        thread.start()
        deadline = time.monotonic() + 10
        while server.store.stats()["runs"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.store.stats()["runs"] == 1
    finally:
        server.stop()
    thread.join(30)
    (answer,) = answers
    assert isinstance(answer, httpx.Response), answer
    assert answer.status_code == 200
    state = answer.json()["result"]["task"]["status"]["state"]
    assert state in ("TASK_STATE_CANCELED", "TASK_STATE_FAILED")
    assert not [r for r in caplog.records if "Exception in ASGI application" in r.getMessage()]


def test_a_stopping_server_refuses_new_requests() -> None:
    """Once its streams are told to close, the JSON-RPC endpoint answers 503 (retry
    later) without reading the request; the card stays public."""
    agent = adk.spawn_agent("Echo", {"provider": "scripted", "script": [{"text": "ok"}]})
    store = start_task_store(agent, server_options(None), child_id="a2a_stopping_tasks")
    closing = StreamsClosing()
    auth = BearerAuth(auth_token=ALICE, verifier=None, callback_timeout=1.0)
    routes = a2a_routes(store, CardSlot(), auth, server_options(None), closing=closing)
    endpoint = next(
        route.app for route in routes if isinstance(route, Route) and route.path == "/a2a/v1"
    )
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        raise AssertionError("the request is not read")

    async def send(message: Any) -> None:
        sent.append(message)

    async def request() -> None:
        await endpoint({"type": "http", "method": "POST", "headers": []}, receive, send)

    try:
        closing.close()
        asyncio.run(request())
    finally:
        stop_task_store(store)
    assert sent[0]["status"] == 503
    assert (b"retry-after", b"1") in sent[0]["headers"]


def test_stop_refuses_a_request_admitted_before_it(caplog: pytest.LogCaptureFixture) -> None:
    """Review2 1. A blocking SendMessage whose (slow) verifier runs when stop() is called
    reaches the store after stop() drained it: the store refuses it (503, -32603
    "server stopping" under its id) instead of starting a run nobody cancels; stop()
    does not wait for uvicorn's graceful timeout, no ASGI exception, no lost end."""
    agent = adk.spawn_agent(
        "Long", {"provider": adk.ScriptedProvider(fn=lambda h, t: {"text": "x", "delay": 30.0})}
    )
    verifying = threading.Event()

    def verifier(token: str) -> str | None:
        verifying.set()
        time.sleep(0.5)  # the request is in flight when stop() starts
        return "alice" if token == ALICE else None

    server = serve(agent, verifier=verifier)
    answers: list[Any] = []

    def send() -> None:
        body = envelope("SendMessage", {"message": message("wait")}, request_id=7)
        headers = {"Authorization": f"Bearer {ALICE}", "A2A-Version": "1.0"}
        try:
            answers.append(httpx.post(server.rpc_url, json=body, headers=headers, timeout=30))
        except httpx.HTTPError as error:
            answers.append(error)

    caplog.set_level(logging.WARNING)
    thread = threading.Thread(target=send)
    try:
        thread.start()
        assert verifying.wait(10)
    finally:
        server.stop()
    thread.join(30)
    (answer,) = answers
    assert isinstance(answer, httpx.Response), answer
    assert answer.status_code == 503
    assert answer.json() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32603, "message": "server stopping"},
    }
    assert adk.runs.list(state="running", agent="Long")["runs"] == []
    messages = [record.getMessage() for record in caplog.records]
    assert not [m for m in messages if "Exception in ASGI application" in m]
    assert not [m for m in messages if "end_not_stored" in m]


def test_a_request_body_past_its_deadline_is_408() -> None:
    """Review2 6. A client that declares a Content-Length and sends less (or trickles)
    is cut off after ``body_timeout``: 408, -32600, the connection closes."""
    agent = adk.spawn_agent("Echo", {"provider": "scripted", "script": [{"text": "ok"}]})
    store = start_task_store(agent, server_options(None), child_id="a2a_body_timeout_tasks")
    auth = BearerAuth(auth_token=ALICE, verifier=None, callback_timeout=1.0)
    routes = a2a_routes(store, CardSlot(), auth, server_options(None), body_timeout=0.05)
    endpoint = next(
        route.app for route in routes if isinstance(route, Route) and route.path == "/a2a/v1"
    )
    sent: list[Any] = []
    parts = [{"type": "http.request", "body": b'{"jsonrpc"', "more_body": True}]

    async def receive() -> dict[str, Any]:
        if parts:
            return parts.pop(0)
        await asyncio.sleep(3600)  # the rest never comes
        raise AssertionError("unreachable")

    async def send(message: Any) -> None:
        sent.append(message)

    headers = [
        (b"authorization", f"Bearer {ALICE}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", b"100"),
    ]

    async def request() -> None:
        await endpoint({"type": "http", "method": "POST", "headers": headers}, receive, send)

    try:
        asyncio.run(request())
    finally:
        stop_task_store(store)
    assert sent[0]["status"] == 408
    assert (b"connection", b"close") in sent[0]["headers"]
    assert json.loads(sent[1]["body"])["error"]["code"] == -32600


def test_end_runs_cancels_every_running_run_across_pages() -> None:
    """Review2 8: with more running runs than a listing page (here pages of 2 for 5
    runs), every one is cancelled and has ended when `end_runs` returns; it lists
    again until no running run is left that it has not cancelled (an offset page
    shifted by a run that ended meanwhile can no longer hide one)."""
    agent = adk.spawn_agent(
        "Paged", {"provider": adk.ScriptedProvider(fn=lambda h, t: {"text": "x", "delay": 30.0})}
    )
    app_name = "a2a.a2a_paged_tasks"
    store = start_task_store(
        agent, server_options(None), child_id="a2a_paged_tasks", app_name=app_name
    )
    try:
        for number in range(5):
            params = {"message": message(f"task {number}")}
            request = wire.parse_request("SendMessage", params, max_parts=8)
            request.configuration.return_immediately = True
            asyncio.run(store.send("alice", request))
        deadline = time.monotonic() + 10
        while store.stats()["runs"] < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert end_runs(app_name, time.monotonic() + 10, page_size=2) == 5
        assert adk.runs.list(state="running", app_name=app_name)["runs"] == []
    finally:
        stop_task_store(store)
