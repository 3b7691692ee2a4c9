"""Calling servers from asyncio without blocking the event loop."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import supervision as sv

pytestmark = pytest.mark.usefixtures("each_dispatcher")


class Slow(sv.GenServer):
    def handle_call(self, request, from_, state):
        if request == "crash":
            raise RuntimeError("bad")
        time.sleep(request)
        return sv.Reply(("slept", request), state)


def test_aio_call_does_not_block_the_loop():
    pid = Slow.start_link()

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        result = await sv.aio.call(pid, 0.3)
        task.cancel()
        return result, ticks

    result, ticks = asyncio.run(main())
    assert result == ("slept", 0.3)
    assert ticks >= 10  # the loop kept running during the 0.3 s call


def test_aio_call_errors_match_sync_call():
    pid = Slow.start()

    async def main():
        with pytest.raises(sv.CallTimeout):
            await sv.aio.call(pid, 0.3, timeout=0.05)
        with pytest.raises(sv.ProcessExit) as info:
            await sv.aio.call(pid, "crash")
        assert info.value.reason.kind == "RuntimeError"
        with pytest.raises(sv.ProcessExit) as info:
            await sv.aio.call(pid, 0)
        assert info.value.reason == "noproc"

    asyncio.run(main())


def test_aio_call_sees_death_at_once():
    pid = Slow.start()

    async def main():
        threading.Timer(0.05, lambda: sv.exit(pid, "kill")).start()
        started = time.monotonic()
        with pytest.raises(sv.ProcessExit) as info:
            await sv.aio.call(pid, 3.0, timeout=30)
        return info.value.reason, time.monotonic() - started

    reason, elapsed = asyncio.run(main())
    assert reason == "killed" and elapsed < 2.0


def test_many_concurrent_aio_calls():
    class Echo(sv.GenServer):
        def handle_call(self, request, from_, state):
            return sv.Reply(request, state)

    pid = Echo.start_link()

    async def main():
        return await asyncio.gather(*(sv.aio.call(pid, i) for i in range(500)))

    assert asyncio.run(main()) == list(range(500))


def test_iterate_steps_off_the_loop_and_closes_on_early_exit():
    import threading

    closed = threading.Event()
    loop_threads = []

    def blocking():
        try:
            for n in range(100):
                time.sleep(0.01)  # blocks: must never run on the loop's thread
                yield n, threading.get_ident()
        finally:
            closed.set()

    async def main():
        loop_threads.append(threading.get_ident())
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        tick = asyncio.create_task(ticker())
        seen = []
        async for n, thread in sv.aio.iterate(blocking()):
            seen.append((n, thread))
            if n == 4:
                break
        tick.cancel()
        return seen, ticks

    seen, ticks = asyncio.run(main())
    assert [n for n, _ in seen] == [0, 1, 2, 3, 4]
    assert all(thread != loop_threads[0] for _, thread in seen)
    assert ticks > 5  # the loop kept running while steps blocked
    assert closed.wait(5)


def test_a_loop_window_holds_its_size_per_loop_in_order_and_refuses_a_bad_size():
    """`LoopWindow`: `size` holders at once on one loop, the rest served first come
    first served; another loop has places of its own; a size that is not an int >= 1
    is refused."""
    window = sv.aio.LoopWindow(2)

    async def main() -> list[str]:
        order: list[str] = []
        first, second = await window.acquire(), await window.acquire()

        async def waiter(name: str) -> None:
            release = await window.acquire()
            order.append(name)
            release()

        waiters = [asyncio.ensure_future(waiter(name)) for name in ("a", "b", "c")]
        await asyncio.sleep(0.01)
        assert order == []  # both places are held
        assert await asyncio.to_thread(asyncio.run, _acquired_elsewhere(window))
        first()
        second()
        await asyncio.gather(*waiters)
        return order

    assert asyncio.run(main()) == ["a", "b", "c"]
    for size in (0, -1, True, 1.5):
        with pytest.raises(ValueError):
            sv.aio.LoopWindow(size)  # type: ignore[arg-type]


async def _acquired_elsewhere(window: sv.aio.LoopWindow) -> bool:
    release = await asyncio.wait_for(window.acquire(), 1.0)
    release()
    return True


def test_a_loop_window_waiter_cancelled_as_a_release_skips_it_gets_its_cancellation():
    """Session 31 review: a waiter cancelled and, in the same loop step, passed over by a
    `release` (its turn already cancelled) ends with `CancelledError`, not a
    `ValueError` from leaving a queue it was no longer in; the place goes on."""
    window = sv.aio.LoopWindow(1)

    async def main() -> tuple[type, list[str]]:
        release = await window.acquire()
        order: list[str] = []

        async def waiter(name: str) -> None:
            (await window.acquire())()
            order.append(name)

        dropped = asyncio.ensure_future(waiter("dropped"))
        kept = asyncio.ensure_future(waiter("kept"))
        await asyncio.sleep(0)  # both wait
        dropped.cancel()  # its turn is cancelled at once...
        release()  # ...and the release passes over it before its task runs
        outcome = await asyncio.gather(dropped, return_exceptions=True)
        await kept
        return type(outcome[0]), order

    kind, order = asyncio.run(main())
    assert kind is asyncio.CancelledError
    assert order == ["kept"]


def test_loop_window_started_work_keeps_its_place_until_it_ends():
    """`started`: the work runs as a task of its own holding a place until it ends;
    the place is then free for the next."""
    window = sv.aio.LoopWindow(1)

    async def main() -> list[str]:
        order: list[str] = []
        gate = asyncio.Event()

        async def work(name: str) -> str:
            order.append(name)
            await gate.wait()
            return name

        first = await window.started(lambda: work("first"))
        second = asyncio.ensure_future(window.started(lambda: work("second")))
        await asyncio.sleep(0.01)
        assert order == ["first"] and not second.done()  # no place until `first` ends
        gate.set()
        assert await first == "first"
        assert await (await second) == "second"
        return order

    assert asyncio.run(main()) == ["first", "second"]
