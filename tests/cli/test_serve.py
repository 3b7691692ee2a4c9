"""`adk serve` as a real subprocess, driven by the CLI's developer-API commands: the
offline example's agent streams, pauses for approval and completes after `adk resume`.

Follows adk_cli_test: successful_developer_commands_case (serve, then inspect, resume).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.conftest import ADK, DEV_TOKEN, REPO, base_env, run_adk

ENV = base_env(ADK_DEV_TOKEN=DEV_TOKEN)


class Daemon:
    def __init__(self, process: subprocess.Popen[str], listening: dict[str, Any]) -> None:
        self.process = process
        self.listening = listening
        self.url = str(listening["url"]).removesuffix("/dev")

    def adk(self, *args: str) -> Any:
        done = run_adk(*args, "--url", self.url, "--json", env=ENV)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def start_run(self, session: str, message: str) -> str:
        answer = httpx.post(
            f"{self.url}/dev/v1/runs",
            json={
                "agent_name": "ScriptedAgent",
                "app_name": "serve-app",
                "user_id": "local",
                "session_id": session,
                "message": message,
            },
            headers={"authorization": f"Bearer {DEV_TOKEN}"},
            timeout=10,
        )
        assert answer.status_code == 202, answer.text
        return str(answer.json()["run_id"])

    def await_state(self, run_id: str, state: str) -> dict[str, Any]:
        deadline = time.monotonic() + 30
        while True:
            status = self.adk("inspect", "run", run_id)
            if status["state"] == state or time.monotonic() > deadline:
                assert status["state"] == state, status
                return status
            time.sleep(0.05)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    process = subprocess.Popen(
        [
            *ADK,
            "serve",
            "--config",
            "examples/agent.scripted.json",
            "--port",
            "0",
            "--data",
            str(tmp_path / "data"),
        ],
        cwd=REPO,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, process.stderr.read() if process.stderr else ""
        yield Daemon(process, json.loads(line))
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def test_serve_then_inspect_resume_and_stop_on_sigterm(daemon):
    assert daemon.listening["status"] == "listening"
    assert daemon.url.startswith("http://127.0.0.1:")
    agents = daemon.adk("inspect", "agents")
    assert [entry["name"] for entry in agents["agents"]] == ["ScriptedAgent"]

    first = daemon.start_run("serve-session", "hello")
    completed = daemon.await_state(first, "completed")
    assert completed["outcome"]["text"] == "Hello! I am the offline scripted agent."

    paused_id = daemon.start_run("serve-session", "publish it")
    paused = daemon.await_state(paused_id, "paused")
    assert paused["outcome"]["pause"]["tool_name"] == "publish_release"
    resumed = daemon.adk("resume", paused_id, "--response-json", '{"confirmed": true}')
    assert resumed["parent_run_id"] == paused_id
    done = daemon.await_state(resumed["run_id"], "completed")
    assert done["outcome"]["text"] == "Release 1.0.0 is published."

    session = daemon.adk("inspect", "session", "serve-app", "local", "serve-session")
    assert session["event_count"] >= 6

    daemon.process.send_signal(signal.SIGTERM)
    assert daemon.process.wait(30) == 0
    after = run_adk("inspect", "agents", "--url", daemon.url, "--json", env=ENV)
    assert after.returncode == 1
    assert json.loads(after.stderr)["details"] == ["connection_refused"]


@pytest.mark.parametrize(
    ("args", "env", "reason"),
    [
        (("--host", "0.0.0.0"), ENV, "developer_server_must_bind_loopback"),
        (("--config", "examples/agent.scripted.json"), base_env(), "dev_token_required"),
        (("--config", "examples/agent.json", "--port", "0"), ENV, "missing_api_key"),
    ],
    ids=["wildcard-bind", "no-token", "gemini-without-key"],
)
def test_serve_refuses_to_start(args, env, reason, tmp_path):
    done = run_adk("serve", *args, "--data", str(tmp_path / "data"), env=env, timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    error = json.loads(done.stderr.strip().splitlines()[-1])
    assert (error["status"], error["reason"]) == ("error", reason)
    if reason == "missing_api_key":
        assert '"provider": "scripted"' in error["message"]
