"""Resolved addresses and how they are judged: the system resolver, IP literals with
zone ids, IPv4 carried inside IPv6 (checked by the IPv4 rules), public vs. loopback."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence

Resolver = Callable[[str, int], Sequence[str]]
"""``resolver(host, port)`` -> the host's IP addresses (strings); raising means unresolvable."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254")
)
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_COMPATIBLE = ipaddress.ip_network("::/96")
_DOCUMENTATION_V6 = ipaddress.ip_network("3fff::/20")
"""RFC 9637's second IPv6 documentation prefix (Python 3.11's ipaddress calls it global)."""


def default_resolver(host: str, port: int) -> list[str]:
    """The system resolver (``getaddrinfo``), unique addresses in its order."""
    found: list[str] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = str(sockaddr[0])
        if address not in found:
            found.append(address)
    return found


def ip_of(address: str) -> IPAddress:
    """The IP address `address` names (a zone id dropped, IPv4-mapped unwrapped);
    ``ValueError`` if it names none."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def is_ip_literal(host: str) -> bool:
    """Is `host` (brackets allowed) an IP address rather than a name to resolve?"""
    try:
        ip_of(host.strip("[]"))
    except ValueError:
        return False
    return True


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries, by the form it has: IPv4-mapped
    (``::ffff:a.b.c.d``), IPv4-compatible (``::a.b.c.d``), 6to4 (``2002:AABB:CCDD::/48``),
    Teredo (``2001::/32``: its server and its client), NAT64 (``64:ff9b::/96``, and the
    local-use ``64:ff9b:1::/48`` under both RFC 6052 layouts a /48 network may use).
    Each is checked with the IPv4 rules, so no form tunnels to an address the IPv4
    rules refuse."""
    found: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    value = int(ip)
    if ip in _NAT64 or ip in _NAT64_LOCAL or (ip in _COMPATIBLE and value > 1):
        found.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if ip in _NAT64_LOCAL:  # RFC 6052 /48: bits 48-63 and 72-87 (bits 64-71 are zero)
        found.append(
            ipaddress.IPv4Address((((value >> 64) & 0xFFFF) << 16) | ((value >> 40) & 0xFFFF))
        )
    return found


def is_loopback_destination(address: str) -> bool:
    """A resolved destination address (zone ids allowed, IPv4-mapped unwrapped) that
    is loopback: where cleartext ``http`` may go with ``allow_http_loopback``. Not
    `adk_actors.serving.is_loopback`, which judges a *bind* host literal."""
    try:
        return ip_of(address).is_loopback
    except ValueError:
        return False


def is_public(address: str) -> bool:
    """A globally routable unicast address that is no cloud metadata service; an IPv6
    address that embeds IPv4 addresses (`embedded_ipv4`) is public only if they are."""
    try:
        ip = ip_of(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and not all(
        _public(inner) for inner in embedded_ipv4(ip)
    ):
        return False
    return _public(ip)


def _public(ip: IPAddress) -> bool:
    if ip in _METADATA_ADDRESSES:
        return False
    if isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip in _DOCUMENTATION_V6:
        return False
    return ip.is_global and not (
        ip.is_multicast or ip.is_reserved or ip.is_link_local or ip.is_unspecified
    )
