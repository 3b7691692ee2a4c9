"""GET /dev/v1/runs/{run_id}/events: SSE replay, reconnect, bounds and overruns.

Real uvicorn, real httpx streams, scripted models. A run that must stay open is held
by a tool waiting on a `threading.Event` the test releases (never by a sleep); a
request the stream awaits (subscribe, ack) is held the same way (`Held`: before it is
sent, or waiting in the run's stream while the stream is held busy), which is how a
test knows where the stream is without timing luck.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.daemon.listener import stop_listener
from supervision import CreditStream
from tests.daemon.conftest import DevServer, start_dev_server

WAIT = 30.0


# -- helpers ---------------------------------------------------------------------------------


@contextmanager
def server_with(**settings: Any) -> Iterator[DevServer]:
    """A second daemon app with other settings, serving the same runtime's runs."""
    server, listener = start_dev_server(**settings)
    try:
        yield server
    finally:
        server.client.close()
        stop_listener(listener)


def parse(body: str) -> list[dict[str, Any]]:
    """The frames of an SSE body: ``{"id", "event", "data"}`` (comments as ``comment``)."""
    frames = []
    for block in body.split("\n\n"):
        if not block:
            continue
        frame: dict[str, Any] = {}
        for line in block.split("\n"):
            if line.startswith(":"):
                frame["comment"] = line[1:].strip()
                continue
            name, _, value = line.partition(": ")
            frame[name] = json.loads(value) if name == "data" else value
        frames.append(frame)
    return frames


def ids(frames: list[dict[str, Any]]) -> list[int]:
    return [int(frame["id"]) for frame in frames if "id" in frame]


def stream(server: DevServer, run_id: str, headers: dict[str, str] | None = None) -> str:
    """The whole body of one SSE connection (it ends on its own)."""
    with server.client.stream("GET", f"/dev/v1/runs/{run_id}/events", headers=headers) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
        return r.read().decode()


def start(server: DevServer, agent: str, session: str = "s", message: str = "hello") -> str:
    body = {
        "agent_name": agent,
        "app_name": "app",
        "user_id": "u",
        "session_id": session,
        "message": message,
    }
    response = server.client.post("/dev/v1/runs", json=body)
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


def answering(name: str = "Answerer", text: str = "Done.") -> None:
    """An agent that calls one tool, then answers: four frames and a terminal."""

    @adk.tool
    def lookup(city: str) -> dict[str, str]:
        """Look a city up."""
        return {"city": city, "forecast": "sunny"}

    adk.spawn_agent(
        name,
        {
            "provider": "scripted",
            "script": [
                {"tool_calls": [{"name": "lookup", "args": {"city": "Oslo"}}]},
                {"text": text},
            ],
        },
        tools=[lookup],
    )


