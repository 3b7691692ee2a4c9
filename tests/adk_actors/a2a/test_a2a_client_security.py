"""The A2A client's outbound rules (spec "A2A 1.0 interoperability": the outbound
client; behaviors.md §12 client line), against the scripted loopback peer of
test_a2a_client.py. Private and public destinations come only from a resolver stub:
no traffic is ever sent to them.

Follows erlang_adk test/protocols/a2a/v1/adk_a2a_v1_client_security_test.erl (each
test names its case).
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from adk_actors.a2a.client import connect
from tests.adk_actors.a2a.test_a2a_client import (
    FixturePeer,
    local,
    make_peer,
    peer,
    plain_card,
    reason,
    rpc_failure,
)
from tests.adk_actors.mcp.pki import write_test_pki

__all__ = ["make_peer", "peer"]  # the fixtures, shared with test_a2a_client.py

BEARER = {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
API_KEY = {"api-key": {"apiKeySecurityScheme": {"name": "X-API-Key", "location": "header"}}}


def secure_card(rpc_url: str) -> dict[str, Any]:
    return plain_card(
        rpc_url, security_schemes=BEARER, security_requirements=[{"schemes": {"bearer": {}}}]
    )


class StubResolver:
    """Answers from a list (the last answer repeats) and records every question."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> Any:
        self.asked.append((host, port))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


class Calls:
    """A credential callback that counts its calls."""

    def __init__(self, value: str, name: str = "Authorization") -> None:
        self.headers = {name: value}
        self.count = 0

    def __call__(self) -> dict[str, str]:
        self.count += 1
        return dict(self.headers)


# -- destinations ------------------------------------------------------------------------


def test_safe_destination_defaults_and_exact_host_policy(
    make_peer: Callable[..., FixturePeer],
) -> None:
    """Follows adk_a2a_v1_client_security_test: safe_destination_defaults_and_exact_host_policy_test."""
    peer = make_peer()
    assert reason(lambda: connect(peer.base, request_timeout=2.0)) == "insecure_a2a_destination"
    assert (
        reason(lambda: local(peer, allowed_hosts=["other.example"]))
        == "a2a_destination_not_allowed"
    )
    assert peer.requests == []
    metadata = make_peer(lambda rpc_url: plain_card("https://169.254.169.254/a2a/v1"))
    remote = local(metadata, allowed_interface_origins=["https://169.254.169.254"])
    assert reason(lambda: remote.get_task("task")) == "a2a_private_destination_rejected"
    private = make_peer(lambda rpc_url: plain_card("http://10.0.0.1/a2a/v1"))
    remote = local(private, allowed_interface_origins=["http://10.0.0.1"])
    assert reason(lambda: remote.get_task("task")) == "insecure_a2a_destination"
    assert local(peer).get_task("task")["id"] == "task-1"
    assert [request["authorization"] for request in peer.seen("rpc")] == [None]


@pytest.mark.parametrize(
    "addresses",
    [
        ["10.1.2.3"],
        ["93.184.216.34", "192.168.1.9"],  # one private address among public ones is enough
        ["169.254.169.254"],
        ["::ffff:169.254.169.254"],  # IPv4-mapped
        ["64:ff9b::a9fe:a9fe"],  # NAT64 of the metadata address
        ["2002:0a00:0001::1"],  # 6to4 of 10.0.0.1
        ["fd00:ec2::254"],
        ["100.64.0.1"],
    ],
)
def test_every_resolved_address_is_checked_before_anything_connects(addresses: list[str]) -> None:
    resolver = StubResolver(addresses)
    refused = reason(
        lambda: connect("https://agent.example", resolver=resolver, request_timeout=2.0)
    )
    assert refused == "a2a_private_destination_rejected"
    assert resolver.asked == [("agent.example", 443)]


