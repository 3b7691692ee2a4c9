"""Regressions of the client review (issue 19, review_client.md) in the shared outbound
rules, for both callers (MCP's reasons and A2A's): the guarded transport against a raw
HTTP/1.1 server on 127.0.0.1, the policy with injected resolvers (no DNS, no traffic)."""

from __future__ import annotations

import gzip
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

import adk_actors.mcp as mcp
from adk_actors.a2a.client import connect
from adk_actors.mcp import security
from adk_actors.outbound import (
    HttpPolicy,
    Observed,
    OriginAuth,
    is_public,
    parse_endpoint,
    reasons_for,
)
from tests.adk_actors.outbound.test_outbound_rules import raw_server, reason, response, run

A2A = reasons_for("a2a")
GZIP_JSON = "content-type: application/json\r\ncontent-encoding: gzip\r\n"


def test_the_shared_transport_asks_for_identity_and_refuses_compressed_bodies() -> None:
    """Review client 1 (MCP half, repro 8): the bound counts the bytes read, so every
    request asks for ``Accept-Encoding: identity`` and a gzip answer is refused (typed
    by the caller's reasons) instead of decoding past max_response_bytes."""
    bomb = gzip.compress(b"{" + b" " * (4 * 1024 * 1024) + b"}")

    async def main() -> Observed:
        server, port, seen = await raw_server(
            {"/mcp": response("200 OK", bomb, GZIP_JSON), "/ok": response("200 OK", b"{}")}
        )
        endpoint = security.parse_endpoint(f"http://127.0.0.1:{port}/mcp")
        observed = Observed()
        transport = security.GuardedTransport(
            endpoint, security.HttpPolicy(allow_http_loopback=True), observed, 1024 * 1024
        )
        async with server, httpx2.AsyncClient(transport=transport, trust_env=False) as client:
            with pytest.raises(httpx2.DecodingError):
                await client.post(endpoint.url, content=b"{}")
            assert (await client.get(f"http://127.0.0.1:{port}/ok")).text == "{}"
        assert all(b"accept-encoding: identity\r\n" in head.lower() for head in seen)
        return observed

    observed = run(main)
    assert observed.refused is not None
    assert observed.refused.reason == "mcp_unsupported_content_encoding"


class GzipAnswers(http.server.BaseHTTPRequestHandler):
    """Every POST answered with a gzip JSON body, whatever the request asked for."""

    body = gzip.compress(b'{"jsonrpc": "2.0", "id": 0, "result": {}}' + b" " * 65536)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-encoding", "gzip")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


def test_an_mcp_server_answering_gzip_is_a_typed_refusal() -> None:
    """Review client 1: the MCP client (the SDK reads the body itself) ends with the
    transport's typed refusal, not a body decoded past its bound."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), GzipAnswers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        refused = reason(
            lambda: mcp.connect(
                "streamable_http", url, allow_http_loopback=True, connect_timeout=5.0
            )
        )
        assert refused == "mcp_unsupported_content_encoding"
    finally:
        server.shutdown()
        server.server_close()


def test_the_loopback_only_rule_is_a_per_connection_policy() -> None:
    """Review client 2: a policy with ``loopback_only`` refuses (with that reason) any
    answer that is not all loopback, whatever the scheme and allow-lists."""
    policy = HttpPolicy(
        reasons=A2A,
        allowed_private_hosts=frozenset({"agent.local"}),
        resolver=lambda host, port: ["127.0.0.1", "10.0.0.7"],
        loopback_only="a2a_undeclared_auth_not_allowed",
    )
    endpoint = parse_endpoint("https://agent.local/a2a/v1", A2A)
    assert reason(lambda: policy.addresses(endpoint)) == "a2a_undeclared_auth_not_allowed"
    local = HttpPolicy(
        reasons=A2A,
        allowed_private_hosts=frozenset({"agent.local"}),
        resolver=lambda host, port: ["127.0.0.1"],
        loopback_only="a2a_undeclared_auth_not_allowed",
    )
    assert local.addresses(endpoint) == ["127.0.0.1"]


def test_the_resolver_answer_is_read_only_up_to_the_cap() -> None:
    """Review client nit 8: a resolver's (huge) answer is read up to
    max_resolved_addresses, never materialised; 3fff::/20 (RFC 9637) is not public."""
    consumed: list[int] = []

    def many(host: str, port: int) -> Iterator[str]:
        for index in range(100_000):
            consumed.append(index)
            yield f"93.184.{index // 256 % 256}.{index % 256}"

    policy = HttpPolicy(reasons=A2A, resolver=many, max_resolved_addresses=8)  # type: ignore[arg-type]
    found = policy.addresses(parse_endpoint("https://agent.example", A2A))
    assert len(found) == 8 and len(consumed) <= 9
    assert not is_public("3fff::1") and not is_public("3fff:0fff::1")
    assert is_public("2606:4700::1111")


def test_mcp_allowed_hosts_are_compared_in_normal_form() -> None:
    """Review client code health: allowed_hosts normalisation lives in HttpPolicy, so
    MCP's ``allowed_hosts=["API.example."]`` matches ``https://api.example/mcp`` as A2A's does."""
    policy = security.HttpPolicy(
        allowed_hosts=frozenset({"API.Example."}),
        allowed_private_hosts=frozenset({"[Internal.Example]"}),
        resolver=lambda host, port: ["93.184.216.34"],
    )
    assert policy.allowed_hosts == frozenset({"api.example"})
    assert policy.allowed_private_hosts == frozenset({"internal.example"})
    assert policy.addresses(security.parse_endpoint("https://api.example/mcp")) == ["93.184.216.34"]


def test_an_auth_callback_raising_timeout_error_keeps_the_mcp_reason() -> None:
    """Review client nit 9: only the auth_timeout itself is ``(..., "timeout")``; a
    callback that raises TimeoutError is "auth() raised", ``mcp_auth_callback_failed``
    as before the refactor (859f1b6)."""
    release = threading.Event()

    def raises() -> dict[str, str]:
        raise TimeoutError("the callback's own")

    def hangs() -> dict[str, str]:
        release.wait(5)
        return {}

    async def main() -> list[Any]:
        server, port, seen = await raw_server({"/": response("200 OK", b"{}")})
        endpoint = security.parse_endpoint(f"http://127.0.0.1:{port}/")
        reasons: list[Any] = []
        async with server:
            for callback, auth in (
                (raises, security.OriginAuth),
                (raises, lambda e, c, o: OriginAuth(e, c, o, A2A, timeout=5.0)),
                (hangs, lambda e, c, o: OriginAuth(e, c, o, A2A, timeout=0.2)),
            ):
                observed = Observed()
                client = httpx2.AsyncClient(
                    transport=security.GuardedTransport(
                        endpoint, security.HttpPolicy(allow_http_loopback=True), observed, 1024
                    ),
                    auth=auth(endpoint, callback, observed),
                    trust_env=False,
                )
                async with client:
                    with pytest.raises(httpx2.ConnectError):
                        await client.get(endpoint.url)
                assert observed.refused is not None
                reasons.append(observed.refused.reason)
        assert seen == []
        return reasons

    try:
        assert run(main) == [
            "mcp_auth_callback_failed",
            "a2a_auth_callback_failed",
            ("a2a_auth_callback_failed", "timeout"),
        ]
    finally:
        release.set()


class GzipRefusals(http.server.BaseHTTPRequestHandler):
    """Every request answered with `status` (and its headers) and a gzip body."""

    status = 401
    extra: dict[str, str] = {}
    body = gzip.compress(b'{"error": "refused"}')

    def answer(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(self.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-encoding", "gzip")
        for name, value in self.extra.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = do_POST = answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def gzip_refusals() -> Iterator[str]:
    """The URL of a `GzipRefusals` server on 127.0.0.1."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), GzipRefusals)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        GzipRefusals.status, GzipRefusals.extra = 401, {}
        server.shutdown()
        server.server_close()


