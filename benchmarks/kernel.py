"""Kernel benchmark: `supervision` against raw pykka, side by side in one process run.

Rows (see docs/BENCHMARKS.md), each for both GenServer dispatchers (``thread``: a pykka
thread per server, like a pykka ThreadingActor; ``pooled``: the default, shared threads):

1. cast throughput: `supervision.cast` to a GenServer vs `ActorRef.tell` to a pykka actor.
2. call round trip: `supervision.call` vs `ActorRef.ask`.
3. relay: one message at a time through a chain of `RELAY_HOPS` servers (each handler
   casts to the next, the last sends it back to the waiting inbox) vs pykka actors that
   `tell` the next: hand-offs between processes, not only from a plain thread (on the
   pool, the worker that readies the next server runs it itself).
4. spawn + stop: a temporary child under a DynamicSupervisor vs `Actor.start()` + `ref.stop()`.
5. restart latency: kill a named permanent child of a Supervisor until its replacement
   answers a call (raw pykka has no supervisor: no peer figure).

The sides of a comparison run in turn, round by round, the first side rotating (thread,
pooled, pykka; pooled, pykka, thread; ...). Each round gives one ratio per dispatcher
(ours / pykka, both measured in that round); the headline is the median of those
per-round ratios, printed with their min-max. The machine facts and the load average
come first.

Usage: ``python benchmarks/kernel.py [--quick] [--repeats N]``
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import queue
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pykka
from _bench import (
    Compared,
    OtherCpu,
    fmt_list,
    fmt_share,
    interleaved,
    load_average,
    print_facts,
    print_table,
)

import supervision
from supervision import ChildSpec, DynamicSupervisor, From, GenServer, Reply, Supervisor

RESTART_NAME = "bench.restart.worker"

RELAY_HOPS = 4
"""Servers (actors) in the relay row's chain."""


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


# -- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    casts: int
    calls: int
    spawns: int
    kills: int
    repeats: int


# Many short rounds rather than a few long ones: on a shared machine a neighbour's burst
# then spoils a few rounds (their ratios show in min-max) instead of the headline.
FULL = Config(casts=100_000, calls=10_000, spawns=1_000, kills=250, repeats=15)
QUICK = Config(casts=20_000, calls=2_000, spawns=200, kills=50, repeats=3)

Side = Callable[[], float]

# The goal of each row, on the median of its per-round ratios (restart: on our median p50).
GOALS: dict[str, tuple[str, Callable[[Compared], bool]]] = {
    "cast vs tell": (">= 0.9x", lambda row: row.ratio is not None and row.ratio >= 0.9),
    "call vs ask": ("<= 1.1x", lambda row: row.ratio is not None and row.ratio <= 1.1),
    "restart latency": ("< 1 ms", lambda row: row.ours < 1.0),
}


def goal(name: str) -> str:
    return GOALS[name][0] if name in GOALS else ""


def met(row: Compared) -> bool | None:
    check = GOALS.get(row.name.split(" [")[0])
    return None if check is None else check[1](row)


def percentile(samples: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))
    return ordered[index]


def measured(
    sides: dict[str, Side], repeats: int, others: list[float | None]
) -> dict[str, list[float]]:
    """One warm-up round (discarded), then `repeats` interleaved rounds."""
    interleaved(sides, 1)
    return interleaved(sides, repeats, others)


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


def bench_cast(config: Config) -> list[Compared]:
    n = config.casts
    sides: dict[str, Side] = {
        kind: functools.partial(ours_cast, server, n) for kind, server in OURS.items()
    }
    sides["pykka"] = lambda: pykka_tell(n)
    others: list[float | None] = []
    runs = measured(sides, config.repeats, others)
    return [
        Compared(
            name=f"cast vs tell [{kind}]",
            unit="msg/s",
            ours_runs=runs[kind],
            peer_runs=runs["pykka"],
            others=others,
            goal=goal("cast vs tell"),
            detail=f"{n:,} casts; runs {fmt_list(runs[kind])} vs pykka {fmt_list(runs['pykka'])}",
        )
        for kind in OURS
    ]


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