class Gate(adk.Tool):
    """A tool that holds its run open until the test opens the gate."""

    name = "gate"
    description = "Wait for the gate."
    parameters = {"type": "object", "properties": {"blob": {"type": "string"}}}

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()

    def execute(self, args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        self.entered.set()
        self.opened.wait(WAIT)
        return {"opened": True}


@pytest.fixture
def gate() -> Iterator[Gate]:
    tool = Gate()
    yield tool
    tool.opened.set()


def gated(gate: Gate, name: str = "Gated", first: Any = None) -> None:
    """An agent whose run waits in `gate` (after `first`, its model's first step)."""
    step = first or {"tool_calls": [{"name": "gate", "args": {}}]}
    adk.spawn_agent(name, {"provider": "scripted", "script": [step, "Opened."]}, tools=[gate])


def held_run(server: DevServer, gate: Gate, first: Any = None) -> str:
    """A run of a `gated` agent, started and now waiting in the gate (items 1, the
    user's message, and 2, the call, are stored)."""
    gated(gate, first=first)
    run_id = start(server, "Gated")
    assert gate.entered.wait(WAIT)
    return run_id


def finish(gate: Gate, run_id: str) -> None:
    """Open the gate: the run completes (nothing a stream did cancelled it)."""
    gate.opened.set()
    assert adk.runs.wait(run_id, timeout=WAIT) == adk.Completed("Opened.")


def status(server: DevServer, run_id: str) -> dict[str, Any]:
    response = server.client.get(f"/dev/v1/runs/{run_id}")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def wait_for_subscribers(run_id: str, count: int, timeout: float = WAIT) -> None:
    """Until the run has `count` subscribers, read from the run itself (so it works
    while the daemon drains). The server learns of a disconnect on its own thread, so
    this polls, up to a deadline; the bound is the assertion."""
    deadline = time.monotonic() + timeout
    while adk.runs.status(run_id)["subscribers"] != count:
        if time.monotonic() > deadline:
            raise AssertionError(f"the run did not have {count} subscribers within {timeout} s")
        time.sleep(0.005)


class Held:
    """Holds the first of the stream's awaited kernel requests (`CreditStream.subscribe_async`
    or `.ack_async`) until the test releases it; later calls go straight through.
    Without `busy`, the request is sent only once released; with `busy`, it is sent at
    once to the run's stream, which is held busy (a `replace_state` that waits), so the
    request waits in the stream's mailbox, awaited on the event loop. `entered`: it is
    held now."""

    def __init__(self, original: Callable[..., Any], busy: bool) -> None:
        self.original = original
        self.busy = busy
        self.entered = threading.Event()
        self.released = threading.Event()
        self._inside = threading.Event()
        self._first = threading.Lock()

    async def __call__(self, stream: sv.Pid, *args: Any, **kwargs: Any) -> Any:
        if not self._first.acquire(blocking=False):
            return await self.original(stream, *args, **kwargs)
        if not self.busy:
            self.entered.set()
            while not self.released.is_set():
                await asyncio.sleep(0.005)
            return await self.original(stream, *args, **kwargs)
        holder = threading.Thread(
            target=sv.replace_state, args=(stream, self._hold), kwargs={"timeout": None}
        )
        holder.start()
        while not self._inside.is_set():
            await asyncio.sleep(0.005)
        request = asyncio.ensure_future(self.original(stream, *args, **kwargs))
        await asyncio.sleep(0)  # the request is sent: it waits in the busy stream's mailbox
        self.entered.set()
        return await request

    def _hold(self, state: Any) -> Any:
        self._inside.set()
        self.released.wait(WAIT)
        return state


@pytest.fixture
def hold(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Held]]:
    """``hold("ack_async")`` / ``hold("subscribe_async", busy=True)``: hold that request
    (released at the end)."""
    made: list[Held] = []

    def make(name: str, busy: bool = False) -> Held:
        held = Held(getattr(CreditStream, name), busy)
        monkeypatch.setattr(CreditStream, name, staticmethod(held))
        made.append(held)
        return held

    yield make
    for held in made:
        held.released.set()


def control_threads() -> list[threading.Thread]:
    """Threads of the pool the runs API once used for subscribe and ack: none now."""
    return [t for t in threading.enumerate() if t.name.startswith("runs-control")]


def answers_in_time(server: DevServer) -> bool:
    """Does the daemon's event loop answer another request now (a route that runs on
    the loop itself, not on a worker thread)?"""
    with httpx.Client(base_url=server.url, headers=server.client.headers, timeout=5.0) as other:
        try:
            return other.get("/dev/v1/agents").status_code == 200
        except httpx.TimeoutException:
            return False


# -- a full stream ---------------------------------------------------------------------------


def test_full_stream_of_a_completed_run(dev_server: DevServer) -> None:
    answering()
    run_id = start(dev_server, "Answerer")
    outcome = adk.runs.wait(run_id, timeout=WAIT)
    assert outcome == adk.Completed("Done.")

    frames = parse(stream(dev_server, run_id))

    assert ids(frames) == [1, 2, 3, 4, 5]
    assert [frame["event"] for frame in frames] == ["event"] * 4 + ["terminal"]
    user, call, response, answer = (frame["data"] for frame in frames[:4])
    assert user["author"] == "user" and user["text"] == "hello"
    assert user["content"] == {"role": "user", "parts": [{"type": "text", "text": "hello"}]}
    assert call["author"] == "Answerer"
    assert call["content"]["parts"][0]["type"] == "function_call"
    assert call["content"]["parts"][0]["args"] == {"city": "Oslo"}
    assert response["content"]["parts"][0]["response"] == {"city": "Oslo", "forecast": "sunny"}
    assert answer["is_final"] is True and answer["partial"] is False
    assert answer["text"] == "Done."
    for event in (user, call, response, answer):
        assert {"id", "invocation_id", "timestamp", "actions", "schema_version"} <= set(event)
        assert "provider_metadata" not in event
    assert frames[4]["data"] == {"type": "completed", "text": "Done."}


