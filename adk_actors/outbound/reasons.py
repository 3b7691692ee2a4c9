"""The error reasons one outbound client reports (each protocol keeps its own names).

The outbound rules are shared; what a refusal is *called* is the caller's: the MCP
client says ``insecure_mcp_destination``, the A2A client ``insecure_a2a_destination``.
"""

from __future__ import annotations

from typing import NamedTuple


class OutboundReasons(NamedTuple):
    """The `AdkError` reasons of one protocol's outbound client."""

    invalid_url: str
    insecure_destination: str
    private_destination_rejected: str
    destination_not_allowed: str
    dns_resolution_failed: str
    unauthorized: str
    forbidden: str
    invalid_auth_header: str
    auth_callback_failed: str
    tls_failed: str
    unsupported_content_encoding: str


def reasons_for(protocol: str) -> OutboundReasons:
    """The reasons named after `protocol` (``"mcp"`` -> ``invalid_mcp_url``,
    ``mcp_private_destination_rejected``, ...)."""
    return OutboundReasons(
        invalid_url=f"invalid_{protocol}_url",
        insecure_destination=f"insecure_{protocol}_destination",
        private_destination_rejected=f"{protocol}_private_destination_rejected",
        destination_not_allowed=f"{protocol}_destination_not_allowed",
        dns_resolution_failed=f"{protocol}_dns_resolution_failed",
        unauthorized=f"{protocol}_unauthorized",
        forbidden=f"{protocol}_forbidden",
        invalid_auth_header=f"invalid_{protocol}_auth_header",
        auth_callback_failed=f"{protocol}_auth_callback_failed",
        tls_failed=f"{protocol}_tls_failed",
        unsupported_content_encoding=f"{protocol}_unsupported_content_encoding",
    )
