"""The developer-API commands against a real daemon app (uvicorn on a loopback port in
this process), each command a real `adk` subprocess.

Follows adk_cli_test: successful_developer_commands_case.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

import adk_actors as adk
from adk_actors.daemon.listener import stop_listener
from examples.agent_tools import PublishRelease
from tests.cli.conftest import base_env, run_adk
from tests.daemon.conftest import TOKEN, DevServer, start_dev_server

ENV = base_env(ADK_DEV_TOKEN=TOKEN)
APP, USER = "cli-dev-app", "cli-dev-user"


@pytest.fixture
def daemon() -> Iterator[DevServer]:
    adk.start()
    server, listener = start_dev_server()
    yield server
    server.client.close()
    stop_listener(listener)
    adk.stop()


def adk_json(server: DevServer, *args: str) -> Any:
    done = run_adk(*args, "--url", server.url, "--json", env=ENV)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def start_run(server: DevServer, agent: str, session: str, message: str) -> str:
    answer = server.client.post(
        "/dev/v1/runs",
        json={
            "agent_name": agent,
            "app_name": APP,
            "user_id": USER,
            "session_id": session,
            "message": message,
        },
    )
    assert answer.status_code == 202, answer.text
    return str(answer.json()["run_id"])


def await_state(server: DevServer, run_id: str, state: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        status = adk_json(server, "inspect", "run", run_id)
        if status["state"] == state or time.monotonic() > deadline:
            assert status["state"] == state, status
            return status
        time.sleep(0.05)


def test_inspect_agents_and_diagnostics(daemon):
    adk.spawn_agent("CliServedAgent", {"provider": "scripted", "script": [{"text": "x"}]})
    agents = adk_json(daemon, "inspect", "agents")
    assert "CliServedAgent" in [entry["name"] for entry in agents["agents"]]
    human = run_adk("inspect", "agents", "--url", daemon.url, env=ENV)
    assert human.returncode == 0 and "CliServedAgent" in human.stdout
    diagnostics = adk_json(daemon, "inspect", "diagnostics")
    assert diagnostics["schema_version"] == 1


def test_session_create_state_inspect_list_and_delete(daemon):
    created = adk_json(daemon, "session", "create", APP, USER, "managed")
    assert created["id"] == "managed"
    listed = adk_json(daemon, "inspect", "sessions", APP, USER)
    assert "managed" in [entry["id"] for entry in listed["sessions"]]
    updated = adk_json(
        daemon,
        "session",
        "state",
        APP,
        USER,
        "managed",
        "--delta-json",
        '{"developer:mode":"test"}',
    )
    assert updated["state"]["developer:mode"] == "test"
    inspected = adk_json(daemon, "inspect", "session", APP, USER, "managed")
    assert inspected["state"]["developer:mode"] == "test"
    human = run_adk("inspect", "session", APP, USER, "managed", "--url", daemon.url, env=ENV)
    assert human.returncode == 0 and "developer:mode" in human.stdout
    deleted = adk_json(daemon, "session", "delete", APP, USER, "managed")
    assert deleted["deleted"] is True
    gone = run_adk(
        "inspect", "session", APP, USER, "managed", "--url", daemon.url, "--json", env=ENV
    )
    assert gone.returncode == 1
    error = json.loads(gone.stderr)
    assert error["reason"] == "developer_api_http_error"
    assert error["details"][0] == 404 and error["details"][1]["code"] == "session_not_found"


def test_inspect_a_completed_run_and_its_session(daemon):
    adk.spawn_agent(
        "CliDone", {"provider": "scripted", "script": [{"text": "CLI served response"}]}
    )
    run_id = start_run(daemon, "CliDone", "done-session", "hello")
    status = await_state(daemon, run_id, "completed")
    assert status["run_id"] == run_id and status["outcome"]["text"] == "CLI served response"
    session = adk_json(daemon, "inspect", "session", APP, USER, "done-session")
    assert session["id"] == "done-session" and session["events"]
    context = adk_json(daemon, "inspect", "context", APP, USER, "done-session")
    assert context["scope"]["session_id"] == "done-session"


def test_cancel_a_running_run(daemon):
    adk.spawn_agent("CliSlow", {"provider": "scripted", "script": [{"text": "late", "delay": 60}]})
    run_id = start_run(daemon, "CliSlow", "slow-session", "wait")
    answer = adk_json(daemon, "cancel", run_id)
    assert answer["run_id"] == run_id
    cancelled = await_state(daemon, run_id, "cancelled")
    assert cancelled["outcome"]["reason"] == "developer_cancelled"


def test_resume_a_paused_run(daemon):
    adk.spawn_agent(
        "CliResume",
        {
            "provider": "scripted",
            "script": [
                {"tool_calls": [{"name": "publish_release", "args": {"version": "3.0"}}]},
                {"text": "Release published"},
            ],
        },
        tools=[PublishRelease()],
    )
    paused_id = start_run(daemon, "CliResume", "resume-session", "publish")
    await_state(daemon, paused_id, "paused")
    refused = run_adk(
        "resume",
        paused_id,
        "--response-json",
        '{"approved": true}',
        "--url",
        daemon.url,
        "--json",
        env=ENV,
    )
    assert refused.returncode == 1
    assert json.loads(refused.stderr)["details"][0] == 400
    resumed = adk_json(daemon, "resume", paused_id, "--response-json", '{"confirmed": true}')
    resumed_id = resumed["run_id"]
    assert resumed_id != paused_id and resumed["parent_run_id"] == paused_id
    done = await_state(daemon, resumed_id, "completed")
    assert done["parent_run_id"] == paused_id
    assert done["outcome"]["text"] == "Release published"
    again = run_adk(
        "resume",
        paused_id,
        "--response-json",
        '{"confirmed": true}',
        "--url",
        daemon.url,
        "--json",
        env=ENV,
    )
    assert again.returncode == 1 and json.loads(again.stderr)["details"][0] == 409


def test_a_wrong_token_is_refused_403_forbidden(daemon):
    """A wrong bearer is 403 forbidden (the reference's adk_dev_auth)."""
    done = run_adk(
        "inspect",
        "agents",
        "--url",
        daemon.url,
        "--json",
        env=base_env(ADK_DEV_TOKEN="not-the-right-token-0123456789"),
    )
    assert done.returncode == 1
    error = json.loads(done.stderr)
    assert error["details"][0] == 403 and error["details"][1]["code"] == "forbidden"
    assert "not-the-right-token" not in done.stderr


ODD_SCOPE = ("odd?app#1", "user %2F 100%", "s?x#%2f y")
"""Ids with every character a path treats specially but ``/`` (and ``%2F`` as text)."""


def test_ids_with_reserved_characters_round_trip_through_the_daemon(daemon):
    """Review L5: each id is one segment end to end, against the real daemon (not only
    the request line a fake server saw): created, listed, read, changed, explained and
    deleted under exactly its own scope."""
    app, user, session = ODD_SCOPE
    daemon.state.sessions.create_session(app, "user", "decoy")  # a neighbouring scope
    created = adk_json(daemon, "session", "create", app, user, session)
    assert (created["app_name"], created["user_id"], created["id"]) == ODD_SCOPE
    listed = adk_json(daemon, "inspect", "sessions", app, user)
    assert (listed["app_name"], listed["user_id"]) == (app, user)
    assert [entry["id"] for entry in listed["sessions"]] == [session]
    changed = adk_json(daemon, "session", "state", *ODD_SCOPE, "--delta-json", '{"k": 1}')
    assert changed["state"] == {"k": 1}
    inspected = adk_json(daemon, "inspect", "session", *ODD_SCOPE)
    assert (inspected["id"], inspected["state"]) == (session, {"k": 1})
    context = adk_json(daemon, "inspect", "context", *ODD_SCOPE)
    assert context["scope"] == {
        "type": "session",
        "app_name": app,
        "user_id": user,
        "session_id": session,
    }
    assert adk_json(daemon, "session", "delete", *ODD_SCOPE)["deleted"] is True
    assert daemon.state.sessions.get_session(app, "user", "decoy").id == "decoy"
    gone = run_adk("inspect", "session", *ODD_SCOPE, "--url", daemon.url, "--json", env=ENV)
    assert gone.returncode == 1 and json.loads(gone.stderr)["details"][0] == 404


def test_a_slash_never_names_another_scope(daemon):
    """Review M1, both sides: ``adk inspect sessions app/user sess`` answered session
    ``sess`` of app ``app``, user ``user`` (exit 0), and ``x/y`` could be created but
    never read or deleted. The CLI refuses such an id before sending (exit 2); the
    daemon refuses it in a path (``%2F``) and in a body (400)."""
    adk_json(daemon, "session", "create", "app", "user", "sess")
    for args in (
        ("inspect", "sessions", "app/user", "sess"),
        ("session", "create", "app", "user", "x/y"),
        ("session", "delete", "app", "user/sess", "x"),
    ):
        done = run_adk(*args, "--url", daemon.url, "--json", env=ENV)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert done.stdout == ""
        assert json.loads(done.stderr)["reason"] == "invalid_path_segment"
    read = daemon.client.get("/dev/v1/sessions/app%2Fuser/sess")
    assert read.status_code == 400 and read.json()["error"]["code"] == "invalid_path_parameter"
    created = daemon.client.post("/dev/v1/sessions/app/user", json={"session_id": "x/y"})
    assert created.status_code == 400
    assert created.json()["error"]["code"] == "invalid_session_id"
    assert [
        entry["id"] for entry in adk_json(daemon, "inspect", "sessions", "app", "user")["sessions"]
    ] == ["sess"]
