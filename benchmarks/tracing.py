"""Tracing overhead on the Runner workload: spans on against spans off, and what spans
cost when no SDK is installed.

The workload of `runner.py` (an agent with one tool, an offline model that asks for the
tool once and then answers, a fresh in-memory session per run), sequential and
16-way concurrent. Every run is one trace: each runs inside a "request" span, as under
an instrumented web server.

Spans on against off: "off" is no SDK installed (the OpenTelemetry API's no-op tracer,
what a library user without an SDK gets); "on" is the SDK's `TracerProvider` with a
`BatchSpanProcessor` in front of an exporter that drops every batch, so the cost
measured is the spans (creation, attributes, context carried across the kernel's
threads, processing) and not an exporter's I/O. A third side, "request only", records
the application's request span with the same SDK but installs no global provider, so
the runtime makes no span: on / off is what turning tracing on costs this workload,
on / request only what the runtime's own spans cost. The sides run in one process and
take turns round by round, the first side rotating (`interleaved`): the global
provider is swapped between blocks of runs (the API's module global is set directly,
and the proxy tracers it handed out forget what they had resolved), so each block
starts as a process would with or without an SDK, and a drift of the machine's load
reaches every side. Per round: wall and CPU (all threads) microseconds per run; the
headline is the median of the per-round ratios, with their min-max. Goal: overhead
under 15%.

The runtime runs with the collector thresholds `adk.start()` sets (`adk_actors.collector`:
young generation 10,000); with Python's (700), most of what the spans cost is
collections: the SDK's batch processor holds each span until its batch is exported, so
Python's frequent young collections promote the spans into the old generations, which
every full collection traverses with the whole heap. ``--python-gc`` measures that.

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

Usage: ``python benchmarks/tracing.py [--quick] [--on-off-only] [--python-gc] [--count N] [--rounds N]``
"""

from __future__ import annotations

import argparse
import gc
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

import adk_actors as adk

GOAL = 0.15
NO_SDK_GOAL = 0.01
WIDTHS = (("sequential", 1), ("16-way concurrent", 16))
ON_OFF_SIDES = ("off", "request only", "on")
NO_SDK_SIDES = ("compiled out", "no SDK", "before")


def get_weather(city: str) -> dict:
    """Get the weather for a city."""
    return {"city": city, "forecast": "sunny"}


def model(history: Any, tools: Any) -> dict[str, Any]:
    if history[-1].role == "tool":
        return {"text": "sunny"}
    return {"tool_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]}


class _Sdk:
    """The SDK configured as an application would (a `TracerProvider`, a
    `BatchSpanProcessor`, an exporter that drops every batch and counts its spans),
    installed as the global provider while `on` and removed while off."""

    def __init__(self) -> None:
        from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )

        sdk = self

        class Drop(SpanExporter):
            def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
                sdk.exported += len(spans)
                return SpanExportResult.SUCCESS

        self.exported = 0
        self.provider = TracerProvider()
        self.provider.add_span_processor(BatchSpanProcessor(Drop()))

    def use(self, on: bool) -> None:
        """Install the SDK (`on`) or no provider at all, as a process starts: the
        API's global is set directly (`set_tracer_provider` works once per process),
        and every proxy tracer handed out so far forgets what it had resolved."""
        from opentelemetry import trace

        self.provider.force_flush()
        trace._TRACER_PROVIDER = self.provider if on else None  # type: ignore[attr-defined]
        for found in gc.get_objects():
            if type(found) is trace.ProxyTracer:
                found._real_tracer = None  # type: ignore[attr-defined]


class _Workload:
    """The agent, its runner and the timed loop, in this process."""

    def __init__(self, python_gc: bool = False) -> None:
        from opentelemetry import trace

        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
        self.tracer: Any = trace.get_tracer("benchmark")  # the application's
        if python_gc:  # Python's collector thresholds, not the runtime's
            adk.start(gc_young_threshold=None)
        else:
            adk.start()
        self.gc_thresholds = gc.get_threshold()
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


