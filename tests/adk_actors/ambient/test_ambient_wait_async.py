"""`adk.ambient.wait_async`: the awaitable `wait`, with its outcomes and typed errors,
holding no thread while it waits and withdrawing its waiter when cancelled."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import adk_actors as adk
from adk_actors import providers
from adk_actors.ambient import AmbientError, AmbientTimeout, Submitted
from tests.adk_actors.ambient._support import event, make, per_event, wait_until


class Blocked:
    """A trigger whose model answers only once `release` is set."""

    def __init__(self, **options: Any) -> None:
        self.release = threading.Event()
        self.called = threading.Event()
        agent = adk.spawn_agent(
            "AmbientWaitAsync", {"provider": providers.ScriptedProvider(fn=self._model)}
        )
        runner = adk.Runner(agent, "ambient_app", adk.sessions.InMemorySessionService())
        self.name = "wait-async"
        options.setdefault("session_policy", per_event())
        adk.ambient.register_trigger(self.name, runner, **options)

    def _model(self, history: Any, tools: Any) -> dict[str, Any]:
        self.called.set()
        self.release.wait(10)
        return {"text": "released"}

    def submit(self, key: str) -> Submitted:
        receipt = adk.ambient.submit(self.name, event(key))
        assert self.called.wait(5)  # the event is running, its model call parked
        return receipt


def waiters(receipt: Submitted) -> int:
    count: int = adk.ambient.status(receipt)["waiter_count"]
    return count


async def until_waiters(receipt: Submitted, count: int, timeout: float = 5.0) -> None:
    """Let the loop run until the event has `count` waiters."""
    loop = asyncio.get_running_loop()
    until = loop.time() + timeout
    while waiters(receipt) != count:
        assert loop.time() < until, "waiters not registered in time"
        await asyncio.sleep(0.01)


def test_wait_async_returns_what_wait_returns() -> None:
    setup = make()
    adk.ambient.register_trigger("same", setup.runner, session_policy=per_event())
    done = adk.ambient.submit("same", event("done"))
    synced = adk.ambient.wait(done, timeout=10)
    assert isinstance(synced, adk.Completed)
    assert asyncio.run(adk.ambient.wait_async(done, timeout=10)) == synced
    assert asyncio.run(adk.ambient.wait_async(done.ref)) == synced  # a ref string too

    blocked = Blocked()
    receipt = blocked.submit("pending")

    async def main() -> object:
        waiting = asyncio.ensure_future(adk.ambient.wait_async(receipt, timeout=10))
        await until_waiters(receipt, 1)
        assert not waiting.done()  # the loop runs while the event is still going
        blocked.release.set()
        return await waiting

    outcome = asyncio.run(main())
    assert outcome == adk.ambient.wait(receipt, timeout=10) == adk.Completed("released")
    assert waiters(receipt) == 0


def test_a_hundred_waiters_hold_no_thread() -> None:
    """100 concurrent `wait_async` on one event add no thread: each is a reply slot
    resolving a future on the loop."""
    blocked = Blocked(max_waiters=128)  # the default is 64
    receipt = blocked.submit("many")

    async def main() -> tuple[list[Any], int, int]:
        await asyncio.sleep(0.05)
        base = threading.active_count()
        tasks = [
            asyncio.ensure_future(adk.ambient.wait_async(receipt, timeout=30)) for _ in range(100)
        ]
        await until_waiters(receipt, 100)
        await asyncio.sleep(0.05)
        held = threading.active_count()
        blocked.release.set()
        return list(await asyncio.gather(*tasks)), base, held

    outcomes, base, held = asyncio.run(main())
    assert held <= base + 2  # a thread per waiter would be 100 more
    assert outcomes == [adk.Completed("released")] * 100
    assert waiters(receipt) == 0


def test_errors_are_the_same_typed_errors_as_wait() -> None:
    blocked = Blocked(max_waiters=1)
    receipt = blocked.submit("errors")

    with pytest.raises(AmbientTimeout) as synced:
        adk.ambient.wait(receipt, timeout=0.05)
    with pytest.raises(AmbientTimeout) as timed_out:
        asyncio.run(adk.ambient.wait_async(receipt, timeout=0.05))
    assert timed_out.value.reason == synced.value.reason == "timeout"
    assert isinstance(timed_out.value, TimeoutError)
    wait_until(lambda: waiters(receipt) == 0)  # a timed-out wait leaves no waiter

    for missing in ("amb-0:no-such-trigger", "not-a-ref", receipt.ref.replace("amb-", "amb-0")):
        with pytest.raises(AmbientError) as sync_missing:
            adk.ambient.wait(missing, timeout=1)
        with pytest.raises(AmbientError) as async_missing:
            asyncio.run(adk.ambient.wait_async(missing, timeout=1))
        assert async_missing.value.reason == sync_missing.value.reason == "not_found"

    async def over_the_limit() -> object:
        first = asyncio.ensure_future(adk.ambient.wait_async(receipt, timeout=10))
        await until_waiters(receipt, 1)
        with pytest.raises(AmbientError) as refused:
            await adk.ambient.wait_async(receipt, timeout=1)
        assert refused.value.reason == "waiter_limit_reached"
        with pytest.raises(AmbientError) as refused_sync:
            adk.ambient.wait(receipt, timeout=1)
        assert refused_sync.value.reason == "waiter_limit_reached"
        blocked.release.set()
        return await first

    assert asyncio.run(over_the_limit()) == adk.Completed("released")


def test_a_cancelled_await_withdraws_its_waiter() -> None:
    """``asyncio.wait_for`` and ``task.cancel()`` cancel a `wait_async`: each
    withdraws its waiter, and the event goes on."""
    blocked = Blocked()
    receipt = blocked.submit("cancelled")

    async def main() -> None:
        for _ in range(50):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(adk.ambient.wait_async(receipt), 0.002)
        task = asyncio.ensure_future(adk.ambient.wait_async(receipt))
        await until_waiters(receipt, 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await until_waiters(receipt, 0)

    asyncio.run(main())
    wait_until(lambda: waiters(receipt) == 0)
    assert adk.ambient.status(receipt)["state"] == "running"
    blocked.release.set()
    assert adk.ambient.wait(receipt, timeout=10) == adk.Completed("released")
