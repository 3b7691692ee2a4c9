"""``async for`` over `Runner.run_async` waits on the inbox, not in a thread (issue 11
§2, "waiting costs no thread"; found by issue 20's latency benchmark: each waiting
consumer held one of the 32 iteration threads, so at most 32 invocations could be in
flight and a 2 s model capped ``async for`` callers at ~16 runs/s)."""

from __future__ import annotations

import asyncio
import threading
import time

import adk_actors as adk

CONSUMERS = 48  # more than the 32 threads the iteration steps had


def test_more_async_consumers_than_iteration_threads_are_all_in_flight_at_once():
    started = 0
    lock = threading.Lock()

    def model(history, tools):
        nonlocal started
        with lock:
            started += 1
        return {"text": "late", "delay": 60}  # awaited on the loop: no thread sleeps

    agent = adk.spawn_agent(
        "AsyncWaiters",
        {
            "provider": adk.ScriptedProvider(fn=model, inline=True),
            "max_concurrent_invocations": CONSUMERS,
        },
    )
    sessions = adk.sessions.InMemorySessionService()
    runner = adk.Runner(agent, "app", sessions)

    async def consume(n: int) -> None:
        async for _event in runner.run_async("u", f"s{n}", "hi"):
            pass

    async def main() -> int:
        consumers = [asyncio.ensure_future(consume(n)) for n in range(CONSUMERS)]
        deadline = time.monotonic() + 20
        while started < CONSUMERS and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        seen = started
        for consumer in consumers:  # leaving early cancels each invocation
            consumer.cancel()
        await asyncio.gather(*consumers, return_exceptions=True)
        return seen

    assert asyncio.run(main()) == CONSUMERS  # every model call began while all waited
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # each left consumer cancelled its invocation
        ended = [
            [e.error.reason for e in sessions.get_session("app", "u", f"s{n}").events if e.error]
            for n in range(CONSUMERS)
        ]
        if all(reasons == ["consumer_closed"] for reasons in ended):
            break
        time.sleep(0.05)
    assert all(reasons == ["consumer_closed"] for reasons in ended)


def test_leaving_async_for_as_the_loop_ends_still_closes_the_callers_inbox():
    """Second review of 3543bf6, finding 3: a consumer that breaks out of ``async for``
    just before ``asyncio.run`` returns left its inbox open (the cancel could not be
    awaited on a closing loop, and the close came after it)."""
    import gc

    from supervision.introspection import live_processes

    def open_inboxes() -> int:
        return sum(
            1
            for process in live_processes()
            if getattr(process, "label", None) == "invocation caller" and process.alive
        )

    agent = adk.spawn_agent(
        "AsyncLeaver",
        {
            "provider": adk.ScriptedProvider(
                fn=lambda h, t: {"text": "late", "delay": 3}, inline=True
            )
        },
    )
    runner = adk.Runner(agent, "app", adk.sessions.InMemorySessionService())

    async def leave() -> None:
        async for _event in runner.run_async("u", "s", "hi"):
            break

    before = open_inboxes()
    asyncio.run(leave())
    gc.collect()
    deadline = time.monotonic() + 5
    while open_inboxes() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert open_inboxes() == before
