"""Kernel benchmark: `supervision` against raw pykka, side by side in one process run.

Rows (see docs/BENCHMARKS.md), each for both GenServer dispatchers (``thread``: a pykka
thread per server, like a pykka ThreadingActor; ``pooled``: the default, shared threads):

1. cast throughput: `supervision.cast` to a GenServer vs `ActorRef.tell` to a pykka actor.
2. call round trip: `supervision.call` vs `ActorRef.ask`.
3. spawn + stop: a temporary child under a DynamicSupervisor vs `Actor.start()` + `ref.stop()`.
4. restart latency: kill a named permanent child of a Supervisor until its replacement
   answers a call (raw pykka has no supervisor: no peer figure).

The sides of a comparison run in turn, in a rotating order, several rounds; the best
round of each side is reported (a neighbour process on a small machine only ever makes
a run slower), and the median of the per-round ratios is printed as a stability check.

Usage: ``python benchmarks/kernel.py [--quick] [--repeats N]``
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gc
import importlib.metadata
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pykka
import structlog

import supervision
from supervision import ChildSpec, DynamicSupervisor, From, GenServer, Reply, Supervisor

RESTART_NAME = "bench.restart.worker"


# -- the actors under test ---------------------------------------------------------------------


class Counter(GenServer):
    """Our side: a cast increments, the call "get" returns the count."""

    def init(self, args: Any) -> int:
        return 0

    def handle_cast(self, msg: Any, state: int) -> int:
        return state + 1

    def handle_call(self, request: Any, from_: From, state: int) -> Reply:
        return Reply(state, state)


class ThreadCounter(Counter):
    """On its own pykka thread, like the peer."""

    dispatcher = "thread"


class PooledCounter(Counter):
    """On the shared pool (the default dispatcher)."""

    dispatcher = "pooled"


OURS: dict[str, type[Counter]] = {"thread": ThreadCounter, "pooled": PooledCounter}


class CounterActor(pykka.ThreadingActor):
    """The peer: a plain pykka actor doing the same work in `on_receive`."""

    use_daemon_thread = True

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def on_receive(self, message: Any) -> Any:
        if message == "get":
            return self.count
        self.count += 1
        return None


# -- configuration and results -----------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    casts: int
    calls: int
    spawns: int
    kills: int
    repeats: int


FULL = Config(casts=200_000, calls=20_000, spawns=2_000, kills=500, repeats=5)
QUICK = Config(casts=20_000, calls=2_000, spawns=200, kills=50, repeats=1)


@dataclass
class Row:
    name: str
    unit: str
    ours: float
    peer: float | None
    goal: str
    met: bool | None
    detail: str = ""

    @property
    def ratio(self) -> float | None:
        return None if self.peer is None or self.peer == 0 else self.ours / self.peer


Side = Callable[[], float]


def percentile(samples: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))
    return ordered[index]


def rounds(sides: dict[str, Side], repeats: int) -> dict[str, list[float]]:
    """Run every side `repeats` times, rotating which one goes first each round."""
    names = list(sides)
    runs: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            gc.collect()
            runs[name].append(sides[name]())
    return runs


def median_ratio(ours: list[float], peer: list[float]) -> float:
    return statistics.median(o / p for o, p in zip(ours, peer, strict=True))


# -- 1. cast throughput ------------------------------------------------------------------------


def ours_cast(server: type[Counter], n: int) -> float:
    """Messages/s for `n` casts followed by one synchronising call."""
    pid = server.start()
    cast, call = supervision.cast, supervision.call
    call(pid, "get")
    start = time.perf_counter()
    for _ in range(n):
        cast(pid, "inc")
    count = call(pid, "get", timeout=None)
    elapsed = time.perf_counter() - start
    assert count == n, (count, n)
    supervision.stop(pid)
    return n / elapsed


def pykka_tell(n: int) -> float:
    """Messages/s for `n` tells followed by one synchronising ask."""
    ref = CounterActor.start()
    tell = ref.tell
    ref.ask("get")
    start = time.perf_counter()
    for _ in range(n):
        tell("inc")
    count = ref.ask("get")
    elapsed = time.perf_counter() - start
    assert count == n, (count, n)
    ref.stop()
    return n / elapsed


def bench_cast(config: Config) -> list[Row]:
    n = config.casts
    sides: dict[str, Side] = {
        kind: functools.partial(ours_cast, server, n) for kind, server in OURS.items()
    }
    sides["pykka"] = lambda: pykka_tell(n)
    rounds(sides, 1)  # warm-up
    runs = rounds(sides, config.repeats)
    peer = max(runs["pykka"])
    rows = []
    for kind in OURS:
        best = max(runs[kind])
        rows.append(
            Row(
                name=f"cast vs tell [{kind}]",
                unit="msg/s",
                ours=best,
                peer=peer,
                goal=">= 0.9x",
                met=best >= 0.9 * peer,
                detail=(
                    f"{n:,} casts; runs {fmt_list(runs[kind])} vs pykka "
                    f"{fmt_list(runs['pykka'])}; median ratio "
                    f"{median_ratio(runs[kind], runs['pykka']):.2f}x"
                ),
            )
        )
    return rows


# -- 2. call round trip ------------------------------------------------------------------------


def timed_round_trips(n: int, round_trip: Callable[[], Any]) -> tuple[float, list[float]]:
    """(mean seconds per round trip over the whole loop, per-call samples in seconds)."""
    clock = time.perf_counter
    samples = [0.0] * n
    start = clock()
    for i in range(n):
        t0 = clock()
        round_trip()
        samples[i] = clock() - t0
    return (clock() - start) / n, samples


def ours_call(server: type[Counter], n: int) -> tuple[float, list[float]]:
    pid = server.start()
    call = supervision.call
    result = timed_round_trips(n, lambda: call(pid, "get"))
    supervision.stop(pid)
    return result


def pykka_ask(n: int) -> tuple[float, list[float]]:
    ref = CounterActor.start()
    ask = ref.ask
    result = timed_round_trips(n, lambda: ask("get"))
    ref.stop()
    return result


class BestSamples:
    """Keeps the per-call samples of each side's fastest run (for p50/p99)."""

    def __init__(self) -> None:
        self.mean: dict[str, float] = {}
        self.samples: dict[str, list[float]] = {}

    def reset(self) -> None:
        self.mean.clear()
        self.samples.clear()

    def side(self, name: str, run: Callable[[], tuple[float, list[float]]]) -> Side:
        def go() -> float:
            mean, per_call = run()
            if mean < self.mean.get(name, float("inf")):
                self.mean[name], self.samples[name] = mean, per_call
            return mean * 1e6

        return go

    def p(self, name: str, q: float) -> float:
        return percentile(self.samples[name], q) * 1e6


