"""Stable runs: start-to-terminal latency and runs/s at 64-way concurrency, against google-adk.

The same workload on both: an agent with one tool, an offline model that asks for
the tool once and then answers, a fresh session per run, 64 runs in flight at a
time. Ours: 64 threads, each `adk.runs.start` then `adk.runs.wait` (the run is a
supervised actor with its own worker, stream and registry entry). google-adk: its
`InMemoryRunner` driven by 64 concurrent asyncio tasks (its native concurrency), a
run being one `run_async` consumed to its last event. Latency is measured from the
start call to the terminal outcome.

Needs google-adk (`make bench` installs it in `.venv-bench`).
Usage: ``python benchmarks/runs.py [--quick]``
"""

from __future__ import annotations

import asyncio
import datetime
import importlib.metadata
import itertools
import statistics
import threading
import time
from collections.abc import Callable

from weather_workload import get_weather, model, peer_one, peer_runner, quiet_options

import adk_actors as adk

WIDTH = 64


class Result:
    """One measured round: runs/s and per-run latencies in seconds."""

    def __init__(self, count: int, seconds: float, latencies: list[float]) -> None:
        self.rate = count / seconds
        ordered = sorted(latencies)
        self.p50 = statistics.median(ordered)
        self.p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


# -- google-adk side ---------------------------------------------------------------------------


def peer_round(count: int) -> Result:
    runner = peer_runner()
    numbers = itertools.count()
    latencies: list[float] = []

    async def lane() -> None:
        for _ in range(count // WIDTH):
            began = time.perf_counter()
            assert await peer_one(runner, f"u{next(numbers)}") == "sunny"
            latencies.append(time.perf_counter() - began)

    async def main() -> None:
        await asyncio.gather(*(lane() for _ in range(WIDTH)))

    started = time.perf_counter()
    asyncio.run(main())
    return Result(len(latencies), time.perf_counter() - started, latencies)


# -- our side ---------------------------------------------------------------------------------

_names = itertools.count()


def our_round(count: int) -> Result:
    sessions = adk.sessions.InMemorySessionService()
    agent = adk.spawn_agent(
        f"RunBench{next(_names)}",
        {"provider": adk.ScriptedProvider(fn=model, inline=True)},
        tools=[adk.tool(get_weather)],
    )
    runner = adk.Runner(agent, "bench", sessions)
    numbers = itertools.count()
    latencies: list[float] = []
    lock = threading.Lock()

    def lane() -> None:
        mine = []
        for _ in range(count // WIDTH):
            began = time.perf_counter()
            run_id = adk.runs.start(runner, "u", f"s{next(numbers)}", "weather?", retention=1.0)
            assert adk.runs.wait(run_id, timeout=120.0) == adk.Completed("sunny")
            mine.append(time.perf_counter() - began)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=lane) for _ in range(WIDTH)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result = Result(len(latencies), time.perf_counter() - started, latencies)
    adk.stop_agent(agent)
    sessions.close()
    return result


def best(fn: Callable[[], Result], rounds: int) -> Result:
    return max((fn() for _ in range(rounds)), key=lambda result: result.rate)


def main() -> None:
    options = quiet_options(__doc__.splitlines()[0])
    count, rounds = (512, 1) if options.quick else (2_048, 3)
    print(
        f"# runs benchmark  {datetime.date.today()}  google-adk {importlib.metadata.version('google-adk')}"
    )
    adk.start()
    ours = best(lambda: our_round(count), rounds)
    peer = best(lambda: peer_round(count), rounds)
    print(
        f"\nstable runs, {count:,} runs, {WIDTH}-way concurrent, one tool round, "
        f"fresh session each, best of {rounds}"
    )
    print("                   runs/s    p50 ms    p99 ms")
    for label, result in (("ours", ours), ("google-adk", peer)):
        print(f"  {label:12s} {result.rate:10,.0f} {result.p50 * 1e3:9.2f} {result.p99 * 1e3:9.2f}")
    print(
        f"  ratio        {ours.rate / peer.rate:9.2f}x {peer.p50 / ours.p50:8.2f}x "
        f"{peer.p99 / ours.p99:8.2f}x   (runs/s ours/peer; latency peer/ours)"
    )
    adk.stop()


if __name__ == "__main__":
    main()
