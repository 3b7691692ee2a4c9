"""Agents: prompt round trips with one tool round, and memory per idle agent.

Rows (see docs/BENCHMARKS.md):

1. prompt round trips per second, sequential: one thread, one agent, each prompt is
   model -> tool call -> tool -> model -> answer on the scripted provider.
2. the same, 64-way concurrent: 64 threads, one agent each.
3. memory per idle agent: RSS added by 5,000 spawned agents (one tool each), divided
   by 5,000. Goal: < 20 KB.

Usage: ``python benchmarks/agents.py [--quick]``
"""

from __future__ import annotations

import argparse
import datetime
import gc
import logging
import os
import platform
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    prompts, idle = (500, 500) if options.quick else (5_000, 5_000)
    print(
        f"# agents benchmark  {datetime.date.today()}  python {platform.python_version()}  cpus {os.cpu_count()}"
    )
    adk.start()
    print(f"prompt round trips, one tool round, sequential:  {sequential(prompts):10,.0f}/s")
    print(f"prompt round trips, one tool round, 64-way:      {concurrent(prompts, 64):10,.0f}/s")
    per_agent = idle_memory(idle)
    verdict = "met" if per_agent < 20 * 1024 else "MISSED"
    print(
        f"memory per idle agent ({idle:,} agents):       {per_agent / 1024:10.1f} KB (goal < 20 KB: {verdict})"
    )
    adk.stop()


if __name__ == "__main__":
    main()
