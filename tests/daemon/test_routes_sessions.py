"""/dev/v1/sessions and /dev/v1/context over real HTTP."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import adk_actors as adk
from adk_actors.daemon.listener import stop_listener
from adk_actors.events import Event
from adk_actors.sessions.query import MAX_PAGE, SessionPage
from providers import content
from providers.content import Content, FunctionCallPart, TextPart
from providers.errors import AdkError
from tests.daemon.conftest import DevServer, start_dev_server

WAIT = 30.0


@contextmanager
def server_with(**options: Any) -> Iterator[DevServer]:
    server, listener = start_dev_server(**options)
    try:
        yield server
    finally:
        server.client.close()
        stop_listener(listener)


def error_code(response: Any) -> str:
    code: str = response.json()["error"]["code"]
    return code


def said(author: str, text: str) -> Event:
    return Event.new(
        author, "inv-1", Content("user" if author == "user" else "model", (TextPart(text),))
    )


# -- list, create, inspect, state, delete ----------------------------------------------------


def test_session_lifecycle_is_scoped_idempotent_and_bounded() -> None:
    """Follows adk_dev_http_test: session_lifecycle_case."""
    with server_with(max_session_results=2) as server:
        client = server.client
        base = "/dev/v1/sessions/lifecycle-app/owner"
        for session_id in ("session-a", "session-b", "session-c"):
            created = client.post(base, json={"session_id": session_id})
            assert created.status_code == 201
            assert created.json()["id"] == session_id
            assert created.json()["state"] == {} and created.json()["events"] == []

        client.post(f"{base}/session-a/state", json={"state_delta": {"kept": 1}})
        again = client.post(base, json={"session_id": "session-a"})
        assert again.status_code == 200
        assert again.json()["state"] == {"kept": 1}  # creating never overwrites

        refused = client.post(
            base, json={"session_id": "x", "state": {"access_token": "never-store-me"}}
        )
        assert refused.status_code == 400
        assert error_code(refused) == "invalid_session_request"
        assert "never-store-me" not in refused.text

        listed = client.get(base).json()
        assert listed["schema_version"] == 1
        assert (listed["app_name"], listed["user_id"]) == ("lifecycle-app", "owner")
        assert listed["total"] == 3 and listed["truncated"] is True
        assert [row["id"] for row in listed["sessions"]] == ["session-a", "session-c"]
        assert set(listed["sessions"][0]) == {"id", "timestamp"}
        assert client.get("/dev/v1/sessions/lifecycle-app/other").json()["sessions"] == []

        path = f"{base}/session-b"
        updated = client.post(f"{path}/state", json={"state_delta": {"draft": "ready"}})
        assert updated.status_code == 200
        assert updated.json()["state"] == {"draft": "ready"}
        assert client.get(path).json()["state"] == {"draft": "ready"}

        deleted = client.delete(path)
        assert deleted.status_code == 200
        assert deleted.json() == {"session_id": "session-b", "deleted": True}
        gone = client.delete(path)
        assert gone.status_code == 404 and error_code(gone) == "session_not_found"
        assert client.get(path).status_code == 404


def test_listing_all_of_a_few_sessions_is_not_truncated(dev_server: DevServer) -> None:
    for session_id in ("one", "two"):
        dev_server.state.sessions.create_session("app", "u", session_id)
    listed = dev_server.client.get("/dev/v1/sessions/app/u").json()
    assert listed["total"] == 2 and listed["truncated"] is False
    assert [row["id"] for row in listed["sessions"]] == ["two", "one"]


def many_sessions(service: Any, count: int, app: str = "app", user: str = "u") -> list[str]:
    """`count` sessions of one user; their ids, newest first."""
    ids = [f"s{n:05d}" for n in range(count)]
    for session_id in ids:
        service.create_session(app, user, session_id)
    return ids[::-1]


class Churning(adk.sessions.InMemorySessionService):
    """Sessions that change between any two pages of a listing (as while a run writes
    its events): every page read with a cursor finds the data changed since."""

    def query_sessions(
        self, app_name: str, user_id: str, limit: int = 50, cursor: str | None = None
    ) -> SessionPage:
        if cursor is not None:
            self.update_state(app_name, user_id, "s00000", {"touched": cursor[-8:]})
        return super().query_sessions(app_name, user_id, limit, cursor)


class Broken(adk.sessions.InMemorySessionService):
    def query_sessions(self, *args: Any, **kwargs: Any) -> SessionPage:
        raise AdkError("unavailable", "the store is gone")


def test_a_long_list_is_one_bounded_page_and_an_exact_total() -> None:
    with server_with(max_session_results=7) as server:
        newest = many_sessions(server.state.sessions, MAX_PAGE + 150)
        response = server.client.get("/dev/v1/sessions/app/u")
    assert response.status_code == 200
    listed = response.json()
    assert [row["id"] for row in listed["sessions"]] == newest[:7]
    assert listed["total"] == MAX_PAGE + 150
    assert listed["total_exact"] is True and listed["truncated"] is True


def test_a_long_list_at_the_default_bound(dev_server: DevServer) -> None:
    newest = many_sessions(dev_server.state.sessions, MAX_PAGE + 1)
    listed = dev_server.client.get("/dev/v1/sessions/app/u").json()
    assert len(listed["sessions"]) == dev_server.state.settings.max_session_results == 100
    assert [row["id"] for row in listed["sessions"]] == newest[:100]
    assert (listed["total"], listed["total_exact"], listed["truncated"]) == (501, True, True)


def test_a_list_of_sessions_that_keep_changing_is_answered_not_refused() -> None:
    """More than a page of sessions, changing while they are counted: the pages after
    the first always go stale, and the answer is still the newest page, with a count
    that says it is not exact."""
    service = Churning()
    with server_with(sessions=service, max_session_results=5) as server:
        many_sessions(service, MAX_PAGE + 20)
        response = server.client.get("/dev/v1/sessions/app/u")
    assert response.status_code == 200, response.text
    listed = response.json()
    assert len(listed["sessions"]) == 5
    assert listed["sessions"][0]["id"] == "s00000"  # touched last: the newest
    assert listed["total"] >= MAX_PAGE and listed["total_exact"] is False
    assert listed["truncated"] is True


def test_a_failing_session_service_is_a_session_error() -> None:
    with server_with(sessions=Broken()) as server:
        response = server.client.get("/dev/v1/sessions/app/u")
    assert response.status_code == 503
    assert error_code(response) == "session_service_unavailable"
    assert response.headers["retry-after"] == "1"


def test_inspection_is_scope_isolated_and_redacted(dev_server: DevServer) -> None:
    """Follows adk_dev_http_test: session_isolation_case."""
    sessions = dev_server.state.sessions
    sessions.create_session(
        "scope-app", "alice", "shared", {"profile": "alice-only", "client_secret": "hush-hush"}
    )
    sessions.create_session("scope-app", "bob", "shared", {"profile": "bob-only"})

    alice = dev_server.client.get("/dev/v1/sessions/scope-app/alice/shared")
    bob = dev_server.client.get("/dev/v1/sessions/scope-app/bob/shared")
    mallory = dev_server.client.get("/dev/v1/sessions/scope-app/mallory/shared")

    assert alice.status_code == 200
    assert alice.json()["state"] == {"profile": "alice-only", "client_secret": "[redacted]"}
    assert "hush-hush" not in alice.text and "bob-only" not in alice.text
    assert bob.json()["state"] == {"profile": "bob-only"}
    assert mallory.status_code == 404 and error_code(mallory) == "session_not_found"


def test_inspection_shows_the_newest_events_within_the_bound() -> None:
    with server_with(max_session_results=2) as server:
        sessions = server.state.sessions
        sessions.create_session("app", "u", "s")
        for text in ("first", "second", "third"):
            sessions.add_event("app", "u", "s", said("user", text))
        body = server.client.get("/dev/v1/sessions/app/u/s").json()
    assert [event["text"] for event in body["events"]] == ["second", "third"]
    assert body["event_count"] == 3 and body["events_truncated"] is True
    assert set(body) == {
        "id",
        "app_name",
        "user_id",
        "state",
        "events",
        "event_count",
        "events_truncated",
        "timestamp",
    }
    assert body["events"][0]["author"] == "user"
    assert body["events"][0]["content"]["parts"] == [{"type": "text", "text": "second"}]


def test_a_run_shows_up_in_its_session(dev_server: DevServer) -> None:
    adk.spawn_agent("Answerer", {"provider": "scripted", "script": ["Done."]})
    start = {
        "agent_name": "Answerer",
        "app_name": "app",
        "user_id": "u",
        "session_id": "chat",
        "message": "hello",
    }
    run_id = dev_server.client.post("/dev/v1/runs", json=start).json()["run_id"]
    adk.runs.wait(run_id, timeout=WAIT)
    session = dev_server.client.get("/dev/v1/sessions/app/u/chat").json()
    assert [(e["author"], e["text"]) for e in session["events"]] == [
        ("user", "hello"),
        ("Answerer", "Done."),
    ]
    assert not any(key.startswith("_adk:") for key in session["state"])


def test_events_show_no_media_bytes_signatures_or_credentials(dev_server: DevServer) -> None:
    sessions = dev_server.state.sessions
    sessions.create_session("app", "u", "s")
    parts = (
        TextPart("look", thought_signature="PRIVATE_SIGNATURE"),
        content.inline_data("image/png", b"\x89PNG-secret-pixels"),
        FunctionCallPart("lookup", {"city": "Oslo", "api_key": "sk-never-shown"}, id="c1"),
    )
    sessions.add_event("app", "u", "s", Event.new("Agent", "inv-1", Content("model", parts)))
    response = dev_server.client.get("/dev/v1/sessions/app/u/s")
    shown = response.json()["events"][0]["content"]["parts"]
    assert shown[0] == {"type": "text", "text": "look"}
    assert shown[1] == {
        "type": "inline_data",
        "mime_type": "image/png",
        "bytes": len(b"\x89PNG-secret-pixels"),
        "data_omitted": True,
    }
    assert shown[2]["name"] == "lookup" and shown[2]["args"]["city"] == "Oslo"
    for private in ("PRIVATE_SIGNATURE", "sk-never-shown", "provider_metadata"):
        assert private not in response.text


@pytest.mark.parametrize(
    "delta",
    [
        {"access_token": "never-store-this-token"},
        {"profile": {"nested": {"password": "never-store-this-token"}}},
        {"note": "Bearer abcdefghijklmnopqrstuvwxyz0123456789never"},
        {"_adk:paused:inv-1": {"forged": True}},
        {"_adk:open:inv-1": "forged"},
    ],
)
def test_secret_and_runtime_state_keys_are_refused(
    dev_server: DevServer, delta: dict[str, Any]
) -> None:
    dev_server.state.sessions.create_session("app", "u", "s")
    response = dev_server.client.post("/dev/v1/sessions/app/u/s/state", json={"state_delta": delta})
    assert response.status_code == 400
    assert error_code(response) == "forbidden_state_key"
    assert "never" not in response.text and "forged" not in response.text
    assert dev_server.state.sessions.get_session("app", "u", "s").state == {}


@pytest.mark.parametrize(
    "body",
    [{}, {"state_delta": {}}, {"state_delta": ["x"]}, {"state_delta": {"a": 1}, "more": 1}],
)
def test_a_state_request_holds_one_non_empty_delta(
    dev_server: DevServer, body: dict[str, Any]
) -> None:
    dev_server.state.sessions.create_session("app", "u", "s")
    response = dev_server.client.post("/dev/v1/sessions/app/u/s/state", json=body)
    assert response.status_code == 400
    assert error_code(response) == "invalid_state_request"


def test_state_of_a_missing_session_is_404(dev_server: DevServer) -> None:
    response = dev_server.client.post(
        "/dev/v1/sessions/app/u/missing/state", json={"state_delta": {"a": 1}}
    )
    assert response.status_code == 404
    assert error_code(response) == "session_not_found"


@pytest.mark.parametrize(
    "session_id", ["", 7, "tab\there", "x" * 200, None, ".", "..", "x/y", "/", "a/../b"]
)
def test_a_created_session_id_is_checked(dev_server: DevServer, session_id: Any) -> None:
    response = dev_server.client.post("/dev/v1/sessions/app/u", json={"session_id": session_id})
    assert response.status_code == 400
    assert error_code(response) == "invalid_session_id"


@pytest.mark.parametrize(
    "path",
    [
        "/dev/v1/sessions/app/%01user",
        "/dev/v1/sessions/app/u/%7Fs",
        f"/dev/v1/sessions/{'a' * 129}/u",
        "/dev/v1/sessions/app/u/%01s/state",
        "/dev/v1/context/app/%0Au/s",
    ],
)
def test_path_ids_are_checked(dev_server: DevServer, path: str) -> None:
    method = "POST" if path.endswith("/state") else "GET"
    response = dev_server.client.request(method, path, json={"state_delta": {"a": 1}})
    assert response.status_code == 400
    assert error_code(response) == "invalid_path_parameter"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/dev/v1/sessions/app/u/%2E%2E"),
        ("DELETE", "/dev/v1/sessions/app/u/%2E"),
        ("GET", "/dev/v1/sessions/%2E%2E/u"),
        ("POST", "/dev/v1/sessions/app/%2E"),
        ("POST", "/dev/v1/sessions/app/u/%2E%2E/state"),
        ("GET", "/dev/v1/context/app/%2E%2E/s"),
        ("GET", "/dev/v1/sessions/app//s"),
        ("DELETE", "/dev/v1/sessions/app/u/"),
        ("GET", "/dev/v1/sessions/"),
        ("POST", "/dev/v1/sessions/app/u//state"),
        ("GET", "/dev/v1/context/app/u/"),
        ("GET", "/dev/v1/sessions/app/%2E/s/state"),
    ],
)
def test_dot_and_empty_path_segments_are_refused(
    dev_server: DevServer, method: str, path: str
) -> None:
    """``.``, ``..`` and empty segments never name a scope: 400, never a session named
    so, a redirect, or a store call."""
    dev_server.state.sessions.create_session("app", "u", "s")
    body = {"state_delta": {"a": 1}} if path.endswith("/state") else {"session_id": "s"}
    response = dev_server.client.request(method, path, json=body, follow_redirects=False)
    assert response.status_code == 400, (path, response.text)
    assert error_code(response) == "invalid_path_parameter"
    assert dev_server.state.sessions.get_session("app", "u", "s").state == {}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/dev/v1/sessions/app%2Fuser/sess"),  # would be session "sess" of app/user
        ("GET", "/dev/v1/sessions/app/user%2fsess"),
        ("DELETE", "/dev/v1/sessions/app/user%2Fsess"),  # would delete session "sess"
        ("DELETE", "/dev/v1/sessions%2Fapp/user/sess"),
        ("POST", "/dev/v1/sessions/app/user%2Fsess/state"),
        ("GET", "/dev/v1/context/app/user%2Fsess/x"),
        ("GET", "/dev/v1/context/app%2Fuser/sess"),
        ("GET", "/dev/v1/sessions/app/user/x%2Fy"),
    ],
)
def test_an_encoded_slash_in_a_path_id_is_refused(
    dev_server: DevServer, method: str, path: str
) -> None:
    """The server decodes ``%2F`` before routing, so an id with a slash would be two
    segments and name another scope: 400 ``invalid_path_parameter``, whatever route its
    decoded form would reach, and nothing is read, written or deleted."""
    dev_server.state.sessions.create_session("app", "user", "sess")
    body = {"state_delta": {"a": 1}} if path.endswith("/state") else None
    response = dev_server.client.request(method, path, json=body)
    assert response.status_code == 400, (path, response.text)
    assert error_code(response) == "invalid_path_parameter"
    session = dev_server.state.sessions.get_session("app", "user", "sess")
    assert session.state == {}


def test_a_slash_id_is_never_created_so_never_unreachable(dev_server: DevServer) -> None:
    """Review M1: ``x/y`` was created from the body and then no path could name it (the
    inspect and delete of ``x%2Fy`` reached ``.../x/y``: 404)."""
    created = dev_server.client.post("/dev/v1/sessions/app/user", json={"session_id": "x/y"})
    assert created.status_code == 400 and error_code(created) == "invalid_session_id"
    listed = dev_server.client.get("/dev/v1/sessions/app/user").json()
    assert listed["sessions"] == []


def test_other_unknown_session_paths_keep_their_404_and_405(dev_server: DevServer) -> None:
    extra = dev_server.client.get("/dev/v1/sessions/app/u/s/extra")
    assert extra.status_code == 404 and error_code(extra) == "not_found"
    wrong = dev_server.client.put("/dev/v1/sessions/app/u")
    assert wrong.status_code == 405 and error_code(wrong) == "method_not_allowed"


def test_path_ids_are_bounded_by_max_field_bytes() -> None:
    with server_with(max_field_bytes=8) as server:
        response = server.client.get("/dev/v1/sessions/app/user-name-too-long")
        assert response.status_code == 400
        assert error_code(response) == "invalid_path_parameter"


def test_session_bodies_are_json(dev_server: DevServer) -> None:
    response = dev_server.client.post(
        "/dev/v1/sessions/app/u", content=b"session_id=x", headers={"content-type": "text/plain"}
    )
    assert response.status_code == 415
    wrong = dev_server.client.put("/dev/v1/sessions/app/u/s")
    assert wrong.status_code == 405 and error_code(wrong) == "method_not_allowed"


# -- context ---------------------------------------------------------------------------------


def test_context_counts_and_fingerprint_without_content(dev_server: DevServer) -> None:
    """Follows adk_dev_v05_http_test: diagnostics_and_context_case."""
    sessions = dev_server.state.sessions
    sessions.create_session("app", "u", "s", {"password": "context-secret-must-not-appear"})
    sessions.add_event("app", "u", "s", said("user", "context-content-must-not-appear"))
    sessions.add_event("app", "u", "s", said("Answerer", "more content"))

    response = dev_server.client.get("/dev/v1/context/app/u/s")

    assert response.status_code == 200
    body = response.json()
    assert body["schema_version"] == 1
    assert body["scope"] == {
        "type": "session",
        "app_name": "app",
        "user_id": "u",
        "session_id": "s",
    }
    context = body["context"]
    assert context["input_events"] == 2 and context["output_events"] == 2
    assert context["dropped_events"] == 0 and context["over_budget"] is False
    assert context["bytes"] > 0 and context["estimated_tokens"] == -(-context["bytes"] // 4)
    fingerprint = context["fingerprint"]
    assert re.fullmatch("[0-9a-f]{64}", fingerprint["value"])
    assert fingerprint["algorithm"] == "sha256" and fingerprint["encoding"] == "hex"
    assert "events" not in context and "state" not in context
    assert "must-not-appear" not in response.text

    sessions.add_event("app", "u", "s", said("user", "and one more"))
    changed = dev_server.client.get("/dev/v1/context/app/u/s").json()["context"]
    assert changed["fingerprint"]["value"] != fingerprint["value"]


def test_context_follows_the_daemons_context_policy() -> None:
    policy = {"max_bytes": 120, "overflow": "truncate"}
    with server_with(runner_options={"context_policy": policy}) as server:
        sessions = server.state.sessions
        sessions.create_session("app", "u", "s")
        for n in range(6):
            sessions.add_event("app", "u", "s", said("user", f"message number {n} " * 3))
        context = server.client.get("/dev/v1/context/app/u/s").json()["context"]
        diagnostics = server.client.get("/dev/v1/diagnostics").json()
    assert context["input_events"] == 6
    assert 0 < context["output_events"] < 6
    assert context["dropped_events"] == 6 - context["output_events"]
    assert context["bytes"] <= 120 and context["overflow"] == "truncate"
    assert diagnostics["context"]["policy"]["max_bytes"] == 120


def test_context_over_an_error_budget_is_reported() -> None:
    with server_with(runner_options={"context_policy": {"max_bytes": 50}}) as server:
        sessions = server.state.sessions
        sessions.create_session("app", "u", "s")
        sessions.add_event("app", "u", "s", said("user", "a history well over fifty bytes " * 3))
        context = server.client.get("/dev/v1/context/app/u/s").json()["context"]
    assert context["over_budget"] is True and context["overflow"] == "error"
    assert context["output_events"] == 1


def test_context_of_a_missing_session_is_404(dev_server: DevServer) -> None:
    response = dev_server.client.get("/dev/v1/context/app/u/missing")
    assert response.status_code == 404
    assert error_code(response) == "session_not_found"
