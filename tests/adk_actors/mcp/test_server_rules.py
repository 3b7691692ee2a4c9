"""The MCP Streamable HTTP server's status-code rules, over raw HTTP (httpx) against a
real `adk.mcp.serve` listener on 127.0.0.1.

Follows behaviors.md §12 (MCP Streamable HTTP server) and erlang_adk
test/protocols/mcp/adk_mcp_streamable_http_SUITE.erl.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import adk_actors as adk
from adk_actors.mcp.server import McpServer, serve
from providers.errors import AdkError

TOKEN = "mcp-server-test-token-0123456789"
BASE_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@adk.tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def _initialize(version: str = "2025-11-25", request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }


class Raw:
    """A raw HTTP client of one server."""

    def __init__(self, server: McpServer, token: str | None = None) -> None:
        self.url = server.url
        self.http = httpx.Client(timeout=10.0)
        self.auth = {"authorization": f"Bearer {token}"} if token else {}

    def post(self, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
        return self.http.post(
            self.url, json=body, headers={**BASE_HEADERS, **self.auth, **(headers or {})}
        )

    def open(self, version: str = "2025-11-25", headers: dict[str, str] | None = None) -> str:
        """Initialize and confirm; the session id."""
        response = self.post(_initialize(version), headers)
        assert response.status_code == 200, response.text
        session = response.headers["mcp-session-id"]
        done = self.post(
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            self.session_headers(session, response.json()["result"]["protocolVersion"], headers),
        )
        assert done.status_code == 202
        return session

    def session_headers(
        self, session: str, version: str = "2025-11-25", extra: dict[str, str] | None = None
    ) -> dict[str, str]:
        return {"mcp-session-id": session, "mcp-protocol-version": version, **(extra or {})}

    def call(
        self, session: str, request_id: int, name: str, args: dict[str, Any], **headers: str
    ) -> httpx.Response:
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": args},
        }
        return self.post(body, self.session_headers(session, extra=headers))


@pytest.fixture
def servers() -> Iterator[list[McpServer]]:
    started: list[McpServer] = []
    yield started
    for server in started:
        server.stop()


def _serve(servers: list[McpServer], **options: Any) -> McpServer:
    options.setdefault("tools", [echo])
    server = serve(**options)
    servers.append(server)
    return server


def test_get_is_405_and_initialize_opens_a_session(servers: list[McpServer]) -> None:
    """Follows behaviors.md §12: GET → 405; initialize → 200 with mcp-session-id and
    2025-11-25; notifications/initialized → 202."""
    raw = Raw(_serve(servers))
    got = raw.http.get(raw.url, headers={"accept": "text/event-stream"})
    assert got.status_code == 405
    assert "POST" in got.headers["allow"]
    response = raw.post(_initialize())
    assert response.status_code == 200
    assert response.headers["mcp-session-id"]
    assert response.json()["result"]["protocolVersion"] == "2025-11-25"
    session = response.headers["mcp-session-id"]
    initialized = raw.post(
        {"jsonrpc": "2.0", "method": "notifications/initialized"}, raw.session_headers(session)
    )
    assert initialized.status_code == 202
    listed = raw.post(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, raw.session_headers(session)
    )
    assert [t["name"] for t in listed.json()["result"]["tools"]] == ["echo"]


def test_version_negotiation(servers: list[McpServer]) -> None:
    """Follows behaviors.md §12: an unknown version negotiates 2025-11-25, 2025-06-18 is
    honoured (and a later request must name the session's version)."""
    raw = Raw(_serve(servers))
    unknown = raw.post(_initialize("2099-01-01"))
    assert unknown.json()["result"]["protocolVersion"] == "2025-11-25"
    old = raw.post(_initialize("2025-06-18"))
    assert old.json()["result"]["protocolVersion"] == "2025-06-18"
    session = old.headers["mcp-session-id"]
    ok = raw.post(
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        raw.session_headers(session, "2025-06-18"),
    )
    assert ok.status_code == 202
    mismatch = raw.post(
        {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, raw.session_headers(session)
    )
    assert mismatch.status_code == 400


def test_only_ping_before_initialized(servers: list[McpServer]) -> None:
    """Follows the MCP lifecycle (and erlang_adk's session phases): before
    notifications/initialized only ping is served; the confirmation is sent once."""
    raw = Raw(_serve(servers))
    response = raw.post(_initialize())
    session = response.headers["mcp-session-id"]
    early = raw.post(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, raw.session_headers(session)
    )
    assert early.status_code == 400
    ping = raw.post({"jsonrpc": "2.0", "id": 3, "method": "ping"}, raw.session_headers(session))
    assert ping.status_code == 200 and ping.json()["result"] == {}
    confirm = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert raw.post(confirm, raw.session_headers(session)).status_code == 202
    assert raw.post(confirm, raw.session_headers(session)).status_code == 400
    listed = raw.post(
        {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, raw.session_headers(session)
    )
    assert listed.status_code == 200


def test_missing_protocol_version_is_400(servers: list[McpServer]) -> None:
    """Follows behaviors.md §12: missing mcp-protocol-version → 400."""
    raw = Raw(_serve(servers))
    session = raw.open()
    response = raw.post(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, {"mcp-session-id": session}
    )
    assert response.status_code == 400


def test_repeated_request_id_is_32600(servers: list[McpServer]) -> None:
    """Follows behaviors.md §12: repeated request id → -32600."""
    raw = Raw(_serve(servers))
    session = raw.open()
    first = raw.call(session, 7, "echo", {"text": "a"})
    assert first.json()["result"]["isError"] is False
    again = raw.call(session, 7, "echo", {"text": "b"})
    assert again.status_code == 200
    assert again.json()["error"]["code"] == -32600
    assert again.json()["id"] == 7
    initialize_id = raw.call(session, 1, "echo", {"text": "c"})  # initialize used id 1
    assert initialize_id.json()["error"]["code"] == -32600


def test_foreign_origin_is_403(servers: list[McpServer]) -> None:
    """Follows behaviors.md §12: foreign Origin → 403 (an allowed one passes)."""
    raw = Raw(_serve(servers, allowed_origins=["http://localhost:3000"]))
    foreign = raw.post(_initialize(), {"origin": "http://evil.example"})
    assert foreign.status_code == 403
    assert "mcp-session-id" not in foreign.headers
    allowed = raw.post(_initialize(), {"origin": "http://localhost:3000"})
    assert allowed.status_code == 200


def test_oversized_body_is_413(servers: list[McpServer]) -> None:
    """Follows behaviors.md §12: oversized body → 413."""
    raw = Raw(_serve(servers, max_body_bytes=1024))
    session = raw.open()
    response = raw.call(session, 2, "echo", {"text": "x" * 4096})
    assert response.status_code == 413
    assert raw.call(session, 3, "echo", {"text": "small"}).status_code == 200


def test_delete_is_204_then_404(servers: list[McpServer]) -> None:
    """Follows behaviors.md §12: DELETE → 204, then 404."""
    raw = Raw(_serve(servers))
    session = raw.open()
    headers = {**raw.session_headers(session), **raw.auth}
    assert raw.http.delete(raw.url, headers=headers).status_code == 204
    assert raw.http.delete(raw.url, headers=headers).status_code == 404
    assert raw.call(session, 2, "echo", {"text": "a"}).status_code == 404


def test_max_concurrency_refuses_past_the_bound_and_the_first_completes(
    servers: list[McpServer],
) -> None:
    """Follows behaviors.md §12 / the spec: max_concurrency=1 with a tool in flight,
    another call → -32000 and the first completes."""
    entered, release = threading.Event(), threading.Event()

    @adk.tool
    def slow() -> str:
        """Wait for the test."""
        entered.set()
        release.wait(10)
        return "done"

    raw = Raw(_serve(servers, tools=[slow, echo], max_concurrency=1))
    session = raw.open()
    results: list[httpx.Response] = []
    worker = threading.Thread(target=lambda: results.append(raw.call(session, 2, "slow", {})))
    worker.start()
    assert entered.wait(10)
    busy = Raw(servers[0]).call(session, 3, "echo", {"text": "b"})
    assert busy.status_code == 200 and busy.json()["error"]["code"] == -32000
    release.set()
    worker.join(10)
    assert results[0].json()["result"]["content"][0]["text"] == "done"
    assert raw.call(session, 4, "echo", {"text": "c"}).json()["result"]["isError"] is False


def test_wrong_bearer_is_401(servers: list[McpServer]) -> None:
    """Follows the spec: a wrong bearer → 401 with a Bearer challenge."""
    server = _serve(servers, auth_token=TOKEN)
    assert Raw(server, "wrong-token-0123456789abc").post(_initialize()).status_code == 401
    anonymous = Raw(server).post(_initialize())
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    assert Raw(server, TOKEN).post(_initialize()).status_code == 200


def _verifier(tokens: dict[str, str]) -> Any:
    def verify(token: str) -> str | None:
        return tokens.get(token)

    return verify


def test_sessions_are_bound_to_the_principal(servers: list[McpServer]) -> None:
    """Follows the spec: a session used by another principal → the same 404 as unknown."""
    tokens = {"alice-token-0123456789": "alice", "bob-token-0123456789ab": "bob"}
    server = _serve(servers, verifier=_verifier(tokens))
    alice, bob = Raw(server, "alice-token-0123456789"), Raw(server, "bob-token-0123456789ab")
    session = alice.open()
    stolen = bob.call(session, 2, "echo", {"text": "a"})
    unknown = bob.call("0" * 32, 2, "echo", {"text": "a"})
    assert stolen.status_code == unknown.status_code == 404
    assert stolen.content == unknown.content
    delete = bob.http.delete(bob.url, headers={**bob.session_headers(session), **bob.auth})
    assert delete.status_code == 404
    assert alice.call(session, 3, "echo", {"text": "a"}).json()["result"]["isError"] is False


def test_authorization_denial_is_403_insufficient_scope(servers: list[McpServer]) -> None:
    """Follows the spec: authorization_fun (principal, method, resource) is asked for
    every message and DELETE, never with the credential; a denial (False or
    "insufficient_scope") → 403 with insufficient_scope; a failing hook denies."""
    seen: list[tuple[str, str, dict[str, Any]]] = []

    def authorize(principal: str, method: str, resource: Any) -> bool | str:
        seen.append((principal, method, dict(resource)))
        if method == "tools/call" and resource.get("tool") == "echo":
            return "insufficient_scope"
        if method == "tools/call" and resource.get("tool") == "slow":
            raise RuntimeError("hook bug")
        return method != "sessions/delete"

    server = _serve(servers, auth_token=TOKEN, authorization_fun=authorize)
    raw = Raw(server, TOKEN)
    session = raw.open()
    denied = raw.call(session, 2, "echo", {"text": "a"})
    assert denied.status_code == 403
    assert 'error="insufficient_scope"' in denied.headers["www-authenticate"]
    assert raw.call(session, 3, "slow", {}).status_code == 403
    headers = {**raw.session_headers(session), **raw.auth}
    assert raw.http.delete(raw.url, headers=headers).status_code == 403
    methods = [method for _, method, _ in seen]
    assert methods[:2] == ["initialize", "notifications/initialized"]
    assert ("auth_token", "tools/call", {"tool": "echo"}) in seen
    assert ("auth_token", "sessions/delete", {"kind": "session"}) in seen
    assert all(TOKEN not in repr(entry) for entry in seen)


def test_oauth_metadata_and_challenge(servers: list[McpServer]) -> None:
    """Follows the spec: the RFC 9728 document is public; no token → 401 whose
    WWW-Authenticate names resource_metadata and scope."""
    oauth = {
        "resource": "https://mcp.example.com/mcp",
        "authorization_servers": ["https://auth.example.com"],
        "scopes_supported": ["mcp:tools", "mcp:read"],
        "required_scopes": ["mcp:tools"],
        "resource_metadata_url": "https://mcp.example.com/.well-known/oauth-protected-resource",
    }
    server = _serve(
        servers,
        verifier=_verifier({"access-token-0123456789": "carol"}),
        authorization_fun=lambda principal, method, resource: True,
        oauth_protected_resource=oauth,
    )
    base = server.url.rsplit("/", 1)[0]
    document = httpx.get(base + "/.well-known/oauth-protected-resource")
    assert document.status_code == 200
    assert document.json()["resource"] == oauth["resource"]
    assert document.json()["authorization_servers"] == oauth["authorization_servers"]
    refused = Raw(server).post(_initialize())
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert f'resource_metadata="{oauth["resource_metadata_url"]}"' in challenge
    assert 'scope="mcp:tools"' in challenge
    assert Raw(server, "access-token-0123456789").post(_initialize()).status_code == 200


def test_oauth_requires_both_hooks() -> None:
    oauth = {
        "resource": "https://mcp.example.com/mcp",
        "authorization_servers": ["https://auth.example.com"],
        "resource_metadata_url": "https://mcp.example.com/.well-known/oauth-protected-resource",
    }
    with pytest.raises(AdkError) as refused:
        serve(tools=[echo], auth_token=TOKEN, oauth_protected_resource=oauth)
    assert refused.value.reason == "mcp_oauth_requires_auth_hooks"


def test_non_loopback_binds_need_auth_acknowledgement_and_tls() -> None:
    """Follows the spec: a non-loopback bind needs authentication, allow_non_loopback and
    TLS (direct or a trusted proxy); each missing piece is a typed error."""
    cases: list[tuple[dict[str, Any], str]] = [
        ({}, "mcp_non_loopback_requires_auth"),
        ({"auth_token": TOKEN}, "mcp_non_loopback_not_acknowledged"),
        ({"auth_token": TOKEN, "allow_non_loopback": True}, "mcp_non_loopback_requires_tls"),
    ]
    for options, reason in cases:
        with pytest.raises(AdkError) as refused:
            serve(tools=[echo], host="0.0.0.0", **options)
        assert refused.value.reason == reason


def test_max_sessions_and_session_ttl_are_bounded(servers: list[McpServer]) -> None:
    """Follows the spec: past max_sessions, initialize → -32000; a session idle past
    session_ttl is gone (404)."""
    raw = Raw(_serve(servers, max_sessions=1, session_ttl=0.3))
    session = raw.open()
    full = raw.post(_initialize(request_id=9))
    assert full.json()["error"]["code"] == -32000
    threading.Event().wait(0.5)
    assert raw.call(session, 2, "echo", {"text": "a"}).status_code == 404
    assert raw.post(_initialize()).status_code == 200  # room again


def test_options_are_checked() -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"max_body_bytes": 0}, "max_body_bytes"),
        ({"max_concurrency": 10**9}, "max_concurrency"),
        ({"session_ttl": float("inf")}, "session_ttl"),
        ({"max_sessions": True}, "max_sessions"),
        ({"request_timeout": -1}, "request_timeout"),
    ]
    for options, field in cases:
        with pytest.raises(AdkError) as refused:
            serve(tools=[echo], **options)
        assert refused.value.reason == ("invalid_mcp_server_option", field)
    with pytest.raises(AdkError) as short:
        serve(tools=[echo], auth_token="short")
    assert short.value.reason == "mcp_auth_token_too_short"
    with pytest.raises(AdkError) as bad_tool:
        serve(tools=[object()])
    assert bad_tool.value.reason == ("invalid_mcp_tool", "object")
