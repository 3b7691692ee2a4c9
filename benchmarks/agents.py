"""Agents: prompt round trips, spawn rate and memory per idle agent, round by round.

Rows (see docs/BENCHMARKS.md), no peer:

1. prompt round trips per second, sequential: one thread, one agent, each prompt an
   `invoke` (model -> tool call -> tool -> model -> answer on the scripted provider).
2. the same, 64-way concurrent: 64 threads, one agent each.
3. spawn rate: N agents spawned one after another, all sharing one tool object.
   Goal (issue 20 §4): >= 10,000/s (before: 800-1,000/s; about 0.5 ms of each spawn
   compiled the tool's schema again).
4. the same with a tool object per agent, as users write them (a factory defines the
   ``@adk.tool``, a closure over the agent's data), built before the timer. Same goal.
5. the same with the ``@adk.tool`` definition inside the timed loop (about 30 us each,
   most of it `typing.get_type_hints`). No goal.
   Rows 3 and 4 run twice: from the main thread, and from a worker thread (threads of
   your own, `aio.run_blocking` and other executor threads). Off the main thread
   `DynamicSupervisor.start_child` runs the child's start on the calling thread; the
   main thread keeps the round trip through the supervisor's thread, so a signal
   handler's exception lands in the caller's wait, never inside a child's `init`.
6. memory per idle agent, one shared tool / a tool object per agent: RSS added by N
   agents divided by N, each in a fresh process (so nothing an earlier row allocated
   is reused). Goal: < 20 KB.

Every row runs once per round, the rows in turn with the first rotating (so a drift
of the machine's load reaches every row); each row's headline is its median round,
printed with the min-max of its rounds. The machine facts and the load average come
first.

Usage: ``python benchmarks/agents.py [--quick] [--rounds N] [--only spawn]``
"""

from __future__ import annotations

import argparse
import gc
import logging
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil
import structlog
from _bench import (
    OtherCpu,
    fmt_list,
    fmt_num,
    fmt_share,
    interleaved,
    load_average,
    print_facts,
    print_grid,
)

import adk_actors as adk

ROUNDS = 5
SPAWN_GOAL = 10_000
SPAWN_BEFORE = "800-1,000/s"
"""Issue 20's figure before validators were shared (50,000 agents in 63 s)."""
IDLE_GOAL_KB = 20.0
SCRIPT = [{"text": "hello"}]
_names = iter(range(1 << 62))


@adk.tool
def get_weather(city: str) -> dict:
    """Get the weather for a city."""
    return {"city": city, "forecast": "sunny"}


