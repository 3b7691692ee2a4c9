"""The legacy ``POST /a2a/prompt`` endpoint: off by default, loopback only, bounded,
and out of reach of web pages."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

import adk_actors as adk
from adk_actors.daemon.legacy import check_legacy_host
from adk_actors.daemon.listener import stop_listener
from providers.errors import AdkError
from tests.daemon.conftest import DevServer, start_dev_server

PATH = "/a2a/prompt"


@pytest.fixture
def legacy_server() -> Iterator[DevServer]:
    """The daemon app with the legacy endpoint on (a 512-byte body limit) and one agent."""
    adk.spawn_agent("HttpAgent", {"provider": "scripted", "script": [{"text": "Hello back"}]})
    server, listener = start_dev_server(legacy_a2a=True, legacy_max_body_bytes=512)
    yield server
    server.client.close()
    stop_listener(listener)


def _post(server: DevServer, **kwargs: object) -> httpx.Response:
    with server.anonymous() as client:  # the endpoint takes no token
        return client.post(PATH, **kwargs)  # type: ignore[arg-type]


JSON = {"content-type": "application/json"}


def test_it_is_off_by_default(dev_server: DevServer) -> None:
    adk.spawn_agent("HttpAgent", {"provider": "scripted", "script": [{"text": "no"}]})
    response = _post(dev_server, json={"agent_name": "HttpAgent", "prompt": "hi"})
    assert response.status_code == 404


def test_a_prompt_gets_the_agents_text(legacy_server: DevServer) -> None:
    """Follows erlang_adk_a2a_handler: dispatch_prompt (ok -> 200 {"response": text})."""
    response = _post(legacy_server, json={"agent_name": "HttpAgent", "prompt": "Hello from HTTP"})
    assert response.status_code == 200
    assert response.json() == {"response": "Hello back"}


def test_an_unknown_agent_is_404(legacy_server: DevServer) -> None:
    """Follows erlang_adk_a2a_handler: dispatch_prompt (not_found -> 404)."""
    for name in ("NoSuchAgent", "not a name", "user", ""):
        response = _post(legacy_server, json={"agent_name": name, "prompt": "hi"})
        assert response.status_code == 404, name
        assert response.text == "Agent not found"


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b"[]",
        b'{"agent_name": "HttpAgent"}',
        b'{"prompt": "hi"}',
        b'{"agent_name": 1, "prompt": "hi"}',
        b'{"agent_name": "HttpAgent", "prompt": ["hi"]}',
        b"\xff",
        b'{"agent_name": "HttpAgent", "prompt": "hi", "x": NaN}',
        b'{"agent_name": "HttpAgent", "prompt": "hi", "prompt": "again"}',
        b'{"agent_name": "HttpAgent", "prompt": "hi", "x": ' + b"[" * 70 + b"]" * 70 + b"}",
    ],
)
def test_a_bad_body_is_400(legacy_server: DevServer, body: bytes) -> None:
    """Follows erlang_adk_a2a_handler: handle_body (anything else -> 400); strict JSON as
    every body of the daemon."""
    response = _post(legacy_server, content=body, headers=JSON)
    assert response.status_code == 400
    assert response.text == "Invalid JSON payload"


# -- out of reach of web pages (CSRF, DNS rebinding) -------------------------------------------


@pytest.fixture
def counted_server() -> Iterator[tuple[DevServer, adk.ScriptedProvider]]:
    """The legacy endpoint and an agent whose model calls are counted."""
    model = adk.ScriptedProvider(fn=lambda history, tools: {"text": "ran"})
    adk.spawn_agent("CountedAgent", {"provider": model})
    server, listener = start_dev_server(legacy_a2a=True)
    yield server, model
    server.client.close()
    stop_listener(listener)


BODY = b'{"agent_name": "CountedAgent", "prompt": "do something costly"}'


def test_a_no_cors_text_post_is_415_and_runs_nothing(
    counted_server: tuple[DevServer, adk.ScriptedProvider],
) -> None:
    """A page's ``fetch(..., {mode: "no-cors"})`` can only send a "simple" content type;
    the endpoint takes JSON only, which needs a CORS preflight that never succeeds."""
    server, model = counted_server
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        response = _post(server, content=BODY, headers={"content-type": content_type})
        assert response.status_code == 415, content_type
        assert response.text == "Unsupported Media Type"
    assert _post(server, content=BODY).status_code == 415  # no content type at all
    assert model.calls == 0


def test_a_foreign_origin_is_403_and_runs_nothing(
    counted_server: tuple[DevServer, adk.ScriptedProvider],
) -> None:
    server, model = counted_server
    for origin in ("http://evil.example", "null", "http://localhost:1"):
        response = _post(server, content=BODY, headers={**JSON, "origin": origin})
        assert response.status_code == 403, origin
        assert response.json()["error"]["code"] == "forbidden"
    assert model.calls == 0
    same = _post(server, content=BODY, headers={**JSON, "origin": server.url})
    assert same.status_code == 200
    assert same.json() == {"response": "ran"}


def test_a_foreign_host_is_421_and_runs_nothing(
    counted_server: tuple[DevServer, adk.ScriptedProvider],
) -> None:
    """DNS rebinding: the attacker's name resolves to 127.0.0.1, so the page is
    same-origin with itself and reads the answer; its Host header gives it away."""
    server, model = counted_server
    port = server.url.rsplit(":", 1)[1]
    for host in ("evil.example", f"evil.example:{port}"):
        response = _post(server, content=BODY, headers={**JSON, "host": host})
        assert response.status_code == 421, host
        assert response.json()["error"]["code"] == "misdirected_request"
    assert model.calls == 0


# -- bounded: prompts at once, and the request deadline ---------------------------------------


def test_prompts_past_the_limit_get_503() -> None:
    """Each prompt holds a worker thread of the endpoint's own pool: past
    ``legacy_max_concurrent`` the answer is 503 at once, so legacy callers cannot take
    the threads the /dev/v1 routes need."""
    entered, gate = threading.Event(), threading.Event()

    def answer(history: Sequence[Any], tools: Sequence[Any]) -> dict[str, Any]:
        entered.set()
        gate.wait(30)
        return {"text": "first"}

    adk.spawn_agent("SlowAgent", {"provider": adk.ScriptedProvider(fn=answer)})
    adk.spawn_agent("OtherAgent", {"provider": "scripted", "script": [{"text": "second"}]})
    server, listener = start_dev_server(legacy_a2a=True, legacy_max_concurrent=1)
    answers: list[httpx.Response] = []
    first = threading.Thread(
        target=lambda: answers.append(
            _post(server, json={"agent_name": "SlowAgent", "prompt": "hold the slot"})
        )
    )
    try:
        first.start()
        assert entered.wait(30)
        refused = _post(server, json={"agent_name": "OtherAgent", "prompt": "hi"})
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "too_many_legacy_prompts"
        assert refused.headers["retry-after"] == "1"
        assert server.client.get("/dev/v1/agents").status_code == 200  # the API goes on
        gate.set()
        first.join(30)
        assert [response.json() for response in answers] == [{"response": "first"}]
        again = _post(server, json={"agent_name": "OtherAgent", "prompt": "hi"})
        assert again.json() == {"response": "second"}  # the slot is free again
    finally:
        gate.set()
        server.client.close()
        stop_listener(listener)


def test_a_turn_ends_before_the_request_deadline() -> None:
    """The turn's timeout ends before the request deadline, so a slow turn is the
    reference's 500 ``agent_execution_failed``, not a guard's 503 after the thread."""
    adk.spawn_agent("SlowAgent", {"provider": "scripted", "script": [{"text": "x", "delay": 30}]})
    server, listener = start_dev_server(legacy_a2a=True, request_timeout=1.0)
    try:
        response = _post(server, json={"agent_name": "SlowAgent", "prompt": "hi"})
    finally:
        server.client.close()
        stop_listener(listener)
    assert response.status_code == 500
    assert response.json() == {"error": "agent_execution_failed"}


def test_a_body_past_the_limit_is_413_and_closes(legacy_server: DevServer) -> None:
    """Follows erlang_adk_a2a_handler: payload_too_large."""
    response = _post(legacy_server, json={"agent_name": "HttpAgent", "prompt": "x" * 600})
    assert response.status_code == 413
    assert response.text == "Payload Too Large"
    assert response.headers["connection"] == "close"


def test_another_method_is_405(legacy_server: DevServer) -> None:
    with legacy_server.anonymous() as client:
        response = client.get(PATH)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


def test_a_failed_turn_is_500_without_detail(legacy_server: DevServer) -> None:
    """Follows erlang_adk_a2a_handler: dispatch_prompt (error -> 500
    agent_execution_failed)."""
    adk.spawn_agent("Broken", {"provider": "scripted", "script": [{"error": "secret_reason"}]})
    response = _post(legacy_server, json={"agent_name": "Broken", "prompt": "hi"})
    assert response.status_code == 500
    assert response.json() == {"error": "agent_execution_failed"}


def test_it_is_refused_while_draining(legacy_server: DevServer) -> None:
    legacy_server.state.start_draining()
    response = _post(legacy_server, json={"agent_name": "HttpAgent", "prompt": "hi"})
    assert response.status_code == 503


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "127.255.255.254", "::1"])
def test_it_binds_any_loopback_address(host: str) -> None:
    assert check_legacy_host(host) == host


@pytest.mark.parametrize(
    "host", ["0.0.0.0", "::", "localhost", "192.168.1.10", "8.8.8.8", "", "::1%lo"]
)
def test_it_refuses_every_other_address(host: str) -> None:
    """The spec: ``legacy_a2a_server_must_bind_loopback`` for every non-loopback or
    wildcard address."""
    with pytest.raises(AdkError) as refused:
        check_legacy_host(host)
    assert refused.value.reason == "legacy_a2a_server_must_bind_loopback"


# -- the documented example --------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "daemon.md"


def _documented_curl() -> list[str]:
    """The ``curl`` command of docs/daemon.md's legacy section, as shell words."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## The legacy endpoint") :]
    block = section[section.index("```sh") : section.index("```", section.index("```sh") + 5)]
    [line] = [line for line in block.splitlines() if line.startswith("curl ")]
    return shlex.split(line)