def test_a_paused_runs_terminal_carries_the_pause(dev_server: DevServer) -> None:
    class Publish(adk.Tool):
        name = "publish"
        description = "Publish the release."
        parameters = {"type": "object", "properties": {}}
        require_confirmation = True

        def execute(self, args: dict[str, Any], ctx: Any) -> dict[str, Any]:
            return {"published": True}

    adk.spawn_agent(
        "Releaser",
        {"provider": "scripted", "script": [{"tool_calls": [{"name": "publish"}]}, "Done."]},
        tools=[Publish()],
    )
    run_id = start(dev_server, "Releaser")
    assert isinstance(adk.runs.wait(run_id, timeout=WAIT), adk.Paused)

    terminal = parse(stream(dev_server, run_id))[-1]

    assert terminal["event"] == "terminal"
    assert terminal["data"]["type"] == "paused"
    assert terminal["data"]["pause"]["type"] == "tool_confirmation"
    assert terminal["data"]["pause"]["tool_name"] == "publish"
    pause = terminal["data"]["event"]["actions"]["pause"]
    assert pause["details"]["type"] == "tool_confirmation"


def test_a_trailing_slash_is_never_redirected(dev_server: DevServer) -> None:
    """The router matches a path as sent (``redirect_slashes`` is off): an events path
    with a trailing slash is an empty run segment (400), another unknown path a 404."""
    answering()
    run_id = start(dev_server, "Answerer")
    client = dev_server.client
    events = client.get(f"/dev/v1/runs/{run_id}/events/", follow_redirects=False)
    assert events.status_code == 400 and events.json()["error"]["code"] == "invalid_run_id"
    for path in ("/dev/v1/agents/", "/dev/v1/diagnostics/", f"/dev/v1/runs/{run_id}/more"):
        response = client.get(path, follow_redirects=False)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "not_found"
    adk.runs.wait(run_id, timeout=WAIT)


# -- reconnect with Last-Event-ID ------------------------------------------------------------


def test_reconnect_resumes_after_the_cursor_without_gap_or_duplicate() -> None:
    """Follows adk_dev_http_test: sse_replay_case."""
    with server_with(sse_max_events=2) as capped:
        answering()
        run_id = start(capped, "Answerer")
        adk.runs.wait(run_id, timeout=WAIT)
        first = parse(stream(capped, run_id))
        assert ids(first) == [1, 2]
        assert all(frame["event"] == "event" for frame in first)

        tail = parse(stream(capped, run_id, {"last-event-id": "2"}))
        assert ids(tail) == [3, 4]

        again = parse(stream(capped, run_id, {"last-event-id": "1"}))
        assert ids(again) == [2, 3]
        assert again[0]["data"] == first[1]["data"]

        last = parse(stream(capped, run_id, {"last-event-id": "4"}))
        assert ids(last) == [5] and last[0]["event"] == "terminal"

        assert stream(capped, run_id, {"last-event-id": "5"}) == ""


def test_the_cursor_is_read_from_the_header_only(dev_server: DevServer) -> None:
    answering()
    run_id = start(dev_server, "Answerer")
    adk.runs.wait(run_id, timeout=WAIT)
    response = dev_server.client.get(
        f"/dev/v1/runs/{run_id}/events", params={"lastEventId": "3", "last-event-id": "3"}
    )
    assert ids(parse(response.text)) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("value", ["-1", "abc", "1.5", "1e3", "9" * 30, "+1"])
