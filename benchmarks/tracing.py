"""Tracing overhead on the Runner workload: spans on against spans off.

The workload of `runner.py` (an agent with one tool, an offline model that asks for the
tool once and then answers, a fresh in-memory session per run), sequential and
16-way concurrent. "off": no SDK installed (the OpenTelemetry API's no-op tracer, what
a library user without an SDK gets). "on": the SDK's `TracerProvider` with a
`BatchSpanProcessor` in front of an exporter that drops every batch, so the cost
measured is the runtime's spans (creation, attributes, context carried across the
kernel's threads, processing) and not an exporter's I/O. Every run is one trace:
each runs inside a "request" span, as under an instrumented web server.

A global tracer provider can be set once per process, so each side of each round
runs in a fresh subprocess; the sides alternate, several rounds, and the best round
of each is compared. Goal: overhead under 15%.

Usage: ``python benchmarks/tracing.py [--quick]``
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import structlog

import adk_actors as adk

GOAL = 0.15
WIDTHS = (("sequential", 1), ("16-way concurrent", 16))


def get_weather(city: str) -> dict:
    """Get the weather for a city."""
    return {"city": city, "forecast": "sunny"}


def model(history: Any, tools: Any) -> dict[str, Any]:
    if history[-1].role == "tool":
        return {"text": "sunny"}
    return {"tool_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]}


def _install_sdk() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Drop(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)


def side(spans: bool, count: int) -> dict[str, float]:
    """One side in this process: runs/s for each width."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if spans:
        _install_sdk()
    from opentelemetry import trace

    tracer = trace.get_tracer("benchmark")
    adk.start()
    sessions = adk.sessions.InMemorySessionService()
    agent = adk.spawn_agent(
        "TracingBench",
        {"provider": adk.ScriptedProvider(fn=model, inline=True)},
        tools=[adk.tool(get_weather)],
    )
    runner = adk.Runner(agent, "bench", sessions)
    ids = itertools.count()
    for _ in range(32):  # warm up: pools, imports, first spans
        runner.run("u", f"w{next(ids)}", "weather?")
    rates: dict[str, float] = {}
    for label, width in WIDTHS:
        per_thread = count // width

        def work(per_thread: int = per_thread) -> None:
            for _ in range(per_thread):
                with tracer.start_as_current_span("request"):
                    assert runner.run("u", f"s{next(ids)}", "weather?") == "sunny"

        threads = [threading.Thread(target=work) for _ in range(width)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        rates[label] = per_thread * width / (time.perf_counter() - started)
    adk.stop_agent(agent)
    adk.stop()
    return rates


def _round(spans: bool, count: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--side", "on" if spans else "off", "--count", str(count)],
        capture_output=True,
        text=True,
        check=True,
        env={key: value for key, value in os.environ.items() if not key.startswith("OTEL_")},
    )
    rates: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--side", choices=("on", "off"))
    parser.add_argument("--count", type=int, default=0)
    options = parser.parse_args()
    if options.side is not None:
        print(json.dumps(side(options.side == "on", options.count)))
        return
    count, rounds = (256, 2) if options.quick else (1_024, 4)
    print(f"# tracing benchmark  {datetime.date.today()}")
    print(f"\nruns/s, {count:,} runs per side and width, one tool round, best of {rounds}")
    best: dict[bool, dict[str, float]] = {False: {}, True: {}}
    for n in range(rounds):
        for spans in (False, True) if n % 2 == 0 else (True, False):
            for label, rate in _round(spans, count).items():
                best[spans][label] = max(best[spans].get(label, 0.0), rate)
    print("                      spans off     spans on   overhead")
    for label, _ in WIDTHS:
        off, on = best[False][label], best[True][label]
        overhead = off / on - 1
        goal = "met" if overhead < GOAL else "MISSED"
        print(f"  {label:18s} {off:10,.0f}   {on:10,.0f}   {overhead:7.1%} ({goal}: < {GOAL:.0%})")


if __name__ == "__main__":
    main()
