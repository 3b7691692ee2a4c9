"""Stress (behaviors §13): 1,000 stable runs over 32 agents, in batches of 50."""

from __future__ import annotations

import asyncio
import random

import pytest

import adk_actors as adk
from adk_actors.app import RUN_SUPERVISOR, TASK_SUPERVISOR
from supervision import DynamicSupervisor, default_task_supervisor
from supervision.process import current_process, resolve
from tests.helpers import wait_until

RUNS = 1_000
AGENTS = 32
BATCH = 50


def echo(history, tools):
    """An offline echo model with a small random delay (thread-safe: module `random`)."""
    return {"text": history[-1].text_value(), "delay": random.uniform(0.0, 0.005)}


def counts():
    return (
        DynamicSupervisor.count_children(RUN_SUPERVISOR)["active"],
        resolve(TASK_SUPERVISOR).count(),
        default_task_supervisor().count(),
    )


@pytest.mark.timeout(300)
def test_1000_stable_runs_over_32_agents():
    sessions = adk.sessions.InMemorySessionService()
    runners = [
        adk.Runner(
            adk.spawn_agent(f"Echo{n}", {"provider": adk.ScriptedProvider(fn=echo)}),
            "stress",
            sessions,
        )
        for n in range(AGENTS)
    ]
    baseline = counts()
    me = current_process()
    mailbox = me.pending()
    finished: dict[str, int] = {}
    for first in range(0, RUNS, BATCH):
        batch = [
            (adk.runs.start(runners[n % AGENTS], "u", f"s{n}", f"message {n}", retention=5.0), n)
            for n in range(first, first + BATCH)
        ]
        for run_id, n in batch:
            assert adk.runs.wait(run_id, timeout=60) == adk.Completed(f"message {n}")
            finished[run_id] = n
    assert len(finished) == RUNS  # run ids are unique
    for n in range(RUNS):
        events = sessions.get_session("stress", "u", f"s{n}").events
        assert [event.author for event in events] == ["user", f"Echo{n % AGENTS}"]
        assert [event.text() for event in events] == [f"message {n}"] * 2
        assert events[1].is_final
        assert len({event.invocation_id for event in events}) == 1
    wait_until(lambda: counts() == baseline, timeout=60)
    assert adk.runs.stats() == {"actors": 0, "retained": 0, "pending_handoffs": 0}
    assert me.pending() == mailbox  # nothing of the runs reached the caller's mailbox
    sessions.close()


@pytest.mark.timeout(300)
def test_1000_runs_at_128_way_on_lmdb_each_store_one_opening_and_one_terminal(tmp_path):
    """Under concurrent load on LMDB every invocation stores its opening and exactly one
    terminal (the old design ended some ``invocation_ended_elsewhere`` with nothing
    stored). Some sessions are shared, so lanes serialize their runs too."""
    sessions = adk.sessions.LmdbSessionService(tmp_path / "sessions")
    runners = [
        adk.Runner(
            adk.spawn_agent(f"Durable{n}", {"provider": adk.ScriptedProvider(fn=echo)}),
            "lmdb",
            sessions,
        )
        for n in range(8)
    ]
    width, total, shared = 128, 1_000, 250
    outcomes: dict[int, object] = {}
    slots = asyncio.Semaphore(width)

    async def one(n: int) -> None:
        async with slots:  # at most 128 runs in flight; each waited for from its start
            run_id = adk.runs.start(runners[n % 8], "u", f"s{n % shared}", f"m{n}")
            outcomes[n] = await adk.runs.wait_async(run_id, timeout=60)

    async def main() -> None:
        await asyncio.gather(*(one(n) for n in range(total)))

    asyncio.run(main())
    assert outcomes == {n: adk.Completed(f"m{n}") for n in range(total)}
    for s in range(shared):
        session = sessions.get_session("lmdb", "u", f"s{s}", include_internal=True)
        by_invocation: dict[str, list] = {}
        for event in session.events:
            by_invocation.setdefault(event.invocation_id, []).append(event)
        assert len(by_invocation) == len(range(s, total, shared))
        for events in by_invocation.values():
            assert events[0].author == "user"
            assert sum(1 for event in events if event.is_final or event.error) == 1
            assert events[-1].is_final
        assert not any(key.startswith("_adk:") for key in session.state)
    sessions.close()
