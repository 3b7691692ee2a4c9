"""GET /dev/v1/runs/{run_id}/events: SSE replay, reconnect, bounds and overruns.

Real uvicorn, real httpx streams, scripted models. A run that must stay open is held
by a tool waiting on a `threading.Event` the test releases (never by a sleep).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

import adk_actors as adk
from adk_actors.daemon.listener import stop_listener
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


def status(server: DevServer, run_id: str) -> dict[str, Any]:
    response = server.client.get(f"/dev/v1/runs/{run_id}")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def wait_for_subscribers(server: DevServer, run_id: str, count: int) -> None:
    """Until the run has `count` subscribers (the server notices a disconnect by itself)."""
    for _ in range(2000):
        if status(server, run_id)["subscriber_count"] == count:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"the run never had {count} subscribers")


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


def test_an_overrun_after_streaming_started_is_a_replay_gap_frame(gate: Gate) -> None:
    """The item being written is held by a client that does not read; meanwhile the run
    moves on past the replay window, so acknowledging it finds the next item gone."""
    blob = "x" * 1_000_000  # twelve calls of 1 MB each: a 12 MB event 2
    calls = [{"name": "gate", "args": {"blob": blob}, "id": f"call-{n}"} for n in range(12)]
    gated(gate, first={"tool_calls": calls})
    with server_with(run_max_buffered_events=1, sse_max_bytes=16 << 20) as server:
        run_id = start(server, "Gated")
        assert gate.entered.wait(WAIT)
        url = f"/dev/v1/runs/{run_id}/events"
        with server.client.stream("GET", url, headers={"last-event-id": "1"}) as response:
            assert response.status_code == 200
            gate.opened.set()  # frame 2 (12 MiB) cannot all be written yet: nobody reads
            assert adk.runs.wait(run_id, timeout=WAIT) == adk.Completed("Opened.")
            frames = parse(response.read().decode())

    assert ids(frames) == [2]
    gap = frames[-1]
    assert gap["event"] == "replay_gap" and "id" not in gap
    assert gap["data"]["reason"] == "replay_gap"
    assert gap["data"]["after_sequence"] == 2
    assert gap["data"]["oldest_available_sequence"] == 4
    assert gap["data"]["terminal"] is True


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
    gated(gate)
    with server_with(sse_max_bytes=1) as capped:
        run_id = start(capped, "Gated")
        assert gate.entered.wait(WAIT)
        assert stream(capped, run_id) == ""
        assert status(capped, run_id)["state"] == "running"
        gate.opened.set()
        assert adk.runs.wait(run_id, timeout=WAIT) == adk.Completed("Opened.")


def test_max_duration_closes_with_heartbeats_and_the_run_goes_on(gate: Gate) -> None:
    """Follows adk_dev_http_test: sse_duration_limit_closes_without_cancelling_case."""
    gated(gate)
    with server_with(sse_max_duration=0.5, sse_heartbeat=0.05) as short:
        run_id = start(short, "Gated")
        assert gate.entered.wait(WAIT)
        frames = parse(stream(short, run_id))
        assert ids(frames) == [1, 2]
        assert {"comment": "heartbeat"} in frames
        wait_for_subscribers(short, run_id, 0)
        assert status(short, run_id)["state"] == "running"
    gate.opened.set()
    assert adk.runs.wait(run_id, timeout=WAIT) == adk.Completed("Opened.")


def test_a_disconnect_mid_stream_keeps_the_run(dev_server: DevServer, gate: Gate) -> None:
    """Follows adk_dev_http_test: sse_detach_case."""
    gated(gate)
    run_id = start(dev_server, "Gated")
    assert gate.entered.wait(WAIT)
    url = f"/dev/v1/runs/{run_id}/events"
    with (
        httpx.Client(base_url=dev_server.url, headers=dev_server.client.headers) as client,
        client.stream("GET", url) as response,
    ):
        lines = response.iter_lines()
        assert next(lines) == "id: 1"
        assert status(dev_server, run_id)["subscriber_count"] == 1
    wait_for_subscribers(dev_server, run_id, 0)
    assert status(dev_server, run_id)["state"] == "running"
    gate.opened.set()
    assert adk.runs.wait(run_id, timeout=WAIT) == adk.Completed("Opened.")
    assert ids(parse(stream(dev_server, run_id)))[-1] == 5


def test_a_live_stream_follows_the_run_to_its_terminal(dev_server: DevServer, gate: Gate) -> None:
    gated(gate)
    run_id = start(dev_server, "Gated")
    assert gate.entered.wait(WAIT)
    with dev_server.client.stream("GET", f"/dev/v1/runs/{run_id}/events") as response:
        lines = response.iter_lines()
        assert next(lines) == "id: 1"
        gate.opened.set()
        frames = parse("id: 1\n" + "\n".join(lines))
    assert ids(frames) == [1, 2, 3, 4, 5]
    assert frames[-1]["data"] == {"type": "completed", "text": "Opened."}
