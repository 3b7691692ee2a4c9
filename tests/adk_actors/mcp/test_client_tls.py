"""HTTPS with a pinned address: the connection goes to the validated address while
TLS verifies the endpoint's host name (SNI and certificate), as the spec requires
("pins one validated address while retaining the original Host/SNI"). A private
address is allowed only for a host named in `allowed_private_hosts`; the addresses
come from a resolver stub."""

from __future__ import annotations

import pytest
from cryptography import x509
from mcp.server.transport_security import TransportSecuritySettings

from adk_actors import mcp
from tests.adk_actors.mcp.conftest import Recorder, reason
from tests.adk_actors.mcp.pki import write_test_pki
from tests.adk_actors.mcp.servers import sdk_server

HOST = "mcp.tls.test"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A test CA and a server certificate for HOST (and nothing else)."""
    folder = tmp_path_factory.mktemp("pki")
    return folder, write_test_pki(folder, HOST, x509.DNSName(HOST))


def test_https_to_a_pinned_private_address_verifies_the_host_name(http_server, pki):
    folder, context = pki
    recorders = []

    def make_app():
        no_rebinding_check = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        app = sdk_server.build().streamable_http_app(transport_security=no_rebinding_check)
        recorders.append(Recorder(app))
        return recorders[-1]

    server = http_server(
        make_app, ssl_certfile=str(folder / "cert.pem"), ssl_keyfile=str(folder / "key.pem")
    )
    url = f"https://{HOST}:{server.port}/mcp"
    loopback = lambda host, port: ["127.0.0.1"]  # noqa: E731
    # the name resolves to loopback: refused unless the host is named as private
    assert (
        reason(lambda: mcp.connect("streamable_http", url, resolver=loopback, ssl_context=context))
        == "mcp_private_destination_rejected"
    )
    assert recorders[-1].requests == []
    client = mcp.connect(
        "streamable_http",
        url,
        resolver=loopback,
        ssl_context=context,
        allowed_private_hosts=[HOST],
        auth=lambda: {"Authorization": "Bearer over-tls"},
    )
    assert client.call_tool("add", {"a": 20, "b": 22}).content[0]["text"] == "42"
    assert set(recorders[-1].hosts) == {f"{HOST}:{server.port}"}
    assert {auth for method, _, auth in recorders[-1].requests if method == "POST"} == {
        "Bearer over-tls"
    }
    client.close()
    # another name for the same address: the certificate does not match, nothing is sent
    other = f"https://other.tls.test:{server.port}/mcp"
    before = len(recorders[-1].requests)
    failed = reason(
        lambda: mcp.connect(
            "streamable_http",
            other,
            resolver=loopback,
            ssl_context=context,
            allowed_private_hosts=["other.tls.test"],
            auth=lambda: {"Authorization": "Bearer must-not-leak"},
        )
    )
    assert failed == "mcp_tls_failed"
    assert len(recorders[-1].requests) == before