REFUSALS = [
    (401, {"www-authenticate": 'Bearer error="invalid_token"'}, "unauthorized", "invalid_token"),
    (403, {"www-authenticate": 'Bearer error="insufficient_scope"'}, "forbidden", None),
    (302, {"location": "http://127.0.0.1:1/elsewhere"}, "redirect", None),
]


@pytest.mark.parametrize(("status", "extra", "kind", "why"), REFUSALS)
def test_a_refused_status_keeps_its_refusal_when_its_body_is_compressed(
    gzip_refusals: str, status: int, extra: dict[str, str], kind: str, why: Any
) -> None:
    """Review2 4 (repro2_6): the status is checked before the encoding, so a 401/403 or a
    redirect whose (never read) body is gzip gets its auth / redirect refusal, for A2A and
    MCP alike; the compressed body is dropped undecoded."""
    GzipRefusals.status, GzipRefusals.extra = status, extra
    url = gzip_refusals
    a2a_reason = reason(lambda: connect(url, allow_http_loopback=True, request_timeout=5.0))
    mcp_reason = reason(
        lambda: mcp.connect("streamable_http", url, allow_http_loopback=True, connect_timeout=5.0)
    )
    if kind == "redirect":
        assert a2a_reason == mcp_reason == "redirect_rejected"
    else:
        assert a2a_reason[0] == f"a2a_{kind}" and mcp_reason[0] == f"mcp_{kind}"
        assert why is None or a2a_reason[1] == mcp_reason[1] == why


def test_an_unread_compressed_body_is_dropped_by_the_transport() -> None:
    """Review2 4: at the transport, the 401's gzip body is never decoded (an empty
    identity body with the status and challenge kept) and the refusal is typed."""
    challenge = 'www-authenticate: Bearer error="invalid_token"\r\n'

    async def main() -> tuple[int, bytes, Any, Observed]:
        bomb = gzip.compress(b" " * (4 * 1024 * 1024))
        server, port, _ = await raw_server(
            {"/mcp": response("401 Unauthorized", bomb, GZIP_JSON + challenge)}
        )
        endpoint = parse_endpoint(f"http://127.0.0.1:{port}/mcp", A2A)
        observed = Observed()
        transport = security.GuardedTransport(
            endpoint, HttpPolicy(reasons=A2A, allow_http_loopback=True), observed, 1024
        )
        async with server, httpx2.AsyncClient(transport=transport, trust_env=False) as client:
            answer = await client.get(endpoint.url)
        return answer.status_code, answer.content, answer.headers.get("www-authenticate"), observed

    status, body, kept, observed = run(main)
    assert (status, body, kept) == (401, b"", 'Bearer error="invalid_token"')
    assert observed.refused is not None
    assert observed.refused.reason == ("a2a_unauthorized", "invalid_token")
    assert observed.too_large == 0