def on_off(
    count: int, rounds: int, python_gc: bool = False
) -> tuple[list[Compared], float, tuple[int, int, int]]:
    """Spans on against off, in this process: per width, a wall and a CPU row for the
    whole cost (on / off) and for the runtime's spans alone (on / request only), the
    spans exported per run on the "on" side, and the collector's thresholds (the
    runtime's, or Python's with `python_gc`)."""
    sdk = _Sdk()
    sdk.use(False)
    workload = _Workload(python_gc)
    proxy, app = workload.tracer, sdk.provider.get_tracer("benchmark")
    rows: list[Compared] = []
    exported = runs_on = 0
    for label, width in WIDTHS:
        others: list[float | None] = []
        cpu: dict[str, list[float]] = {side: [] for side in ON_OFF_SIDES}

        def block(side: str, width: int = width, cpu: dict[str, list[float]] = cpu) -> float:
            nonlocal exported, runs_on
            sdk.use(side == "on")
            workload.tracer = proxy if side == "off" else app
            before = sdk.exported
            rate, cpu_us = workload.timed(count, width)
            sdk.provider.force_flush()
            cpu[side].append(cpu_us)
            if side == "on":
                exported, runs_on = exported + sdk.exported - before, runs_on + count
            return 1e6 / rate

        wall = interleaved(
            {side: lambda side=side: block(side) for side in ON_OFF_SIDES}, rounds, others
        )
        for unit, found in (("wall us/run", wall), ("CPU us/run", cpu)):
            for name, peer in (("", "off"), (", runtime's spans", "request only")):
                rows.append(
                    Compared(
                        name=f"{label}{name}, {unit.split()[0]}",
                        unit=unit,
                        ours_runs=found["on"],
                        peer_runs=found[peer],
                        goal=f"< {1 + GOAL:.2f}x",
                        others=others,
                        detail=f"on {fmt_list(found['on'])} vs {peer} {fmt_list(found[peer])}",
                    )
                )
    sdk.use(False)
    workload.stop()
    return rows, exported / runs_on, workload.gc_thresholds


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
    from adk_actors.observability.tracing import OpenSpan
    from adk_actors.runner import server

    off = _Off()
    model_call = {semconv.PROVIDER_NAME: "scripted"}
    spans = [(module, "runtime_span") for module in (turn, tool_round)]
    for module, name in spans:
        assert hasattr(module, name), f"{module.__name__} has no {name}"
    # the invocation server's own invoke_agent span, where it opens one
    opened = [(server, "start_span")] if hasattr(server, "start_span") else []

    def constant(value: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: value

    return {
        "compiled out": {
            **{place: constant(off) for place in spans},
            **{place: constant(OpenSpan(None)) for place in opened},
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
    calls', one tool call's, with their names and attributes), as the
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
                with span_(tracer, name, attributes=attributes):
                    pass  # the offline model reports no usage: nothing set at the end
            with span_(
                tracer,
                semconv.span_name(semconv.EXECUTE_TOOL, "get_weather"),
                attributes=semconv.tool_call("TracingBench", "get_weather", "call-1"),
            ) as span:
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
    parser.add_argument("--side", choices=("no-sdk",))
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--on-off-only", action="store_true", help="skip the no-SDK part")
    parser.add_argument(
        "--python-gc",
        action="store_true",
        help="keep Python's collector thresholds (adk.start(gc_young_threshold=None))",
    )
    options = parser.parse_args()
    if options.side == "no-sdk":
        print(json.dumps(no_sdk(options.count, options.rounds) | {"replayed": replayed(5)}))
        return
    count, rounds = (128, 4) if options.quick else (256, 12)
    count, rounds = options.count or count, options.rounds or rounds
    block, blocks = (64, 10) if options.quick else (128, 30)
    print_facts(
        "# tracing benchmark" + (" (quick)" if options.quick else ""),
        "opentelemetry-api",
        "opentelemetry-sdk",
    )
    meter = OtherCpu()
    rows, spans_per_run, thresholds = on_off(count, rounds, options.python_gc)
    print(
        f"spans on against off: {count:,} runs a block, {rounds} rounds, sides interleaved;"
        f' {spans_per_run:.2f} spans exported per run on the "on" side (the request span'
        f" included); collector thresholds {thresholds}"
        + (" (Python's: --python-gc)" if options.python_gc else " (the runtime's)")
    )
    print_table(
        rows,
        ours="spans on",
        peer="spans off",
        met=lambda row: row.ratio is not None and row.ratio < 1 + GOAL,
    )
    print(f"other processes used {fmt_share(meter.share())} of the CPUs; load {load_average()}")
    if options.on_off_only:
        return

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
