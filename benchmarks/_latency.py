"""What `runner.py` and `runs.py` share beyond `weather_workload`: the rows, the slow
offline models, google-adk's side (in-memory or SQLite sessions, every round on one
event loop), the latency bound and the tables.

A zero-latency row is the `weather_workload` run (one tool round). A slow row's model
answers after a fixed delay, one model call per run: ours is `ScriptedProvider(fn=...)`
returning a step with ``"delay"`` (awaited on the event loop, as `asyncio.sleep`), the
peer's `SlowLlm` awaits `asyncio.sleep(delay)` and answers. A runtime with no overhead
would end `width` runs every `delay` seconds: the latency bound, ``width / delay``
runs/s; each side is reported as a share of it.

Needs google-adk with SQLAlchemy (`make bench` installs both in `.venv-bench`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import structlog
from _bench import (
    Compared,
    OtherCpu,
    fmt_list,
    fmt_num,
    fmt_share,
    interleaved,
    load_average,
    print_facts,
    print_grid,
    print_table,
)
from google.adk.agents import LlmAgent
from google.adk.artifacts.in_memory_artifact_service import InMemoryArtifactService
from google.adk.memory.in_memory_memory_service import InMemoryMemoryService
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner, Runner
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.genai import types
from weather_workload import FakeLlm, get_weather, model, peer_one

import adk_actors as adk

MAX_IN_FLIGHT = 4096
"""Our agents' `max_concurrent_invocations` (default 32): as many as the widest row."""
RUNNER_GOAL = 12.0
"""Issue 20 §4: the Runner at zero latency, concurrency 1 and 64, >= 12x google-adk."""
BOUND_GOAL = 0.8
"""Issue 20 §4: a 2 s model with 1,024 runs in flight reaches >= 80% of the bound."""


# -- rows --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One row's work: the model's delay (0: the tool-round workload), runs in flight,
    runs per lane (`waves`), durable sessions or in-memory, and measured rounds."""

    delay: float
    width: int
    waves: int
    rounds: int
    durable: bool = False

    @property
    def runs(self) -> int:
        return self.width * self.waves

    @property
    def bound(self) -> float | None:
        """Runs/s with no overhead: `width` runs every `delay` seconds."""
        return self.width / self.delay if self.delay else None

    @property
    def name(self) -> str:
        model = f"{fmt_delay(self.delay)} model" if self.delay else "zero latency"
        sessions = ", durable" if self.durable else ""
        return f"{model}, {self.width:,} in flight{sessions}"

    def goal(self, runner_goal: bool) -> tuple[str, Callable[[Compared], bool] | None]:
        """This row's issue 20 §4 goal (its text and its check), or none."""
        if runner_goal and not self.delay and not self.durable and self.width in (1, 64):
            return f">= {RUNNER_GOAL:g}x", lambda row: (row.ratio or 0.0) >= RUNNER_GOAL
        if self.delay == 2.0 and self.width == 1024:
            bound = self.bound or 1.0
            return f">= {BOUND_GOAL:.0%} of bound", lambda row: row.ours / bound >= BOUND_GOAL
        return "", None


def fmt_delay(delay: float) -> str:
    return f"{delay * 1e3:.0f} ms" if delay < 1 else f"{delay:g} s"


