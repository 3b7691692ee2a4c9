"""The MCP Streamable HTTP server's status-code rules, over raw HTTP (httpx) against a
real `adk.mcp.serve` listener on 127.0.0.1.

Follows behaviors.md §12 (MCP Streamable HTTP server) and erlang_adk
test/protocols/mcp/adk_mcp_streamable_http_SUITE.erl.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import adk_actors as adk
from adk_actors.mcp.server import McpServer, serve
from adk_actors.mcp.server_handlers import McpCatalog
from adk_actors.mcp.server_options import check_exposure, server_options
from adk_actors.mcp.server_sessions import MAX_ID_WINDOW, Admission, SessionTable
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
    """Follows the spec and RFC 6750 §3.1: a wrong bearer → 401 whose Bearer challenge
    says error="invalid_token"; no credential → 401 with a challenge and no error."""
    server = _serve(servers, auth_token=TOKEN)
    wrong = Raw(server, "wrong-token-0123456789abc").post(_initialize())
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"].startswith("Bearer")
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    anonymous = Raw(server).post(_initialize())
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    assert "error=" not in anonymous.headers["www-authenticate"]
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
    hooks: dict[str, Any] = {
        "verifier": _verifier({}),
        "authorization_fun": lambda principal, method, resource: True,
    }
    cases: list[tuple[dict[str, Any], Any]] = [
        ({**oauth, "colour": "red"}, ("unknown_keys", ["colour"])),
        ({**oauth, "resource": "http://mcp.example.com/mcp"}, "resource"),
        ({**oauth, "authorization_servers": []}, "authorization_servers"),
        ({**oauth, "required_scopes": ["a b"]}, "required_scopes"),
        ({**oauth, "metadata_path": "relative"}, "metadata_path"),
    ]
    for settings, key in cases:
        with pytest.raises(AdkError) as bad:
            serve(tools=[echo], oauth_protected_resource=settings, **hooks)
        assert bad.value.reason == ("invalid_mcp_oauth_resource", key)


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


def _ping(raw: Raw, session: str, request_id: Any) -> httpx.Response:
    return raw.post(
        {"jsonrpc": "2.0", "id": request_id, "method": "ping"}, raw.session_headers(session)
    )


def test_request_ids_are_bounded(servers: list[McpServer]) -> None:
    """Review finding 1: a string id longer than 128 characters (or an integer past 64
    bits) is a 400 carrying -32600, never remembered; 128 characters pass."""
    raw = Raw(_serve(servers))
    session = raw.open()
    for bad in ("x" * 129, "y" * 100_000, 1 << 63, -(1 << 63) - 1):
        refused = _ping(raw, session, bad)
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == -32600
        assert refused.json()["id"] is None
    assert _ping(raw, session, "z" * 128).json()["result"] == {}
    assert _ping(raw, session, (1 << 63) - 1).json()["result"] == {}
    long_initialize = raw.post({**_initialize(), "id": "i" * 129})
    assert long_initialize.status_code == 400
    assert "mcp-session-id" not in long_initialize.headers


def test_a_session_remembers_a_bounded_window_of_request_ids() -> None:
    """Review finding 1: the ids a session remembers are its last MAX_ID_WINDOW (the
    spec's default request budget), not its whole history."""
    table = SessionTable(max_sessions=1, ttl=60.0, max_requests=1_000_000)
    assert table.reserve()
    table.open("s", "scope", "2025-11-25", 0)
    table.release()
    record = table.find("s", "scope")
    assert record is not None
    for request_id in range(1, 3 * MAX_ID_WINDOW):
        assert table.admit("s", record, request_id) is Admission.ADMITTED
        table.count(record, request_id)
    assert len(record.seen_ids) == MAX_ID_WINDOW
    assert table.admit("s", record, 3 * MAX_ID_WINDOW - 1) is Admission.REPEATED
    assert table.admit("s", record, 0) is Admission.ADMITTED  # long forgotten
    small = SessionTable(max_sessions=1, ttl=60.0, max_requests=5)
    assert small.id_window == 5


def test_a_spent_session_expires_with_404_and_the_client_initializes_again(
    servers: list[McpServer],
) -> None:
    """Review finding 2: past max_session_requests the session is closed (404, as an
    expired one), so a client initializes again, instead of -32600 forever."""
    raw = Raw(_serve(servers, max_session_requests=3))
    session = raw.open()  # initialize is request 1
    assert raw.call(session, 2, "echo", {"text": "a"}).json()["result"]["isError"] is False
    assert raw.call(session, 3, "echo", {"text": "b"}).json()["result"]["isError"] is False
    spent = raw.call(session, 4, "echo", {"text": "c"})
    assert spent.status_code == 404
    assert raw.call(session, 5, "echo", {"text": "d"}).status_code == 404
    fresh = raw.open()
    assert fresh != session
    assert raw.call(fresh, 2, "echo", {"text": "e"}).json()["result"]["isError"] is False


def _wait_until(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_timed_out_calls_stay_counted_until_their_threads_end(
    servers: list[McpServer],
) -> None:
    """Review finding 3: a call cut off by request_timeout answers mcp_timeout, but its
    thread still counts against max_concurrency until it really ends: with both slots
    held by abandoned threads the next call is -32000, and no thread is added. A
    refused request's id is not spent (it may be sent again)."""
    release = threading.Event()
    running = []

    @adk.tool
    def hang() -> str:
        """Hang until the test releases it."""
        running.append(1)
        release.wait(10)
        running.pop()
        return "late"

    raw = Raw(_serve(servers, tools=[hang, echo], max_concurrency=2, request_timeout=0.05))
    session = raw.open()
    try:
        for request_id in (2, 3):
            late = raw.call(session, request_id, "hang", {})
            assert late.json()["result"]["isError"] is True
            assert "mcp_timeout" in late.json()["result"]["content"][0]["text"]
        threads = threading.active_count()
        for request_id in range(4, 12):
            busy = raw.call(session, request_id, "hang", {})
            assert busy.json()["error"]["code"] == -32000
        assert raw.call(session, 12, "echo", {"text": "a"}).json()["error"]["code"] == -32000
        assert len(running) == 2 and threading.active_count() <= threads
    finally:
        release.set()
    _wait_until(lambda: not running)
    _wait_until(lambda: "result" in raw.call(session, 99, "echo", {"text": "ok"}).json())
    again = raw.call(session, 4, "echo", {"text": "back"})  # refused as busy: not spent
    assert again.json()["result"]["content"][0]["text"] == "back"


def test_a_slow_verifier_cannot_add_threads_past_its_pool(servers: list[McpServer]) -> None:
    """Review finding 3: verifier calls that time out (anonymous junk tokens) keep their
    threads counted; with max_callback_threads taken, a request is 503 server_busy at
    once, and no thread is added."""
    release = threading.Event()
    calls = []

    def verify(token: str) -> str | None:
        calls.append(token)
        if token.startswith("junk"):
            release.wait(10)
            return None
        return "alice" if token == "alice-token-0123456789" else None

    server = _serve(servers, verifier=verify, callback_timeout=0.05, max_callback_threads=2)
    try:
        for n in range(2):
            assert Raw(server, f"junk-{n}").post(_initialize()).status_code == 401
        threads = threading.active_count()
        for n in range(2, 10):
            busy = Raw(server, f"junk-{n}").post(_initialize())
            assert busy.status_code == 503
            assert busy.json()["error"]["code"] == -32000
        assert len(calls) == 2 and threading.active_count() <= threads
    finally:
        release.set()
    _wait_until(
        lambda: Raw(server, "alice-token-0123456789").post(_initialize()).status_code == 200
    )


def test_max_sessions_holds_under_concurrent_initializes(servers: list[McpServer]) -> None:
    """Review finding 7: concurrent initializes open exactly max_sessions sessions; every
    other one gets the same -32000 "Session capacity reached"."""
    server = _serve(servers, max_sessions=2)
    count = 24
    barrier = threading.Barrier(count)
    answers: list[httpx.Response] = []

    def initialize() -> None:
        raw = Raw(server)
        barrier.wait(10)
        answers.append(raw.post(_initialize()))

    workers = [threading.Thread(target=initialize) for _ in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert len(answers) == count
    opened = [a for a in answers if "mcp-session-id" in a.headers]
    refused = [a for a in answers if "mcp-session-id" not in a.headers]
    assert len(opened) == 2
    assert {
        (a.status_code, a.json()["error"]["code"], a.json()["error"]["message"]) for a in refused
    } == {(200, -32000, "Session capacity reached")}


def test_max_response_bytes_bounds_every_answer(servers: list[McpServer]) -> None:
    """Review finding 11 / the spec's max_response_bytes: a tool result past it is the
    tool error mcp_response_too_large, a resource past it is -32603, and an encoded
    answer past it (a result whose structured copy doubles it) is -32603 "Response
    exceeds limit"; small answers pass."""

    @adk.tool
    def blob(size: int) -> str:
        """A string of `size` characters."""
        return "b" * size

    resources = [{"uri": "memo://big", "name": "big", "read": lambda: "r" * 4096}]
    raw = Raw(_serve(servers, tools=[blob], resources=resources, max_response_bytes=1024))
    session = raw.open()
    assert raw.call(session, 2, "blob", {"size": 100}).json()["result"]["isError"] is False
    too_large = raw.call(session, 3, "blob", {"size": 2000}).json()["result"]
    assert too_large["isError"] is True
    assert "mcp_response_too_large" in too_large["content"][0]["text"]
    doubled = raw.call(session, 4, "blob", {"size": 700}).json()
    assert doubled["error"] == {"code": -32603, "message": "Response exceeds limit"}
    assert doubled["id"] == 4
    read = raw.post(
        {"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {"uri": "memo://big"}},
        raw.session_headers(session),
    )
    assert read.json()["error"]["code"] == -32603


def test_max_response_bytes_is_bounded() -> None:
    """The spec's max_response_bytes: 256 bytes at least, a hard ceiling (64 MiB), 4 MiB
    by default."""
    assert server_options({}).max_response_bytes == 4 << 20
    bad: list[Any] = [255, (64 << 20) + 1, 1.5, True, None]
    for value in bad:
        with pytest.raises(AdkError) as refused:
            serve(tools=[echo], max_response_bytes=value)
        assert refused.value.reason == ("invalid_mcp_server_option", "max_response_bytes")


def test_unknown_options_are_named() -> None:
    with pytest.raises(AdkError) as refused:
        server_options({"colour": "red", "max_sessions": 3})
    assert refused.value.reason == ("invalid_mcp_server_option", ("unknown_keys", ["colour"]))
    with pytest.raises(AdkError) as tls:
        server_options({"tls_certfile": "/tmp/cert.pem"})
    assert tls.value.reason == ("invalid_mcp_server_option", "tls")


def test_the_accepted_non_loopback_modes_pass_the_checks() -> None:
    """The spec's non-loopback rule, the accepting side (no socket is bound on a
    non-loopback address): authentication, allow_non_loopback and TLS, direct or a
    trusted proxy; loopback needs none of them."""
    accepted = [
        {"host": "0.0.0.0", "allow_non_loopback": True, "trusted_tls_proxy": True},
        {
            "host": "::",
            "allow_non_loopback": True,
            "tls_certfile": "/etc/mcp/cert.pem",
            "tls_keyfile": "/etc/mcp/key.pem",
        },
    ]
    for options in accepted:
        check_exposure(server_options(options), authenticated=True)
        with pytest.raises(AdkError) as anonymous:
            check_exposure(server_options(options), authenticated=False)
        assert anonymous.value.reason == "mcp_non_loopback_requires_auth"
    for host in ("127.0.0.1", "::1", "127.5.6.7"):
        check_exposure(server_options({"host": host}), authenticated=False)
    with pytest.raises(AdkError) as named:
        check_exposure(server_options({"host": "localhost"}), authenticated=False)
    assert named.value.reason == "mcp_non_loopback_requires_auth"


def test_the_catalog_refuses_past_its_worker_pool() -> None:
    """Review finding 3, without HTTP in front (as ``adk mcp serve-stdio`` runs it): at
    most max_workers threads, abandoned ones included; past it a call is -32000 "Server
    busy" and no thread starts; once they end, calls run again."""
    from mcp.shared.exceptions import MCPError

    release = threading.Event()

    @adk.tool
    def hang() -> str:
        """Hang until the test releases it."""
        release.wait(10)
        return "late"

    catalog = McpCatalog([hang, echo], request_timeout=0.05, max_workers=1)

    async def scenario() -> None:
        late = await catalog.call_tool("hang", {})
        assert late.is_error and "mcp_timeout" in late.content[0].text  # type: ignore[union-attr]
        assert catalog.workers.abandoned == 1
        with pytest.raises(MCPError) as busy:
            await catalog.call_tool("echo", {"text": "a"})
        assert busy.value.error.code == -32000
        release.set()
        while catalog.workers.alive:
            await asyncio.sleep(0.01)
        assert catalog.workers.abandoned == 0
        again = await catalog.call_tool("echo", {"text": "b"})
        assert again.content[0].text == "b"  # type: ignore[union-attr]

    try:
        asyncio.run(asyncio.wait_for(scenario(), 20))
    finally:
        release.set()
