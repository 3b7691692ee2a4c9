"""Which credentials the A2A client may send, decided from the peer's card before any
RPC: for a card with ``securityRequirements``, ``auth()`` answers for the exact declared
scheme named by ``auth_scheme`` (an alternative holding that one scheme), or the call
fails closed; a card that declares nothing gets no credentials unless
``allow_undeclared_auth`` and a loopback interface. Also the ``A2A-Extensions`` header
for the card's required extensions, bounded."""

from __future__ import annotations

from a2a.types import a2a_pb2 as pb

from adk_actors.outbound.auth import AUTHORIZATION
from providers.errors import AdkError

EXTENSIONS_HEADER = "A2A-Extensions"


def rpc_header_names(
    card: pb.AgentCard,
    *,
    has_auth: bool,
    auth_scheme: str | None,
    allow_undeclared_auth: bool,
) -> frozenset[str] | None:
    """The header names ``auth()`` may set on RPC requests, or None: no credentials."""
    requirements = list(card.security_requirements)
    if not requirements:
        return AUTHORIZATION if has_auth and allow_undeclared_auth else None
    if not has_auth:
        raise AdkError("a2a_auth_required", "the card requires credentials: pass auth=")
    if auth_scheme is None:
        raise AdkError(
            "a2a_auth_scheme_required",
            "the card declares security: pass auth_scheme= (the declared scheme auth() answers)",
        )
    alone = any(list(item.schemes) == [auth_scheme] for item in requirements)
    if not alone:
        if any(auth_scheme in item.schemes for item in requirements):
            raise AdkError(
                "a2a_compound_auth_not_supported",
                "the scheme is only required together with others",
            )
        raise AdkError("a2a_auth_scheme_not_declared", "the card declares no such scheme")
    scheme = card.security_schemes.get(auth_scheme)
    if scheme is None:
        raise AdkError("a2a_auth_scheme_not_declared", "the card declares no such scheme")
    return _header_names(scheme)


def _header_names(scheme: pb.SecurityScheme) -> frozenset[str]:
    kind = scheme.WhichOneof("scheme")
    if kind in ("http_auth_security_scheme", "oauth2_security_scheme"):
        return AUTHORIZATION
    if kind == "open_id_connect_security_scheme":
        return AUTHORIZATION
    if kind == "api_key_security_scheme" and scheme.api_key_security_scheme.location == "header":
        name = scheme.api_key_security_scheme.name.strip().lower()
        if name and name not in _CONTROL_HEADERS:
            return frozenset({name})
    raise AdkError(
        "a2a_auth_scheme_not_supported",
        "the client sends credentials in a header (HTTP auth, OAuth 2, OpenID Connect, "
        "or an API key in a header)",
    )


_CONTROL_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "a2a-version",
        "a2a-extensions",
        "last-event-id",
        "cookie",
    }
)


def extension_headers(
    card: pb.AgentCard, *, max_extensions: int, max_header_bytes: int
) -> dict[str, str]:
    """``{"A2A-Extensions": "uri,uri"}`` for the card's required extensions (or ``{}``)."""
    required = [item.uri for item in card.capabilities.extensions if item.required]
    if not required:
        return {}
    if len(required) > max_extensions:
        raise AdkError("too_many_required_a2a_extensions", "past max_extensions")
    value = ",".join(required)
    if len(value.encode()) > max_header_bytes or any(ch in value for ch in "\r\n\0"):
        raise AdkError("a2a_extension_header_too_large", "past max_extension_header_bytes")
    return {EXTENSIONS_HEADER: value}
