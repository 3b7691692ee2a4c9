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
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise AdkError((invalid, "unparsable"), "the endpoint is not a URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise AdkError((invalid, "scheme"), "the endpoint is http:// or https://")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise AdkError((invalid, "userinfo"), "credentials never go in the URL")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise AdkError((invalid, "query_or_fragment"), "no query or fragment")
    host = (parts.hostname or "").lower().rstrip(".")
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
    return (url.scheme, (url.host or "").lower().rstrip("."), port) == endpoint.origin
