"""`serving.bodies.read_body`: one bounded request-body reader for the MCP and A2A
servers (Review F4 / duplication D2)."""

from __future__ import annotations

import asyncio
from typing import Any

from adk_actors.serving.bodies import Body, BodyStatus, read_body


def read_counted(
    messages: list[dict[str, Any]], limit: int, content_length: str | None = None
) -> tuple[Body, int]:
    """What `read_body` answers over `messages`, and how many of them it read."""
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        return queue.pop(0)

    body = asyncio.run(read_body(receive, limit, content_length=content_length))
    return body, len(messages) - len(queue)


def read(messages: list[dict[str, Any]], limit: int, content_length: str | None = None) -> Body:
    return read_counted(messages, limit, content_length)[0]


def chunk(data: bytes, more: bool = False) -> dict[str, Any]:
    return {"type": "http.request", "body": data, "more_body": more}


def test_a_body_in_chunks_up_to_the_limit_is_complete() -> None:
    body = read([chunk(b"ab", True), chunk(b"cd", True), chunk(b"")], 4, "4")
    assert body == Body(BodyStatus.COMPLETE, b"abcd")


def test_past_the_limit_is_too_large_and_the_rest_unread() -> None:
    """A declared length past the limit is refused before reading; an undeclared body is
    refused at the chunk that passes it, and nothing after it is read."""
    assert read_counted([chunk(b"x")], 4, "5") == (Body(BodyStatus.TOO_LARGE), 0)
    chunks = [chunk(b"abc", True), chunk(b"de", True), chunk(b"f")]
    assert read_counted(chunks, 4) == (Body(BodyStatus.TOO_LARGE), 2)


def test_a_non_numeric_length_is_invalid() -> None:
    """Review F4: a Content-Length that is not a decimal number is not "too large"."""
    for declared in ("12abc", "-1", "", "1e3", "\u0661", "9" * 40):
        assert read([chunk(b"{}")], 1024, declared).status is BodyStatus.INVALID_LENGTH, declared


def test_a_client_leaving_mid_body_is_disconnected_with_no_data() -> None:
    """Review F4: the part that arrived before the disconnect is never handed over."""
    body = read([chunk(b'{"complete": true}', True), {"type": "http.disconnect"}], 1024, "100")
    assert body == Body(BodyStatus.DISCONNECTED)


def test_a_body_that_never_ends_times_out() -> None:
    """Review2 6: a declared length never sent in full (the client waits) is cut off
    after `timeout`, not held open."""

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    body = asyncio.run(read_body(receive, 1024, content_length="100", timeout=0.05))
    assert body == Body(BodyStatus.TIMED_OUT)


def test_a_trickling_body_times_out_as_a_whole() -> None:
    """Review2 6: the deadline bounds the whole body, not each chunk (a byte every few
    milliseconds never completes it in time)."""

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(0.005)
        return chunk(b"x", True)

    body = asyncio.run(read_body(receive, 1 << 20, timeout=0.1))
    assert body == Body(BodyStatus.TIMED_OUT)
