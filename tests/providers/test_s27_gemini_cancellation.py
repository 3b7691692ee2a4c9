"""An abandoned async Gemini call closes its connection even when its task is cancelled
twice (session 27 finding, the judge flake that reverted 6ef3a86).

The LLM judge runs the provider inside its own `asyncio.timeout` and gives the provider
the same deadline, so two timers cancel the same task a loop turn apart. httpcore closes
the abandoned connection in an ``except`` block that awaits under an anyio shield, which
does not hold off asyncio's own cancellation: the second cancel interrupted the cleanup
and the connection stayed open (ACTIVE in its pool) until the server's late answer.
Google-genai clients built slowly (18-37 ms of TLS setup) had kept the two deadlines
apart; with the shared TLS context they coincide. The async path now runs each attempt
in a task that a caller's cancellations reach once (`providers.gemini.cancellation`).
Follows tests/adk_actors/evaluation/test_judge.py::
test_the_callers_deadline_bounds_the_async_judge.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from providers import content
from providers.fake_gemini import FakeGemini, FakeResponse, candidate
from providers.gemini import GeminiProvider
from providers.gemini.cancellation import cancelled_once

KEY = "AIzaSyTEST-cancel-key-0123456789"
HISTORY = [content.from_text("hi")]


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


def config(fake: FakeGemini, **extra: Any) -> dict[str, Any]:
    return {
        "provider": "gemini",
        "model": "gemini-3.1-flash-lite",
        "api_key": KEY,
        "base_url": fake.base_url,
        **extra,
    }


def wait_until(check: Any, timeout: float = 10.0) -> None:
    stop = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < stop, "condition not reached"
        time.sleep(0.01)


async def _until(check: Any) -> None:
    stop = time.monotonic() + 10
    while not check():
        assert time.monotonic() < stop, "condition not reached"
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("turns_between", [0, 1, 2, 3])
def test_a_call_cancelled_twice_closes_its_connection(fake: FakeGemini, turns_between: int) -> None:
    """Cancel, let the cleanup start (`turns_between` loop turns), cancel again: the
    server sees the connection close while its 30 s answer is still pending, on a loop
    that ends at once (no `aclose`)."""
    fake.enqueue(FakeResponse(body=candidate([{"text": "late"}]), delay=30))
    provider = GeminiProvider()

    async def main() -> None:
        call = asyncio.ensure_future(provider.agenerate(config(fake), HISTORY, ()))
        await _until(lambda: fake.in_flight == 1)
        call.cancel()
        for _ in range(turns_between):
            await asyncio.sleep(0)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(main())
    wait_until(lambda: fake.in_flight == 0)  # hung up well before the 30 s answer
    assert len(fake.requests) == 1


def test_two_deadlines_at_one_instant_close_the_connection(fake: FakeGemini) -> None:
    """The judge's shape: a caller's `asyncio.timeout` and the provider's deadline at
    the same instant; the caller sees its own timeout, the connection closes. (A smoke
    test of that shape: it passes without `cancelled_once` too, as the two timers
    rarely fall a loop turn apart here; the regressions are the `[1]` case above and
    test_s27_gemini_review_fixes.py::test_f5_a_call_cancelled_at_every_turn_...)"""
    for _ in range(5):
        fake.enqueue(FakeResponse(body=candidate([{"text": "late"}]), delay=30))
    provider = GeminiProvider()

    async def main() -> None:
        scope = asyncio.timeout(0.1)
        with pytest.raises(TimeoutError):
            async with scope:
                await provider.agenerate(config(fake, request_timeout=100), HISTORY, ())
        assert scope.expired()

    for _ in range(5):
        asyncio.run(main())
        wait_until(lambda: fake.in_flight == 0)


def test_cancelled_once_forwards_one_cancel_and_waits_for_the_cleanup() -> None:
    """Three cancellations of the caller: the attempt sees one, its awaiting cleanup
    finishes, and the caller's timeout still reads as its own."""
    seen: list[str] = []

    async def attempt() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            for _ in range(5):  # a cleanup that awaits, like httpcore's lock and close
                await asyncio.sleep(0)
            seen.append("cleaned up")
            raise
        return "never"

    async def main() -> None:
        caller = asyncio.ensure_future(cancelled_once(attempt))
        await asyncio.sleep(0.01)
        for _ in range(3):
            caller.cancel()
            await asyncio.sleep(0)
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert seen == ["cancelled", "cleaned up"]

        scope = asyncio.timeout(0.02)
        with pytest.raises(TimeoutError):
            async with scope:
                await cancelled_once(attempt)
        assert scope.expired()

    asyncio.run(main())


def test_cancelled_once_returns_the_answer_and_raises_the_failure() -> None:
    """A smoke test: the answer and the failure pass through unchanged."""

    async def answer() -> int:
        await asyncio.sleep(0)
        return 7

    async def fail() -> int:
        raise ValueError("bad")

    async def main() -> None:
        assert await cancelled_once(answer) == 7
        with pytest.raises(ValueError, match="bad"):
            await cancelled_once(fail)

    asyncio.run(main())
