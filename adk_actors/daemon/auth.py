"""Bearer authentication and the same-origin check of the /dev/v1 API.

The token travels only in ``Authorization: Bearer <token>`` (the scheme in any case);
a token anywhere in the URL is never looked at, so it never authenticates. The
candidate is hashed and its SHA-256 compared with the kept digest in constant time
(`hmac.compare_digest`), so neither the token nor its length shows in timing.
No header, or another scheme: ``unauthorized`` (401); a wrong token, or one with
whitespace in it: ``forbidden`` (403). A request with an ``Origin`` header (a
browser's) must come from ``scheme://Host`` of the request itself, else
``forbidden``; requests without one (the CLI, curl) are not browser requests.
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
