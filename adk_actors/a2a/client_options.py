"""The A2A client's plain options (`ClientOptions`, decoded with `decode_options`) and
its outbound reasons (`A2A_REASONS`: ``invalid_a2a_url``, ``insecure_a2a_destination``, ...)."""

from __future__ import annotations

from typing import Annotated, TypedDict

import msgspec

from adk_actors.outbound import (
    DEFAULT_MAX_RESOLVED_ADDRESSES,
    MAX_RESOLVED_ADDRESSES,
    OutboundReasons,
    reasons_for,
)

A2A_REASONS: OutboundReasons = reasons_for("a2a")
OPTION_REASON = "invalid_a2a_client_option"

DEFAULT_REQUEST_TIMEOUT = 30.0
MAX_TIMEOUT = 3600.0
DEFAULT_AUTH_TIMEOUT = 5.0
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_STREAM_EVENTS = 1024
MAX_STREAM_EVENTS = 100_000
MAX_EXTENSIONS = 32
MAX_EXTENSION_HEADER_BYTES = 8192
MAX_HOSTS = 256

Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_TIMEOUT)]
Host = Annotated[str, msgspec.Meta(min_length=1, max_length=253, pattern=r"^[^\s/@?#]+$")]
Origin = Annotated[
    str, msgspec.Meta(min_length=1, max_length=300, pattern=r"^https?://[^\s/@?#]+/?$")
]
SchemeName = Annotated[
    str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")
]


class ClientOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`connect`'s plain options; a bad one raises ``AdkError(("invalid_a2a_client_option", key))``."""

    request_timeout: Seconds = DEFAULT_REQUEST_TIMEOUT
    """Each public call's one absolute deadline (discovery included for `connect`)."""
    auth_scheme: SchemeName | None = None
    """For a card with ``securityRequirements``: the declared scheme ``auth()`` answers for."""
    auth_timeout: Seconds = DEFAULT_AUTH_TIMEOUT
    """How long one ``auth()`` / ``discovery_auth()`` call may take (within the deadline)."""
    allow_undeclared_auth: bool = False
    """Send ``auth()`` to a card that declares no security, only to a loopback interface."""
    allow_http_loopback: bool = False
    allowed_hosts: Annotated[list[Host], msgspec.Meta(max_length=MAX_HOSTS)] | None = None
    allowed_private_hosts: Annotated[list[Host], msgspec.Meta(max_length=MAX_HOSTS)] = []
    allowed_interface_origins: Annotated[list[Origin], msgspec.Meta(max_length=MAX_HOSTS)] = []
    max_response_bytes: Annotated[int, msgspec.Meta(ge=1024, le=MAX_RESPONSE_BYTES)] = (
        DEFAULT_MAX_RESPONSE_BYTES
    )
    """One response body; for a stream, all its bytes."""
    max_stream_events: Annotated[int, msgspec.Meta(ge=1, le=MAX_STREAM_EVENTS)] = (
        DEFAULT_MAX_STREAM_EVENTS
    )
    max_extensions: Annotated[int, msgspec.Meta(ge=0, le=MAX_EXTENSIONS)] = MAX_EXTENSIONS
    """Required card extensions the client declares in ``A2A-Extensions``."""
    max_extension_header_bytes: Annotated[
        int, msgspec.Meta(ge=1, le=MAX_EXTENSION_HEADER_BYTES)
    ] = MAX_EXTENSION_HEADER_BYTES
    max_resolved_addresses: Annotated[int, msgspec.Meta(ge=1, le=MAX_RESOLVED_ADDRESSES)] = (
        DEFAULT_MAX_RESOLVED_ADDRESSES
    )


class ClientKeywords(TypedDict, total=False):
    """`connect`'s plain keyword options, for type checkers (`ClientOptions` holds their
    defaults and bounds and checks them at run time)."""

    request_timeout: float
    auth_scheme: str | None
    auth_timeout: float
    allow_undeclared_auth: bool
    allow_http_loopback: bool
    allowed_hosts: list[str] | None
    allowed_private_hosts: list[str]
    allowed_interface_origins: list[str]
    max_response_bytes: int
    max_stream_events: int
    max_extensions: int
    max_extension_header_bytes: int
    max_resolved_addresses: int
