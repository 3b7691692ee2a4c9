"""The legacy ``POST /a2a/prompt`` endpoint: off by default, loopback only, bounded."""

from __future__ import annotations

from collections.abc import Iterator

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
    ],
)
def test_a_bad_body_is_400(legacy_server: DevServer, body: bytes) -> None:
    """Follows erlang_adk_a2a_handler: handle_body (anything else -> 400)."""
    response = _post(legacy_server, content=body)
    assert response.status_code == 400
    assert response.text == "Invalid JSON payload"


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
