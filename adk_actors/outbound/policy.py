"""Where an outbound client may connect: the scheme rule (cleartext only to loopback,
with the opt-in), the host allow-lists, and every resolved address checked.

`HttpPolicy.addresses` resolves the host (an IP literal is used as is) with the
policy's resolver (injectable: tests use a stub) and checks *every* address before
anything connects. ``https`` needs every address public (not private, loopback,
link-local, shared, reserved, multicast, unspecified or a cloud metadata address),
unless the host is named in ``allowed_private_hosts``; ``http`` needs
``allow_http_loopback=True`` and every address loopback. With ``loopback_only`` (a
reason) every address must be loopback whatever the scheme: a request that carries a
credential only a loopback peer may get is checked on every connection, not once.
Host names in the allow-lists are compared in one normal form (lowercase, no trailing
dot, no brackets), for every client. The resolver's answer is read up to
``max_resolved_addresses`` (the rest is never read nor used: only validated addresses
are connected to).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from adk_actors.outbound.addresses import (
    Resolver,
    default_resolver,
    ip_of,
    is_ip_literal,
    is_loopback_destination,
    is_public,
)
from adk_actors.outbound.endpoints import Endpoint, normal_host
from adk_actors.outbound.reasons import OutboundReasons
from providers.errors import AdkError

DEFAULT_MAX_RESOLVED_ADDRESSES = 64
MAX_RESOLVED_ADDRESSES = 256


@dataclass(frozen=True, kw_only=True)
class HttpPolicy:
    """Where one outbound client may connect, and the reasons its refusals carry."""

    reasons: OutboundReasons
    allow_http_loopback: bool = False
    allowed_hosts: frozenset[str] | None = None
    """None: any public host; else only these exact host names."""
    allowed_private_hosts: frozenset[str] = frozenset()
    """Exact HTTPS host names that may resolve to private addresses."""
    resolver: Resolver = default_resolver
    max_resolved_addresses: int = DEFAULT_MAX_RESOLVED_ADDRESSES
    loopback_only: str | None = None
    """A reason: refuse (with it) any connection to a non-loopback address."""

    def __post_init__(self) -> None:
        if self.allowed_hosts is not None:
            object.__setattr__(self, "allowed_hosts", normal_hosts(self.allowed_hosts))
        object.__setattr__(self, "allowed_private_hosts", normal_hosts(self.allowed_private_hosts))

    def check_scheme(self, endpoint: Endpoint) -> None:
        if endpoint.scheme == "http" and not self.allow_http_loopback:
            raise AdkError(
                self.reasons.insecure_destination,
                "cleartext http is refused; use https, or allow_http_loopback=True "
                "for a loopback endpoint",
            )

    def addresses(self, endpoint: Endpoint) -> list[str]:
        """The endpoint's validated addresses (resolved now; blocking)."""
        self.check_scheme(endpoint)
        if self.allowed_hosts is not None and endpoint.host not in self.allowed_hosts:
            raise AdkError(self.reasons.destination_not_allowed, "the host is not in allowed_hosts")
        return self.validate(endpoint, self._resolve(endpoint))

    def _resolve(self, endpoint: Endpoint) -> list[str]:
        if is_ip_literal(endpoint.host):
            return [endpoint.host.strip("[]")]
        failed = self.reasons.dns_resolution_failed
        try:
            answer = self.resolver(endpoint.host, endpoint.port)
            found = list(itertools.islice(answer, self.max_resolved_addresses))
        except Exception:
            raise AdkError(failed, "the host did not resolve") from None
        if not found or not all(isinstance(address, str) for address in found):
            raise AdkError(failed, "the host resolved to nothing")
        return found

    def validate(self, endpoint: Endpoint, addresses: Iterable[str]) -> list[str]:
        """`addresses` if `endpoint` may go to all of them, else the typed refusal."""
        checked = list(addresses)
        for address in checked:
            try:
                ip_of(address)
            except ValueError:
                raise AdkError(
                    self.reasons.dns_resolution_failed, "the resolver returned a non-address"
                ) from None
        if self.loopback_only is not None and not all(
            is_loopback_destination(address) for address in checked
        ):
            raise AdkError(
                self.loopback_only, "this request's credentials go to loopback addresses only"
            )
        if endpoint.scheme == "http":
            if not all(is_loopback_destination(address) for address in checked):
                raise AdkError(
                    self.reasons.insecure_destination,
                    "cleartext http is only allowed to loopback",
                )
            return checked
        if endpoint.host in self.allowed_private_hosts:
            return checked
        if not all(is_public(address) for address in checked):
            raise AdkError(
                self.reasons.private_destination_rejected,
                "the host resolves to a private, loopback, link-local, reserved or "
                "metadata address",
            )
        return checked


def normal_hosts(hosts: Iterable[str]) -> frozenset[str]:
    """Host names as `parse_endpoint` leaves them (`normal_host`)."""
    return frozenset(normal_host(host) for host in hosts)
