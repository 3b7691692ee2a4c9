"""Stable runs: runs/s and start-to-terminal latency against google-adk, round by round.

Rows (see docs/BENCHMARKS.md), a fresh session per run on both sides:

1. zero latency, 1 and 64 runs in flight, in-memory sessions: the `weather_workload`
   run (an agent with one tool, an offline model that asks for the tool once and then
   answers).
2. the same at 64 on durable sessions: our `LmdbSessionService` against google-adk's
   `DatabaseSessionService` on SQLite (``sqlite+aiosqlite``, a file in a temp dir).
3. a model that answers after 50 ms and after 2 s (one model call per run), 1, 64 and
   1,024 runs in flight, in memory, each side also as a share of the latency bound
   (width / delay runs/s). Goal (issue 20 §4): the 2 s model with 1,024 in flight
   >= 80% of it.

Ours: `width` asyncio tasks on one event loop, each `waves` times `await
adk.runs.start_async` then `await adk.runs.wait_async` (every run a supervised
invocation server with retention; neither the start nor the wait parks the loop's
thread: the run supervisor's thread starts the server while the loop runs on, and
waiting holds no thread); agents admit every run at once
(`max_concurrent_invocations` 4,096). google-adk has no supervised run, so its side is
its native form: `width` asyncio tasks each consuming `Runner.run_async` to its last
event. Latency is from the start call to the terminal outcome (p50/p99 over every run
of the row). Both sides use the same offline models (`_latency`); their logs are kept
to errors. Each row's sides run in turn, round by round (first side alternating); the
headline is the median of the per-round ratios with their min-max. The machine facts
and the load average come first.

Needs google-adk and SQLAlchemy (`make bench` installs them in `.venv-bench`).
Usage: ``python benchmarks/runs.py [--quick] [--rounds N] [--only zero|slow]``
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from _latency import Clock, Timed, Workload, our_runner, run_rows

import adk_actors as adk

_sessions = itertools.count()


def our_round(work: Workload, durable: Any | None) -> Timed:
    """`width` asyncio tasks, each `waves` stable runs one after another on a fresh
    session each; every outcome checked, every latency kept."""
    latencies: list[float] = []
    failed: list[str] = []
    with our_runner(work, durable) as runner:

        async def lane() -> None:
            for _ in range(work.waves):
                began = time.perf_counter()
                try:
                    # waited for from its start: a run that ended is retained 1 s
                    run_id = await adk.runs.start_async(
                        runner, "u", f"s{next(_sessions)}", "weather?", retention=1.0
                    )
                    outcome = await adk.runs.wait_async(run_id, timeout=120.0)
                    if outcome != adk.Completed("sunny"):
                        raise AssertionError(f"ended {outcome!r}")
                except Exception as error:  # reported with the row
                    failed.append(repr(error)[:200])
                    continue
                latencies.append(time.perf_counter() - began)

        async def main() -> None:
            await asyncio.gather(*(lane() for _ in range(work.width)))

        loop = asyncio.new_event_loop()
        clock = Clock()
        loop.run_until_complete(main())
        timed = clock.stop(latencies, failed)
        loop.close()
    return timed


def main() -> None:
    run_rows(
        "runs benchmark: ours (adk.runs) vs google-adk (Runner.run_async)",
        our_round,
        durable_widths=(64,),
        runner_goal=False,
    )


if __name__ == "__main__":
    main()
