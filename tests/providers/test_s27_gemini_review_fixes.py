"""The session 27 review of 75df4b5 (the Gemini provider's `cancelled_once`, the shared
TLS context, 8-connection shards, the content split): one test or more per finding,
named F1-F7 as in the review. Each behaviour test fails on 75df4b5.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import ssl
from typing import Any

import pytest

from providers import content, content_canonical
from providers.fake_gemini import FakeGemini, FakeResponse, candidate
from providers.gemini import GeminiProvider, cancellation, shards
from providers.gemini.cancellation import cancelled_once
from providers.gemini.config import check
from providers.gemini.shards import SHARD_CONNECTIONS, Shards
from tests.providers import test_s27_gemini_cancellation as cancellation_tests

# the fake server, config and waits of the cancellation tests this file follows
KEY, HISTORY, config = cancellation_tests.KEY, cancellation_tests.HISTORY, cancellation_tests.config
fake, wait_until, until = (
    cancellation_tests.fake,
    cancellation_tests.wait_until,
    cancellation_tests._until,
)


def slow_cleanup(seen: list[str], started: list[asyncio.Task[Any]]) -> Any:
    """An attempt whose cleanup awaits five loop turns, like httpcore's lock and close;
    `seen` says whether a second cancellation cut the cleanup short."""

    async def attempt() -> str:
        task = asyncio.current_task()
        assert task is not None
        started.append(task)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            try:
                for _ in range(5):
                    await asyncio.sleep(0)
            except asyncio.CancelledError:
                seen.append("cleanup interrupted")
                raise
            seen.append("cleaned up")
            raise
        return "never"

    return attempt


# -- F1: a shutdown sweep cancels the attempt and the caller: the attempt once -----------


def test_f1_a_sweep_that_cancels_the_attempt_first_is_not_doubled() -> None:
    """The sweep's order (a WeakSet's) put the attempt's task first: it is cancelled by
    the sweep, then the caller is; the caller does not cancel it again."""
    seen: list[str] = []
    started: list[asyncio.Task[Any]] = []

    async def main() -> None:
        caller = asyncio.ensure_future(cancelled_once(slow_cleanup(seen, started)))
        await until(lambda: bool(started))
        await asyncio.sleep(0)
        started[0].cancel()  # what asyncio.run's or the reactor's sweep does, in one turn
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller

    asyncio.run(main())
    assert seen == ["cancelled", "cleaned up"]


def test_f1_a_call_pending_when_asyncio_run_ends_closes_its_connection(
    fake: FakeGemini,
) -> None:
    """The review's r1: `main()` returns with the call pending; asyncio.run's shutdown
    cancels every task. On 75df4b5 about half of the runs left the connection open."""
    provider = GeminiProvider()
    for _ in range(6):
        fake.enqueue(FakeResponse(body=candidate([{"text": "late"}]), delay=30))

        async def main() -> None:
            pending = asyncio.ensure_future(provider.agenerate(config(fake), HISTORY, ()))
            await until(lambda: fake.in_flight == 1)
            assert not pending.done()  # left pending: the shutdown sweep cancels it

        asyncio.run(main())
        wait_until(lambda: fake.in_flight == 0)


# -- F2: the first idle client, so a sequential caller reuses its connection -------------


def test_f2_sequential_calls_reuse_one_connection(fake: FakeGemini) -> None:
    """With the default 1,024 connections (128 clients), 40 sequential calls opened 40
    connections on 75df4b5 (clients used in turn); now one."""
    provider = GeminiProvider()

    async def main() -> None:
        for _ in range(40):
            fake.reply_text("ok")
            assert await provider.agenerate(config(fake), HISTORY, ()) == "ok"
        await provider.aclose()

    asyncio.run(main())
    assert fake.connections_accepted == 1


def test_f2_concurrent_calls_spread_over_small_pools(fake: FakeGemini) -> None:
    """Three calls at once go to three clients (one idle client each), each of
    `SHARD_CONNECTIONS` connections; when they end, the next call takes the first."""
    provider = GeminiProvider()
    settings = check(config(fake))

    async def main() -> list[int]:
        for _ in range(3):
            fake.enqueue(FakeResponse(body=candidate([{"text": "ok"}]), delay=0.2))
        await asyncio.gather(*(provider.agenerate(config(fake), HISTORY, ()) for _ in range(3)))
        (pool,) = provider._loop_clients[asyncio.get_running_loop()].values()
        limits = [int(http._transport._pool._max_connections) for _, http in pool.clients]
        assert pool.busy == [0, 0, 0]
        assert provider._async_client(settings) is pool.clients[0][0]
        await provider.aclose()
        return limits

    assert asyncio.run(main()) == [SHARD_CONNECTIONS] * 3
    assert fake.connections_accepted == 3


def test_f2_the_pick_fills_idle_clients_then_the_least_busy() -> None:
    pool = Shards(count=3)
    assert pool.pick() is None  # none yet: make one
    assert pool.add(("a", "a")) == 0  # type: ignore[arg-type]
    assert pool.pick() is None  # the only one is busy: make another
    assert pool.add(("b", "b")) == 1  # type: ignore[arg-type]
    pool.release(0)
    assert pool.pick() == 0  # the first idle one
    assert pool.pick() is None
    assert pool.add(("c", "c")) == 2  # type: ignore[arg-type]
    pool.release(1)
    assert pool.busy == [1, 0, 1]
    assert pool.pick() == 1
    assert pool.pick() == 0  # all three exist and are busy: the least busy (ties: first)
    assert pool.pick() == 1
    assert pool.pick() == 2
    assert pool.busy == [2, 2, 2]
    for _ in range(2):
        pool.release(2)
    assert pool.pick() == 2  # idle again, found although it is the last
    assert shards.SHARD_CONNECTIONS == SHARD_CONNECTIONS


# -- F3: the cleanup wait is bounded, and an abandoned attempt's failure is retrieved ----


def test_f3_an_abandoned_cleanup_is_logged_and_its_failure_retrieved(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A cleanup longer than `CLEANUP_SECONDS` that then fails: the caller goes on at
    the bound, one warning says so, and asyncio never reports the failure as
    "never retrieved" (75df4b5 left it unretrieved)."""
    monkeypatch.setattr(cancellation, "CLEANUP_SECONDS", 0.05)
    unretrieved: list[dict[str, Any]] = []

    async def main() -> float:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: unretrieved.append(context))
        done = asyncio.Event()

        async def attempt() -> str:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                await asyncio.sleep(0.2)  # longer than the bound
                done.set()
                raise ValueError("failed while cleaning up") from None
            return "never"

        caller = asyncio.ensure_future(cancelled_once(attempt))
        await asyncio.sleep(0.01)
        start = loop.time()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        waited = loop.time() - start
        await done.wait()
        await asyncio.sleep(0.01)
        return waited

    with caplog.at_level(logging.WARNING, logger="adk.gemini"):
        waited = asyncio.run(main())
    gc.collect()
    assert waited < 0.2  # released at the bound, not at the cleanup's end
    assert [r for r in caplog.records if "cleanup_abandoned" in r.getMessage()]
    assert unretrieved == []
    assert cancellation.CLEANUP_SECONDS == 0.05
    monkeypatch.undo()
    assert cancellation.CLEANUP_SECONDS <= 1.0  # the default bound


