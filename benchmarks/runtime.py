"""Runtime benchmark: pooled actors at scale, task spawn rate, credit stream throughput.

Rows (see docs/BENCHMARKS.md):

1. 100,000 idle pooled GenServers: time to start them all, resident memory they add,
   then one call to each. Goals: start < 10 s, RSS < 2 GiB.
2. Task spawn rate: start a burst of N tasks (5,000 and 50,000), then wait for all; sync callables on the task pool,
   coroutines on the reactor. Peer: `concurrent.futures.ThreadPoolExecutor.submit` +
   `result` for sync work, `asyncio.run_coroutine_threadsafe` for coroutines.
   Goal: >= 20,000 tasks/s.
3. Credit stream: items/s published to a stream with one push subscriber, and with
   one credit subscriber that acks every item (credit 1 and credit 64).

Pooled vs thread GenServer cast/call figures are in `benchmarks/kernel.py`.

Usage: ``python benchmarks/runtime.py [--quick]``
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import datetime
import gc
import os
import platform
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil
import structlog

import supervision as sv
from supervision import CreditStream, StreamTerminal, Task, next_message, reactor_loop


class Idle(sv.GenServer):
    dispatcher = "pooled"

    def handle_call(self, request: Any, from_: sv.From, state: Any) -> Any:
        return sv.Reply(state, state)


def rss_bytes() -> int:
    return int(psutil.Process().memory_info().rss)


def idle_actors(count: int) -> dict[str, float]:
    gc.collect()
    before = rss_bytes()
    started = time.perf_counter()
    pids = [Idle.start(index) for index in range(count)]
    start_seconds = time.perf_counter() - started
    gc.collect()
    added = rss_bytes() - before
    started = time.perf_counter()
    for index, pid in enumerate(pids):
        assert sv.call(pid, "get") == index
    call_seconds = time.perf_counter() - started
    started = time.perf_counter()
    for pid in pids:
        sv.exit(pid, "kill")
    stop_seconds = time.perf_counter() - started
    del pids
    return {
        "start_s": start_seconds,
        "rss_mib": added / 2**20,
        "call_each_s": call_seconds,
        "kill_each_s": stop_seconds,
    }


def best_rate(run: Callable[[int], None], count: int, rounds: int) -> float:
    """Best items/s over `rounds` runs of `run(count)`."""
    best = 0.0
    for _ in range(rounds):
        gc.collect()
        started = time.perf_counter()
        run(count)
        best = max(best, count / (time.perf_counter() - started))
    return best


def _one(x: int) -> int:
    return x + 1


async def _aone(x: int) -> int:
    return x + 1


def our_sync_tasks(count: int) -> None:
    tasks = [Task.start(_one, i) for i in range(count)]
    for task in tasks:
        task.wait(30)


def our_coroutine_tasks(count: int) -> None:
    tasks = [Task.start(_aone, i) for i in range(count)]
    for task in tasks:
        task.wait(30)


_executor = concurrent.futures.ThreadPoolExecutor(max_workers=32)


def peer_sync(count: int) -> None:
    futures = [_executor.submit(_one, i) for i in range(count)]
    for future in futures:
        future.result(30)


def peer_coroutines(count: int) -> None:
    loop = reactor_loop()
    futures = [asyncio.run_coroutine_threadsafe(_aone(i), loop) for i in range(count)]
    for future in futures:
        future.result(30)


def stream_push(count: int) -> None:
    stream = CreditStream.start_link(max_buffered=1024)
    received = threading.Event()

    def reader() -> None:
        CreditStream.subscribe(stream)
        ready.set()
        while not isinstance(next_message(stream, 30), StreamTerminal):
            pass
        received.set()

    ready = threading.Event()
    threading.Thread(target=reader).start()
    ready.wait()
    for index in range(count):
        CreditStream.publish(stream, index)
    CreditStream.finish(stream, "done")
    received.wait(60)
    sv.stop(stream)


def stream_credit(credit: int) -> Callable[[int], None]:
    """A credit subscriber draining a stream that already holds every item.

    (A publisher that outruns a credit subscriber makes it fall out of the window:
    that is a `replay_gap` by design, not a throughput figure.)
    """

    def run(count: int) -> None:
        stream = CreditStream.start_link(max_buffered=count)
        for index in range(count):
            CreditStream.publish(stream, index)
        CreditStream.finish(stream, "done")
        CreditStream.subscribe(stream, mode="credit", credit=credit)
        while True:
            message = next_message(stream, 30)
            if isinstance(message, StreamTerminal):
                break
            if message.seq % credit == 0:  # the terminal comes once credit allows
                CreditStream.ack(stream, message.seq)
        sv.stop(stream)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    options = parser.parse_args()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(open(os.devnull, "w")))  # noqa: SIM115
    actors = 10_000 if options.quick else 100_000
    tasks = 5_000 if options.quick else 50_000
    items = 5_000 if options.quick else 50_000
    rounds = 1 if options.quick else 3

    print(f"# runtime benchmark  {datetime.date.today()}  python {platform.python_version()}")
    print(
        f"# cpus {os.cpu_count()}  pool threads {os.environ.get('SUPERVISION_POOL_THREADS', 'default')}"
    )
    reactor_loop()  # start the runtime outside the timings

    result = idle_actors(actors)
    print(f"\n{actors:,} idle pooled actors")
    print(
        f"  start            {result['start_s']:8.2f} s   (goal < 10 s: {'met' if result['start_s'] < 10 else 'MISSED'})"
    )
    print(
        f"  RSS added        {result['rss_mib']:8.0f} MiB (goal < 2048 MiB: {'met' if result['rss_mib'] < 2048 else 'MISSED'})"
    )
    print(
        f"  one call to each {result['call_each_s']:8.2f} s   ({actors / result['call_each_s']:,.0f} calls/s)"
    )
    print(f"  kill each        {result['kill_each_s']:8.2f} s")

    for burst in sorted({tasks // 10, tasks}):
        print(
            f"\ntask spawn+wait, bursts of {burst:,} tasks, best of {rounds}: ours / peer / ratio"
        )
        for label, ours, peer in (
            ("sync callables", our_sync_tasks, peer_sync),
            ("coroutines", our_coroutine_tasks, peer_coroutines),
        ):
            our_rate = best_rate(ours, burst, rounds)
            peer_rate = best_rate(peer, burst, rounds)
            verdict = "met" if our_rate >= 20_000 else "MISSED"
            print(
                f"  {label:15s} {our_rate:10,.0f}/s  {peer_rate:10,.0f}/s  {our_rate / peer_rate:5.2f}x"
                f"  (goal >= 20,000/s: {verdict})"
            )

    print(f"\ncredit stream, {items:,} items, best of {rounds}")
    rate = best_rate(stream_push, items, rounds)
    print(f"  push subscriber, live publisher      {rate:10,.0f} items/s")
    for credit in (1, 64):
        rate = best_rate(stream_credit(credit), items, rounds)
        print(f"  credit {credit:<3} subscriber (publish + drain) {rate:10,.0f} items/s")


if __name__ == "__main__":
    main()
