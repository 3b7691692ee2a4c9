"""Runner throughput: ours against google-adk's `InMemoryRunner`, side by side.

The same workload on both: an agent with one tool, an offline model that asks for
the tool once and then answers, a fresh session per run. Sequential (one run after
another) and 64-way concurrent (ours: 64 threads calling `Runner.run`; google-adk: 64
`run_async` coroutines under `asyncio.gather`, its native concurrency). Ours also on
`LmdbSessionService`. Goal: >= 3x google-adk with in-memory sessions at both
concurrencies, >= 1x with LMDB.

Needs google-adk (`make bench` installs it in `.venv-bench`).
Usage: ``python benchmarks/runner.py [--quick]``
"""

from __future__ import annotations

import asyncio
import datetime
import importlib.metadata
import itertools
import tempfile
import threading
import time
from typing import Any

from weather_workload import get_weather, model, peer_one, peer_runner, quiet_options

import adk_actors as adk

# -- google-adk side ---------------------------------------------------------------------------


def peer_rate(count: int, width: int) -> float:
    runner = peer_runner()

    async def main() -> None:
        if width == 1:
            for n in range(count):
                assert await peer_one(runner, f"u{n}") == "sunny"
        else:
            for start in range(0, count, width):
                results = await asyncio.gather(
                    *(peer_one(runner, f"u{start + n}") for n in range(width))
                )
                assert results == ["sunny"] * width

    started = time.perf_counter()
    asyncio.run(main())
    return count / (time.perf_counter() - started)


# -- our side ---------------------------------------------------------------------------------

_names = itertools.count()


def our_rate(count: int, width: int, sessions: Any) -> float:
    agent = adk.spawn_agent(
        f"Bench{next(_names)}",
        {"provider": adk.ScriptedProvider(fn=model, inline=True)},
        tools=[adk.tool(get_weather)],
    )
    runner = adk.Runner(agent, "bench", sessions)
    sessions_ids = itertools.count()
    per_thread = count // width

    def work() -> None:
        for _ in range(per_thread):
            assert runner.run("u", f"s{next(sessions_ids)}", "weather?") == "sunny"

    threads = [threading.Thread(target=work) for _ in range(width)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rate = per_thread * width / (time.perf_counter() - started)
    adk.stop_agent(agent)
    return rate


def best(fn: Any, rounds: int) -> float:
    return max(fn() for _ in range(rounds))


def main() -> None:
    options = quiet_options(__doc__.splitlines()[0])
    count, rounds = (256, 1) if options.quick else (2_048, 3)
    print(
        f"# runner benchmark  {datetime.date.today()}  google-adk {importlib.metadata.version('google-adk')}"
    )
    adk.start()
    memory = adk.sessions.InMemorySessionService()
    lmdb_store = adk.sessions.LmdbSessionService(tempfile.mkdtemp(prefix="adk-bench-"))
    print(f"\nruns/s, {count:,} runs, one tool round, fresh session each, best of {rounds}")
    print(
        "                      ours (memory)  ours (lmdb)   google-adk   memory ratio  lmdb ratio"
    )
    for label, width in (("sequential", 1), ("64-way concurrent", 64)):
        ours_memory = best(lambda width=width: our_rate(count, width, memory), rounds)
        ours_lmdb = best(lambda width=width: our_rate(count, width, lmdb_store), rounds)
        peer = best(lambda width=width: peer_rate(count, width), rounds)
        memory_goal = "met" if ours_memory >= 3 * peer else "MISSED"
        lmdb_goal = "met" if ours_lmdb >= peer else "MISSED"
        print(
            f"  {label:18s} {ours_memory:12,.0f} {ours_lmdb:12,.0f} {peer:12,.0f}"
            f"   {ours_memory / peer:5.2f}x ({memory_goal:6s}) {ours_lmdb / peer:5.2f}x ({lmdb_goal})"
        )
    lmdb_store.close()
    adk.stop()


if __name__ == "__main__":
    main()