# -- F4: no frame reaches the reader after the caller was cancelled ----------------------


def test_f4_no_frame_is_delivered_after_the_callers_cancellation(fake: FakeGemini) -> None:
    """The reader cancels the call at its first frame; the other frames arrived in the
    same read and, on 75df4b5, were still delivered before the attempt was cancelled."""
    fake.reply_stream([candidate([{"text": f"part {n} "}]) for n in range(5)])
    provider = GeminiProvider()
    delivered: list[str] = []

    async def main() -> None:
        call: asyncio.Future[Any] | None = None

        def on_delta(text: str) -> None:
            delivered.append(text)
            assert call is not None
            call.cancel()

        call = asyncio.ensure_future(provider.astream(config(fake), HISTORY, (), on_delta))
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(main())
    assert delivered == ["part 0 "]


# -- F5: cancelled at every loop turn, and the TLS context shared -------------------------


def test_f5_a_call_cancelled_at_every_turn_closes_its_connection(fake: FakeGemini) -> None:
    """Any cleanup length: the call is cancelled at every loop turn until it ends (the
    review's r4; `turns_between=1` caught the bug only while httpcore's cleanup is two
    turns long)."""
    fake.enqueue(FakeResponse(body=candidate([{"text": "late"}]), delay=30))
    provider = GeminiProvider()

    async def main() -> None:
        call = asyncio.ensure_future(provider.agenerate(config(fake), HISTORY, ()))
        await until(lambda: fake.in_flight == 1)
        while not call.done():
            call.cancel()
            await asyncio.sleep(0)
        assert call.cancelled()

    asyncio.run(main())
    wait_until(lambda: fake.in_flight == 0)


def test_f5_a_new_shard_client_builds_no_tls_context(
    fake: FakeGemini, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Restored from before 5bc3c7e: google-genai builds two TLS contexts per client
    unless told which one to use (18-37 ms each time): every client, async shards and
    the sync one, shares the provider's one context."""
    from providers.gemini import transport

    settings = check(config(fake, max_connections=3 * SHARD_CONNECTIONS))
    provider = GeminiProvider()
    transport.ssl_context()  # the shared one exists before the clients

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a TLS context was built for a client")

    monkeypatch.setattr(ssl, "create_default_context", refuse)
    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", refuse)

    async def make() -> int:
        leases = [provider._async_lease(settings) for _ in range(3)]  # all busy: 3 clients
        made = {id(pool.clients[index][0]) for pool, index in leases}
        provider._client(settings)
        return len(made)

    assert asyncio.run(make()) == 3


# -- F7: the canonical cache's bound lives where it is read -------------------------------


def test_f7_the_cache_bound_is_patched_where_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """`content.CANONICAL_CACHE_SIZE` was a copy that could be patched to no effect; it
    is gone, so patching it fails loudly, and every public name still imports."""
    assert not hasattr(content, "CANONICAL_CACHE_SIZE")
    with pytest.raises(AttributeError):
        monkeypatch.setattr(content, "CANONICAL_CACHE_SIZE", 8)
    assert isinstance(content_canonical.CANONICAL_CACHE_SIZE, int)
    for name in content.__all__:
        assert getattr(content, name) is not None