def _as_sent(words: list[str], url: str) -> tuple[str, dict[str, str], bytes]:
    """The request curl makes for `words` (the documented URL's origin swapped for `url`):
    ``-d`` makes it a POST of that body, ``application/x-www-form-urlencoded`` unless a
    ``-H`` sets the content type."""
    headers = {"content-type": "application/x-www-form-urlencoded"}
    body: bytes | None = None
    target = ""
    rest = iter(words[1:])
    for word in rest:
        if word == "-s":
            continue
        if word == "-H":
            name, _, value = next(rest).partition(":")
            headers[name.strip().lower()] = value.strip()
        elif word == "-d":
            body = next(rest).encode()
        else:
            assert word.startswith("http://127.0.0.1:8080/"), word
            target = url + word.removeprefix("http://127.0.0.1:8080")
    assert body is not None and target.endswith(PATH)
    return target, headers, body


def test_the_documented_example_works_as_written() -> None:
    """docs/daemon.md's curl line, sent as curl sends it (review M2: without its
    ``Content-Type: application/json`` the form content type of ``curl -d`` is 415)."""
    adk.spawn_agent("ScriptedAgent", {"provider": "scripted", "script": [{"text": "Hi!"}] * 2})
    server, listener = start_dev_server(legacy_a2a=True)
    try:
        words = _documented_curl()
        target, headers, body = _as_sent(words, server.url)
        assert headers["content-type"] == "application/json"
        with server.anonymous() as client:
            response = client.post(target, content=body, headers=headers)
        assert response.status_code == 200, response.text
        assert response.json() == {"response": "Hi!"}
        if shutil.which("curl"):  # and by curl itself, when it is installed
            swapped = [word.replace("http://127.0.0.1:8080", server.url) for word in words]
            environ = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
            done = subprocess.run(
                swapped, capture_output=True, text=True, timeout=30, check=False, env=environ
            )
            assert json.loads(done.stdout) == {"response": "Hi!"}, done.stderr
    finally:
        server.client.close()
        stop_listener(listener)
