"""Outbound URLs: ``http`` or ``https`` only, a host, no user info, query or fragment
(a credential must never become part of a request URL), and the origin they name."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

import httpx2

from adk_actors.outbound.reasons import OutboundReasons
from providers.errors import AdkError

MAX_URL_BYTES = 2048


@dataclass(frozen=True)
class Endpoint:
    """A checked outbound URL."""

    url: str
    scheme: str
    host: str
    port: int
    path: str

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


def parse_endpoint(url: Any, reasons: OutboundReasons) -> Endpoint:
    """The endpoint of `url`, or ``(reasons.invalid_url, why)``."""
    invalid = reasons.invalid_url
    if not isinstance(url, str) or not url or len(url) > MAX_URL_BYTES:
        raise AdkError((invalid, "not_a_url"), "the endpoint is a URL string")
    if any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in url):
        raise AdkError((invalid, "unparsable"), "a URL has no spaces or control characters")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
        parsed = httpx2.URL(url)  # what the HTTP client will be given must parse there too
        wire_host = parsed.raw_host.decode("ascii")
    except (ValueError, httpx2.InvalidURL):
        raise AdkError((invalid, "unparsable"), "the endpoint is not a URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise AdkError((invalid, "scheme"), "the endpoint is http:// or https://")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise AdkError((invalid, "userinfo"), "credentials never go in the URL")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise AdkError((invalid, "query_or_fragment"), "no query or fragment")
    # the host as the connection pool sees it (IDNA A-labels), without a trailing dot
    host = normal_host(wire_host) if parts.hostname else ""
    if not host or any(ch.isspace() for ch in url):
        raise AdkError((invalid, "host"), "the endpoint names a host")
    if port is None:
        port = 443 if scheme == "https" else 80
    if not 0 < port <= 65535:
        raise AdkError((invalid, "port"), "ports are 1-65535")
    return Endpoint(url, scheme, host, port, parts.path or "/")


def same_origin(url: httpx2.URL, endpoint: Endpoint) -> bool:
    """Does the request URL `url` go to `endpoint`'s origin (scheme, host, port)?"""
    port = url.port or (443 if url.scheme == "https" else 80)
    host = normal_host(url.raw_host.decode("ascii", "replace"))
    return (url.scheme, host, port) == endpoint.origin


def normal_host(host: str) -> str:
    """A host name in the one form every comparison uses: lowercase, no brackets, no
    trailing dot, IDNA A-labels (``bücher.example`` -> ``xn--bcher-kva.example``)."""
    host = host.lower().strip("[]").rstrip(".")
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host
