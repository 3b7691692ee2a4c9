"""The non-loopback rule shared by the HTTP surfaces (`adk.mcp.serve`, `adk.a2a.serve`).

Binding anywhere but loopback needs authentication, an explicit ``allow_non_loopback=True``
and TLS: direct (certificate and key files) or ``trusted_tls_proxy=True`` (only when the
clear listener is reachable exclusively from that TLS terminator; forwarding headers are
never proof of TLS). Each missing piece is its own reason, named by the surface
(`ExposureReasons`). A host name (even ``localhost``) is not loopback: only an address is.
"""

from __future__ import annotations

from typing import NamedTuple

from adk_actors.serving.listener import is_loopback
from providers.errors import AdkError


class ExposureReasons(NamedTuple):
    """One surface's reasons for each missing piece, and its label in the messages."""

    requires_auth: str = "non_loopback_requires_auth"
    not_acknowledged: str = "non_loopback_not_acknowledged"
    requires_tls: str = "non_loopback_requires_tls"
    label: str = "server"


DEFAULT_EXPOSURE_REASONS = ExposureReasons()


def check_exposure(
    host: str,
    *,
    authenticated: bool,
    allow_non_loopback: bool,
    tls: bool,
    trusted_tls_proxy: bool,
    reasons: ExposureReasons = DEFAULT_EXPOSURE_REASONS,
) -> None:
    """Refuse a non-loopback `host` without authentication, the acknowledgement or TLS."""
    if is_loopback(host):
        return
    if not authenticated:
        raise AdkError(
            reasons.requires_auth,
            f"a non-loopback {reasons.label} needs auth_token or verifier",
        )
    if allow_non_loopback is not True:
        raise AdkError(
            reasons.not_acknowledged,
            "binding beyond loopback needs allow_non_loopback=True",
        )
    if not tls and trusted_tls_proxy is not True:
        raise AdkError(
            reasons.requires_tls,
            f"a non-loopback {reasons.label} needs tls_certfile/tls_keyfile "
            "or trusted_tls_proxy=True",
        )
