"""report.md: a stress report for people and pull requests (pass/fail, counts, latency
percentiles, throughput, the invariants with their details, the chaos events).

Every string that came from the scenario or the run is escaped for a Markdown table
cell (pipes, backslashes, line breaks, HTML), so user text stays text.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from adk_actors.stress.records import ChaosEvent, StressReport

MAX_CELL_CHARS = 500
MAX_CHAOS_ROWS = 100
"""report.md lists this many of the kept chaos events (the first ones) after the exact
per-action summary."""
LATENCY_KEYS = ("p50", "p90", "p95", "p99", "max", "mean")


def render_markdown(report: StressReport) -> str:
    """The whole report.md text."""
    lines = [f"# Stress report: {cell(scenario_name(report))}", ""]
    failed = [item for item in report.invariant_details if not item.held]
    if report.passed:
        lines.append(f"**PASSED**: all {len(report.invariant_details)} invariants held.")
    else:
        lines.append(
            f"**FAILED**: {len(failed)} of {len(report.invariant_details)} invariants failed "
            f"({', '.join(cell(item.name) for item in failed) or 'see below'})."
        )
    lines += ["", "| | |", "| --- | --- |"]
    lines += [f"| {cell(key)} | {cell(value)} |" for key, value in summary_rows(report)]
    lines += ["", "## Counts", "", "| outcome | runs |", "| --- | ---: |"]
    lines += [f"| {cell(name)} | {count} |" for name, count in report.counts.items()]
    lines += ["", "## Latency (ms)", ""]
    lines.append("| " + " | ".join(LATENCY_KEYS) + " |")
    lines.append("|" + " ---: |" * len(LATENCY_KEYS))
    lines.append("| " + " | ".join(number(report.latency_ms.get(k)) for k in LATENCY_KEYS) + " |")
    lines += ["", "## Invariants", "", "| invariant | held | detail |", "| --- | --- | --- |"]
    for item in report.invariant_details:
        held = "yes" if item.held else "**NO**"
        lines.append(f"| {cell(item.name)} | {held} | {cell(item.detail)} |")
    lines += ["", "## Chaos events", ""]
    if not chaos_total(report):
        lines.append("No chaos events.")
    else:
        lines += ["| action | outcome | events |", "| --- | --- | ---: |"]
        for (action, outcome), count in chaos_summary(report):
            lines.append(f"| {cell(action)} | {cell(outcome)} | {count} |")
        shown = report.chaos[:MAX_CHAOS_ROWS]
        lines += ["", chaos_kept_note(report)]
        lines += ["", "| t (s) | action | target | outcome |", "| ---: | --- | --- | --- |"]
        for event in shown:
            lines.append(
                f"| {event.t_s:.2f} | {cell(event.action)} | {cell(event.target)} "
                f"| {cell(outcome_text(event))} |"
            )
        if len(report.chaos) > len(shown):
            lines += ["", f"({len(report.chaos) - len(shown)} more kept in report.json)"]
    lines.append("")
    return "\n".join(lines)


def scenario_name(report: StressReport) -> str:
    """The scenario's name, else its kind, else ``"stress"``."""
    for key in ("name", "kind"):
        value = report.scenario.get(key)
        if isinstance(value, str) and value:
            return value
    return "stress"


def summary_rows(report: StressReport) -> list[tuple[str, str]]:
    """The headline figures, as (label, text) rows shared by report.md and report.html."""
    scenario = report.scenario
    rows = [
        ("result", "passed" if report.passed else "failed"),
        ("kind", text_of(scenario.get("kind"))),
        ("target", text_of(scenario.get("target"))),
        ("started at", report.started_at),
        ("duration", f"{report.duration_s:.2f} s"),
        ("runs", str(sum(report.counts.values()))),
        ("throughput", f"{report.throughput_per_s:.2f} runs/s"),
        ("restarts", str(report.restarts)),
        ("chaos events", str(chaos_total(report))),
    ]
    if report.interrupted:
        rows.insert(1, ("interrupted", "yes: stopped early, the report covers what ran"))
    return rows


def chaos_total(report: StressReport) -> int:
    """Every chaos event of the run (a report without `chaos_total`: those it kept)."""
    return max(report.chaos_total, len(report.chaos))


def chaos_summary(report: StressReport) -> list[tuple[tuple[str, str], int]]:
    """Every chaos event counted by (action, outcome): exact from `chaos_counts`, else
    from the events kept."""
    if report.chaos_counts:
        return sorted(
            ((action, outcome), count)
            for action, outcomes in report.chaos_counts.items()
            for outcome, count in outcomes.items()
        )
    counted = Counter((str(event.action), str(event.outcome)) for event in report.chaos)
    return sorted(counted.items())


def chaos_kept_note(report: StressReport) -> str:
    """Which events the report lists: all of them, or a uniform sample."""
    total, kept = chaos_total(report), len(report.chaos)
    if kept >= total:
        return f"All {total} events:"
    return f"{kept} of the {total} events, a uniform sample kept by the engine:"


def outcome_text(event: ChaosEvent) -> str:
    """An event's outcome with why it was skipped (``skipped: why``)."""
    return f"{event.outcome}: {event.reason}" if event.reason else str(event.outcome)


def text_of(value: Any) -> str:
    """A scenario value as one line: strings as they are, anything else as JSON."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def number(value: float | None) -> str:
    """A measurement for a table: ``-`` when there is none."""
    return "-" if value is None else f"{value:.2f}"


def cell(value: str) -> str:
    """`value` safe in a Markdown table cell: one line, no table or HTML syntax."""
    text = " ".join(str(value).split())[:MAX_CELL_CHARS]
    for raw, escaped in (
        ("\\", "\\\\"),
        ("&", "&amp;"),
        ("<", "&lt;"),
        (">", "&gt;"),
        ("|", "\\|"),
        ("`", "\\`"),
        ("*", "\\*"),
        ("[", "\\["),
        ("]", "\\]"),
    ):
        text = text.replace(raw, escaped)
    return text