class Samples:
    """Keeps every per-call sample of each side's measured rounds (for p50/p99)."""

    def __init__(self) -> None:
        self.samples: dict[str, list[float]] = {}

    def side(self, name: str, run: Callable[[], tuple[float, list[float]]]) -> Side:
        def go() -> float:
            mean, per_call = run()
            self.samples.setdefault(name, []).extend(per_call)
            return mean * 1e6

        return go

    def p(self, name: str, q: float) -> float:
        return percentile(self.samples[name], q) * 1e6


def bench_call(config: Config) -> list[Compared]:
    n = config.calls
    samples = Samples()
    sides = {
        kind: samples.side(kind, functools.partial(ours_call, server, n))
        for kind, server in OURS.items()
    }
    sides["pykka"] = samples.side("pykka", lambda: pykka_ask(n))
    interleaved(sides, 1)  # warm-up
    samples.samples.clear()
    others: list[float | None] = []
    runs = interleaved(sides, config.repeats, others)
    return [
        Compared(
            name=f"call vs ask [{kind}]",
            unit="µs/call",
            ours_runs=runs[kind],
            peer_runs=runs["pykka"],
            others=others,
            goal=goal("call vs ask"),
            detail=(
                f"{n:,} calls; mean µs {fmt_list(runs[kind])} vs pykka "
                f"{fmt_list(runs['pykka'])}; all rounds: p50 {samples.p(kind, 50):.1f} vs "
                f"{samples.p('pykka', 50):.1f} µs, p99 {samples.p(kind, 99):.1f} vs "
                f"{samples.p('pykka', 99):.1f} µs"
            ),
        )
        for kind in OURS
    ]


# -- 3. relay: server-to-server hand-offs ------------------------------------------------------


class Relay(GenServer):
    """Passes each cast to the next server of the chain; the last one sends it to the
    waiting inbox (its state: the next pid, or ``("inbox", pid)``)."""

    def handle_cast(self, msg: Any, state: Any) -> Any:
        if type(state) is tuple:
            supervision.send(state[1], msg)
        else:
            supervision.cast(state, msg)
        return state


class ThreadRelay(Relay):
    dispatcher = "thread"


class PooledRelay(Relay):
    dispatcher = "pooled"


RELAYS: dict[str, type[Relay]] = {"thread": ThreadRelay, "pooled": PooledRelay}


class RelayActor(pykka.ThreadingActor):
    """The peer: tells the next actor of the chain; the last one puts the message on
    the queue the main thread waits on."""

    use_daemon_thread = True

    def __init__(self, after: pykka.ActorRef[Any] | queue.SimpleQueue[Any]) -> None:
        super().__init__()
        self.after = after

    def on_receive(self, message: Any) -> Any:
        if isinstance(self.after, queue.SimpleQueue):
            self.after.put(message)
        else:
            self.after.tell(message)
        return None


def ours_relay(server: type[Relay], n: int) -> float:
    """Mean µs for one message to pass a chain of `RELAY_HOPS` servers and come back
    to this thread's inbox, one message at a time (so each hop is a hand-off)."""
    with supervision.Inbox() as inbox:
        after: Any = ("inbox", inbox.pid)
        chain = []
        for _ in range(RELAY_HOPS):
            after = server.start(after)
            chain.append(after)
        head, cast, receive = after, supervision.cast, inbox.receive
        start = time.perf_counter()
        for i in range(n):
            cast(head, i)
            assert receive(10.0) == i
        elapsed = time.perf_counter() - start
        for pid in chain:
            supervision.stop(pid)
    return elapsed / n * 1e6


def pykka_relay(n: int) -> float:
    """Mean µs for the same trip through a chain of pykka actors."""
    back: queue.SimpleQueue[Any] = queue.SimpleQueue()
    after: Any = back
    chain = []
    for _ in range(RELAY_HOPS):
        after = RelayActor.start(after)
        chain.append(after)
    head, get = after, back.get
    start = time.perf_counter()
    for i in range(n):
        head.tell(i)
        assert get(timeout=10.0) == i
    elapsed = time.perf_counter() - start
    for ref in chain:
        ref.stop()
    return elapsed / n * 1e6


