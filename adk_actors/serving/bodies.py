"""Reading a request body under a byte bound, shared by the HTTP surfaces (`adk.mcp.serve`,
`adk.a2a.serve`).

`read_body(receive, limit, content_length=...)` answers a `Body`: the bytes
(`BodyStatus.COMPLETE`), `TOO_LARGE` once the body passes `limit` (a declared
``Content-Length`` past it is refused before anything is read; the rest is never read,
so the caller answers 413 and closes), `INVALID_LENGTH` for a ``Content-Length`` that
is not a decimal number (answer 400), or `DISCONNECTED` when the client left before
the body ended (answer nothing: the partial body is never parsed).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from starlette.types import Receive


class BodyStatus(enum.Enum):
    """How reading a request body ended."""

    COMPLETE = "complete"
    TOO_LARGE = "too_large"
    INVALID_LENGTH = "invalid_length"
    DISCONNECTED = "disconnected"


class Body(NamedTuple):
    """A read body: its `status`, and its bytes when `BodyStatus.COMPLETE` (else empty)."""

    status: BodyStatus
    data: bytes = b""


_MAX_LENGTH_DIGITS = 19


async def read_body(receive: Receive, limit: int, *, content_length: str | None = None) -> Body:
    """The request body read from `receive`, at most `limit` bytes (see the module doc);
    `content_length` is the request's ``Content-Length`` header, when it has one."""
    if content_length is not None:
        declared = content_length.strip()
        if not declared.isascii() or not declared.isdigit() or len(declared) > _MAX_LENGTH_DIGITS:
            return Body(BodyStatus.INVALID_LENGTH)
        if int(declared) > limit:
            return Body(BodyStatus.TOO_LARGE)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return Body(BodyStatus.DISCONNECTED)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return Body(BodyStatus.TOO_LARGE)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return Body(BodyStatus.COMPLETE, b"".join(chunks))
