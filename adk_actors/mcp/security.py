"""The Streamable HTTP client's security rules (spec "MCP clients": client security),
the shared outbound rules (`adk_actors.outbound`) with MCP's error reasons.

* `parse_endpoint`: ``http`` or ``https`` only, a host, no user info, query or fragment
  (a credential must never become part of a request URL): ``invalid_mcp_url``.
* `HttpPolicy.addresses`: every resolved address checked before anything connects
  (``insecure_mcp_destination``, ``mcp_private_destination_rejected``,
  ``mcp_destination_not_allowed``, ``mcp_dns_resolution_failed``).
* `GuardedTransport`: the endpoint's origin only, redirects recorded (never followed),
  lost sessions (404 to a request carrying ``mcp-session-id``), bodies bounded (and
  asked for in ``identity`` encoding: any other is ``mcp_unsupported_content_encoding``);
  each connection pinned to an address validated just then (`PinnedBackend`).
* `OriginAuth`: headers come only from the ``auth`` callback, per request, and only
  for the endpoint's origin; at most one ``Authorization`` header.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from adk_actors.outbound import (
    DEFAULT_MAX_RESOLVED_ADDRESSES,
    MAX_HEADER_BYTES,
    MAX_RESOLVED_ADDRESSES,
    MAX_URL_BYTES,
    STATIC_HEADER_OPTIONS,
    AuthCallback,
    Endpoint,
    Observed,
    OutboundReasons,
    PinnedBackend,
    Resolver,
    ResponseTooLarge,
    default_resolver,
    embedded_ipv4,
    is_loopback_destination,
    is_public,
    reasons_for,
    refuse_static_headers,
    same_origin,
)
from adk_actors.outbound import GuardedTransport as _GuardedTransport
from adk_actors.outbound import HttpPolicy as _HttpPolicy
from adk_actors.outbound import OriginAuth as _OriginAuth
from adk_actors.outbound import auth_header as _auth_header
from adk_actors.outbound import auth_refusal as _auth_refusal
from adk_actors.outbound import parse_endpoint as _parse_endpoint
from adk_actors.outbound import tls_failure as _tls_failure
from providers.errors import AdkError

__all__ = [
    "DEFAULT_MAX_RESOLVED_ADDRESSES",
    "MAX_HEADER_BYTES",
    "MAX_RESOLVED_ADDRESSES",
    "MAX_URL_BYTES",
    "MCP_REASONS",
    "SESSION_HEADER",
    "STATIC_HEADER_OPTIONS",
    "AuthCallback",
    "Endpoint",
    "GuardedTransport",
    "HttpPolicy",
    "Observed",
    "OriginAuth",
    "PinnedBackend",
    "Resolver",
    "ResponseTooLarge",
    "auth_header",
    "auth_refusal",
    "default_resolver",
    "embedded_ipv4",
    "is_loopback_destination",
    "is_public",
    "parse_endpoint",
    "refuse_static_headers",
    "same_origin",
    "tls_failure",
]

MCP_REASONS: OutboundReasons = reasons_for("mcp")
"""``invalid_mcp_url``, ``insecure_mcp_destination``, ``mcp_private_destination_rejected``, ..."""
SESSION_HEADER = "mcp-session-id"


@dataclass(frozen=True, kw_only=True)
class HttpPolicy(_HttpPolicy):
    """Where the Streamable HTTP client may connect (refusals carry MCP's reasons)."""

    reasons: OutboundReasons = MCP_REASONS


def parse_endpoint(url: Any) -> Endpoint:
    """The endpoint of `url`, or ``("invalid_mcp_url", why)``."""
    return _parse_endpoint(url, MCP_REASONS)


class GuardedTransport(_GuardedTransport):
    """The endpoint's origin only; a 404 to a request carrying the session id is a lost session."""

    def __init__(
        self,
        endpoint: Endpoint,
        policy: _HttpPolicy,
        observed: Observed,
        max_response_bytes: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(
            endpoint,
            policy,
            observed,
            max_response_bytes,
            ssl_context,
            session_header=SESSION_HEADER,
        )


class OriginAuth(_OriginAuth):
    """``auth()`` per request to the endpoint's origin, one ``Authorization`` header at most."""

    def __init__(self, endpoint: Endpoint, callback: AuthCallback, observed: Observed) -> None:
        super().__init__(endpoint, callback, observed, MCP_REASONS)


def auth_header(headers: Any) -> tuple[str | None, str]:
    """The one ``Authorization`` header `headers` may hold (or none): ``invalid_mcp_auth_header``."""
    return _auth_header(headers, MCP_REASONS)


def auth_refusal(status: int, challenge: str) -> AdkError:
    """``("mcp_unauthorized", ...)`` for a 401, ``("mcp_forbidden", ...)`` for a 403."""
    return _auth_refusal(status, challenge, MCP_REASONS)


def tls_failure(error: BaseException) -> AdkError | None:
    """``mcp_tls_failed`` if `error` came from the TLS handshake or certificate check."""
    return _tls_failure(error, MCP_REASONS)
