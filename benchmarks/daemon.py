"""The daemon under HTTP load, side by side with google-adk's `adk api_server`.

Each server runs in a process of its own, started by this script; the client is this
process (httpx on asyncio, connections sharded over clients of at most 64 each so no
pool scans thousands). Both answer from an offline model with the same delay: ours
the scripted provider of an agent config file (one step, ``script_repeat``), google-
adk's a `BaseLlm` in `benchmarks/_adk_peer_app/bench_agent`. Sessions: ours are LMDB
under ``--data`` (the daemon has no other store); google-adk's are in memory
(``memory://``, its durable store needs sqlalchemy, which the bench venv lacks).
Workloads:

* **start rate**: runs started over HTTP as fast as `Sizes.width` concurrent
  requests allow, the model answering at once. Ours: ``POST /dev/v1/runs`` answered
  202 (the run goes on in the daemon). google-adk has no asynchronous start: its
  figure is ``POST /run_sse`` requests read to their end. Also ours **start +
  follow**: the POST, then ``GET /dev/v1/runs/{id}/events`` read to the terminal
  event, the like-for-like comparison with one ``/run_sse``.
* **fan-out**: ours: 100 runs, each with 10 SSE subscribers (1,000 connections)
  attached while the model waits, every subscriber reading to the terminal event.
  google-adk cannot subscribe to a run it is already running: its comparable is
  1,000 concurrent streaming ``/run_sse`` requests. Server RSS (psutil on its pid,
  sampled every 20 ms) before, at peak and after each round, and the time until
  every reader has everything.

Usage: ``python benchmarks/daemon.py [--quick] [--side both|ours|peer]`` (in `.venv-bench`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import importlib.metadata
import os
import platform
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil  # type: ignore[import-untyped]
from daemon_servers import AGENT, CHUNKS, PEER_APP, ROOT, Server, start_ours, start_peer

APP = "bench"
SHARD = 64
"""Connections per httpx client: one pool scanning thousands of connections is slow."""
START_GOAL = 200.0
"""Issue 14: 200 runs/s started over HTTP."""
NOTES: list[str] = []
"""Caveats met while measuring, printed with the results."""
RSS_BOUND = 32 * 2**20
"""Bounded RSS: after the last fan-out round within this much of after the first."""


@dataclass(frozen=True)
class Sizes:
    """How much load each workload puts on a server."""

    width: int
    """Concurrent requests in the start-rate workloads."""
    start_runs: int
    follow_runs: int
    alone_runs: int
    """Calls made one at a time, for the latency of a call alone."""
    rounds: int
    """Rounds of the start-rate workloads (the best is kept)."""
    fan_runs: int
    fan_subscribers: int
    fan_rounds: int
    delay: float
    """The model's delay in the fan-out workload, seconds."""


FULL = Sizes(
    width=32,
    start_runs=1_000,
    follow_runs=500,
    alone_runs=50,
    rounds=2,
    fan_runs=100,
    fan_subscribers=10,
    fan_rounds=3,
    delay=2.0,
)
QUICK = Sizes(
    width=8,
    start_runs=60,
    follow_runs=30,
    alone_runs=10,
    rounds=1,
    fan_runs=5,
    fan_subscribers=4,
    fan_rounds=2,
    delay=0.5,
)


# -- the client ----------------------------------------------------------------------------