def bench_call(config: Config) -> list[Row]:
    n = config.calls
    best = BestSamples()
    sides = {
        kind: best.side(kind, functools.partial(ours_call, server, n))
        for kind, server in OURS.items()
    }
    sides["pykka"] = best.side("pykka", lambda: pykka_ask(n))
    rounds(sides, 1)  # warm-up
    best.reset()
    runs = rounds(sides, config.repeats)
    peer = min(runs["pykka"])
    rows = []
    for kind in OURS:
        ours = min(runs[kind])
        rows.append(
            Row(
                name=f"call vs ask [{kind}]",
                unit="µs/call",
                ours=ours,
                peer=peer,
                goal="<= 1.1x",
                met=ours <= 1.1 * peer,
                detail=(
                    f"{n:,} calls; p50 {best.p(kind, 50):.1f} vs {best.p('pykka', 50):.1f} µs, "
                    f"p99 {best.p(kind, 99):.1f} vs {best.p('pykka', 99):.1f} µs; "
                    f"median ratio {median_ratio(runs[kind], runs['pykka']):.2f}x"
                ),
            )
        )
    return rows


# -- 3. spawn + stop ---------------------------------------------------------------------------


def ours_spawn(server: type[Counter], n: int) -> float:
    """Children/s: start a temporary child under a DynamicSupervisor, then terminate it."""
    sup = DynamicSupervisor.start()
    start_child, terminate_child = DynamicSupervisor.start_child, DynamicSupervisor.terminate_child
    start = time.perf_counter()
    for i in range(n):
        spec = ChildSpec(i, lambda: server.start_link(0), restart="temporary")
        pid = start_child(sup, spec)
        assert pid is not None
        terminate_child(sup, pid)
    elapsed = time.perf_counter() - start
    supervision.stop(sup, "shutdown")
    return n / elapsed


def pykka_spawn(n: int) -> float:
    """Actors/s: `CounterActor.start()` then `ref.stop()` (which waits for the stop)."""
    start = time.perf_counter()
    for _ in range(n):
        CounterActor.start().stop()
    return n / (time.perf_counter() - start)


def bench_spawn(config: Config) -> list[Row]:
    n = config.spawns
    sides: dict[str, Side] = {
        kind: functools.partial(ours_spawn, server, n) for kind, server in OURS.items()
    }
    sides["pykka"] = lambda: pykka_spawn(n)
    rounds(sides, 1)  # warm-up
    runs = rounds(sides, config.repeats)
    peer = max(runs["pykka"])
    return [
        Row(
            name=f"spawn+stop [{kind}]",
            unit="spawn/s",
            ours=max(runs[kind]),
            peer=peer,
            goal="(none)",
            met=None,
            detail=(
                f"{n:,} children; runs {fmt_list(runs[kind])} vs pykka "
                f"{fmt_list(runs['pykka'])}; median ratio "
                f"{median_ratio(runs[kind], runs['pykka']):.2f}x"
            ),
        )
        for kind in OURS
    ]


# -- 4. restart latency ------------------------------------------------------------------------