def workloads(quick: bool, durable_widths: Sequence[int]) -> list[Workload]:
    """The rows: zero latency at 1 and 64 in flight (in memory, then durable at
    `durable_widths`), then a 50 ms and a 2 s model at 1, 64 and 1,024 in flight. Each
    row takes seconds: 1,024 runs a round at zero latency (128 durable, google-adk's
    SQLite side doing 6-40/s here), and the 2 s model's widest row is two waves (one in
    quick mode)."""
    zero, durable = (64, 32) if quick else (1024, 128)
    rounds, slow_rounds = (2, 1) if quick else (5, 3)
    rows = [Workload(0.0, width, max(1, zero // width), rounds) for width in (1, 64)]
    rows += [
        Workload(0.0, width, max(1, durable // width), slow_rounds, True)
        for width in durable_widths
    ]
    rows += [
        Workload(0.05, 1, 5 if quick else 20, rounds),
        Workload(0.05, 64, 1 if quick else 16, rounds),
        Workload(0.05, 1024, 1, slow_rounds),
        Workload(2.0, 1, 1, slow_rounds),
        Workload(2.0, 64, 1, slow_rounds),
        Workload(2.0, 1024, 1 if quick else 2, slow_rounds),
    ]
    return rows


def parse_options(description: str) -> argparse.Namespace:
    """``--quick``, ``--rounds N`` (every row), ``--only zero|slow``; then `silence`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--rounds", type=int, help="measured rounds for every row")
    parser.add_argument(
        "--only", choices=["zero", "slow"], help="zero-latency rows or slow-model rows"
    )
    options = parser.parse_args()
    silence()
    return options


def selected(rows: list[Workload], options: argparse.Namespace) -> list[Workload]:
    """The rows `--only` keeps, with `--rounds` applied."""
    if options.only == "zero":
        rows = [row for row in rows if not row.delay]
    elif options.only == "slow":
        rows = [row for row in rows if row.delay]
    if options.rounds:
        rows = [replace(row, rounds=options.rounds) for row in rows]
    return rows


def silence() -> None:
    """Both runtimes' logs to errors only, so that logging costs neither side anything:
    google-adk warns on every model call without token usage ("Skipping missing token
    usage metadata"), and logs at debug level on every node; ours warns about slow
    handlers (structlog, filtered before formatting)."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    logging.getLogger("google_adk").setLevel(logging.ERROR)
    logging.disable(logging.WARNING)  # every stdlib logger: one integer comparison a call
    warnings.simplefilter("ignore")


# -- timings -----------------------------------------------------------------------------------


@dataclass
class Timed:
    """One side's round: runs, wall seconds, and each run's latency (seconds) if kept."""

    runs: int
    seconds: float
    latencies: list[float] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    """Why runs failed (a failed run is reported, and not counted in `runs`)."""
    cpu: float = 0.0
    """CPU seconds this process used in the round, every thread: unlike the wall time,
    it hardly moves with other processes' load (a side with more threads gets a larger
    share of a busy machine's CPUs, and so a better wall time)."""

    @property
    def rate(self) -> float:
        return self.runs / self.seconds


class Clock:
    """A round's wall time and this process's CPU time, from its making to `stop`."""

    def __init__(self) -> None:
        self._wall = time.perf_counter()
        self._cpu = time.process_time()

    def stop(self, latencies: list[float], failed: list[str]) -> Timed:
        """The round: its successful runs (one latency each) and failures."""
        seconds = time.perf_counter() - self._wall
        return Timed(len(latencies), seconds, latencies, failed, time.process_time() - self._cpu)


def recorded(round_: Callable[[], Timed], timings: list[Timed]) -> Callable[[], float]:
    """A side for `interleaved` (its rate) that keeps each round's `Timed` in `timings`."""

    def side() -> float:
        timed = round_()
        timings.append(timed)
        return timed.rate

    return side


def failure_note(label: str, rounds: Sequence[Timed]) -> str:
    """``; <label>: N failed runs (first: ...)``, or "" when every run succeeded."""
    failed = [reason for timed in rounds for reason in timed.failed]
    return f"; {label}: {len(failed)} failed runs (first: {failed[0]})" if failed else ""


def cpu_note(label: str, rounds: Sequence[Timed]) -> str:
    """``; <label> CPU a ms/run``: the median round's CPU time per successful run."""
    per_run = [timed.cpu / timed.runs for timed in rounds if timed.runs]
    return f"; {label} CPU {fmt_num(statistics.median(per_run) * 1e3)} ms/run" if per_run else ""


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def latency_note(label: str, rounds: Sequence[Timed]) -> str:
    """``; <label> p50/p99 a/b ms`` over every run of every round, or "" when the
    rounds kept no latencies."""
    latencies = [latency for timed in rounds for latency in timed.latencies]
    if not latencies:
        return ""
    p50, p99 = statistics.median(latencies) * 1e3, percentile(latencies, 0.99) * 1e3
    return f"; {label} p50/p99 {fmt_num(p50)}/{fmt_num(p99)} ms"


# -- our side ---------------------------------------------------------------------------------

_agents = itertools.count()


@contextlib.contextmanager
def our_runner(work: Workload, durable: Any | None) -> Iterator[adk.Runner]:
    """Our side's `Runner` for one round: a new agent with the row's model and one tool,
    admitting every run at once, on `durable` sessions (shared by the rounds) or on
    fresh in-memory ones (as the peer's `InMemoryRunner`); both ended afterwards."""
    sessions = durable if durable is not None else adk.sessions.InMemorySessionService()
    agent = adk.spawn_agent(
        f"Bench{next(_agents)}",
        {
            "provider": adk.ScriptedProvider(fn=our_model(work.delay), inline=True),
            "max_concurrent_invocations": MAX_IN_FLIGHT,
        },
        tools=[adk.tool(get_weather)],
    )
    try:
        yield adk.Runner(agent, "bench", sessions)
    finally:
        adk.stop_agent(agent)
        if durable is None:
            sessions.close()


# -- the models --------------------------------------------------------------------------------


def our_model(delay: float) -> Callable[[Any, Any], dict[str, Any]]:
    """Our offline model for a row: the tool round at zero delay, else "sunny" after
    `delay` seconds."""
    if not delay:
        return model
    step = {"text": "sunny", "delay": delay}
    return lambda history, tools: step


class SlowLlm(BaseLlm):
    """google-adk's slow offline model: "sunny" after `delay` seconds."""

    delay: float = 0.0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        await asyncio.sleep(self.delay)
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="sunny")]))


# -- google-adk's side -------------------------------------------------------------------------


class Peer:
    """google-adk's side. Every round runs on one event loop of its own: the SQLite
    engine's connections belong to the loop that opened them. Durable sessions are a
    `DatabaseSessionService` on a SQLite file (``sqlite+aiosqlite``), shared by the
    rounds as our LMDB directory is."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.directory = tempfile.mkdtemp(prefix="adk-bench-peer-")
        self._database: DatabaseSessionService | None = None

    def _sessions(self) -> DatabaseSessionService:
        if self._database is None:
            url = f"sqlite+aiosqlite:///{os.path.join(self.directory, 'sessions.db')}"
            self._database = DatabaseSessionService(url)
        return self._database

    def runner(self, work: Workload) -> Runner:
        llm = SlowLlm(model="fake", delay=work.delay) if work.delay else FakeLlm(model="fake")
        agent = LlmAgent(name="weather", model=llm, tools=[get_weather])
        if not work.durable:
            return InMemoryRunner(agent=agent, app_name="bench")
        return Runner(
            app_name="bench",
            agent=agent,
            session_service=self._sessions(),
            artifact_service=InMemoryArtifactService(),
            memory_service=InMemoryMemoryService(),
        )

    def round(self, work: Workload) -> Timed:
        """`width` asyncio tasks (its native concurrency), each `waves` runs one after
        another on a fresh session each, every answer checked (a failed run is kept in
        `Timed.failed`)."""
        runner = self.runner(work)
        latencies: list[float] = []
        failed: list[str] = []

        async def lane(number: int) -> None:
            for wave in range(work.waves):
                began = time.perf_counter()
                try:
                    answer = await peer_one(runner, f"u{number}-{wave}")
                    if answer != "sunny":
                        raise AssertionError(f"answered {answer!r}")
                except Exception as error:  # reported with the row
                    failed.append(repr(error)[:200])
                    continue
                latencies.append(time.perf_counter() - began)

        async def main() -> None:
            await asyncio.gather(*(lane(number) for number in range(work.width)))

        clock = Clock()
        self.loop.run_until_complete(main())
        return clock.stop(latencies, failed)

    def close(self) -> None:
        if self._database is not None:
            self.loop.run_until_complete(self._database.close())
        self.loop.close()


# -- the rows, side by side --------------------------------------------------------------------

OurRound = Callable[[Workload, Any], Timed]
"""Our side's round of a row: (the row, our LMDB sessions if it is durable, else None)."""


def compare(
    work: Workload, our_round: OurRound, peer: Peer, lmdb: Any, runner_goal: bool
) -> tuple[Compared, Callable[[Compared], bool] | None]:
    """One row: both sides, `work.rounds` interleaved rounds; and its goal's check."""
    durable = lmdb if work.durable else None
    ours: list[Timed] = []
    theirs: list[Timed] = []
    sides = {
        "ours": recorded(lambda: our_round(work, durable), ours),
        "google-adk": recorded(lambda: peer.round(work), theirs),
    }
    others: list[float | None] = []
    began = time.perf_counter()
    runs = interleaved(sides, work.rounds, others)
    print(f"  {work.name}: {time.perf_counter() - began:.1f} s", file=sys.stderr, flush=True)
    goal, check = work.goal(runner_goal)
    row = Compared(
        name=work.name,
        unit="runs/s",
        ours_runs=runs["ours"],
        peer_runs=runs["google-adk"],
        goal=goal,
        others=others,
        detail=(
            f"{work.runs:,} runs a round ({work.width:,} x {work.waves:,}); runs "
            f"{fmt_list(runs['ours'])} vs google-adk {fmt_list(runs['google-adk'])}"
            + latency_note("ours", ours)
            + latency_note("google-adk", theirs)
            + cpu_note("ours", ours)
            + cpu_note("google-adk", theirs)
            + failure_note("ours", ours)
            + failure_note("google-adk", theirs)
        ),
    )
    return row, check


def run_rows(
    title: str, our_round: OurRound, *, durable_widths: Sequence[int], runner_goal: bool
) -> None:
    """The benchmark: options, machine facts, a warm-up round of each side (in memory and
    durable), every row, the table with its goals, the latency-bound table, the
    footer. `runner_goal`: the zero-latency rows carry the Runner's 12x goal."""
    options = parse_options(title)
    works = selected(workloads(options.quick, durable_widths), options)
    print_facts(title + (" (quick)" if options.quick else ""), "google-adk", "sqlalchemy")
    started, meter = time.perf_counter(), OtherCpu()
    adk.start()
    lmdb = adk.sessions.LmdbSessionService(tempfile.mkdtemp(prefix="adk-bench-"))
    peer = Peer()
    for warm in (Workload(0.0, 8, 8, 1), Workload(0.0, 8, 8, 1, durable=True)):
        durable = lmdb if warm.durable else None
        interleaved(
            {
                "ours": lambda w=warm, d=durable: our_round(w, d).rate,
                "google-adk": lambda w=warm: peer.round(w).rate,
            },
            1,
        )
    rows, checks = [], {}
    for work in works:
        row, check = compare(work, our_round, peer, lmdb, runner_goal)
        rows.append(row)
        checks[row.name] = check
    print_table(rows, ours="ours", peer="google-adk", met=met_by(checks))
    print_bounds(rows, works, "google-adk")
    print_footer(started, fmt_share(meter.share()))
    peer.close()
    lmdb.close()
    adk.stop()


def met_by(
    checks: dict[str, Callable[[Compared], bool] | None],
) -> Callable[[Compared], bool | None]:
    """`print_table`'s `met`: each row's check by name, None for a row without a goal."""

    def met(row: Compared) -> bool | None:
        check = checks.get(row.name)
        return None if check is None else check(row)

    return met


def print_bounds(rows: Sequence[Compared], works: Sequence[Workload], peer: str) -> None:
    """The slow rows against the latency bound: each side's median round as a share."""
    lines = []
    for row, work in zip(rows, works, strict=True):
        bound = work.bound
        if bound is None:
            continue
        peer_share = "n/a" if row.peer is None else f"{row.peer / bound:.0%}"
        lines.append([row.name, f"{fmt_num(bound)}/s", f"{row.ours / bound:.0%}", peer_share])
    if lines:
        print("\nlatency bound (width / delay runs/s): each side's median round as a share")
        print_grid(["row", "bound", "ours", peer], lines)


def print_footer(started: float, cpu: str) -> None:
    print(
        f"\ntotal {time.perf_counter() - started:.0f} s; rounds after a warm-up, the two sides "
        "in turn (first side alternating); ours/google-adk columns: each side's median "
        "round; ratio = ours / google-adk per round, headline = median of the per-round "
        f"ratios; other processes used {cpu} of the CPUs during the run; load avg at the end "
        f"{load_average()}"
    )
