"""``adk serve --a2a``: the daemon's agent over A2A 1.0, driven by our A2A client and raw
HTTP against a real daemon (`serve.main` on an ephemeral loopback port, a scripted agent
file, LMDB sessions in a tmp dir).

Follows the spec's "A2A 1.0 interoperability" (the card at the well-known path naming the
JSON-RPC interface, bearer authentication, a task that completes with its artifact) and
behaviors.md §12 (401 without auth).
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

import adk_actors as adk
from adk_actors.cli.main import cli
from adk_actors.daemon.serve import EXIT_REFUSED, main
from tests.daemon.conftest import TOKEN

START_TIMEOUT = 60.0
ANSWER = "the daemon agent answers over A2A"


def _agent_file(tmp_path: Path) -> Path:
    config = tmp_path / "agent.json"
    config.write_text(
        json.dumps(
            {
                "name": "A2aDaemonAgent",
                "provider": "scripted",
                "script": [{"text": ANSWER}],
                "script_repeat": True,
            }
        )
    )
    return config


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A daemon started with ``a2a=True``; yields its listening line."""
    out = io.StringIO()
    stop = threading.Event()
    codes: list[int] = []

    def serve() -> None:
        codes.append(
            main(
                _agent_file(tmp_path),
                "127.0.0.1",
                0,
                tmp_path / "data",
                {"ADK_DEV_TOKEN": TOKEN},
                out,
                stop=stop,
                console_logs=False,
                a2a=True,
            )
        )

    thread = threading.Thread(target=serve, name="daemon")
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not out.getvalue() and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        line: dict[str, Any] = json.loads(out.getvalue().splitlines()[0])
        yield line
    finally:
        stop.set()
        thread.join(START_TIMEOUT)
    assert codes == [0]


def test_the_listening_line_names_the_card_and_the_endpoint(listening: dict[str, Any]) -> None:
    """The line adds ``a2a_card_url`` and ``a2a_url`` under the daemon's own URL, and the
    public card names that endpoint with the bound port and declares the bearer scheme."""
    url = listening["url"]
    assert listening["a2a_card_url"] == f"{url}/.well-known/agent-card.json"
    assert listening["a2a_url"] == f"{url}/a2a/v1"
    card = httpx.get(listening["a2a_card_url"]).json()
    assert card["name"] == "A2aDaemonAgent"
    assert [interface["url"] for interface in card["supportedInterfaces"]] == [listening["a2a_url"]]
    assert list(card["securitySchemes"]) == ["bearer"]


def test_the_client_sends_with_the_developer_token(listening: dict[str, Any]) -> None:
    """Our client, with the developer token, gets a COMPLETED task whose artifact is the
    agent's answer; the task is found again by id."""
    with adk.a2a.connect(
        listening["a2a_card_url"],
        auth=lambda: {"Authorization": f"Bearer {TOKEN}"},
        auth_scheme="bearer",
        allow_http_loopback=True,
    ) as client:
        task = client.send("hello")["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"] == [{"text": ANSWER}]
        again = client.get_task(task["id"])
        assert again["id"] == task["id"]
        assert again["status"]["state"] == "TASK_STATE_COMPLETED"


def test_without_the_token_the_endpoint_is_401(listening: dict[str, Any]) -> None:
    """behaviors §12: no auth -> 401, before the body is read as JSON-RPC."""
    answer = httpx.post(
        listening["a2a_url"],
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "task-1"}},
        headers={"A2A-Version": "1.0"},
    )
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")


def test_a2a_without_an_agent_file_is_refused(tmp_path: Path) -> None:
    """``--a2a`` serves the ``--config`` agent: without one it is refused before anything
    starts, as one JSON line and exit code 2."""
    err = io.StringIO()
    code = main(
        None,
        "127.0.0.1",
        0,
        tmp_path / "data",
        {"ADK_DEV_TOKEN": TOKEN},
        io.StringIO(),
        err=err,
        console_logs=False,
        a2a=True,
    )
    assert code == EXIT_REFUSED
    assert json.loads(err.getvalue())["reason"] == "a2a_requires_agent"


def test_the_cli_takes_the_a2a_flag(tmp_path: Path) -> None:
    """``adk serve --a2a`` reaches the daemon (here refused for the missing --config)."""
    result = CliRunner().invoke(
        cli,
        ["serve", "--a2a", "--port", "0", "--data", str(tmp_path / "data")],
        env={"ADK_DEV_TOKEN": TOKEN},
    )
    assert result.exit_code == EXIT_REFUSED
    assert "a2a_requires_agent" in result.output + (result.stderr if result.stderr_bytes else "")