def test_unresolvable_hosts_and_bad_urls_are_typed() -> None:
    """Follows adk_a2a_v1_client_security_test: resolver_heap_and_result_are_bounded_test
    (a failing or malformed resolver answer is a DNS failure)."""
    for answer in (OSError("no such host"), [], ["not-an-address"], [8]):
        assert (
            reason(
                lambda answer=answer: connect("https://x.example", resolver=StubResolver(answer))
            )
            == "a2a_dns_resolution_failed"
        )
    assert reason(lambda: connect("ftp://x.example")) == ("invalid_a2a_url", "scheme")
    assert reason(lambda: connect("https://user:secret@x.example")) == (
        "invalid_a2a_url",
        "userinfo",
    )
    assert reason(lambda: connect("https://x.example/card?token=1")) == (
        "invalid_a2a_url",
        "query_or_fragment",
    )
    assert reason(lambda: connect(42)) == ("invalid_a2a_url", "not_a_url")  # type: ignore[arg-type]


def test_each_connection_resolves_again_and_connects_to_the_validated_address(
    make_peer: Callable[..., FixturePeer],
) -> None:
    """The host name stays in the request (Host header) while the connection goes to
    the address validated just then; an answer that changes to a non-loopback address
    is refused (DNS rebinding)."""
    peer = make_peer(lambda rpc_url: plain_card(rpc_url.replace("127.0.0.1", "agent.test")))
    resolver = StubResolver(["127.0.0.1"], ["127.0.0.1"], ["10.0.0.7"])
    remote = connect(f"http://agent.test:{peer.port}", resolver=resolver, allow_http_loopback=True)
    assert remote.get_task("task-1")["id"] == "task-1"
    assert {request["host"] for request in peer.requests} == {f"agent.test:{peer.port}"}
    assert reason(lambda: remote.get_task("task-1")) == "insecure_a2a_destination"
    assert len(peer.seen("rpc")) == 1
    assert resolver.asked == [("agent.test", peer.port)] * 3


def test_a_private_https_host_needs_allowed_private_hosts(peer: FixturePeer) -> None:
    """allowed_private_hosts lets the named https host resolve to loopback (the TLS
    handshake with the plain-HTTP fixture then fails, typed)."""
    url = f"https://agent.internal:{peer.port}"
    resolver = StubResolver(["127.0.0.1"])
    assert reason(lambda: connect(url, resolver=resolver)) == "a2a_private_destination_rejected"
    assert (
        reason(lambda: connect(url, resolver=resolver, allowed_private_hosts=["agent.internal"]))
        == "a2a_tls_failed"
    )


