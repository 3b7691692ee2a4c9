"""The stress report's plots: throughput and latency percentiles over time, with the
chaos events the report kept marked, drawn by matplotlib as SVG text to embed inline in
report.html. Past `MAX_CHAOS_MARKS` kept events, an evenly spaced subset of them is
marked, so marks cover the whole run; the page says how many.

matplotlib is optional (the ``stress`` extra): without it `make_plots` returns a typed
`PlotsUnavailable` (and logs it) instead of failing, and the page says what to install.
Figures are built with the object API (`matplotlib.figure.Figure`), never pyplot, so
the process's global backend and figure registry are left alone and threads are safe.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable, Sequence

import msgspec

from adk_actors.stress.records import ChaosEvent, ChaosOutcome, StressReport, TimelinePoint
from supervision.logs import get_logger

try:
    import matplotlib
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
except ImportError:  # the optional `stress` extra is not installed
    matplotlib = None  # type: ignore[assignment]
    Figure = None  # type: ignore[assignment,misc]

_log = get_logger("adk_actors.stress")

PLOTS_UNAVAILABLE = "stress_plots_unavailable"
INSTALL_HINT = "pip install 'adk-actors[stress]' (matplotlib)"
MAX_CHAOS_MARKS = 1000
"""Each plot marks at most this many chaos events (evenly spaced over the kept ones)."""
FULL_HEIGHT_MARKS = 60
"""Up to this many chaos events are drawn as full-height lines; more as short ticks
along the bottom of the plot (one row per action), so the series stay readable."""
MAX_PLOT_POINTS = 20_000
"""A longer timeline is thinned (every n-th point) before it is drawn."""

_ACTION_COLORS = ("#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")
_ACTION_STYLES = ("--", ":", "-.", (0, (5, 1)), (0, (1, 1)), (0, (3, 1, 1, 1)))
_SVG_START = re.compile(r"<svg\b")


class Plots(msgspec.Struct, frozen=True, kw_only=True):
    """The two plots as standalone ``<svg>`` elements; `chaos_marked` events are drawn."""

    throughput_svg: str
    latency_svg: str
    chaos_marked: int


class PlotsUnavailable(msgspec.Struct, frozen=True, kw_only=True):
    """Why there are no plots (a stable `reason`) and what to do about it."""

    reason: str
    message: str


Plotter = Callable[[StressReport], Plots | PlotsUnavailable]
"""What `write_reports` calls to draw: `make_plots` unless a caller passes another."""


def make_plots(
    report: StressReport, *, figure_class: type[Figure] | None = Figure
) -> Plots | PlotsUnavailable:
    """Draw the report's plots with `figure_class` (matplotlib's `Figure`; None when
    matplotlib is missing, which yields `PlotsUnavailable`)."""
    if figure_class is None or matplotlib is None:
        missing = PlotsUnavailable(
            reason=PLOTS_UNAVAILABLE,
            message=f"matplotlib is not installed: no plots; {INSTALL_HINT}",
        )
        _log.warning("stress_plots_unavailable", reason=missing.reason, hint=INSTALL_HINT)
        return missing
    points = _thinned(report)
    times = [point.t_s for point in points]
    marked = marked_events(report)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "adk-stress"}):
        throughput = _figure(
            figure_class,
            "Throughput over time",
            "completed per second",
            [("throughput (runs/s)", times, [p.throughput_per_s for p in points], "#1f77b4")],
            marked,
            "throughput",
        )
        latency = _figure(
            figure_class,
            "Latency percentiles over time",
            "latency (ms)",
            [
                ("p50", times, [_value(p.latency_p50_ms) for p in points], "#2ca02c"),
                ("p95", times, [_value(p.latency_p95_ms) for p in points], "#ff7f0e"),
                ("p99", times, [_value(p.latency_p99_ms) for p in points], "#d62728"),
            ],
            marked,
            "latency",
        )
    return Plots(throughput_svg=throughput, latency_svg=latency, chaos_marked=len(marked))


def _figure(
    figure_class: type[Figure],
    title: str,
    ylabel: str,
    series: Sequence[tuple[str, list[float], list[float], str]],
    chaos: Sequence[ChaosEvent],
    prefix: str,
) -> str:
    figure = figure_class(figsize=(10.0, 3.6), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    for label, xs, ys, color in series:
        (line,) = axes.plot(xs, ys, label=label, color=color, linewidth=1.6, marker=".")
        line.set_gid(f"{prefix}-series-{label.split(' ')[0]}")
    actions: dict[str, int] = {}
    full = len(chaos) <= FULL_HEIGHT_MARKS
    for index, event in enumerate(chaos):
        slot = actions.setdefault(event.action, len(actions))
        mark = axes.axvline(
            event.t_s,
            ymin=0.0 if full else 0.06 * slot,
            ymax=1.0 if full else 0.06 * slot + 0.05,
            color=_ACTION_COLORS[slot % len(_ACTION_COLORS)],
            linestyle=_ACTION_STYLES[slot % len(_ACTION_STYLES)] if full else "-",
            linewidth=1.1,
            alpha=0.3 if event.outcome is ChaosOutcome.SKIPPED else 0.8,
            label=_label(f"chaos: {event.action}"),
        )
        mark.set_gid(f"{prefix}-chaos-{index}")
    _dedupe_legend(axes)
    axes.set_title(title)
    axes.set_xlabel("seconds since start")
    axes.set_ylabel(ylabel)
    axes.set_xlim(left=0.0)
    finite = [y for _, _, ys, _ in series for y in ys if math.isfinite(y)]
    axes.set_ylim(bottom=0.0, top=max([*finite, 1.0]) * 1.15)
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg")
    text = buffer.getvalue()
    start = _SVG_START.search(text)
    return text[start.start() :] if start else text


def marked_events(report: StressReport) -> list[ChaosEvent]:
    """The kept chaos events the plots mark: all of them up to `MAX_CHAOS_MARKS`, else
    that many evenly spaced over them (the first and the last included)."""
    kept = report.chaos
    if len(kept) <= MAX_CHAOS_MARKS:
        return list(kept)
    last = len(kept) - 1
    return [kept[round(index * last / (MAX_CHAOS_MARKS - 1))] for index in range(MAX_CHAOS_MARKS)]


def _dedupe_legend(axes: Axes) -> None:
    """One legend entry per chaos action, however many lines it drew."""
    seen: set[str] = set()
    for line in axes.get_lines():
        label = str(line.get_label())
        if label.startswith("_"):
            continue
        if label in seen:
            line.set_label("_nolegend_")
        seen.add(label)


def _thinned(report: StressReport) -> list[TimelinePoint]:
    timeline = report.timeline
    if len(timeline) <= MAX_PLOT_POINTS:
        return list(timeline)
    step = math.ceil(len(timeline) / MAX_PLOT_POINTS)
    return list(timeline[::step])


def _value(value: float | None) -> float:
    return math.nan if value is None else value


def _label(text: str) -> str:
    """Legend text shown as written: bounded, and no ``$`` read as mathtext."""
    return text[:60].replace("$", r"\$")
