"""Session 30 review findings, fixed (real runner, registry and loops; scripted model).

- M1: the per-loop start window was an `asyncio.Semaphore`, which keeps the loop it first
  waited on: as the value of a `WeakKeyDictionary` keyed by that loop it kept every loop
  that had more than `START_WINDOW` starts in flight alive for good.
- M2 (older than the session): a run started with the id of a lost run the registry
  still retained was never tracked (its `Track` was ignored, its `Terminal` dropped), so
  its server was never let go and the id stayed taken until the application stopped.
"""

from __future__ import annotations

import asyncio
import gc
import itertools

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.outcomes import Completed, Failed
from adk_actors.runner import launch
from adk_actors.runs.registry import RUN_REGISTRY, Known
from tests.helpers import wait_until

_numbers = itertools.count()


@pytest.fixture
def runner():
    sessions = adk.sessions.InMemorySessionService()
    agent = adk.spawn_agent(
        f"Fixes{next(_numbers)}",
        {
            "provider": adk.ScriptedProvider(fn=lambda h, t: {"text": "ok"}, inline=True),
            "max_concurrent_invocations": 1024,
        },
    )
    yield adk.Runner(agent, "app", sessions)
    sessions.close()


def test_a_loop_past_its_start_window_is_not_kept_alive(runner):
    """M1: three loops that each had more starts in flight than the window are all
    freed once they are closed and dropped."""
    count = launch.START_WINDOW * 2 + 8

    async def burst() -> list[adk.Outcome]:
        ids = await asyncio.gather(
            *(adk.runs.start_async(runner, "u", f"m1-{next(_numbers)}", "hi") for _ in range(count))
        )
        return [await adk.runs.wait_async(run_id, timeout=10.0) for run_id in ids]

    for _ in range(3):
        assert asyncio.run(burst()) == [Completed("ok")] * count
    gc.collect()
    assert launch._starts.loops() == 0


def test_the_window_passes_on_a_place_given_to_a_caller_cancelled_at_once():
    """A caller given a place by a release but cancelled before it ran hands the place
    on; one cancelled while it still waited leaves the queue; the count stays whole."""

    async def main() -> list[str]:
        window = sv.aio.LoopWindow(1)
        order: list[str] = []
        release = await window.acquire()  # the one place is taken
        releases = []

        async def waiter(name: str) -> None:
            releases.append(await window.acquire())
            order.append(name)

        first = asyncio.ensure_future(waiter("first"))
        dropped = asyncio.ensure_future(waiter("dropped"))
        last = asyncio.ensure_future(waiter("last"))
        await asyncio.sleep(0)  # all three wait now
        dropped.cancel()  # still waiting: it leaves the queue
        release()  # the place goes to "first"...
        first.cancel()  # ...cancelled before it could run: it passes the place on
        await asyncio.gather(first, dropped, return_exceptions=True)
        await last
        releases[0]()  # "last" gives it back: one place free again
        await asyncio.wait_for(window.acquire(), 1.0)
        return order

    assert asyncio.run(main()) == ["last"]


def test_a_lost_runs_id_reused_within_its_retention_is_tracked_and_let_go(runner):
    """M2: the new run's own `Track` replaces the lost run's retained entry, so the new
    run is retained with its outcome, let go when its retention ends, and its id is
    free again."""
    slow = adk.Runner(
        adk.spawn_agent(
            f"Slow{next(_numbers)}",
            {"provider": adk.ScriptedProvider(fn=lambda h, t: {"text": "x", "delay": 30})},
        ),
        "app",
        adk.sessions.InMemorySessionService(),
    )
    lost = adk.runs.start(slow, "u", "s-lost", "hi", run_id="run-reused", retention=30.0)
    sv.exit(sv.whereis(("adk.run", lost)), "kill")
    assert adk.runs.wait(lost, timeout=10.0) == Failed(("run_actor_exit", "killed"))
    again = adk.runs.start(runner, "u", "s-again", "hi", run_id="run-reused", retention=0.2)
    server = sv.whereis(("adk.run", again))
    assert adk.runs.wait(again, timeout=10.0) == Completed("ok")
    wait_until(lambda: not server.is_alive())  # its retention ended: let go
    assert all(run_id != "run-reused" for run_id, _, _ in sv.call(RUN_REGISTRY, Known()))
    third = adk.runs.start(runner, "u", "s-third", "hi", run_id="run-reused", retention=0.2)
    assert adk.runs.wait(third, timeout=10.0) == Completed("ok")
