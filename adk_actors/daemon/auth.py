"""Who may ask: the loopback Host check, bearer authentication and the same-origin check.

Every request must carry exactly one ``Host`` header naming the listener as a loopback
client does: ``127.0.0.1``, ``[::1]`` or ``localhost`` with the listener's port (no
port only when it is 80). A browser tricked by DNS rebinding sends the attacker's host
name there, so its requests never reach a route (`loopback_host`).

The token travels only in ``Authorization: Bearer <token>`` (the scheme in any case);
a token anywhere in the URL is never looked at, so it never authenticates. The
candidate is hashed and its SHA-256 compared with the kept digest in constant time
(`hmac.compare_digest`), so neither the token nor its length shows in timing.
No header, or another scheme: ``unauthorized`` (401); a wrong token, or one with
whitespace in it: ``forbidden`` (403). A request with an ``Origin`` header (a
browser's) must come from ``scheme://Host`` of the request itself, else
``forbidden``; requests without one (the CLI, curl) are not browser requests. The
scheme is the listener's own (uvicorn runs without ``proxy_headers``, so no
``X-Forwarded-Proto`` can change it).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Literal

REALM = "adk_dev"
WWW_AUTHENTICATE = f'Bearer realm="{REALM}"'

Verdict = Literal["ok", "unauthorized", "forbidden"]

_WHITESPACE = (b" ", b"\t", b"\r", b"\n")
_LOOPBACK_NAMES = (b"127.0.0.1", b"[::1]", b"localhost")


def loopback_host(headers: Iterable[tuple[bytes, bytes]], port: int) -> bool:
    """True when the raw ASGI `headers` hold exactly one ``Host``, and it is a loopback
    name with `port` (ASCII case ignored)."""
    hosts = [value for name, value in headers if name == b"host"]
    if len(hosts) != 1:
        return False
    allowed = {name + b":%d" % port for name in _LOOPBACK_NAMES}
    if port == 80:  # a client leaves the default port out
        allowed.update(_LOOPBACK_NAMES)
    return hosts[0].lower() in allowed


def authorize(headers: Iterable[tuple[bytes, bytes]], expected_digest: bytes) -> Verdict:
    """The verdict on a request's raw ASGI `headers` (lower-case names) for the bearer
    token whose SHA-256 is `expected_digest`."""
    values = [value for name, value in headers if name == b"authorization"]
    if not values:
        return "unauthorized"
    header = b", ".join(values)  # repeated headers read as one list, as HTTP folds them
    scheme, space, candidate = header.partition(b" ")
    if not space or not candidate or scheme.lower() != b"bearer":
        return "unauthorized"
    if any(char in candidate for char in _WHITESPACE):
        return "forbidden"
    if not hmac.compare_digest(hashlib.sha256(candidate).digest(), expected_digest):
        return "forbidden"
    return "ok"


def same_origin(scheme: str, headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """True without an ``Origin`` header, or when it is ``scheme://Host`` of this very
    request (ASCII case ignored); a request with an Origin and no Host is not."""
    origins = []
    hosts = []
    for name, value in headers:
        if name == b"origin":
            origins.append(value)
        elif name == b"host":
            hosts.append(value)
    if not origins:
        return True
    if len(origins) != 1 or len(hosts) != 1:
        return False
    expected = scheme.encode("ascii") + b"://" + hosts[0]
    return origins[0].lower() == expected.lower()
