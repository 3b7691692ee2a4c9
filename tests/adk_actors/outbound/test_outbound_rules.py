"""The shared outbound rules (`adk_actors.outbound`), named by each caller's reasons:
URL parsing, address checks with an injected resolver (no DNS, no traffic to the
refused addresses), credential headers, and the guarded transport against a raw HTTP
server on 127.0.0.1. The MCP client's own cases are tests/adk_actors/mcp/test_security.py."""

from __future__ import annotations

import asyncio
import ipaddress
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import pytest

from adk_actors.mcp.security import MCP_REASONS
from adk_actors.outbound import (
    GuardedTransport,
    HttpPolicy,
    Observed,
    OriginAuth,
    ResponseTooLarge,
    auth_headers,
    auth_refusal,
    embedded_ipv4,
    is_public,
    parse_endpoint,
    reasons_for,
)
from providers.errors import AdkError

A2A = reasons_for("a2a")


def reason(fn: Callable[[], Any]) -> Any:
    with pytest.raises(AdkError) as info:
        fn()
    return info.value.reason


def test_each_protocol_names_its_refusals() -> None:
    assert A2A.invalid_url == "invalid_a2a_url"
    assert A2A.private_destination_rejected == "a2a_private_destination_rejected"
    assert MCP_REASONS.insecure_destination == "insecure_mcp_destination"
    assert reason(lambda: parse_endpoint("ftp://x", A2A)) == ("invalid_a2a_url", "scheme")
    assert reason(lambda: parse_endpoint("ftp://x", MCP_REASONS)) == ("invalid_mcp_url", "scheme")
    endpoint = parse_endpoint("https://Agent.Example.:8443/a2a/v1", A2A)
    assert endpoint.origin == ("https", "agent.example", 8443) and endpoint.path == "/a2a/v1"


def test_the_policy_checks_every_address_with_the_callers_reasons() -> None:
    asked: list[tuple[str, int]] = []

    def resolver(answer: list[str]) -> Callable[[str, int], list[str]]:
        def resolve(host: str, port: int) -> list[str]:
            asked.append((host, port))
            return answer

        return resolve

    endpoint = parse_endpoint("https://agent.example", A2A)
    assert HttpPolicy(reasons=A2A, resolver=resolver(["93.184.216.34"])).addresses(endpoint) == [
        "93.184.216.34"
    ]
    refused = HttpPolicy(reasons=A2A, resolver=resolver(["93.184.216.34", "::ffff:10.0.0.1"]))
    assert reason(lambda: refused.addresses(endpoint)) == "a2a_private_destination_rejected"
    allowed = HttpPolicy(
        reasons=A2A,
        resolver=resolver(["10.0.0.1"]),
        allowed_private_hosts=frozenset({"agent.example"}),
    )
    assert allowed.addresses(endpoint) == ["10.0.0.1"]
    only = HttpPolicy(
        reasons=A2A,
        allowed_hosts=frozenset({"other.example"}),
        resolver=resolver(["93.184.216.34"]),
    )
    assert reason(lambda: only.addresses(endpoint)) == "a2a_destination_not_allowed"
    cleartext = parse_endpoint("http://agent.example", A2A)
    assert (
        reason(lambda: HttpPolicy(reasons=A2A).addresses(cleartext)) == "insecure_a2a_destination"
    )
    loopback = HttpPolicy(
        reasons=A2A, allow_http_loopback=True, resolver=resolver(["127.0.0.1", "10.0.0.1"])
    )
    assert reason(lambda: loopback.addresses(cleartext)) == "insecure_a2a_destination"
    bounded = HttpPolicy(
        reasons=A2A, resolver=resolver(["93.184.216.34"] * 10), max_resolved_addresses=3
    )
    assert len(bounded.addresses(endpoint)) == 3
    literal = parse_endpoint("https://10.0.0.1", A2A)
    assert reason(lambda: HttpPolicy(reasons=A2A, resolver=resolver([])).addresses(literal)) == (
        "a2a_private_destination_rejected"
    )
    assert ("10.0.0.1", 443) not in asked  # an IP literal is never resolved


def test_ipv4_carried_in_ipv6_is_judged_by_the_ipv4_rules() -> None:
    teredo = ipaddress.IPv6Address("2001:0:4136:e378:8000:63bf:3fff:fdd2")
    assert [str(ip) for ip in embedded_ipv4(teredo)] == ["65.54.227.120", "192.0.2.45"]
    assert not is_public("64:ff9b::7f00:1") and not is_public("2002:a9fe:a9fe::1")
    assert is_public("2606:4700:4700::1111") and is_public("1.1.1.1")


