"""A2A tests: helpers for driving `adk.a2a.serve` over real loopback sockets.

The autouse `app` fixture of tests/adk_actors/conftest.py starts a fresh runtime for
each test. `Rpc` posts raw JSON-RPC with httpx (the headers of each case set by hand),
`sse_events` parses an SSE body, `raw_http` talks over a bare socket where httpx would
not send the request as written.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import adk_actors as adk
from adk_actors.a2a.server import A2AServer, serve

ALICE = "alice-secret-token-0123456789abcd"
ALICE_AGAIN = "alice-second-token-0123456789abc"
BOB = "bob-secret-token-0123456789abcdef"
PRINCIPALS = {ALICE: "alice", ALICE_AGAIN: "alice", BOB: "bob"}
VERSION = {"A2A-Version": "1.0"}


def principal_of(token: str) -> str | None:
    """The verifier of the shared servers: two tokens are alice, one is bob."""
    return PRINCIPALS.get(token)


def echo(history: Any, tools: Any) -> dict[str, Any]:
    """A scripted model answering ``echo: <the user's text>``."""
    return {"text": "echo: " + history[-1].text_value()}


def slow(history: Any, tools: Any) -> dict[str, Any]:
    """A scripted model answering ``late`` after a second."""
    return {"text": "late", "delay": 1.0}


def message(text: str, **ids: str) -> dict[str, Any]:
    """A user message in its A2A 1.0 JSON form (``taskId`` / ``contextId`` in `ids`)."""
    return {
        "messageId": f"m-{uuid.uuid4().hex}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **ids,
    }


def envelope(method: str, params: Any, request_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


class Rpc:
    """JSON-RPC posts to one server's endpoint as one principal."""

    def __init__(self, server: A2AServer, token: str | None = ALICE) -> None:
        self.server = server
        self.token = token

    def headers(
        self, extra: dict[str, str] | None = None, *, version: bool = True
    ) -> dict[str, str]:
        headers = dict(VERSION) if version else {}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        headers.update(extra or {})
        return headers

    def post(
        self,
        body: Any,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        version: bool = True,
    ) -> httpx.Response:
        content = raw if raw is not None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json", **self.headers(headers, version=version)}
        return httpx.post(self.server.rpc_url, content=content, headers=sent, timeout=30)

    def call(self, method: str, params: Any, **options: Any) -> dict[str, Any]:
        """The JSON-RPC answer (HTTP 200) of `method`."""
        response = self.post(envelope(method, params), **options)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer

    def result(self, method: str, params: Any, **options: Any) -> dict[str, Any]:
        answer = self.call(method, params, **options)
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    def error_code(self, method: str, params: Any, **options: Any) -> int:
        answer = self.call(method, params, **options)
        assert "error" in answer and "result" not in answer, answer
        code: int = answer["error"]["code"]
        return code

    def stream(
        self, method: str, params: Any, headers: dict[str, str] | None = None
    ) -> tuple[httpx.Response, list[tuple[int, dict[str, Any]]]]:
        """A streaming method's whole SSE answer, parsed (it must end by itself)."""
        extra = {"Accept": "text/event-stream", **(headers or {})}
        response = self.post(envelope(method, params), headers=extra)
        return response, sse_events(response.text)


def sse_events(body: str) -> list[tuple[int, dict[str, Any]]]:
    """``(id, data)`` of each SSE event of `body` (comments skipped)."""
    events = []
    for block in body.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":")
        )
        if fields:
            events.append((int(fields["id"]), json.loads(fields["data"])))
    return events


def raw_http(port: int, request: bytes) -> bytes:
    """Send `request` as written over a new socket; the response head that came back
    (or what came before the server closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        return received


@pytest.fixture
def echo_server() -> Iterator[A2AServer]:
    """An echo agent served with a verifier (alice has two tokens, bob one)."""
    agent = adk.spawn_agent("Echo", {"provider": adk.ScriptedProvider(fn=echo, inline=True)})
    with serve(agent, verifier=principal_of) as server:
        yield server


@pytest.fixture
def slow_server() -> Iterator[A2AServer]:
    """An agent taking about a second per answer (tasks are still WORKING when looked at)."""
    agent = adk.spawn_agent("Slow", {"provider": adk.ScriptedProvider(fn=slow)})
    with serve(agent, verifier=principal_of) as server:
        yield server