def wait_replacement(old: supervision.Pid) -> None:
    """Return once a process other than `old` holds the name and has answered a call."""
    whereis, call, sleep = supervision.whereis, supervision.call, time.sleep
    while True:
        pid = whereis(RESTART_NAME)
        if pid is not None and pid != old:
            try:
                call(pid, "get")
                return
            except supervision.ProcessExit:
                pass
        sleep(0)  # releases the GIL so the supervisor's thread runs at once


def restart_latencies(server: type[Counter], kills: int) -> list[float]:
    """Seconds from `exit(pid, "kill")` until the replacement answers, per kill."""
    spec = ChildSpec("worker", lambda: server.start_link(0, name=RESTART_NAME))
    sup = Supervisor.start([spec], intensity=1_000_000, period=1)
    samples: list[float] = []
    for _ in range(kills):
        old = supervision.whereis(RESTART_NAME)
        assert old is not None
        start = time.perf_counter()
        supervision.exit(old, "kill")
        wait_replacement(old)
        samples.append(time.perf_counter() - start)
    supervision.stop(sup, "shutdown")
    return samples


def bench_restart(config: Config) -> list[Row]:
    kills = config.kills
    samples: dict[str, list[list[float]]] = {kind: [] for kind in OURS}

    def side(kind: str) -> Side:
        def go() -> float:
            run = restart_latencies(OURS[kind], kills)
            samples[kind].append(run)
            return percentile(run, 50)

        return go

    rounds({kind: side(kind) for kind in OURS}, 1)  # warm-up
    samples = {kind: [] for kind in OURS}
    rounds({kind: side(kind) for kind in OURS}, config.repeats)
    rows = []
    for kind in OURS:
        best = min(samples[kind], key=lambda run: percentile(run, 50))
        p50 = percentile(best, 50) * 1e3
        rows.append(
            Row(
                name=f"restart latency [{kind}]",
                unit="ms p50",
                ours=p50,
                peer=None,
                goal="< 1 ms",
                met=p50 < 1.0,
                detail=(
                    f"{kills} kills; p99 {percentile(best, 99) * 1e3:.3f} ms, "
                    f"mean {statistics.fmean(best) * 1e3:.3f} ms; p50 per run "
                    f"{fmt_list([percentile(r, 50) * 1e3 for r in samples[kind]])} ms"
                ),
            )
        )
    return rows


# -- reporting ---------------------------------------------------------------------------------


def fmt_num(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def fmt_list(values: list[float]) -> str:
    return "/".join(fmt_num(v) for v in values)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_facts() -> list[str]:
    facts = [
        f"date     {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"cpus     {os.cpu_count()} ({cpu_model()})",
        f"python   {platform.python_implementation()} {platform.python_version()}",
        f"pykka    {importlib.metadata.version('pykka')}",
        f"platform {platform.platform()}",
    ]
    try:
        import psutil  # type: ignore[import-untyped]

        facts.append(f"ram      {psutil.virtual_memory().total / 2**30:.1f} GiB")
    except ImportError:
        pass
    if hasattr(os, "getloadavg"):
        facts.append("load     " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return facts


def print_table(rows: list[Row]) -> None:
    header = ("benchmark", "unit", "supervision", "pykka", "ratio", "goal", "met")
    lines = [
        (
            row.name,
            row.unit,
            fmt_num(row.ours),
            "n/a" if row.peer is None else fmt_num(row.peer),
            "n/a" if row.ratio is None else f"{row.ratio:.2f}x",
            row.goal,
            "-" if row.met is None else ("yes" if row.met else "NO"),
        )
        for row in rows
    ]
    widths = [max(len(cell) for cell in column) for column in zip(header, *lines, strict=True)]
    for cells in [header, tuple("-" * w for w in widths), *lines]:
        print("  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip())
    print()
    for row in rows:
        print(f"{row.name}: {row.detail}")


def quiet_logs() -> None:
    """Render supervisor reports as usual but write them to /dev/null, not over the table."""
    sink = open(os.devnull, "w")  # noqa: SIM115 - kept open for the whole run
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sink))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="supervision kernel vs raw pykka")
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--repeats", type=int, help="rounds per comparison (the best is kept)")
    args = parser.parse_args(argv)
    config = QUICK if args.quick else FULL
    if args.repeats:
        config = Config(config.casts, config.calls, config.spawns, config.kills, args.repeats)
    quiet_logs()
    print("supervision kernel vs raw pykka" + (" (quick)" if args.quick else ""))
    for fact in machine_facts():
        print("  " + fact)
    print(flush=True)
    started = time.perf_counter()
    rows: list[Row] = []
    for bench in (bench_cast, bench_call, bench_spawn, bench_restart):
        rows.extend(bench(config))
    print_table(rows)
    print(
        f"\ntotal {time.perf_counter() - started:.1f} s; best of {config.repeats} rounds per "
        "side, sides alternated; ratio = supervision / pykka"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
