"""Runner throughput: ours against google-adk's `Runner`, the sides in turn round by round.

Rows (see docs/BENCHMARKS.md), a fresh session per run on both sides:

1. zero latency, 1 and 64 runs in flight, in-memory sessions: the `weather_workload`
   run (an agent with one tool, an offline model that asks for the tool once and then
   answers). Goal (issue 20 §4): >= 12x google-adk at both.
2. the same on durable sessions: our `LmdbSessionService` (every step a committed LMDB
   write transaction) against google-adk's `DatabaseSessionService` on SQLite
   (``sqlite+aiosqlite``, a file in a temp dir). No goal.
3. a model that answers after 50 ms and after 2 s (one model call per run), 1, 64 and
   1,024 runs in flight, in memory, each side also as a share of the latency bound
   (width / delay runs/s). Goal: the 2 s model with 1,024 in flight >= 80% of it.

Ours: `width` threads calling `Runner.run` (its blocking form: a thread per caller),
each `waves` runs one after another, all released at once; agents admit every run at
once (`max_concurrent_invocations` 4,096). google-adk: `width` asyncio tasks, each
consuming `run_async` to its last event (its native concurrency). Both sides use the
same offline models (`_latency`); their logs are kept to errors. Each row's sides run
in turn, round by round (first side alternating); the headline is the median of the
per-round ratios with their min-max. The machine facts and the load average come
first.

Needs google-adk and SQLAlchemy (`make bench` installs them in `.venv-bench`).
Usage: ``python benchmarks/runner.py [--quick] [--rounds N] [--only zero|slow]``
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

from _latency import Clock, Timed, Workload, our_runner, run_rows

_sessions = itertools.count()


def our_round(work: Workload, durable: Any | None) -> Timed:
    """`width` threads, each `waves` `Runner.run` calls one after another on a fresh
    session each, released together; every answer checked, every latency kept."""
    latencies: list[float] = []
    failed: list[str] = []
    gate = threading.Event()
    with our_runner(work, durable) as runner:

        def lane() -> None:
            gate.wait()
            for _ in range(work.waves):
                began = time.perf_counter()
                try:
                    answer = runner.run("u", f"s{next(_sessions)}", "weather?")
                    if answer != "sunny":
                        raise AssertionError(f"answered {answer!r}")
                except Exception as error:  # reported with the row
                    failed.append(repr(error)[:200])
                    continue
                latencies.append(time.perf_counter() - began)

        threads = [threading.Thread(target=lane) for _ in range(work.width)]
        for thread in threads:
            thread.start()
        clock = Clock()
        gate.set()
        for thread in threads:
            thread.join()
        timed = clock.stop(latencies, failed)
    return timed


def main() -> None:
    run_rows(
        "runner benchmark: ours (Runner) vs google-adk (Runner)",
        our_round,
        durable_widths=(1, 64),
        runner_goal=True,
    )


if __name__ == "__main__":
    main()