def bench_relay(config: Config) -> list[Compared]:
    n = config.calls
    sides: dict[str, Side] = {
        kind: functools.partial(ours_relay, server, n) for kind, server in RELAYS.items()
    }
    sides["pykka"] = lambda: pykka_relay(n)
    others: list[float | None] = []
    runs = measured(sides, config.repeats, others)
    return [
        Compared(
            name=f"relay [{kind}]",
            unit="µs/msg",
            ours_runs=runs[kind],
            peer_runs=runs["pykka"],
            others=others,
            goal=goal("relay"),
            detail=(
                f"{n:,} messages one at a time through {RELAY_HOPS} servers and back; mean "
                f"µs {fmt_list(runs[kind])} vs pykka {fmt_list(runs['pykka'])}"
            ),
        )
        for kind in RELAYS
    ]


# -- 4. spawn + stop ---------------------------------------------------------------------------


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


def bench_spawn(config: Config) -> list[Compared]:
    n = config.spawns
    sides: dict[str, Side] = {
        kind: functools.partial(ours_spawn, server, n) for kind, server in OURS.items()
    }
    sides["pykka"] = lambda: pykka_spawn(n)
    others: list[float | None] = []
    runs = measured(sides, config.repeats, others)
    return [
        Compared(
            name=f"spawn+stop [{kind}]",
            unit="spawn/s",
            ours_runs=runs[kind],
            peer_runs=runs["pykka"],
            others=others,
            detail=f"{n:,} children; runs {fmt_list(runs[kind])} vs pykka {fmt_list(runs['pykka'])}",
        )
        for kind in OURS
    ]


# -- 5. restart latency ------------------------------------------------------------------------


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


def bench_restart(config: Config) -> list[Compared]:
    kills = config.kills
    samples: dict[str, list[float]] = {kind: [] for kind in OURS}

    def side(kind: str) -> Side:
        def go() -> float:
            run = restart_latencies(OURS[kind], kills)
            samples[kind].extend(run)
            return percentile(run, 50) * 1e3

        return go

    sides = {kind: side(kind) for kind in OURS}
    interleaved(sides, 1)  # warm-up
    for kind in OURS:
        samples[kind].clear()
    others: list[float | None] = []
    runs = interleaved(sides, config.repeats, others)
    return [
        Compared(
            name=f"restart latency [{kind}]",
            unit="ms p50",
            ours_runs=runs[kind],
            goal=goal("restart latency"),
            others=others,
            detail=(
                f"{kills} kills a round; p50 per round {fmt_list(runs[kind])} ms; all rounds: "
                f"p99 {percentile(samples[kind], 99) * 1e3:.3f} ms, "
                f"mean {statistics.fmean(samples[kind]) * 1e3:.3f} ms"
            ),
        )
        for kind in OURS
    ]


# -- reporting ---------------------------------------------------------------------------------


def quiet_logs() -> None:
    """Render supervisor reports as a CLI does (`supervision.configure_console`, INFO and
    up) but write them to /dev/null, so their cost is counted and the table stays clean."""
    supervision.configure_console()
    sink = open(os.devnull, "w")  # noqa: SIM115 - kept open for the whole run
    handler = logging.StreamHandler(sink)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logging.getLogger().handlers[:] = [handler]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="supervision kernel vs raw pykka")
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--repeats", type=int, help="measured rounds per comparison")
    args = parser.parse_args(argv)
    config = QUICK if args.quick else FULL
    if args.repeats:
        config = Config(config.casts, config.calls, config.spawns, config.kills, args.repeats)
    quiet_logs()
    print_facts("supervision kernel vs raw pykka" + (" (quick)" if args.quick else ""), "pykka")
    started, meter = time.perf_counter(), OtherCpu()
    rows: list[Compared] = []
    for bench in (bench_cast, bench_call, bench_relay, bench_spawn, bench_restart):
        rows.extend(bench(config))
    print_table(rows, ours="supervision", peer="pykka", met=met)
    print(
        f"\ntotal {time.perf_counter() - started:.1f} s; {config.repeats} rounds per comparison "
        "after a warm-up, sides interleaved (first side rotating); ours/pykka columns: each "
        "side's median round; ratio = supervision / pykka per round, headline = median of "
        f"the per-round ratios; other processes used {fmt_share(meter.share())} of the CPUs "
        f"during the run; load avg at the end {load_average()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
