"""The Streamable HTTP client's security rules (spec "MCP clients": HTTPS by default,
cleartext only to loopback with the opt-in, every resolved address validated, the
validated address pinned, no redirects, credentials only from the auth callback and
never across origins; behaviors.md §12 client line). Private addresses come only from
a resolver stub: no traffic is ever sent to them."""

from __future__ import annotations

import asyncio
import ipaddress
import threading
import time

import httpx2
import pytest
from mcp.server.transport_security import TransportSecuritySettings

import adk_actors as adk
from adk_actors import mcp
from adk_actors.mcp.security import (
    Observed,
    OriginAuth,
    embedded_ipv4,
    is_public,
    parse_endpoint,
)
from tests.adk_actors.mcp.conftest import Recorder, reason
from tests.adk_actors.mcp.servers import sdk_server


class StubResolver:
    """Answers from a table and records every question."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked = []

    def __call__(self, host, port):
        self.asked.append((host, port))
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@adk.tool
def echo_tool(text: str) -> str:
    """Echo `text`."""
    return text


def recorded_sdk_app(recorders, **options):
    def make():
        recorders.append(Recorder(sdk_server.build().streamable_http_app(**options)))
        return recorders[-1]

    return make


def test_cleartext_needs_the_loopback_opt_in(http_server):
    """Follows erlang_adk test/protocols/mcp/adk_mcp_test.erl:
    mcp_client_rejects_cleartext_bearer_without_explicit_loopback_opt_in_test_."""
    recorders = []
    server = http_server(recorded_sdk_app(recorders))
    assert reason(lambda: mcp.connect("streamable_http", server.base + "/mcp")) == (
        "insecure_mcp_destination"
    )
    assert recorders[-1].requests == []  # refused before any traffic
    resolver = StubResolver(["10.1.2.3"])
    assert (
        reason(
            lambda: mcp.connect(
                "streamable_http",
                "http://mcp.internal.test/mcp",
                allow_http_loopback=True,
                resolver=resolver,
            )
        )
        == "insecure_mcp_destination"
    )
    assert resolver.asked == [("mcp.internal.test", 80)]


@pytest.mark.parametrize(
    "addresses",
    [
        ["10.0.0.5"],
        ["192.168.1.10"],
        ["172.16.0.1"],
        ["127.0.0.1"],
        ["169.254.169.254"],
        ["100.64.0.1"],
        ["0.0.0.0"],
        ["224.0.0.1"],
        ["240.0.0.1"],
        ["::1"],
        ["fe80::1"],
        ["fc00::1"],
        ["::ffff:10.0.0.1"],
        ["8.8.8.8", "10.0.0.5"],  # one bad address is enough
    ],
)
def test_https_to_private_reserved_or_metadata_addresses_is_refused(addresses):
    """Follows erlang_adk test/protocols/mcp/adk_mcp_test.erl:
    mcp_client_rejects_private_and_mixed_dns_destinations_test."""
    resolver = StubResolver(addresses)
    assert (
        reason(
            lambda: mcp.connect(
                "streamable_http", "https://mcp.example.test/mcp", resolver=resolver
            )
        )
        == "mcp_private_destination_rejected"
    )
    assert resolver.asked == [("mcp.example.test", 443)]


def test_address_rules():
    assert is_public("8.8.8.8") and is_public("2001:4860:4860::8888")
    assert not is_public("169.254.169.254") and not is_public("fd00:ec2::254")
    assert not is_public("::ffff:127.0.0.1")


@pytest.mark.parametrize(
    "address",
    [
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254 (metadata)
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "2002:a00:1::1",  # 6to4 of 10.0.0.1
        "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
        "2002:6440:1::1",  # 6to4 of 100.64.0.1 (shared)
        "64:ff9b::a9fe:a9fe",  # NAT64 well-known prefix
        "64:ff9b::7f00:1",
        "64:ff9b:1::a00:1",  # NAT64 local-use prefix (/96 layout)
        "64:ff9b:1:a00:0:100::",  # NAT64 local-use prefix (/48 layout) of 10.0.0.1
        "::ffff:169.254.169.254",  # IPv4-mapped
        "::ffff:10.0.0.1",
        "::127.0.0.1",  # IPv4-compatible
        "::10.0.0.1",
        "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo, client 10.0.0.1
    ],
)
def test_ipv6_forms_that_embed_a_private_ipv4_are_refused(address):
    """Every IPv6 form that carries an IPv4 address (6to4, NAT64, IPv4-mapped,
    IPv4-compatible, Teredo) is judged by the IPv4 rules too: none tunnels to a
    private, loopback, shared or metadata address."""
    assert not is_public(address)
    resolver = StubResolver([address])
    assert reason(
        lambda: mcp.connect("streamable_http", "https://mcp.example.test/mcp", resolver=resolver)
    ) == ("mcp_private_destination_rejected")


def test_embedded_ipv4_is_extracted_from_every_form():
    found = {
        address: [str(ip) for ip in embedded_ipv4(ipaddress.IPv6Address(address))]
        for address in (
            "2002:808:808::1",
            "64:ff9b::808:808",
            "::ffff:8.8.8.8",
            "::8.8.8.8",
            "2001:0:4136:e378:8000:63bf:f5ff:fffe",
            "2606:4700::1111",
        )
    }
    assert found == {
        "2002:808:808::1": ["8.8.8.8"],
        "64:ff9b::808:808": ["8.8.8.8"],
        "::ffff:8.8.8.8": ["8.8.8.8"],
        "::8.8.8.8": ["8.8.8.8"],
        "2001:0:4136:e378:8000:63bf:f5ff:fffe": ["65.54.227.120", "10.0.0.1"],
        "2606:4700::1111": [],
    }
    assert is_public("2002:808:808::1")  # 6to4 of a public address stays public


def test_401_and_403_have_their_own_reasons():
    """A 401 (no or a wrong bearer) and a 403 (authorization refused) are typed as
    ``mcp_unauthorized`` and ``mcp_forbidden`` from the Bearer challenge, not as a
    generic JSON-RPC error."""
    token = "t" * 32

    def authorize(principal, method, resource):
        return method != "tools/call" or "insufficient_scope"

    server = mcp.serve(tools=[echo_tool], auth_token=token, authorization_fun=authorize)
    try:
        assert reason(
            lambda: mcp.connect("streamable_http", server.url, allow_http_loopback=True)
        ) == ("mcp_unauthorized", "token_required")
        wrong = {"Authorization": "Bearer " + "w" * 32}
        assert reason(
            lambda: mcp.connect(
                "streamable_http", server.url, allow_http_loopback=True, auth=lambda: wrong
            )
        ) == ("mcp_unauthorized", "invalid_token")
        client = mcp.connect(
            "streamable_http",
            server.url,
            allow_http_loopback=True,
            auth=lambda: {"Authorization": f"Bearer {token}"},
        )
        assert [tool.name for tool in client.list_tools()] == ["echo_tool"]
        assert reason(lambda: client.call_tool("echo_tool", {"text": "hi"})) == (
            "mcp_forbidden",
            "insufficient_scope",
        )
        client.close()
    finally:
        server.stop()


def test_hosts_and_urls():
    resolver = StubResolver(["8.8.8.8"])
    assert (
        reason(
            lambda: mcp.connect(
                "streamable_http",
                "https://other.example.test/mcp",
                resolver=resolver,
                allowed_hosts=["mcp.example.test"],
            )
        )
        == "mcp_destination_not_allowed"
    )
    assert resolver.asked == []
    for url, why in [
        ("https://user:pw@mcp.example.test/mcp", "userinfo"),
        ("https://mcp.example.test/mcp?token=x", "query_or_fragment"),
        ("https://mcp.example.test/mcp#x", "query_or_fragment"),
        ("ftp://mcp.example.test/mcp", "scheme"),
        ("https:///mcp", "host"),
    ]:
        assert reason(lambda url=url: parse_endpoint(url)) == ("invalid_mcp_url", why)
    failing = StubResolver([])
    assert (
        reason(lambda: mcp.connect("streamable_http", "https://gone.test/mcp", resolver=failing))
        == "mcp_dns_resolution_failed"
    )


def test_a_hung_resolver_costs_no_more_than_the_connect_timeout():
    release = threading.Event()

    def hung(host, port):
        release.wait(10)
        return ["8.8.8.8"]

    started = time.monotonic()
    try:
        assert (
            reason(
                lambda: mcp.connect(
                    "streamable_http",
                    "https://slow-dns.example.test/mcp",
                    resolver=hung,
                    connect_timeout=0.3,
                )
            )
            == "mcp_connect_timeout"
        )
        assert time.monotonic() - started < 2.0
    finally:
        release.set()


def test_static_headers_are_refused():
    """Follows erlang_adk test/protocols/mcp/adk_mcp_test.erl:
    mcp_client_rejects_static_secret_and_transport_headers_test and
    mcp_client_rejects_proxy_authorization_test_."""
    for option in ("headers", "cookies", "proxy_authorization"):
        assert (
            reason(
                lambda option=option: mcp.connect(
                    "streamable_http",
                    "https://mcp.example.test/mcp",
                    **{option: {"Authorization": "Bearer x"}},
                )
            )
            == "static_headers_not_supported"
        )


def test_the_validated_address_is_pinned(http_server):
    """Follows erlang_adk test/protocols/mcp/adk_mcp_test.erl:
    mcp_client_pins_validated_address_and_preserves_origin_headers_test_.
    The host name is resolved by the policy (here a stub answering loopback), the
    connection goes to that address and the request keeps its Host header."""
    recorders = []
    no_rebinding_check = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    server = http_server(recorded_sdk_app(recorders, transport_security=no_rebinding_check))
    resolver = StubResolver(["127.0.0.1"])
    url = f"http://mcp.pinned.test:{server.port}/mcp"
    client = mcp.connect("streamable_http", url, allow_http_loopback=True, resolver=resolver)
    assert client.call_tool("add", {"a": 1, "b": 2}).content[0]["text"] == "3"
    assert ("mcp.pinned.test", server.port) in resolver.asked
    assert set(recorders[-1].hosts) == {f"mcp.pinned.test:{server.port}"}
    client.close()


def test_an_answer_that_changes_after_the_check_is_never_used(http_server):
    """DNS rebinding: the check passes on loopback, the connection-time answer is
    private: the connection is refused before any traffic."""
    recorders = []
    server = http_server(recorded_sdk_app(recorders))
    resolver = StubResolver(["127.0.0.1"], ["10.0.0.1"])
    url = f"http://mcp.rebind.test:{server.port}/mcp"
    assert (
        reason(
            lambda: mcp.connect("streamable_http", url, allow_http_loopback=True, resolver=resolver)
        )
        == "insecure_mcp_destination"
    )
    assert len(resolver.asked) == 2
    assert recorders[-1].requests == []


async def redirect_to(location, seen, scope, receive, send):
    if scope["type"] != "http":
        return
    headers = dict(scope.get("headers") or [])
    seen.append((scope["method"], scope["path"], headers.get(b"authorization")))
    await send(
        {
            "type": "http.response.start",
            "status": 307,
            "headers": [(b"location", location.encode()), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})


def test_redirects_are_refused_and_credentials_stay_on_the_origin(http_server):
    """Follows erlang_adk test/protocols/mcp/adk_mcp_test.erl:
    mcp_client_rejects_redirect_without_forwarding_credentials_test_."""
    recorders = []
    target = http_server(recorded_sdk_app(recorders))
    seen = []
    redirector = http_server(
        lambda: (
            lambda scope, receive, send: redirect_to(
                target.base + "/mcp", seen, scope, receive, send
            )
        )
    )
    assert (
        reason(
            lambda: mcp.connect(
                "streamable_http",
                redirector.base + "/mcp",
                allow_http_loopback=True,
                auth=lambda: {"Authorization": "Bearer origin-token"},
            )
        )
        == "redirect_rejected"
    )
    assert seen and seen[0][2] == b"Bearer origin-token"  # the endpoint's own origin
    assert recorders[-1].requests == []  # the other origin got nothing, credentials least
    same_origin = http_server(
        lambda: lambda scope, receive, send: redirect_to("/elsewhere", [], scope, receive, send)
    )
    assert (
        reason(
            lambda: mcp.connect(
                "streamable_http", same_origin.base + "/mcp", allow_http_loopback=True
            )
        )
        == "redirect_rejected"
    )


def test_the_auth_callback_is_called_per_request(http_server):
    recorders = []
    server = http_server(recorded_sdk_app(recorders))
    tokens = iter(f"Bearer t{n}" for n in range(1000))
    client = mcp.connect(
        "streamable_http",
        server.base + "/mcp",
        allow_http_loopback=True,
        auth=lambda: {"Authorization": next(tokens)},
    )
    client.call_tool("add", {"a": 1, "b": 2})
    sent = [auth for method, _, auth in recorders[-1].requests if method == "POST"]
    assert all(auth and auth.startswith("Bearer t") for auth in sent)
    assert len(set(sent)) == len(sent)  # a fresh header for each request
    client.close()
    bad = mcp.connect  # an auth callback may return only one Authorization header
    assert (
        reason(
            lambda: bad(
                "streamable_http",
                server.base + "/mcp",
                allow_http_loopback=True,
                auth=lambda: {"Cookie": "session=1"},
            )
        )
        == "invalid_mcp_auth_header"
    )


def test_origin_auth_never_calls_back_for_another_origin():
    called = []
    endpoint = parse_endpoint("https://mcp.example.test/mcp")
    flow_auth = OriginAuth(endpoint, lambda: called.append(1) or {"Authorization": "x"}, Observed())

    async def run(url):
        request = httpx2.Request("POST", url)
        flow = flow_auth.async_auth_flow(request)
        sent = await flow.__anext__()
        await flow.aclose()
        return sent.headers.get("authorization")

    assert asyncio.run(run("https://evil.example.test/mcp")) is None
    assert asyncio.run(run("http://mcp.example.test/mcp")) is None  # another scheme
    assert asyncio.run(run("https://mcp.example.test:8443/mcp")) is None  # another port
    assert called == []
    assert asyncio.run(run("https://mcp.example.test/other")) == "x"
    assert called == [1]
