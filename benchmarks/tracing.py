"""Tracing overhead on the Runner workload: spans on against spans off, and what spans
cost when no SDK is installed.

The workload of `runner.py` (an agent with one tool, an offline model that asks for the
tool once and then answers, a fresh in-memory session per run), sequential and
16-way concurrent. Every run is one trace: each runs inside a "request" span, as under
an instrumented web server.

Spans on against off: "off" is no SDK installed (the OpenTelemetry API's no-op tracer,
what a library user without an SDK gets); "on" is the SDK's `TracerProvider` with a
`BatchSpanProcessor` in front of an exporter that drops every batch, so the cost
measured is the runtime's spans (creation, attributes, context carried across the
kernel's threads, processing) and not an exporter's I/O. A global tracer provider can
be set once per process, so each side of each round runs in a fresh subprocess; the
sides alternate, several rounds, and the best round of each is compared. Goal:
overhead under 15%.

No SDK against tracing compiled out, in one process (no SDK on every side), the sides
swapped in and out between blocks of runs: "compiled out", the floor (the agents'
`runtime_span` is a constant context manager, the span name and attribute builders
return constants); "no SDK", the runtime as it is (its no-SDK fast path); "before",
the previous no-SDK path (every span through the API's proxy and no-op tracers, the
previous attribute check). CPU microseconds per run (all threads), median of the
per-round ratios to the floor. A whole run's CPU varies by more than a few
microseconds on a shared machine, so the span calls of one run are also replayed
alone, before and now. Goal: with no SDK, the span calls cost under 1% of a
compiled-out run's CPU.

Usage: ``python benchmarks/tracing.py [--quick]``
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import logging
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import structlog
from _bench import interleaved

import adk_actors as adk

GOAL = 0.15
NO_SDK_GOAL = 0.01
WIDTHS = (("sequential", 1), ("16-way concurrent", 16))
NO_SDK_SIDES = ("compiled out", "no SDK", "before")


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


class _Workload:
    """The agent, its runner and the timed loop, in this process."""

    def __init__(self) -> None:
        from opentelemetry import trace

        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
        self.tracer = trace.get_tracer("benchmark")
        adk.start()
        self.agent = adk.spawn_agent(
            "TracingBench",
            {"provider": adk.ScriptedProvider(fn=model, inline=True)},
            tools=[adk.tool(get_weather)],
        )
        self.runner = adk.Runner(self.agent, "bench", adk.sessions.InMemorySessionService())
        self.ids = itertools.count()  # next() on it is atomic
        for _ in range(32):  # warm up: pools, imports, first spans
            self.runner.run("u", f"w{next(self.ids)}", "weather?")

    def timed(self, count: int, width: int) -> tuple[float, float]:
        """Runs/s and CPU microseconds per run (all threads) of `count` runs on
        `width` threads."""
        per_thread = count // width

        def work() -> None:
            for _ in range(per_thread):
                with self.tracer.start_as_current_span("request"):
                    assert self.runner.run("u", f"s{next(self.ids)}", "weather?") == "sunny"

        threads = [threading.Thread(target=work) for _ in range(width)]
        started, cpu_started = time.perf_counter(), time.process_time()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        runs = per_thread * width
        return runs / (time.perf_counter() - started), (
            time.process_time() - cpu_started
        ) / runs * 1e6

    def stop(self) -> None:
        adk.stop_agent(self.agent)
        adk.stop()


def side(spans: bool, count: int) -> dict[str, float]:
    """One side of spans on against off in this process: runs/s for each width."""
    if spans:
        _install_sdk()
    workload = _Workload()
    rates = {label: workload.timed(count, width)[0] for label, width in WIDTHS}
    workload.stop()
    return rates


# -- no SDK: compiled out, as it is, before ------------------------------------------------------


def _previous_checked(attributes: Mapping[str, object]) -> dict[str, Any]:
    """`semconv.checked` as it was before the no-SDK work."""
    from adk_actors.observability import semconv

    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if len(out) >= semconv.MAX_ATTRIBUTES:
            break
        if isinstance(value, bool | int | float):
            out[key] = value
        elif isinstance(value, str):
            out[key] = value[: semconv.MAX_VALUE_CHARS]
    return out


@contextmanager
def _previous_runtime_span(
    tracer_: Any, name: str, attributes: Mapping[str, Any] | None = None
) -> Iterator[Any]:
    """`observability.runtime_span` as it was before the no-SDK work: every span
    through the tracer, whichever it is."""
    from adk_actors.observability import failed

    with tracer_.start_as_current_span(
        name, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as current_span:
        try:
            yield current_span
        except BaseException as exc:
            failed(current_span, exc)
            raise


class _Off:
    """A span compiled out."""

    def __enter__(self) -> Any:
        from opentelemetry import trace

        return trace.INVALID_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


def _no_sdk_sides() -> dict[str, dict[tuple[Any, str], Any]]:
    """Each side's replacements: (module, attribute) -> value."""
    from adk_actors.agents import tool_round, turn
    from adk_actors.observability import semconv

    off = _Off()
    model_call = {semconv.PROVIDER_NAME: "scripted"}
    spans = [(module, "runtime_span") for module in (turn, tool_round)]
    for module, name in spans:
        assert hasattr(module, name), f"{module.__name__} has no {name}"

    def constant(value: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: value

    return {
        "compiled out": {
            **{place: constant(off) for place in spans},
            (semconv, "span_name"): constant(""),
            (semconv, "invocation"): constant({}),
            (semconv, "tool_call"): constant({}),
            (semconv, "model_call_from_config"): constant(model_call),
        },
        "no SDK": {},
        "before": {
            **{place: _previous_runtime_span for place in spans},
            (semconv, "checked"): _previous_checked,
        },
    }


def no_sdk(count: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    """The no-SDK sides in this process, swapped between blocks of `count` runs:
    CPU microseconds per run of every round, per width and side."""
    workload = _Workload()
    sides = _no_sdk_sides()
    places = {place for replaced in sides.values() for place in replaced}
    originals = {place: getattr(*place) for place in places}
    out: dict[str, dict[str, list[float]]] = {}
    for label, width in WIDTHS:

        def block(name: str, width: int = width) -> float:
            for (module, attribute), value in (originals | sides[name]).items():
                setattr(module, attribute, value)
            try:
                return workload.timed(count, width)[1]
            finally:
                for (module, attribute), value in originals.items():
                    setattr(module, attribute, value)

        out[label] = interleaved(
            {name: lambda name=name: block(name) for name in NO_SDK_SIDES}, rounds
        )
    workload.stop()
    return out


def replayed(rounds: int) -> dict[str, float]:
    """The span calls of one run replayed alone (no SDK; the turn's span, two model
    calls', one tool call's, with their names, attributes and durations), as the
    previous code made them and as now: microseconds per run, best of `rounds`. The
    steady figure where a whole run's CPU varies by more than it."""
    import timeit

    from opentelemetry import trace

    from adk_actors.observability import runtime_span, semconv

    tracer = trace.get_tracer("adk_actors")
    config = {"provider": adk.ScriptedProvider(fn=model, inline=True)}

    def one_run(span_: Callable[..., Any]) -> None:
        with span_(
            tracer,
            semconv.span_name(semconv.INVOKE_AGENT, "TracingBench"),
            attributes=semconv.invocation("TracingBench", invocation_id="e-1", session_id="s-1"),
        ):
            for _ in range(2):
                attributes = semconv.model_call_from_config("TracingBench", config)
                name = semconv.span_name(semconv.CHAT, str(attributes[semconv.PROVIDER_NAME]))
                with span_(tracer, name, attributes=attributes) as span:
                    span.set_attribute(semconv.ADK_DURATION_MS, 1.0)
            with span_(
                tracer,
                semconv.span_name(semconv.EXECUTE_TOOL, "get_weather"),
                attributes=semconv.tool_call("TracingBench", "get_weather", "call-1"),
            ) as span:
                span.set_attribute(semconv.ADK_DURATION_MS, 1.0)
                span.set_attribute(semconv.ADK_TOOL_SUCCESS, True)

    checked = semconv.checked
    out = {}
    for name, span_, checked_ in (
        ("before", _previous_runtime_span, _previous_checked),
        ("no SDK", runtime_span, checked),
    ):
        semconv.checked = checked_  # type: ignore[assignment]
        try:
            n = 20_000
            best = min(timeit.repeat(lambda span_=span_: one_run(span_), number=n, repeat=rounds))
        finally:
            semconv.checked = checked  # type: ignore[assignment]
        out[name] = best / n * 1e6
    return out


# -- the report -----------------------------------------------------------------------------------


def _child(*argv: str) -> Any:
    done = subprocess.run(
        [sys.executable, __file__, *argv],
        capture_output=True,
        text=True,
        check=True,
        env={key: value for key, value in os.environ.items() if not key.startswith("OTEL_")},
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--side", choices=("on", "off", "no-sdk"))
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=0)
    options = parser.parse_args()
    if options.side == "no-sdk":
        print(json.dumps(no_sdk(options.count, options.rounds) | {"replayed": replayed(5)}))
        return
    if options.side is not None:
        print(json.dumps(side(options.side == "on", options.count)))
        return
    count, rounds = (256, 2) if options.quick else (1_024, 4)
    block, blocks = (64, 10) if options.quick else (128, 30)
    print(f"# tracing benchmark  {datetime.date.today()}")
    print(f"\nruns/s, {count:,} runs per side and width, one tool round, best of {rounds}")
    best: dict[bool, dict[str, float]] = {False: {}, True: {}}
    for n in range(rounds):
        for spans in (False, True) if n % 2 == 0 else (True, False):
            for label, rate in _child(
                "--side", "on" if spans else "off", "--count", str(count)
            ).items():
                best[spans][label] = max(best[spans].get(label, 0.0), rate)
    print("                      spans off     spans on   overhead")
    for label, _ in WIDTHS:
        off, on = best[False][label], best[True][label]
        overhead = off / on - 1
        goal = "met" if overhead < GOAL else "MISSED"
        print(f"  {label:18s} {off:10,.0f}   {on:10,.0f}   {overhead:7.1%} ({goal}: < {GOAL:.0%})")

    found = _child("--side", "no-sdk", "--count", str(block), "--rounds", str(blocks))
    print(
        f"\nno SDK installed: CPU us per run (median round), {block} runs a block,"
        f" {blocks} rounds; cost over compiled out: median of the per-round ratios (min-max)"
    )
    print("                     compiled out  no SDK  before    no SDK costs        before cost")
    replay = found.pop("replayed")
    for label, _ in WIDTHS:
        cpu = found[label]
        floor = cpu["compiled out"]

        def cost(
            name: str, cpu: Mapping[str, list[float]] = cpu, floor: list[float] = floor
        ) -> str:
            ratios = [side / base - 1 for side, base in zip(cpu[name], floor, strict=True)]
            return f"{statistics.median(ratios):6.1%} ({min(ratios):.1%} to {max(ratios):.1%})"

        medians = "  ".join(f"{statistics.median(cpu[name]):6,.0f}" for name in NO_SDK_SIDES)
        print(f"  {label:18s} {medians}    {cost('no SDK')}  {cost('before')}")
    floor = statistics.median(found["sequential"]["compiled out"])
    print(
        "\nthe span calls of one run replayed alone, no SDK: us per run (share of the"
        " compiled-out run's CPU)"
    )
    for name in ("before", "no SDK"):
        share = replay[name] / floor
        goal = "met" if share < NO_SDK_GOAL else "MISSED"
        print(f"  {name:18s} {replay[name]:6.1f} us ({share:.1%}; {goal}: < {NO_SDK_GOAL:.0%})")


if __name__ == "__main__":
    main()