def test_credential_headers_are_named_bounded_and_single_line() -> None:
    assert auth_headers({}, A2A) == {}
    assert auth_headers({"Authorization": "Bearer t"}, A2A) == {"authorization": "Bearer t"}
    assert auth_headers({"X-API-Key": "k"}, A2A, {"x-api-key"}) == {"x-api-key": "k"}
    for bad in (
        {"Cookie": "a"},
        {"Authorization": "a\r\nHost: x"},
        {"Authorization": ""},
        ["Authorization"],
    ):
        assert reason(lambda bad=bad: auth_headers(bad, A2A)) == "invalid_a2a_auth_header"
    assert (
        reason(lambda: auth_headers({"Authorization": "a", "authorization": "b"}, A2A))
        == "invalid_a2a_auth_header"
    )
    assert auth_refusal(401, 'Bearer error="invalid_token"', A2A).reason == (
        "a2a_unauthorized",
        "invalid_token",
    )
    assert auth_refusal(403, "", MCP_REASONS).reason == ("mcp_forbidden", "forbidden")


# -- the transport against a raw HTTP server --------------------------------------------


async def raw_server(answers: dict[str, bytes]) -> tuple[asyncio.Server, int, list[bytes]]:
    """An HTTP/1.1 server on 127.0.0.1 answering each path with canned bytes."""
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head)
        path = head.split(b" ", 2)[1].decode()
        writer.write(answers[path])
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], seen


def response(status: str, body: bytes = b"", extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-length: {len(body)}\r\nconnection: close\r\n{extra}\r\n".encode()
        + body
    )


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(main())  # type: ignore[arg-type]


def test_the_guarded_transport_keeps_to_its_origin_and_bounds_bodies() -> None:
    """Auth only to the endpoint's origin, another origin refused with the caller's
    reason, redirects and lost sessions recorded, a body past the bound cut off."""
    calls: list[int] = []

    async def main() -> None:
        answers = {
            "/ok": response("200 OK", b"fine"),
            "/moved": response("302 Found", extra="location: https://elsewhere.example/\r\n"),
            "/gone": response("404 Not Found"),
            "/big": response("200 OK", b"x" * 5000),
        }
        server, port, seen = await raw_server(answers)
        base = f"http://127.0.0.1:{port}/"
        endpoint = parse_endpoint(base, A2A)
        policy = HttpPolicy(reasons=A2A, allow_http_loopback=True)
        observed = Observed()

        def token() -> dict[str, str]:
            calls.append(1)
            return {"Authorization": "Bearer t"}

        client = httpx2.AsyncClient(
            transport=GuardedTransport(
                endpoint, policy, observed, 1024, session_header="session-id"
            ),
            auth=OriginAuth(endpoint, token, observed, A2A),
            follow_redirects=False,
            trust_env=False,
        )
        async with server, client:
            assert (await client.get(base + "ok")).text == "fine"
            assert b"authorization: Bearer t" in seen[-1]
            assert (await client.get(base + "moved")).status_code == 302
            assert observed.redirects == 1 and len(seen) == 2
            await client.get(base + "gone", headers={"session-id": "s-1"})
            assert observed.session_lost == 1
            with pytest.raises(ResponseTooLarge):
                await client.get(base + "big")
            assert observed.too_large == 1
            with pytest.raises(httpx2.ConnectError):
                await client.get(f"http://127.0.0.2:{port}/ok")
            assert (
                observed.refused is not None
                and observed.refused.reason == "a2a_destination_not_allowed"
            )
            assert len(seen) == 4 and len(calls) == 4  # the other origin got no credentials

    run(main)


def test_a_hung_resolver_is_abandoned_when_the_call_is_cancelled() -> None:
    """The pinned backend's resolution runs on a thread the cancelled call leaves
    behind, so a deadline holds even if the resolver never answers."""
    release = threading.Event()

    def hung(host: str, port: int) -> list[str]:
        release.wait(10)
        return ["127.0.0.1"]

    async def main() -> float:
        endpoint = parse_endpoint("http://agent.test:9/", A2A)
        policy = HttpPolicy(reasons=A2A, allow_http_loopback=True, resolver=hung)
        client = httpx2.AsyncClient(
            transport=GuardedTransport(endpoint, policy, Observed(), 1024), trust_env=False
        )
        started = time.monotonic()
        async with client:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await client.get(endpoint.url)
        return time.monotonic() - started

    try:
        assert run(main) < 5.0
    finally:
        release.set()