def test_https_verifies_the_host_name_and_keeps_it_for_sni(
    make_peer: Callable[..., FixturePeer], tmp_path: Path
) -> None:
    """TLS to a private https host (allowed_private_hosts, a test CA via ssl_context):
    the connection goes to the validated address, the certificate is checked against
    the host name, and the bearer goes only over it; another name or no trust fails."""
    trust = write_test_pki(tmp_path, "agent.internal", x509.DNSName("agent.internal"))
    files = (str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
    peer = make_peer(secure_card, tls=files, host="agent.internal")
    options: dict[str, Any] = {
        "resolver": StubResolver(["127.0.0.1"]),
        "allowed_private_hosts": ["agent.internal"],
        "auth": Calls("Bearer over-tls"),
        "auth_scheme": "bearer",
        "request_timeout": 5.0,
    }
    remote = connect(peer.base, ssl_context=trust, **options)
    assert remote.get_task("task")["id"] == "task-1"
    assert peer.seen("rpc")[0]["authorization"] == "Bearer over-tls"
    assert {request["host"] for request in peer.requests} == {f"agent.internal:{peer.port}"}
    assert reason(lambda: connect(peer.base, **options)) == "a2a_tls_failed"  # system CAs only
    other = tmp_path / "other"
    other.mkdir()
    wrong = write_test_pki(other, "ip", x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    named = make_peer(
        secure_card, tls=(str(other / "cert.pem"), str(other / "key.pem")), host="agent.internal"
    )
    assert reason(lambda: connect(named.base, ssl_context=wrong, **options)) == "a2a_tls_failed"
    assert len(peer.seen("rpc")) == 1 and named.requests == []


def test_redirects_are_not_followed(make_peer: Callable[..., FixturePeer]) -> None:
    """Follows adk_a2a_v1_client_security_test: redirects_are_not_followed_test."""
    peer = make_peer(lambda rpc_url: plain_card(rpc_url + "/redirect"))
    remote = local(peer)
    assert reason(lambda: remote.get_task("task")) == "redirect_rejected"
    assert len(peer.seen("redirect")) == 1
    assert peer.seen("rpc") == []


def test_cross_origin_discovery_requires_exact_origin_allowlist(
    make_peer: Callable[..., FixturePeer],
) -> None:
    """Follows adk_a2a_v1_client_security_test: cross_origin_discovery_requires_exact_origin_allowlist_test."""
    other = "http://127.0.0.1:9"
    peer = make_peer(lambda rpc_url: plain_card(other + "/a2a/v1"))
    assert reason(lambda: local(peer)) == "a2a_cross_origin_interface"
    remote = local(peer, allowed_interface_origins=[other])
    assert remote.rpc_url == other + "/a2a/v1"
    assert len(peer.seen("card")) == 2


# -- credentials -------------------------------------------------------------------------


def test_discovery_and_rpc_credentials_are_separated(peer: FixturePeer) -> None:
    """Follows adk_a2a_v1_client_security_test: discovery_and_rpc_credentials_are_separated_test."""
    rpc_auth, discovery_auth = Calls("Bearer rpc-private"), Calls("Bearer discovery-private")
    remote = local(peer, auth=rpc_auth)
    assert peer.seen("card")[-1]["authorization"] is None and rpc_auth.count == 0
    remote = local(peer, auth=rpc_auth, discovery_auth=discovery_auth)
    assert peer.seen("card")[-1]["authorization"] == "Bearer discovery-private"
    assert discovery_auth.count == 1 and rpc_auth.count == 0
    remote.get_task("task")  # the card declares no security: no credentials
    assert peer.seen("rpc")[-1]["authorization"] is None and rpc_auth.count == 0
    remote = local(peer, auth=rpc_auth, allow_undeclared_auth=True)
    remote.get_task("task")
    remote.get_task("task")
    assert [request["authorization"] for request in peer.seen("rpc")[-2:]] == [
        "Bearer rpc-private"
    ] * 2
    assert rpc_auth.count == 2  # called for every request
    assert discovery_auth.count == 1


def test_undeclared_auth_goes_to_loopback_only(make_peer: Callable[..., FixturePeer]) -> None:
    """allow_undeclared_auth never sends credentials to a non-loopback interface
    (follows the reference's rpc_local_compatibility mode)."""
    interface = "https://agent.internal"
    peer = make_peer(lambda rpc_url: plain_card(interface + "/a2a/v1"))
    options: dict[str, Any] = {
        "auth": Calls("Bearer x"),
        "allow_undeclared_auth": True,
        "allowed_interface_origins": [interface],
        "allowed_private_hosts": ["agent.internal"],
    }
    refused = reason(lambda: local(peer, resolver=StubResolver(["10.0.0.7"]), **options))
    assert refused == "a2a_undeclared_auth_not_allowed"
    assert (
        local(peer, resolver=StubResolver(["127.0.0.1"]), **options).rpc_url
        == interface + "/a2a/v1"
    )


def test_declared_security_enables_rpc_auth_and_errors_are_secret_free(
    make_peer: Callable[..., FixturePeer],
) -> None:
    """Follows adk_a2a_v1_client_security_test:
    declared_security_enables_rpc_auth_and_errors_are_secret_free_test."""
    private = "Bearer declared-private-token"
    peer = make_peer(secure_card)
    peer.answer = lambda request: rpc_failure(
        request, -32001, f"no task for {private} (declared-private-token)"
    )
    auth = Calls(private)
    assert reason(lambda: local(peer)) == "a2a_auth_required"
    assert reason(lambda: local(peer, auth=auth)) == "a2a_auth_scheme_required"
    assert (
        reason(lambda: local(peer, auth=auth, auth_scheme="attacker-selected"))
        == "a2a_auth_scheme_not_declared"
    )
    assert auth.count == 0 and peer.seen("rpc") == []
    remote = local(peer, auth=auth, auth_scheme="bearer")
    with pytest.raises(Exception) as info:
        remote.get_task("task")
    assert peer.seen("rpc")[0]["authorization"] == private and auth.count == 1
    assert info.value.reason == ("a2a_rpc_error", -32001)  # type: ignore[attr-defined]
    assert "declared-private-token" not in str(info.value)
    assert "no task for" in str(info.value)


def test_compound_security_requirement_is_rejected(make_peer: Callable[..., FixturePeer]) -> None:
    """Follows adk_a2a_v1_client_security_test: compound_security_requirement_is_rejected_test."""
    peer = make_peer(
        lambda rpc_url: plain_card(
            rpc_url,
            security_schemes={**BEARER, **API_KEY},
            security_requirements=[{"schemes": {"bearer": {}, "api-key": {}}}],
        )
    )
    refused = reason(lambda: local(peer, auth=Calls("Bearer private"), auth_scheme="bearer"))
    assert refused == "a2a_compound_auth_not_supported"
    assert peer.seen("rpc") == []


def test_an_api_key_scheme_sends_its_declared_header_only(
    make_peer: Callable[..., FixturePeer],
) -> None:
    peer = make_peer(
        lambda rpc_url: plain_card(
            rpc_url, security_schemes=API_KEY, security_requirements=[{"schemes": {"api-key": {}}}]
        )
    )
    remote = local(peer, auth=Calls("key-123", "X-API-Key"), auth_scheme="api-key")
    remote.get_task("task")
    assert peer.seen("rpc")[-1]["api_key"] == "key-123"
    assert peer.seen("rpc")[-1]["authorization"] is None
    wrong = local(peer, auth=Calls("Bearer x"), auth_scheme="api-key")
    assert reason(lambda: wrong.get_task("task")) == "invalid_a2a_auth_header"
    assert len(peer.seen("rpc")) == 1


def test_a_401_is_typed_from_the_challenge(make_peer: Callable[..., FixturePeer]) -> None:
    peer = make_peer(lambda rpc_url: plain_card(rpc_url + "/locked"))
    assert reason(lambda: local(peer).get_task("task")) == ("a2a_unauthorized", "invalid_token")


def test_authentication_callback_is_bounded(peer: FixturePeer) -> None:
    """Follows adk_a2a_v1_client_security_test: authentication_callback_is_bounded_test
    (a hung callback costs at most auth_timeout; the request is never sent)."""
    release = threading.Event()

    def slow() -> dict[str, str]:
        release.wait(10)
        return {"Authorization": "Bearer too-late"}

    def broken() -> dict[str, str]:
        raise RuntimeError("token store down")

    try:
        remote = local(peer, auth=slow, allow_undeclared_auth=True, auth_timeout=0.2)
        assert reason(lambda: remote.get_task("task")) == ("a2a_auth_callback_failed", "timeout")
        remote = local(
            peer, auth=slow, allow_undeclared_auth=True, auth_timeout=5.0, request_timeout=0.3
        )
        assert reason(lambda: remote.get_task("task")) == ("a2a_timeout", "get_task")
        remote = local(peer, auth=broken, allow_undeclared_auth=True)
        assert reason(lambda: remote.get_task("task")) == "a2a_auth_callback_failed"
        remote = local(
            peer,
            auth=lambda: {"Authorization": "Bearer a\r\nX-Injected: 1"},
            allow_undeclared_auth=True,
        )
        assert reason(lambda: remote.get_task("task")) == "invalid_a2a_auth_header"
        assert peer.seen("rpc") == []
    finally:
        release.set()


# -- deadlines and bounds ---------------------------------------------------------------


def test_operation_uses_one_absolute_deadline(peer: FixturePeer) -> None:
    """Follows adk_a2a_v1_client_security_test: operation_uses_one_absolute_deadline_test
    (discovery has connect's deadline; each call has its own)."""
    peer.card_delay = 1.0
    assert reason(lambda: local(peer, request_timeout=0.3)) == ("a2a_timeout", "discover")
    peer.card_delay = 0.0
    peer.rpc_delay = 1.0
    remote = local(peer)
    assert reason(lambda: remote.get_task("task", timeout=0.3)) == ("a2a_timeout", "get_task")
    assert reason(lambda: remote.stream("x", timeout=0.3)) == ("a2a_timeout", "stream")


def test_body_chunks_do_not_restart_the_deadline(make_peer: Callable[..., FixturePeer]) -> None:
    """Follows adk_a2a_v1_client_security_test: body_chunks_do_not_restart_deadline_test."""
    peer = make_peer(lambda rpc_url: plain_card(rpc_url + "/slow"))
    remote = local(peer)
    assert remote.get_task("task", timeout=5.0)["id"] == "task-1"
    assert reason(lambda: remote.get_task("task", timeout=0.5)) == ("a2a_timeout", "get_task")


def test_resolver_obeys_the_absolute_deadline() -> None:
    """Follows adk_a2a_v1_client_security_test:
    resolver_obeys_absolute_deadline_without_late_reply_test (a hung resolver is
    abandoned at the deadline; its late answer is never used)."""
    release = threading.Event()

    def late(host: str, port: int) -> list[str]:
        release.wait(10)
        return ["93.184.216.34"]

    started = time.monotonic()
    try:
        assert reason(
            lambda: connect("https://late.example", resolver=late, request_timeout=0.3)
        ) == (
            "a2a_timeout",
            "discover",
        )
        assert time.monotonic() - started < 5.0
    finally:
        release.set()


def test_responses_are_bounded(make_peer: Callable[..., FixturePeer]) -> None:
    peer = make_peer(lambda rpc_url: plain_card(rpc_url + "/big"))
    remote = local(peer, max_response_bytes=65_536)
    assert reason(lambda: remote.get_task("task")) == "a2a_response_too_large"
    assert local(peer).get_task("task")["id"] == "task-1"
    wordy = make_peer(lambda rpc_url: plain_card(rpc_url, description="d" * 5000))
    assert reason(lambda: local(wordy, max_response_bytes=1024)) == "a2a_response_too_large"
    assert wordy.seen("rpc") == []


def test_required_extensions_are_bounded_and_sent(make_peer: Callable[..., FixturePeer]) -> None:
    """Follows adk_a2a_v1_client_security_test: required_extensions_are_bounded_and_sent_test."""
    extension = "https://example.test/a2a/extensions/audit/v1"

    def card(*uris: str) -> Callable[[str], dict[str, Any]]:
        def build(rpc_url: str) -> dict[str, Any]:
            made = plain_card(rpc_url)
            made["capabilities"]["extensions"] = [{"uri": uri, "required": True} for uri in uris]
            return made

        return build

    peer = make_peer(card(extension))
    local(peer).get_task("task")
    assert peer.seen("rpc")[0]["extensions"] == extension
    assert (
        reason(lambda: local(peer, max_extension_header_bytes=8))
        == "a2a_extension_header_too_large"
    )
    two = make_peer(card("https://example.test/ext/one", "https://example.test/ext/two"))
    assert reason(lambda: local(two, max_extensions=1)) == "too_many_required_a2a_extensions"
    assert two.seen("rpc") == []