class Clients:
    """httpx clients of at most `SHARD` connections; `for_slot(n)` keeps each client's
    concurrent requests within its pool when slots are numbered 0..width-1."""

    def __init__(self, url: str, width: int, token: str | None) -> None:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        limits = httpx.Limits(max_connections=SHARD, max_keepalive_connections=SHARD)
        timeout = httpx.Timeout(120.0, pool=120.0)
        self._clients = [
            httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=timeout)
            for _ in range(max(1, -(-width // SHARD)))
        ]

    def for_slot(self, slot: int) -> httpx.AsyncClient:
        return self._clients[(slot // SHARD) % len(self._clients)]

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()


async def _sse_events(response: httpx.Response, until: str | None) -> int:
    """Count the SSE events of `response`; stop after an ``event: <until>`` one."""
    if response.status_code != 200:
        raise RuntimeError(f"SSE answered {response.status_code}: {await response.aread()!r}")
    count = 0
    name = ""
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            count += 1
        elif not line:
            if until is not None and name == until:
                return count
            name = ""
    if until is not None:
        raise RuntimeError(f"the stream closed before its {until!r} event")
    return count


async def ours_start(client: httpx.AsyncClient, n: int) -> str:
    body = {
        "agent_name": AGENT,
        "app_name": APP,
        "user_id": "u",
        "session_id": f"s{n}-{secrets.token_hex(3)}",
        "message": "hello",
    }
    response = await client.post("/dev/v1/runs", json=body)
    if response.status_code != 202:
        raise RuntimeError(f"POST /dev/v1/runs answered {response.status_code}: {response.text}")
    events_url: str = response.json()["events_url"]
    return events_url


async def ours_follow(
    client: httpx.AsyncClient, events_url: str, attached: list[float] | None = None
) -> int:
    """Read a run's events to its terminal; `attached` gets the time its headers came."""
    async with client.stream("GET", events_url) as response:
        if attached is not None:
            attached.append(time.perf_counter())
        return await _sse_events(response, until="terminal")


async def peer_run(
    client: httpx.AsyncClient, n: int, streaming: bool, attached: list[float] | None = None
) -> int:
    """One ``/run_sse`` read to its end; `attached` gets the time its headers came."""
    body = {
        "app_name": PEER_APP,
        "user_id": "u",
        "session_id": f"s{n}-{secrets.token_hex(3)}",
        "new_message": {"role": "user", "parts": [{"text": "hello"}]},
        "streaming": streaming,
    }
    async with client.stream("POST", "/run_sse", json=body) as response:
        if attached is not None:
            attached.append(time.perf_counter())
        return await _sse_events(response, until=None)


@dataclass
class Measured:
    """One workload round on one server."""

    count: int
    seconds: float
    server_cpu: float
    client_cpu: float
    events: int = 0
    rss_before: int = 0
    rss_peak: int = 0
    rss_after: int = 0
    started: float = 0.0
    """`time.perf_counter()` when the round began."""
    attached: float = 0.0
    """Fan-out: seconds from the start until the last reader had its answer's headers."""
    latencies: list[float] = field(default_factory=list)
    """Rate workloads: seconds per call."""

    @property
    def rate(self) -> float:
        return self.count / self.seconds

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latencies) * 1e3 if self.latencies else float("nan")


def _client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _lanes(
    width: int, count: int, one: Callable[[int, int], Coroutine[Any, Any, int]]
) -> int:
    """`count` calls of ``one(n, slot)`` over `width` lanes; the sum of their results."""
    numbers = iter(range(count))
    total = 0

    async def lane(slot: int) -> None:
        nonlocal total
        for n in numbers:
            total += await one(n, slot)

    await asyncio.gather(*(lane(slot) for slot in range(width)))
    return total


def measure(server: Server, count: int, work: Callable[[], Coroutine[Any, Any, int]]) -> Measured:
    """Run `work` (returns events seen) with the server's CPU, RSS and the wall time."""
    server.quiesce()
    server.check_alive()
    cpu, client_cpu, before = server.cpu_seconds(), _client_cpu(), server.rss()
    with server.sampling():
        started = time.perf_counter()
        events = asyncio.run(work())
        seconds = time.perf_counter() - started
        client_used = _client_cpu() - client_cpu
    server.quiesce()
    return Measured(
        count=count,
        seconds=seconds,
        server_cpu=server.cpu_seconds() - cpu,
        client_cpu=client_used,
        started=started,
        events=events,
        rss_before=before,
        rss_peak=server.peak,
        rss_after=server.rss(),
    )


def _with_clients(
    url: str, width: int, token: str | None, body: Callable[[Clients], Coroutine[Any, Any, int]]
) -> Callable[[], Coroutine[Any, Any, int]]:
    async def work() -> int:
        clients = Clients(url, width, token)
        try:
            return await body(clients)
        finally:
            await clients.aclose()

    return work


# -- workloads -------------------------------------------------------------------------------


Call = Callable[[httpx.AsyncClient, int], Coroutine[Any, Any, int]]
"""One call of a rate workload: ``call(client, n)``, the number of events it read."""


async def start_only(client: httpx.AsyncClient, n: int) -> int:
    await ours_start(client, n)
    return 0


async def start_and_follow(client: httpx.AsyncClient, n: int) -> int:
    return await ours_follow(client, await ours_start(client, n))


async def peer_call(client: httpx.AsyncClient, n: int) -> int:
    return await peer_run(client, n, streaming=False)


def rate_round(server: Server, token: str | None, width: int, count: int, call: Call) -> Measured:
    """`count` calls over `width` concurrent lanes; each call's latency kept."""
    latencies: list[float] = []

    async def body(clients: Clients) -> int:
        async def one(n: int, slot: int) -> int:
            began = time.perf_counter()
            events = await call(clients.for_slot(slot), n)
            latencies.append(time.perf_counter() - began)
            return events

        return await _lanes(width, count, one)

    measured = measure(server, count, _with_clients(server.url, width, token, body))
    measured.latencies = latencies
    return measured


def ours_fan_out(server: Server, token: str, sizes: Sizes) -> Measured:
    """`fan_runs` runs, `fan_subscribers` SSE readers each, attached as soon as the
    run's 202 arrives (the model is still waiting); every reader must see the same
    events, the terminal one last."""
    readers = sizes.fan_runs * sizes.fan_subscribers
    attached: list[float] = []

    async def body(clients: Clients) -> int:
        posts = Clients(server.url, SHARD, token)

        async def run(n: int) -> list[int]:
            events_url = await ours_start(posts.for_slot(0), n)
            slots = range(n * sizes.fan_subscribers, (n + 1) * sizes.fan_subscribers)
            return await asyncio.gather(
                *(ours_follow(clients.for_slot(slot), events_url, attached) for slot in slots)
            )

        try:
            seen = await asyncio.gather(*(run(n) for n in range(sizes.fan_runs)))
        finally:
            await posts.aclose()
        for counts in seen:
            if len(set(counts)) != 1:
                raise RuntimeError(f"subscribers of one run saw different events: {counts}")
        return sum(sum(counts) for counts in seen)

    work = _with_clients(server.url, readers, token, body)
    measured = measure(server, readers, work)
    measured.attached = max(attached) - measured.started
    return measured


def peer_fan_out(server: Server, sizes: Sizes) -> Measured:
    """As many concurrent streaming ``/run_sse`` requests as ours has subscribers."""
    readers = sizes.fan_runs * sizes.fan_subscribers
    attached: list[float] = []

    async def body(clients: Clients) -> int:
        counts = await asyncio.gather(
            *(peer_run(clients.for_slot(n), n, True, attached) for n in range(readers))
        )
        if len(set(counts)) != 1:
            raise RuntimeError(f"streams saw different numbers of events: {sorted(set(counts))}")
        return sum(counts)

    work = _with_clients(server.url, readers, None, body)
    measured = measure(server, readers, work)
    measured.attached = max(attached) - measured.started
    return measured


def warm_up(server: Server, token: str | None) -> None:
    """One run end to end (the peer loads its agent module on first use)."""

    async def body(clients: Clients) -> int:
        client = clients.for_slot(0)
        if token is None:
            return await peer_run(client, -1, streaming=True)
        return await ours_follow(client, await ours_start(client, -1))

    asyncio.run(_with_clients(server.url, 1, token, body)())


# -- report ----------------------------------------------------------------------------------


def cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def machine_facts() -> list[str]:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return [
        f"date     {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"commit   {commit or 'unknown'}",
        f"cpus     {os.cpu_count()} ({cpu_model()})",
        f"ram      {psutil.virtual_memory().total / 2**30:.1f} GiB",
        f"python   {platform.python_implementation()} {platform.python_version()}",
        f"platform {platform.platform()}",
        f"peer     google-adk {importlib.metadata.version('google-adk')}",
        "load     " + " ".join(f"{x:.2f}" for x in os.getloadavg()),
    ]


def best(rounds: list[Measured]) -> Measured:
    return max(rounds, key=lambda m: m.rate)


def _mib(value: int) -> str:
    return f"{value / 2**20:,.0f}"


def _ratio(ours: float, peer: float | None) -> str:
    return f"{ours / peer:5.2f}x" if peer else "  n/a"


@dataclass
class RateRow:
    """One rate workload: its best concurrent round, and calls made one at a time."""

    label: str
    concurrent: Measured
    alone: Measured


def rate_row(label: str, server: Server, token: str | None, sizes: Sizes, call: Call) -> RateRow:
    count = sizes.start_runs if call is start_only else sizes.follow_runs
    rounds = [rate_round(server, token, sizes.width, count, call) for _ in range(sizes.rounds)]
    return RateRow(label, best(rounds), rate_round(server, token, 1, sizes.alone_runs, call))


def print_rates(sizes: Sizes, ours: list[RateRow], peer: RateRow | None) -> None:
    print(
        f"\nover HTTP, instant model: runs/s with {sizes.width} concurrent requests (best of "
        f"{sizes.rounds}), server CPU ms per run, client CPU % of one core, p50 ms per "
        f"call at that concurrency and alone ({sizes.alone_runs} calls one at a time)"
    )
    print(
        f"  {'workload':40s} {'runs':>6s} {'runs/s':>7s} {'cpu ms':>7s} {'client':>6s} "
        f"{'p50 ms':>7s} {'alone':>6s} {'ratio':>6s}"
    )
    for row in [*ours, *([peer] if peer is not None else [])]:
        run = row.concurrent
        ratio = _ratio(run.rate, peer.concurrent.rate) if peer and row is not peer else ""
        print(
            f"  {row.label:40s} {run.count:6,d} {run.rate:7,.0f} "
            f"{run.server_cpu / run.count * 1e3:7.2f} {run.client_cpu / run.seconds * 100:5.0f}% "
            f"{run.p50_ms:7.1f} {row.alone.p50_ms:6.1f} {ratio:>6s}"
        )
    if ours:
        starts = ours[0].concurrent.rate
        goal = "met" if starts >= START_GOAL else "MISSED"
        if sizes is QUICK:
            goal = "not judged on a --quick run"
        print(f"  goal: >= {START_GOAL:.0f} runs/s started over HTTP: {goal}")


def print_fan_out(sizes: Sizes, ours: list[Measured] | None, peer: list[Measured] | None) -> None:
    readers = sizes.fan_runs * sizes.fan_subscribers
    print(
        f"\nfan-out, {readers:,} concurrent SSE readers, model delay {sizes.delay} s, "
        f"{len(CHUNKS)} chunks; ours: {sizes.fan_runs} runs x {sizes.fan_subscribers} "
        f"subscribers; google-adk: {readers:,} /run_sse streams"
    )
    print(
        "  wall: first request to last event read; attached: until every reader had its "
        "headers;\n  cpu s: the server's CPU time in the round; client: this process, % of a core"
    )
    print(
        f"  {'side':12s} {'round':>5s} {'wall s':>7s} {'attached':>8s} {'events':>7s} "
        f"{'RSS MiB before':>14s} {'peak':>6s} {'after':>6s} {'cpu s':>6s} {'client':>7s}"
    )
    sides = [(name, rounds) for name, rounds in (("ours", ours), ("google-adk", peer)) if rounds]
    for name, rounds in sides:
        for number, row in enumerate(rounds, 1):
            print(
                f"  {name:12s} {number:5d} {row.seconds:7.2f} {row.attached:8.2f} "
                f"{row.events:7,d} {_mib(row.rss_before):>14s} {_mib(row.rss_peak):>6s} "
                f"{_mib(row.rss_after):>6s} {row.server_cpu:6.2f} "
                f"{row.client_cpu / row.seconds * 100:6.0f}%"
            )
    if ours:
        growth = ours[-1].rss_after - ours[0].rss_after
        bounded = "met" if growth <= RSS_BOUND else "MISSED"
        if sizes is QUICK:
            bounded = "not judged on a --quick run"
        print(
            f"  goal: bounded RSS (after round {len(ours)} within {_mib(RSS_BOUND)} MiB of "
            f"after round 1): {bounded} ({growth / 2**20:+,.1f} MiB)"
        )
    if ours and peer:
        ours_wall = min(row.seconds for row in ours)
        peer_wall = min(row.seconds for row in peer)
        ours_rise = max(row.rss_peak - row.rss_before for row in ours)
        peer_rise = max(row.rss_peak - row.rss_before for row in peer)
        print(
            f"  best wall: ours {ours_wall:.2f} s, google-adk {peer_wall:.2f} s "
            f"(ratio {peer_wall / ours_wall:.2f}x); largest RSS rise in a round: ours "
            f"{_mib(ours_rise)} MiB, google-adk {_mib(peer_rise)} MiB"
        )


# -- main ------------------------------------------------------------------------------------


def _run_ours(work: Path, token: str, sizes: Sizes) -> tuple[list[RateRow], list[Measured]]:
    server = start_ours(work, token, delay=0.0, streaming=False)
    try:
        warm_up(server, token)
        rows = [
            rate_row("ours: POST /dev/v1/runs answered 202", server, token, sizes, start_only),
            rate_row(
                "ours: POST, then its events to the end", server, token, sizes, start_and_follow
            ),
        ]
    finally:
        server.stop()
    server = start_ours(work, token, delay=sizes.delay, streaming=True)
    try:
        if server.note:
            print(f"note: {server.note}", file=sys.stderr, flush=True)
            NOTES.append(server.note)
        warm_up(server, token)
        fan = [ours_fan_out(server, token, sizes) for _ in range(sizes.fan_rounds)]
    finally:
        server.stop()
    return rows, fan


def _run_peer(work: Path, sizes: Sizes) -> tuple[RateRow, list[Measured]]:
    server = start_peer(work, delay=0.0, chunks=1)
    try:
        warm_up(server, None)
        row = rate_row("google-adk: POST /run_sse to its end", server, None, sizes, peer_call)
    finally:
        server.stop()
    server = start_peer(work, delay=sizes.delay, chunks=len(CHUNKS))
    try:
        warm_up(server, None)
        fan = [peer_fan_out(server, sizes) for _ in range(sizes.fan_rounds)]
    finally:
        server.stop()
    return row, fan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a smoke run")
    parser.add_argument("--side", choices=("both", "ours", "peer"), default="both")
    options = parser.parse_args()
    sizes = QUICK if options.quick else FULL
    print("# daemon benchmark" + (" (quick)" if options.quick else ""))
    for fact in machine_facts():
        print(fact)
    token = secrets.token_urlsafe(24)
    started = time.perf_counter()
    ours: list[RateRow] = []
    peer: RateRow | None = None
    fan: list[Measured] | None = None
    peer_fan: list[Measured] | None = None
    with tempfile.TemporaryDirectory(prefix="adk-bench-daemon-") as directory:
        work = Path(directory)
        if options.side in ("both", "ours"):
            print("measuring the adk_actors daemon ...", file=sys.stderr, flush=True)
            ours, fan = _run_ours(work, token, sizes)
        if options.side in ("both", "peer"):
            print("measuring google-adk api_server ...", file=sys.stderr, flush=True)
            peer, peer_fan = _run_peer(work, sizes)
    print_rates(sizes, ours, peer)
    print_fan_out(sizes, fan, peer_fan)
    for note in dict.fromkeys(NOTES):
        print(f"note: {note}")
    print(f"\nload after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