def test_an_invalid_last_event_id_is_refused(dev_server: DevServer, value: str) -> None:
    answering()
    run_id = start(dev_server, "Answerer")
    response = dev_server.client.get(
        f"/dev/v1/runs/{run_id}/events", headers={"last-event-id": value}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_last_event_id"


def test_a_cursor_past_the_run_is_refused(dev_server: DevServer) -> None:
    """Follows adk_dev_http_test: sse_replay_gap_case (the cursor-ahead half)."""
    answering()
    run_id = start(dev_server, "Answerer")
    adk.runs.wait(run_id, timeout=WAIT)
    response = dev_server.client.get(
        f"/dev/v1/runs/{run_id}/events", headers={"last-event-id": "99"}
    )
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "run_event_cursor_ahead"
    assert error["details"] == {"after_sequence": 99, "latest_sequence": 5}


def test_an_unknown_run_has_no_stream(dev_server: DevServer) -> None:
    response = dev_server.client.get("/dev/v1/runs/run-missing/events")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "run_not_found"


def test_a_head_request_holds_no_subscription(dev_server: DevServer, gate: Gate) -> None:
    gated(gate)
    run_id = start(dev_server, "Gated")
    response = dev_server.client.head(f"/dev/v1/runs/{run_id}/events")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert status(dev_server, run_id)["subscriber_count"] == 0
    assert dev_server.client.head("/dev/v1/runs/run-missing/events").status_code == 404


# -- the replay window -----------------------------------------------------------------------


def test_a_cursor_older_than_the_window_is_a_409_before_streaming() -> None:
    """Follows adk_dev_http_test: sse_replay_gap_case."""
    with server_with(run_max_buffered_events=1) as server:
        answering()
        run_id = start(server, "Answerer")
        adk.runs.wait(run_id, timeout=WAIT)

        response = server.client.get(f"/dev/v1/runs/{run_id}/events")

        assert response.status_code == 409
        assert response.headers["content-type"].startswith("application/json")
        error = response.json()["error"]
        assert error["code"] == "run_event_replay_gap"
        assert error["details"] == {
            "reason": "replay_gap",
            "after_sequence": 0,
            "oldest_available_sequence": 4,
            "latest_sequence": 4,
            "terminal": True,
        }
        inside = parse(stream(server, run_id, {"last-event-id": "3"}))
        assert ids(inside) == [4, 5]


def test_an_overrun_after_streaming_started_is_a_replay_gap_frame(
    gate: Gate, hold: Callable[..., Held]
) -> None:
    """Item 2 is written, and its acknowledgement held until the run has gone past the
    replay window (one item: 3 is evicted by 4), so the ack finds the next item gone:
    one ``replay_gap`` frame, then a clean close. No timing: the test decides when the
    ack goes."""
    ack = hold("ack_async")
    with server_with(run_max_buffered_events=1) as server:
        run_id = held_run(server, gate)
        url = f"/dev/v1/runs/{run_id}/events"
        with server.client.stream("GET", url, headers={"last-event-id": "1"}) as response:
            assert response.status_code == 200
            assert ack.entered.wait(WAIT)  # frame 2 is out; its ack waits
            finish(gate, run_id)
            assert adk.runs.status(run_id)["oldest_available_sequence"] == 4
            ack.released.set()
            frames = parse(response.read().decode())  # ends: a clean close
        wait_for_subscribers(run_id, 0)
        again = server.client.get(url, headers={"last-event-id": "2"})

    assert ids(frames) == [2] and frames[0]["event"] == "event"
    gap = frames[-1]
    assert gap["event"] == "replay_gap" and "id" not in gap
    assert gap["data"] == {
        "reason": "replay_gap",
        "after_sequence": 2,
        "oldest_available_sequence": 4,
        "latest_sequence": 4,
        "terminal": True,
    }
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "run_event_replay_gap"


# -- per-connection bounds -------------------------------------------------------------------


def test_max_bytes_closes_cleanly_and_reconnects_continue() -> None:
    # each frame of this run is well under 1,000 bytes, all five together well over
    with server_with(sse_max_bytes=1000) as capped:
        answering()
        run_id = start(capped, "Answerer")
        adk.runs.wait(run_id, timeout=WAIT)
        seen: list[int] = []
        bodies: list[str] = []
        while not seen or seen[-1] != 5:
            cursor = {"last-event-id": str(seen[-1])} if seen else {}
            bodies.append(stream(capped, run_id, cursor))
            seen += ids(parse(bodies[-1]))
            assert len(bodies) <= 5
    assert seen == [1, 2, 3, 4, 5]
    assert len(bodies) > 1
    assert all(len(body.encode()) <= 1000 for body in bodies)


def test_a_frame_over_max_bytes_is_never_sent_and_the_run_goes_on(gate: Gate) -> None:
    """Follows adk_dev_http_test: sse_byte_limit_closes_without_cancelling_case."""
    with server_with(sse_max_bytes=1) as capped:
        run_id = held_run(capped, gate)
        assert stream(capped, run_id) == ""
        assert status(capped, run_id)["state"] == "running"
        finish(gate, run_id)


def test_max_duration_closes_with_heartbeats_and_the_run_goes_on(gate: Gate) -> None:
    """Follows adk_dev_http_test: sse_duration_limit_closes_without_cancelling_case."""
    with server_with(sse_max_duration=0.5, sse_heartbeat=0.05) as short:
        run_id = held_run(short, gate)
        frames = parse(stream(short, run_id))
        assert ids(frames) == [1, 2]
        assert {"comment": "heartbeat"} in frames
        wait_for_subscribers(run_id, 0)
        assert status(short, run_id)["state"] == "running"
    finish(gate, run_id)


def test_a_disconnect_mid_stream_keeps_the_run(dev_server: DevServer, gate: Gate) -> None:
    """Follows adk_dev_http_test: sse_detach_case."""
    run_id = held_run(dev_server, gate)
    url = f"/dev/v1/runs/{run_id}/events"
    with (
        httpx.Client(base_url=dev_server.url, headers=dev_server.client.headers) as client,
        client.stream("GET", url) as response,
    ):
        lines = response.iter_lines()
        assert next(lines) == "id: 1"
        assert status(dev_server, run_id)["subscriber_count"] == 1
    wait_for_subscribers(run_id, 0)
    assert status(dev_server, run_id)["state"] == "running"
    finish(gate, run_id)
    assert ids(parse(stream(dev_server, run_id)))[-1] == 5


def test_a_live_stream_follows_the_run_to_its_terminal(dev_server: DevServer, gate: Gate) -> None:
    run_id = held_run(dev_server, gate)
    with dev_server.client.stream("GET", f"/dev/v1/runs/{run_id}/events") as response:
        lines = response.iter_lines()
        assert next(lines) == "id: 1"
        gate.opened.set()
        frames = parse("id: 1\n" + "\n".join(lines))
    assert ids(frames) == [1, 2, 3, 4, 5]
    assert frames[-1]["data"] == {"type": "completed", "text": "Opened."}


def test_a_disconnect_while_a_frame_is_in_flight_releases_the_subscription(gate: Gate) -> None:
    """The client goes away without reading, most likely while the 8 MB frame of item 2
    is still being written: wherever the stream was, the subscription ends with the
    response (not whenever its body is garbage-collected), and the run goes on."""
    blob = "x" * 1_000_000
    calls = [{"name": "gate", "args": {"blob": blob}, "id": f"call-{n}"} for n in range(8)]
    with server_with(sse_max_bytes=16 << 20) as server:
        run_id = held_run(server, gate, first={"tool_calls": calls})
        with (
            httpx.Client(base_url=server.url, headers=server.client.headers) as client,
            client.stream("GET", f"/dev/v1/runs/{run_id}/events") as response,
        ):
            assert response.status_code == 200
            wait_for_subscribers(run_id, 1)
        wait_for_subscribers(run_id, 0)
        assert adk.runs.status(run_id)["state"] == "running"  # never cancelled by it
    finish(gate, run_id)


# -- the drain -------------------------------------------------------------------------------


def test_the_drain_ends_a_run_stream_cleanly_and_keeps_the_run(gate: Gate) -> None:
    with server_with() as server:
        run_id = held_run(server, gate)
        with server.client.stream("GET", f"/dev/v1/runs/{run_id}/events") as response:
            lines = response.iter_lines()
            seen = [next(lines) for _ in range(6)]  # frames 1 and 2 (id, event, data lines)
            assert seen[0] == "id: 1" and "id: 2" in seen
            started = time.monotonic()
            server.state.start_draining()
            rest = list(lines)  # the body ends (a complete chunked body, no read timeout)
            assert time.monotonic() - started < 5.0
        assert ids(parse("\n".join(rest))) == []
        wait_for_subscribers(run_id, 0)
        assert adk.runs.status(run_id)["state"] == "running"
    finish(gate, run_id)


# -- the event loop is never blocked ---------------------------------------------------------


def test_a_held_ack_does_not_block_the_event_loop(
    dev_server: DevServer, gate: Gate, hold: Callable[..., Held]
) -> None:
    """While the acknowledgement of item 1 waits in the run's stream, held busy, the
    daemon still answers other requests: the ack is awaited, and no thread waits."""
    ack = hold("ack_async", busy=True)
    run_id = held_run(dev_server, gate)
    with dev_server.client.stream("GET", f"/dev/v1/runs/{run_id}/events") as response:
        lines = response.iter_lines()
        assert next(lines) == "id: 1"
        assert ack.entered.wait(WAIT)
        assert answers_in_time(dev_server)
        assert not control_threads()
        ack.released.set()
        gate.opened.set()
        frames = parse("id: 1\n" + "\n".join(lines))
    assert ids(frames) == [1, 2, 3, 4, 5]


def test_a_held_subscribe_does_not_block_the_event_loop(
    dev_server: DevServer, gate: Gate, hold: Callable[..., Held]
) -> None:
    subscribe = hold("subscribe_async", busy=True)
    run_id = held_run(dev_server, gate)
    bodies: list[str] = []
    reader = threading.Thread(target=lambda: bodies.append(stream(dev_server, run_id)))
    reader.start()
    try:
        assert subscribe.entered.wait(WAIT)
        assert answers_in_time(dev_server)
        assert not control_threads()
    finally:
        subscribe.released.set()
        gate.opened.set()
        reader.join(WAIT)
    assert ids(parse(bodies[0])) == [1, 2, 3, 4, 5]


# -- items larger than a connection may carry ------------------------------------------------


def test_an_item_larger_than_max_bytes_is_announced_and_the_stream_goes_on() -> None:
    """Frames 2 (a call with 5,000 bytes of arguments), 4 (a 5,000-character answer)
    and the terminal (the same answer) are each larger than a connection may carry:
    they are announced in their place, with their ids, so reconnecting moves on."""

    @adk.tool
    def lookup(city: str) -> dict[str, str]:
        """Look a city up."""
        return {"forecast": "sunny"}

    script = [{"tool_calls": [{"name": "lookup", "args": {"city": "x" * 5000}}]}, "y" * 5000]
    adk.spawn_agent("Wordy", {"provider": "scripted", "script": script}, tools=[lookup])
    with server_with(sse_max_bytes=3000) as capped:
        run_id = start(capped, "Wordy")
        adk.runs.wait(run_id, timeout=WAIT)
        frames: list[dict[str, Any]] = []
        bodies = 0
        while not frames or frames[-1].get("event") != "terminal":
            cursor = {"last-event-id": frames[-1]["id"]} if frames else {}
            body = stream(capped, run_id, cursor)
            assert len(body.encode()) <= 3000
            frames += parse(body)
            bodies += 1
            assert bodies <= 5, "the stream does not move past an item that never fits"
    assert ids(frames) == [1, 2, 3, 4, 5]
    kinds = [frame["event"] for frame in frames]
    assert kinds == ["event", "event_too_large", "event", "event_too_large", "terminal"]
    for frame in (frames[1], frames[3]):
        data = frame["data"]
        assert data["reason"] == "event_too_large" and data["sequence"] == int(frame["id"])
        assert data["bytes"] > 3000 and data["max_bytes"] == 3000
    terminal = frames[4]["data"]
    assert terminal["type"] == "completed" and terminal["data_omitted"] is True
    assert terminal["bytes"] > 3000 and terminal["max_bytes"] == 3000
    assert "text" not in terminal
