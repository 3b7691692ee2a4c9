"""The /dev/v1 trigger routes on a real uvicorn: submit, status, cancel, auth."""

from __future__ import annotations

import threading
import time
from typing import Any

import adk_actors as adk
from adk_actors import providers
from tests.daemon.conftest import DevServer


def error_code(response: Any) -> str:
    code: str = response.json()["error"]["code"]
    return code


def register(name: str = "inbox", delay: float = 0.0, **options: Any) -> threading.Event:
    """A trigger whose model waits `delay` s, or until the returned event is set."""
    release = threading.Event()

    def answer(history: Any, tools: Any) -> dict[str, Any]:
        if delay:
            release.wait(delay)
        return {"text": "Summarized."}

    agent = adk.spawn_agent(f"Ambient_{name}", {"provider": providers.ScriptedProvider(fn=answer)})
    runner = adk.Runner(agent, "ambient_http", adk.sessions.InMemorySessionService())
    options.setdefault("session_policy", {"mode": "per_event", "user_id": "worker"})
    adk.ambient.register_trigger(name, runner, **options)
    return release


def wait_for(check: Any, timeout: float = 5.0) -> None:
    until = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < until
        time.sleep(0.01)


def test_submit_then_status_until_completed(dev_server: DevServer) -> None:
    register()
    body = {"payload": "Summarize 42", "idempotency_key": "mail:42", "metadata": {"src": "t"}}
    answer = dev_server.client.post("/dev/v1/triggers/inbox/events", json=body)
    assert answer.status_code == 202
    ref = answer.json()["ref"]
    assert answer.json()["duplicate"] is False
    assert answer.json()["url"] == f"/dev/v1/triggers/inbox/events/{ref}"
    again = dev_server.client.post("/dev/v1/triggers/inbox/events", json=body)
    assert again.status_code == 202 and again.json() == {**answer.json(), "duplicate": True}

    def done() -> bool:
        return bool(dev_server.client.get(answer.json()["url"]).json()["state"] == "terminal")

    wait_for(done)
    view = dev_server.client.get(answer.json()["url"]).json()
    assert view["outcome"] == {"type": "completed", "output": "Summarized."}
    assert view["metadata"] == {"src": "t"} and view["attempts"] == 1
    trigger = dev_server.client.get("/dev/v1/triggers/inbox").json()
    assert (trigger["active"], trigger["queued"], trigger["submitted"]) == (0, 0, 1)
    listing = dev_server.client.get("/dev/v1/triggers").json()["triggers"]
    assert [t["name"] for t in listing] == ["inbox"]


def test_cancel_an_active_event(dev_server: DevServer) -> None:
    release = register(delay=10.0)
    try:
        answer = dev_server.client.post(
            "/dev/v1/triggers/inbox/events", json={"payload": "x", "idempotency_key": "k"}
        )
        url = answer.json()["url"]
        wait_for(lambda: dev_server.client.get(url).json()["run_id"] is not None)
        cancelled = dev_server.client.delete(url)
        assert cancelled.status_code == 202 and cancelled.json()["state"] == "cancelling"
        wait_for(lambda: dev_server.client.get(url).json()["state"] == "terminal")
        assert dev_server.client.get(url).json()["outcome"] == {
            "type": "cancelled",
            "reason": "developer_cancelled",
        }
        again = dev_server.client.delete(url)
        assert again.status_code == 409 and error_code(again) == "event_already_terminal"
    finally:
        release.set()


def test_refusals_map_to_status_codes(dev_server: DevServer) -> None:
    release = register(delay=10.0, max_concurrency=1, max_queue=0)
    try:
        post = dev_server.client.post
        missing = post(
            "/dev/v1/triggers/nope/events", json={"payload": "x", "idempotency_key": "k"}
        )
        assert missing.status_code == 404 and error_code(missing) == "trigger_not_found"
        assert error_code(dev_server.client.get("/dev/v1/triggers/nope")) == "trigger_not_found"
        for bad in (
            {"payload": "x"},
            {"payload": "", "idempotency_key": "k"},
            {"payload": "x", "idempotency_key": "k", "extra": 1},
            {"payload": "x", "idempotency_key": "k", "metadata": {"token": "s3cret"}},
        ):
            refused = post("/dev/v1/triggers/inbox/events", json=bad)
            assert refused.status_code == 400 and error_code(refused) == "invalid_ambient_event"
        assert (
            post(
                "/dev/v1/triggers/inbox/events", json={"payload": "x", "idempotency_key": "a"}
            ).status_code
            == 202
        )
        full = post("/dev/v1/triggers/inbox/events", json={"payload": "x", "idempotency_key": "b"})
        assert full.status_code == 429 and error_code(full) == "ambient_queue_full"
        unknown = dev_server.client.get("/dev/v1/triggers/inbox/events/amb-0:inbox")
        assert unknown.status_code == 404 and error_code(unknown) == "event_not_found"
        foreign = dev_server.client.get("/dev/v1/triggers/inbox/events/amb-0:other")
        assert foreign.status_code == 404 and error_code(foreign) == "event_not_found"
        not_json = post(
            "/dev/v1/triggers/inbox/events", content=b"x", headers={"content-type": "text/plain"}
        )
        assert not_json.status_code == 415
    finally:
        release.set()


def test_the_trigger_routes_need_the_token(dev_server: DevServer) -> None:
    register()
    with dev_server.anonymous() as anonymous:
        assert anonymous.get("/dev/v1/triggers").status_code == 401
        denied = anonymous.post(
            "/dev/v1/triggers/inbox/events", json={"payload": "x", "idempotency_key": "k"}
        )
        assert denied.status_code == 401
        assert anonymous.get("/dev/v1/triggers/inbox/events/amb-0:inbox").status_code == 401
    assert adk.ambient.trigger_status("inbox")["submitted"] == 0
    encoded = dev_server.client.get("/dev/v1/triggers/a%2Fb")
    assert encoded.status_code == 400


def test_event_status_bounds_the_output_it_serves(dev_server: DevServer) -> None:
    """A large output is cut to 64 KiB in the polled status, with a flag; a small one
    is served whole, flagged false."""
    big = "x" * 200_000

    def answer(history: Any, tools: Any) -> dict[str, Any]:
        return {"text": big}

    agent = adk.spawn_agent("Ambient_big", {"provider": providers.ScriptedProvider(fn=answer)})
    runner = adk.Runner(agent, "ambient_http", adk.sessions.InMemorySessionService())
    adk.ambient.register_trigger(
        "big", runner, session_policy={"mode": "per_event", "user_id": "worker"}
    )
    answer_ = dev_server.client.post(
        "/dev/v1/triggers/big/events", json={"payload": "go", "idempotency_key": "big-1"}
    )
    url = answer_.json()["url"]
    wait_for(lambda: dev_server.client.get(url).json()["state"] == "terminal")
    response = dev_server.client.get(url)
    view = response.json()
    assert view["output_truncated"] is True
    assert view["outcome"]["type"] == "completed"
    assert 60_000 <= len(view["outcome"]["output"]) <= 65_536
    assert len(response.content) < 70_000
    assert adk.ambient.wait(answer_.json()["ref"], 1) == adk.Completed(big)  # whole here

    register()
    small = dev_server.client.post(
        "/dev/v1/triggers/inbox/events", json={"payload": "go", "idempotency_key": "small-1"}
    ).json()["url"]
    wait_for(lambda: dev_server.client.get(small).json()["state"] == "terminal")
    view = dev_server.client.get(small).json()
    assert view["output_truncated"] is False and view["outcome"]["output"] == "Summarized."
