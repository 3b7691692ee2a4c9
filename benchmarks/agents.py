"""Agents: prompt round trips with one tool round, and memory per idle agent.

Rows (see docs/BENCHMARKS.md):

1. prompt round trips per second, sequential: one thread, one agent, each prompt is
   model -> tool call -> tool -> model -> answer on the scripted provider.
2. the same, 64-way concurrent: 64 threads, one agent each.
3. memory per idle agent: RSS added by 5,000 spawned agents (one tool each), divided
   by 5,000. Goal: < 20 KB.
4. spawn rate (issue 20): agents spawned per second, N agents one after another, all
   sharing one tool object. Goal: 10,000/s (before: 800-1,000/s; about 0.5 ms of each
   spawn compiled the tool's schema again).
5. the same with a tool object per agent, as users write them: a factory defines the
   ``@adk.tool`` (a closure over the agent's data); the tools built before the timer,
   then with the ``@adk.tool`` definition inside the timed loop (about 30 us each, most
   of it `typing.get_type_hints`).
6. memory per idle agent with a tool object per agent, in a fresh process (so nothing
   an earlier row allocated is reused): RSS added by N agents, divided by N.

Usage: ``python benchmarks/agents.py [--quick] [--only spawn]``
"""

from __future__ import annotations

import argparse
import datetime
import gc
import logging
import os
import platform
import subprocess
import sys
import threading
import time

import psutil
import structlog

import adk_actors as adk


@adk.tool
def get_weather(city: str) -> dict:
    """Get the weather for a city."""
    return {"city": city, "forecast": "sunny"}


def model(history, tools):
    last = history[-1]
    if last.role == "tool":
        return {"text": "sunny"}
    return {"tool_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]}


def config() -> dict:
    return {"provider": adk.ScriptedProvider(fn=model, inline=True)}


def sequential(count: int) -> float:
    agent = adk.spawn_agent("Seq", config(), tools=[get_weather])
    adk.prompt(agent, "warm up")
    started = time.perf_counter()
    for _ in range(count):
        adk.invoke(agent, "weather?")
    rate = count / (time.perf_counter() - started)
    adk.stop_agent(agent)
    return rate


def concurrent(count: int, width: int) -> float:
    agents = [adk.spawn_agent(f"Conc{n}", config(), tools=[get_weather]) for n in range(width)]
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


def idle_memory(count: int) -> float:
    gc.collect()
    before = psutil.Process().memory_info().rss
    agents = [adk.spawn_agent(f"Idle{n}", config(), tools=[get_weather]) for n in range(count)]
    gc.collect()
    per_agent = (psutil.Process().memory_info().rss - before) / count
    for agent in agents:
        adk.stop_agent(agent)
    return per_agent


SPAWN_GOAL = 10_000
SPAWN_BEFORE = "800-1,000/s"
"""Issue 20's figure before validators were shared (50,000 agents in 63 s)."""
SCRIPT = [{"text": "hello"}]


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


def spawn_rate(count: int, prefix: str, tools: str) -> float:
    """Agents spawned per second: `count` scripted agents, one after another, with one
    shared tool (``"shared"``), a tool object each built beforehand (``"own"``), or a
    tool object each defined in the timed loop (``"defined"``)."""
    built = [own_tool(n) for n in range(count)] if tools == "own" else []
    started = time.perf_counter()
    for n in range(count):
        tool = built[n] if built else own_tool(n) if tools == "defined" else get_weather
        adk.spawn_agent(f"{prefix}{n}", {"provider": "scripted", "script": SCRIPT}, tools=[tool])
    rate = count / (time.perf_counter() - started)
    for n in range(count):
        adk.stop_agent(f"{prefix}{n}")
    return rate


def idle_memory_child(count: int) -> None:
    """In a fresh process: RSS added by `count` agents with a tool object each, per agent
    (bytes, printed alone on stdout)."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    adk.start()
    adk.spawn_agent("Warm", {"provider": "scripted", "script": SCRIPT}, tools=[own_tool(-1)])
    gc.collect()
    before = psutil.Process().memory_info().rss
    for n in range(count):
        adk.spawn_agent(
            f"Fresh{n}", {"provider": "scripted", "script": SCRIPT}, tools=[own_tool(n)]
        )
    gc.collect()
    print((psutil.Process().memory_info().rss - before) / count)
    adk.stop()


def fresh_idle_memory(count: int) -> float:
    output = subprocess.run(
        [sys.executable, __file__, "--idle-child", str(count)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    return float(output.strip().splitlines()[-1])


def spawn_rows(spawns: int, idle: int) -> None:
    rows = (
        ("shared", "one shared tool"),
        ("own", "a tool object each"),
        ("defined", "a tool each, @adk.tool in loop"),
    )
    for tools, label in rows:
        rate = spawn_rate(spawns, f"Spawn{tools}", tools)
        verdict = "met" if rate >= SPAWN_GOAL else "MISSED"
        print(
            f"spawn rate, {spawns:,} agents, {label + ':':32} {rate:8,.0f}/s"
            f" (before {SPAWN_BEFORE}; goal {SPAWN_GOAL:,}/s: {verdict})"
        )
    per_agent = fresh_idle_memory(idle)
    print(
        f"memory per idle agent, a tool object each ({idle:,} agents, fresh process):"
        f" {per_agent / 1024:.1f} KB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=["spawn"], help="run the spawn rows alone")
    parser.add_argument("--idle-child", type=int, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.idle_child:
        idle_memory_child(options.idle_child)
        return
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    prompts, idle, spawns = (500, 500, 2_000) if options.quick else (5_000, 5_000, 20_000)
    print(
        f"# agents benchmark  {datetime.date.today()}  python {platform.python_version()}  cpus {os.cpu_count()}"
    )
    adk.start()
    if options.only != "spawn":
        print(f"prompt round trips, one tool round, sequential:  {sequential(prompts):10,.0f}/s")
        print(
            f"prompt round trips, one tool round, 64-way:      {concurrent(prompts, 64):10,.0f}/s"
        )
        per_agent = idle_memory(idle)
        verdict = "met" if per_agent < 20 * 1024 else "MISSED"
        print(
            f"memory per idle agent ({idle:,} agents):       {per_agent / 1024:10.1f} KB (goal < 20 KB: {verdict})"
        )
    spawn_rows(spawns, idle)
    adk.stop()


if __name__ == "__main__":
    main()
