"""Reading a request body under a byte bound, shared by the HTTP surfaces (`adk.mcp.serve`,
`adk.a2a.serve`).

`read_body(receive, limit, content_length=..., timeout=...)` answers a `Body`: the
bytes (`BodyStatus.COMPLETE`), `TOO_LARGE` once the body passes `limit` (a declared
``Content-Length`` past it is refused before anything is read; the rest is never read,
so the caller answers 413 and closes), `INVALID_LENGTH` for a ``Content-Length`` that
is not a decimal number (answer 400), `DISCONNECTED` when the client left before the
body ended (answer nothing: the partial body is never parsed), or `TIMED_OUT` when the
whole body did not arrive within `timeout` seconds (``BODY_TIMEOUT`` by default: a
client that declares more than it sends, or trickles, holds its connection no longer;
answer 408 and close).
"""

from __future__ import annotations

import asyncio
import enum
from typing import NamedTuple

from starlette.types import Receive


class BodyStatus(enum.Enum):
    """How reading a request body ended."""

    COMPLETE = "complete"
    TOO_LARGE = "too_large"
    INVALID_LENGTH = "invalid_length"
    DISCONNECTED = "disconnected"
    TIMED_OUT = "timed_out"


class Body(NamedTuple):
    """A read body: its `status`, and its bytes when `BodyStatus.COMPLETE` (else empty)."""

    status: BodyStatus
    data: bytes = b""


_MAX_LENGTH_DIGITS = 19
BODY_TIMEOUT = 30.0
"""How long a whole request body may take to arrive (the order of the head's 10 s)."""


async def read_body(
    receive: Receive,
    limit: int,
    *,
    content_length: str | None = None,
    timeout: float = BODY_TIMEOUT,
) -> Body:
    """The request body read from `receive`, at most `limit` bytes, within `timeout`
    seconds (see the module doc); `content_length` is the request's ``Content-Length``
    header, when it has one."""
    if content_length is not None:
        declared = content_length.strip()
        if not declared.isascii() or not declared.isdigit() or len(declared) > _MAX_LENGTH_DIGITS:
            return Body(BodyStatus.INVALID_LENGTH)
        if int(declared) > limit:
            return Body(BodyStatus.TOO_LARGE)
    try:
        async with asyncio.timeout(timeout):
            return await _read_chunks(receive, limit)
    except TimeoutError:
        return Body(BodyStatus.TIMED_OUT)


async def _read_chunks(receive: Receive, limit: int) -> Body:
    """The body's chunks up to its end, a disconnect, or past `limit`."""
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
