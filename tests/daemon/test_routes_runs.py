"""/dev/v1/runs: start, status, cancel and resume over real HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import adk_actors as adk
from adk_actors.daemon.listener import stop_listener
from adk_actors.daemon.routes_runs import _resume_refusal, _start_refusal
from adk_actors.daemon.views import run_refusal
from providers.errors import AdkError
from tests.daemon.conftest import DevServer, start_dev_server

WAIT = 30.0
STATUS_KEYS = {
    "run_id",
    "state",
    "outcome",
    "agent_name",
    "app_name",
    "user_id",
    "session_id",
    "invocation_id",
    "started_at",
    "finished_at",
    "event_count",
    "buffered_event_count",
    "subscriber_count",
    "latest_sequence",
    "oldest_available_sequence",
    "terminal_sequence",
    "parent_run_id",
    "resumed_to",
    "status_url",
    "events_url",
    "parent_url",
    "resumed_to_url",
}


@contextmanager
def server_with(**settings: Any) -> Iterator[DevServer]:
    server, listener = start_dev_server(**settings)
    try:
        yield server
    finally:
        server.client.close()
        stop_listener(listener)


def start_body(agent: str = "Answerer", **fields: Any) -> dict[str, Any]:
    return {
        "agent_name": agent,
        "app_name": "app",
        "user_id": "u",
        "session_id": "s",
        "message": "hello",
        **fields,
    }


def error_code(response: Any) -> str:
    code: str = response.json()["error"]["code"]
    return code


def answerer(name: str = "Answerer", text: str = "Done.") -> None:
    adk.spawn_agent(name, {"provider": "scripted", "script": [text]})


class Publish(adk.Tool):
    name = "publish"
    description = "Publish the release."
    parameters = {"type": "object", "properties": {}}
    require_confirmation = True

    def execute(self, args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"published": True}


def releaser() -> None:
    adk.spawn_agent(
        "Releaser",
        {
            "provider": "scripted",
            "script": [{"tool_calls": [{"name": "publish", "args": {}}]}, "Released."],
        },
        tools=[Publish()],
    )


@pytest.fixture
def held() -> Iterator[threading.Event]:
    """An agent ``Holder`` whose runs wait in a tool until the event is set."""
    release = threading.Event()

    @adk.tool
    def hold() -> dict[str, bool]:
        """Wait."""
        release.wait(WAIT)
        return {"held": True}

    adk.spawn_agent(
        "Holder",
        {"provider": "scripted", "script": [{"tool_calls": [{"name": "hold"}]}, "Let go."]},
        tools=[hold],
    )
    yield release
    release.set()


# -- POST /dev/v1/runs -----------------------------------------------------------------------


def test_start_answers_202_with_the_run_and_its_urls(dev_server: DevServer) -> None:
    """Follows adk_dev_http_test: run_lifecycle_case (the start)."""
    answerer()
    response = dev_server.client.post("/dev/v1/runs", json=start_body())
    assert response.status_code == 202
    body = response.json()
    run_id = body["run_id"]
    assert run_id.startswith("run-")
    assert body == {
        "run_id": run_id,
        "state": "running",
        "status_url": f"/dev/v1/runs/{run_id}",
        "events_url": f"/dev/v1/runs/{run_id}/events",
    }
    assert response.headers["location"] == f"/dev/v1/runs/{run_id}"
    assert adk.runs.wait(run_id, timeout=WAIT) == adk.Completed("Done.")
    session = dev_server.state.sessions.get_session("app", "u", "s")
    assert [event.author for event in session.events] == ["user", "Answerer"]


def test_an_unregistered_agent_is_404(dev_server: DevServer) -> None:
    response = dev_server.client.post("/dev/v1/runs", json=start_body("Nobody"))
    assert response.status_code == 404
    assert error_code(response) == "agent_not_found"


@pytest.mark.parametrize(
    "body",
    [
        {k: v for k, v in start_body().items() if k != "message"},
        start_body(extra="x"),
        start_body(message=""),
        start_body(user_id=7),
        start_body(session_id=None),
        start_body(app_name="a" * 129),
        start_body(session_id="line\nbreak"),
        start_body(agent_name=["Answerer"]),
        start_body(app_name=".."),
        start_body(user_id="."),
        start_body(session_id=".."),
        start_body(session_id="x/y"),
        start_body(user_id="/"),
        start_body(app_name="app/user"),
    ],
)
def test_start_fields_are_checked(dev_server: DevServer, body: dict[str, Any]) -> None:
    answerer()
    response = dev_server.client.post("/dev/v1/runs", json=body)
    assert response.status_code == 400
    assert error_code(response) == "invalid_request"
    assert "line\nbreak" not in response.text


def test_fields_are_bounded_by_the_settings() -> None:
    with server_with(max_field_bytes=8, max_body_bytes=256) as server:
        answerer("A")
        too_long = server.client.post("/dev/v1/runs", json=start_body("A", user_id="u" * 9))
        assert error_code(too_long) == "invalid_request"
        ok = server.client.post("/dev/v1/runs", json=start_body("A", message="m" * 100))
        assert ok.status_code == 202
        huge = server.client.post("/dev/v1/runs", json=start_body("A", message="m" * 300))
        assert huge.status_code == 413
        assert error_code(huge) == "payload_too_large"


def test_a_start_body_must_be_a_json_object(dev_server: DevServer) -> None:
    not_json = dev_server.client.post(
        "/dev/v1/runs", content=b"agent_name=x", headers={"content-type": "text/plain"}
    )
    assert not_json.status_code == 415
    assert error_code(not_json) == "unsupported_media_type"
    broken = dev_server.client.post(
        "/dev/v1/runs", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert broken.status_code == 400
    assert error_code(broken) == "invalid_json"
    listed = dev_server.client.post("/dev/v1/runs", json=[start_body()])
    assert error_code(listed) == "invalid_json"


def test_only_post_starts_a_run(dev_server: DevServer) -> None:
    response = dev_server.client.get("/dev/v1/runs")
    assert response.status_code == 405
    assert error_code(response) == "method_not_allowed"
    assert "POST" in response.headers["allow"]


# -- GET / DELETE /dev/v1/runs/{run_id} ------------------------------------------------------


def test_status_of_a_completed_run(dev_server: DevServer) -> None:
    answerer()
    run_id = dev_server.client.post("/dev/v1/runs", json=start_body()).json()["run_id"]
    adk.runs.wait(run_id, timeout=WAIT)

    status = dev_server.client.get(f"/dev/v1/runs/{run_id}").json()

    assert set(status) == STATUS_KEYS
    assert status["state"] == "completed"
    assert status["outcome"] == {"type": "completed", "text": "Done."}
    assert (status["agent_name"], status["app_name"], status["user_id"]) == ("Answerer", "app", "u")
    assert status["session_id"] == "s"
    assert status["event_count"] == status["latest_sequence"] == 2
    assert status["buffered_event_count"] == 2
    assert status["oldest_available_sequence"] == 1
    assert status["terminal_sequence"] == 3
    assert status["subscriber_count"] == 0
    assert status["finished_at"] >= status["started_at"]
    assert status["parent_run_id"] is None and status["parent_url"] is None
    assert status["resumed_to"] is None and status["resumed_to_url"] is None
    assert status["status_url"] == f"/dev/v1/runs/{run_id}"


def test_cancel_then_cancel_again(dev_server: DevServer, held: threading.Event) -> None:
    """Follows adk_dev_http_test: run_lifecycle_case."""
    run_id = dev_server.client.post("/dev/v1/runs", json=start_body("Holder")).json()["run_id"]
    running = dev_server.client.get(f"/dev/v1/runs/{run_id}").json()
    assert running["state"] == "running" and running["outcome"] is None

    cancelled = dev_server.client.delete(f"/dev/v1/runs/{run_id}")

    assert cancelled.status_code == 202
    assert cancelled.json() == {"run_id": run_id, "state": "cancelling"}
    assert adk.runs.wait(run_id, timeout=WAIT) == adk.Cancelled("developer_cancelled")
    status = dev_server.client.get(f"/dev/v1/runs/{run_id}").json()
    assert status["state"] == "cancelled"
    assert status["outcome"] == {"type": "cancelled", "reason": "developer_cancelled"}
    again = dev_server.client.delete(f"/dev/v1/runs/{run_id}")
    assert again.status_code == 409
    assert error_code(again) == "run_already_terminal"


def test_an_unknown_run_is_404(dev_server: DevServer) -> None:
    for method in ("GET", "DELETE"):
        response = dev_server.client.request(method, "/dev/v1/runs/run-nothing-here")
        assert response.status_code == 404
        assert error_code(response) == "run_not_found"


@pytest.mark.parametrize("run_id", ["bad%20id", "-leading-dash", "x" * 129, "%C3%A9t%C3%A9"])
def test_an_invalid_run_id_is_400(dev_server: DevServer, run_id: str) -> None:
    for path in (f"/dev/v1/runs/{run_id}", f"/dev/v1/runs/{run_id}/events"):
        response = dev_server.client.get(path)
        assert response.status_code == 400
        assert error_code(response) == "invalid_run_id"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/dev/v1/runs/%2E%2E"),
        ("DELETE", "/dev/v1/runs/%2E"),
        ("GET", "/dev/v1/runs/%2E%2E/events"),
        ("POST", "/dev/v1/runs/%2E/resume"),
        ("GET", "/dev/v1/runs//events"),
        ("DELETE", "/dev/v1/runs/"),
        ("POST", "/dev/v1/runs//resume"),
    ],
)
def test_dot_and_empty_run_ids_are_400(dev_server: DevServer, method: str, path: str) -> None:
    body = {"tool_response": {"confirmed": True}} if path.endswith("/resume") else None
    response = dev_server.client.request(method, path, json=body, follow_redirects=False)
    assert response.status_code == 400, (path, response.text)
    assert error_code(response) == "invalid_run_id"


def test_an_encoded_slash_never_reaches_another_run_route(dev_server: DevServer) -> None:
    """``/dev/v1/runs/RUN%2Fevents`` decodes to the run's event stream and
    ``/dev/v1/runs%2FRUN`` to the run itself: 400 ``invalid_run_id``, nothing streamed
    or cancelled."""
    entered, gate = threading.Event(), threading.Event()

    def answer(history: Any, tools: Any) -> dict[str, Any]:
        entered.set()
        gate.wait(WAIT)
        return {"text": "late"}

    adk.spawn_agent("Held", {"provider": adk.ScriptedProvider(fn=answer)})
    run_id = dev_server.client.post("/dev/v1/runs", json=start_body("Held")).json()["run_id"]
    try:
        assert entered.wait(WAIT)
        for method, path in (
            ("GET", f"/dev/v1/runs/{run_id}%2Fevents"),
            ("GET", f"/dev/v1/runs%2F{run_id}"),
            ("DELETE", f"/dev/v1/runs%2f{run_id}"),
            ("DELETE", f"/dev/v1/runs/{run_id}%2F"),
            ("POST", f"/dev/v1/runs/{run_id}%2Fresume"),
        ):
            body = {"tool_response": {"confirmed": True}} if method == "POST" else None
            response = dev_server.client.request(method, path, json=body)
            assert response.status_code == 400, (path, response.text)
            assert error_code(response) == "invalid_run_id"
            assert response.headers["content-type"] == "application/json"
        assert dev_server.client.get(f"/dev/v1/runs/{run_id}").json()["state"] == "running"
    finally:
        gate.set()
    assert isinstance(adk.runs.wait(run_id, timeout=WAIT), adk.Completed)


def test_other_unknown_run_paths_keep_their_404_and_405(dev_server: DevServer) -> None:
    extra = dev_server.client.get("/dev/v1/runs/run-x/events/more")
    assert extra.status_code == 404 and error_code(extra) == "not_found"
    wrong = dev_server.client.put("/dev/v1/runs/run-x")
    assert wrong.status_code == 405 and error_code(wrong) == "method_not_allowed"


def test_a_failed_run_shows_its_reason(dev_server: DevServer) -> None:
    adk.spawn_agent("Broken", {"provider": "scripted", "script": [{"error": "model_exploded"}]})
    run_id = dev_server.client.post("/dev/v1/runs", json=start_body("Broken")).json()["run_id"]
    assert isinstance(adk.runs.wait(run_id, timeout=WAIT), adk.Failed)
    status = dev_server.client.get(f"/dev/v1/runs/{run_id}").json()
    assert status["state"] == "failed"
    assert status["outcome"] == {"type": "failed", "reason": "model_exploded"}


# -- pause and resume ------------------------------------------------------------------------


def test_a_paused_run_resumes_over_http_and_completes(dev_server: DevServer) -> None:
    """Follows adk_dev_http_test: resume_run_case."""
    releaser()
    paused_id = dev_server.client.post("/dev/v1/runs", json=start_body("Releaser")).json()["run_id"]
    assert isinstance(adk.runs.wait(paused_id, timeout=WAIT), adk.Paused)
    paused = dev_server.client.get(f"/dev/v1/runs/{paused_id}").json()
    assert paused["state"] == "paused"
    pause = paused["outcome"]["pause"]
    assert pause["type"] == "tool_confirmation" and pause["tool_name"] == "publish"
    assert paused["outcome"]["event"]["actions"]["pause"]["reason"] == "tool_confirmation"

    resumed = dev_server.client.post(
        f"/dev/v1/runs/{paused_id}/resume", json={"tool_response": {"confirmed": True}}
    )

    assert resumed.status_code == 202
    resumed_id = resumed.json()["run_id"]
    assert resumed_id != paused_id
    assert resumed.json() == {
        "run_id": resumed_id,
        "parent_run_id": paused_id,
        "state": "running",
        "status_url": f"/dev/v1/runs/{resumed_id}",
        "events_url": f"/dev/v1/runs/{resumed_id}/events",
    }
    assert resumed.headers["location"] == f"/dev/v1/runs/{resumed_id}"
    assert adk.runs.wait(resumed_id, timeout=WAIT) == adk.Completed("Released.")
    child = dev_server.client.get(f"/dev/v1/runs/{resumed_id}").json()
    assert child["outcome"] == {"type": "completed", "text": "Released."}
    assert child["parent_run_id"] == paused_id
    assert child["parent_url"] == f"/dev/v1/runs/{paused_id}"
    parent = dev_server.client.get(f"/dev/v1/runs/{paused_id}").json()
    assert parent["resumed_to"] == resumed_id
    assert parent["resumed_to_url"] == f"/dev/v1/runs/{resumed_id}"

    again = dev_server.client.post(
        f"/dev/v1/runs/{paused_id}/resume", json={"tool_response": {"confirmed": True}}
    )
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "run_already_resumed"
    assert again.json()["error"]["resumed_run_id"] == resumed_id

    done = dev_server.client.post(
        f"/dev/v1/runs/{resumed_id}/resume", json={"tool_response": {"confirmed": True}}
    )
    assert done.status_code == 409
    assert error_code(done) == "run_not_paused"


def test_a_rejected_confirmation_completes_without_the_tool(dev_server: DevServer) -> None:
    releaser()
    paused_id = dev_server.client.post("/dev/v1/runs", json=start_body("Releaser")).json()["run_id"]
    assert isinstance(adk.runs.wait(paused_id, timeout=WAIT), adk.Paused)
    resumed = dev_server.client.post(
        f"/dev/v1/runs/{paused_id}/resume", json={"tool_response": {"confirmed": False}}
    )
    assert resumed.status_code == 202
    assert adk.runs.wait(resumed.json()["run_id"], timeout=WAIT) == adk.Completed("Released.")


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"tool_response": {"confirmed": "yes"}}, "invalid_tool_confirmation_response"),
        ({"tool_response": {"approved": True}}, "invalid_tool_confirmation_response"),
        ({"tool_response": {"confirmed": True}, "extra": 1}, "invalid_resume_request"),
        ({"response": {"confirmed": True}}, "invalid_resume_request"),
        ({}, "invalid_resume_request"),
    ],
)
def test_a_bad_resume_changes_nothing(
    dev_server: DevServer, body: dict[str, Any], code: str
) -> None:
    releaser()
    paused_id = dev_server.client.post("/dev/v1/runs", json=start_body("Releaser")).json()["run_id"]
    assert isinstance(adk.runs.wait(paused_id, timeout=WAIT), adk.Paused)
    response = dev_server.client.post(f"/dev/v1/runs/{paused_id}/resume", json=body)
    assert response.status_code == 400
    assert error_code(response) == code
    assert dev_server.client.get(f"/dev/v1/runs/{paused_id}").json()["resumed_to"] is None
    ok = dev_server.client.post(
        f"/dev/v1/runs/{paused_id}/resume", json={"tool_response": {"confirmed": True}}
    )
    assert ok.status_code == 202


def test_resuming_an_unknown_or_running_run(dev_server: DevServer, held: threading.Event) -> None:
    missing = dev_server.client.post(
        "/dev/v1/runs/run-missing/resume", json={"tool_response": {"confirmed": True}}
    )
    assert missing.status_code == 404
    assert error_code(missing) == "run_not_found"
    run_id = dev_server.client.post("/dev/v1/runs", json=start_body("Holder")).json()["run_id"]
    running = dev_server.client.post(
        f"/dev/v1/runs/{run_id}/resume", json={"tool_response": {"confirmed": True}}
    )
    assert running.status_code == 409
    assert error_code(running) == "run_not_paused"


# -- refusals of the runtime -----------------------------------------------------------------


def test_an_admission_refusal_fails_the_run_with_its_reason() -> None:
    adk.stop()
    adk.start(admission_control={"global_limit": 1})
    adk.spawn_agent("Slow", {"provider": "scripted", "script": [{"text": "late", "delay": 60}]})
    answerer("Quick")
    with server_with(runner_options={"admission_control": {}}) as server:
        slow = server.client.post("/dev/v1/runs", json=start_body("Slow")).json()["run_id"]
        for _ in range(3000):  # until it holds the one permit (its turn is open)
            if adk.runs.status(slow)["phase"] == "open":
                break
            threading.Event().wait(0.01)
        refused = server.client.post("/dev/v1/runs", json=start_body("Quick", session_id="q"))
        assert refused.status_code == 202  # admission acts inside the run
        run_id = refused.json()["run_id"]
        assert isinstance(adk.runs.wait(run_id, timeout=WAIT), adk.Failed)
        status = server.client.get(f"/dev/v1/runs/{run_id}").json()
        assert status["state"] == "failed"
        assert status["outcome"] == {
            "type": "failed",
            "reason": "admission_failed",
            "detail": "concurrency_limit_reached",
        }
        assert server.client.delete(f"/dev/v1/runs/{slow}").status_code == 202


def test_capacity_and_runtime_refusals_map_to_429_and_503() -> None:
    full = _start_refusal(AdkError("too_many_runs"))
    assert (full.status, full.code, full.headers) == (429, "too_many_runs", {"retry-after": "1"})
    down = _start_refusal(AdkError("not_started"))
    assert (down.status, down.code) == (503, "run_service_unavailable")
    other = _start_refusal(AdkError(("invocation_start_failed", "x")))
    assert (other.status, other.code) == (500, "run_start_failed")
    assert _resume_refusal(AdkError("too_many_runs")).status == 429
    assert _resume_refusal(AdkError("no_paused_invocation")).code == "run_not_paused"


def test_one_mapping_for_what_every_run_operation_shares() -> None:
    """Start, resume, status, cancel and the event stream refuse alike (`run_refusal`)."""
    for refusal in (_start_refusal, _resume_refusal, run_refusal):
        full = refusal(AdkError("too_many_runs"))
        assert (full.status, full.code, full.headers) == (
            429,
            "too_many_runs",
            {"retry-after": "1"},
        )
    assert _resume_refusal(AdkError("not_found")).code == "run_not_found"
    assert run_refusal(AdkError("not_found")).status == 404
    assert _start_refusal(AdkError("not_found")).code == "run_start_failed"
    assert run_refusal(AdkError("too_many_subscribers")).code == "too_many_subscribers"
    assert run_refusal(AdkError("anything_else")).code == "run_service_unavailable"