def model(history: Any, tools: Any) -> dict[str, Any]:
    """The tool call first, the answer after the tool responded."""
    if history[-1].role == "tool":
        return {"text": "sunny"}
    return {"tool_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]}


def config() -> dict[str, Any]:
    return {"provider": adk.ScriptedProvider(fn=model, inline=True)}


def own_tool(n: int) -> adk.Tool:
    """A tool object per agent, as users write them: defined in the agent's factory."""
    region = f"region-{n}"

    @adk.tool
    def get_weather(city: str, days: int = 1) -> dict:
        """Get the weather for a city.

        Args:
            city: the city name
            days: how many days ahead
        """
        return {"city": city, "days": days, "region": region}

    return get_weather


# -- the rows ----------------------------------------------------------------------------------


def sequential(count: int) -> float:
    """Prompt round trips per second: `count` invokes of one agent, one after another."""
    agent = adk.spawn_agent(f"Seq{next(_names)}", config(), tools=[get_weather])
    adk.prompt(agent, "warm up")
    started = time.perf_counter()
    for _ in range(count):
        adk.invoke(agent, "weather?")
    rate = count / (time.perf_counter() - started)
    adk.stop_agent(agent)
    return rate


def concurrent(count: int, width: int) -> float:
    """Prompt round trips per second: `width` threads, one agent each, `count` in all."""
    round_ = next(_names)
    agents = [
        adk.spawn_agent(f"Conc{round_}_{n}", config(), tools=[get_weather]) for n in range(width)
    ]
    per_thread = count // width

    def work(agent: adk.AgentRef) -> None:
        for _ in range(per_thread):
            adk.invoke(agent, "weather?")

    threads = [threading.Thread(target=work, args=(agent,)) for agent in agents]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rate = per_thread * width / (time.perf_counter() - started)
    for agent in agents:
        adk.stop_agent(agent)
    return rate


def spawn_rate(count: int, tools: str, worker_thread: bool = False) -> float:
    """Agents spawned per second: `count` scripted agents, one after another, with one
    shared tool (``"shared"``), a tool object each built beforehand (``"own"``), or a
    tool object each defined in the timed loop (``"defined"``); from the main thread,
    or from a worker thread with `worker_thread`."""
    prefix = f"Spawn{tools}{next(_names)}_"
    built = [own_tool(n) for n in range(count)] if tools == "own" else []
    elapsed: list[float] = []

    def spawn_all() -> None:
        started = time.perf_counter()
        for n in range(count):
            tool = built[n] if built else own_tool(n) if tools == "defined" else get_weather
            config = {"provider": "scripted", "script": SCRIPT}
            adk.spawn_agent(f"{prefix}{n}", config, tools=[tool])
        elapsed.append(time.perf_counter() - started)

    if worker_thread:
        spawner = threading.Thread(target=spawn_all, name="spawner")
        spawner.start()
        spawner.join()
    else:
        spawn_all()
    rate = count / elapsed[0]
    for n in range(count):
        adk.stop_agent(f"{prefix}{n}")
    return rate


def idle_memory_child(count: int, tools: str) -> None:
    """In a fresh process: RSS added by `count` agents with one shared tool
    (``"shared"``) or a tool object each (``"own"``), per agent (bytes, printed alone
    on stdout)."""
    quiet()
    adk.start()
    adk.spawn_agent("Warm", {"provider": "scripted", "script": SCRIPT}, tools=[own_tool(-1)])
    gc.collect()
    before = psutil.Process().memory_info().rss
    for n in range(count):
        tool = own_tool(n) if tools == "own" else get_weather
        adk.spawn_agent(f"Fresh{n}", {"provider": "scripted", "script": SCRIPT}, tools=[tool])
    gc.collect()
    print((psutil.Process().memory_info().rss - before) / count)
    adk.stop()


def fresh_idle_memory(count: int, tools: str) -> float:
    """KB per idle agent, measured in a fresh process (`idle_memory_child`)."""
    output = subprocess.run(
        [sys.executable, __file__, "--idle-child", str(count), "--tools", tools],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    return float(output.strip().splitlines()[-1]) / 1024


# -- the table ---------------------------------------------------------------------------------


@dataclass
class Row:
    """One row: how to measure a round, its unit and goal (text and check)."""

    name: str
    unit: str
    measure: Callable[[], float]
    goal: str = ""
    check: Callable[[float], bool] | None = None


def rows(prompts: int, spawns: int, idle: int, only_spawn: bool) -> list[Row]:
    """The rows measured (the spawn and memory rows alone with `only_spawn`)."""
    table = []
    if not only_spawn:
        trips = "prompt round trips, one tool round"
        table += [
            Row(f"{trips}, sequential", "/s", lambda: sequential(prompts)),
            Row(f"{trips}, 64 agents x 64 threads", "/s", lambda: concurrent(prompts, 64)),
        ]
    spawn_goal = f">= {SPAWN_GOAL:,}/s (before {SPAWN_BEFORE})"
    for tools, label, goal, worker_thread in (
        ("shared", "one shared tool", True, False),
        ("own", "a tool object each", True, False),
        ("shared", "one shared tool, from a worker thread", True, True),
        ("own", "a tool object each, from a worker thread", True, True),
        ("defined", "@adk.tool defined in the loop", False, False),
    ):
        table.append(
            Row(
                f"spawn {spawns:,} agents, {label}",
                "/s",
                lambda tools=tools, worker_thread=worker_thread: spawn_rate(
                    spawns, tools, worker_thread
                ),
                spawn_goal if goal else "",
                (lambda v: v >= SPAWN_GOAL) if goal else None,
            )
        )
    for tools, label in (("shared", "one shared tool"), ("own", "a tool object each")):
        table.append(
            Row(
                f"memory per idle agent, {label} ({idle:,} agents, fresh process)",
                "KB",
                lambda tools=tools: fresh_idle_memory(idle, tools),
                f"< {IDLE_GOAL_KB:g} KB",
                lambda v: v < IDLE_GOAL_KB,
            )
        )
    return table


def print_rows(table: list[Row], runs: dict[str, list[float]]) -> None:
    """Each row's median round, the min-max of its rounds, its goal and whether met."""
    lines = []
    for row in table:
        figures = runs[row.name]
        median = statistics.median(figures)
        verdict = "-" if row.check is None else ("yes" if row.check(median) else "NO")
        spread = f"{fmt_num(min(figures))}-{fmt_num(max(figures))}"
        lines.append([row.name, row.unit, fmt_num(median), spread, row.goal or "none", verdict])
    print_grid(["row", "unit", "median", "min-max", "goal", "met"], lines)
    for row in table:
        print(f"{row.name}: rounds {fmt_list(runs[row.name])}")


def quiet() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--rounds", type=int, help=f"measured rounds (default {ROUNDS})")
    parser.add_argument("--only", choices=["spawn"], help="the spawn and memory rows alone")
    parser.add_argument("--idle-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--tools", choices=["shared", "own"], help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.idle_child:
        idle_memory_child(options.idle_child, options.tools or "own")
        return
    quiet()
    prompts, spawns, idle, rounds = (
        (200, 2_000, 500, 2) if options.quick else (2_000, 20_000, 5_000, ROUNDS)
    )
    rounds = options.rounds or rounds
    print_facts("agents benchmark" + (" (quick)" if options.quick else ""), "psutil")
    started, meter = time.perf_counter(), OtherCpu()
    adk.start()
    table = rows(prompts, spawns, idle, options.only == "spawn")
    sides = {row.name: row.measure for row in table}
    sequential(prompts // 10)  # warm-up
    others: list[float | None] = []
    runs = interleaved(sides, rounds, others)
    adk.stop()
    print_rows(table, runs)
    print("other processes' CPU per round " + "/".join(map(fmt_share, others)))
    print(
        f"\ntotal {time.perf_counter() - started:.0f} s; {rounds} rounds, every row once a "
        "round, the rows in turn (first rotating); median: each row's median round; other "
        f"processes used {fmt_share(meter.share())} of the CPUs during the run; load avg at "
        f"the end {load_average()}"
    )


if __name__ == "__main__":
    main()
