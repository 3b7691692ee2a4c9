"""Outbound HTTP rules shared by the MCP and A2A clients: URL parsing, resolution and
address checks, the pinned network backend, the origin-bound guarded transport and
origin-scoped auth, each refusal named by the caller's `OutboundReasons`."""

from adk_actors.outbound.addresses import (
    Resolver,
    default_resolver,
    embedded_ipv4,
    ip_of,
    is_loopback_destination,
    is_public,
)
from adk_actors.outbound.auth import (
    MAX_HEADER_BYTES,
    STATIC_HEADER_OPTIONS,
    AuthCallback,
    OriginAuth,
    auth_header,
    auth_headers,
    refuse_static_headers,
)
from adk_actors.outbound.endpoints import MAX_URL_BYTES, Endpoint, parse_endpoint, same_origin
from adk_actors.outbound.observed import Observed
from adk_actors.outbound.policy import (
    DEFAULT_MAX_RESOLVED_ADDRESSES,
    MAX_RESOLVED_ADDRESSES,
    HttpPolicy,
    normal_hosts,
)
from adk_actors.outbound.reasons import OutboundReasons, reasons_for
from adk_actors.outbound.transport import (
    BoundedStream,
    GuardedTransport,
    PinnedBackend,
    ResponseTooLarge,
    auth_refusal,
    caused_by,
    tls_failure,
)

__all__ = [
    "DEFAULT_MAX_RESOLVED_ADDRESSES",
    "MAX_HEADER_BYTES",
    "MAX_RESOLVED_ADDRESSES",
    "MAX_URL_BYTES",
    "STATIC_HEADER_OPTIONS",
    "AuthCallback",
    "BoundedStream",
    "Endpoint",
    "GuardedTransport",
    "HttpPolicy",
    "Observed",
    "OriginAuth",
    "OutboundReasons",
    "PinnedBackend",
    "Resolver",
    "ResponseTooLarge",
    "auth_header",
    "auth_headers",
    "auth_refusal",
    "caused_by",
    "default_resolver",
    "embedded_ipv4",
    "ip_of",
    "is_loopback_destination",
    "is_public",
    "normal_hosts",
    "parse_endpoint",
    "reasons_for",
    "refuse_static_headers",
    "same_origin",
    "tls_failure",
]
