"""report.html: one self-contained page (no network: inline CSS and inline SVG plots, a
Content-Security-Policy that allows nothing else) with the summary, the plots, and the
counts, latency, invariants and chaos tables.

Every string from the scenario or the run is HTML-escaped; the plots are matplotlib's
own SVG (it escapes its text). Elements carry ``data-testid`` names for tests.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape

from adk_actors.stress.records import StressReport
from adk_actors.stress.report_markdown import (
    LATENCY_KEYS,
    chaos_kept_note,
    chaos_summary,
    chaos_total,
    number,
    outcome_text,
    scenario_name,
    summary_rows,
)
from adk_actors.stress.report_plots import Plots, PlotsUnavailable

MAX_CHAOS_ROWS = 1000
"""report.html lists this many of the kept chaos events (the first ones); report.json
has every kept one, and `chaos_counts` counts them all."""
MAX_SCENARIO_CHARS = 64 * 1024

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1000px;
       color: #1d1d1f; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f5f5f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.verdict { display: inline-block; padding: 3px 12px; border-radius: 4px; font-weight: 600;
           color: #fff; }
.verdict.passed { background: #1a7f37; } .verdict.failed { background: #cf222e; }
tr.broken td { background: #ffebe9; }
.plot svg { max-width: 100%; height: auto; }
.notice { background: #fff8c5; border: 1px solid #d4a72c; padding: 8px 12px; }
pre { background: #f5f5f7; padding: 8px; overflow-x: auto; font-size: 12px; }
"""


def render_html(report: StressReport, plots: Plots | PlotsUnavailable) -> str:
    """The whole report.html text."""
    name = escape(scenario_name(report))
    verdict = "passed" if report.passed else "failed"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Stress report: {name}</title>",
        f"<style>{_STYLE}</style></head>",
        f'<body data-passed="{str(report.passed).lower()}">',
        f'<h1 data-testid="title">Stress report: {name}</h1>',
        f'<p><span class="verdict {verdict}" data-testid="verdict">{verdict.upper()}</span></p>',
        _table("summary", ("", ""), summary_rows(report), numeric=()),
        "<h2>Throughput and latency over time</h2>",
        _plots(report, plots),
        "<h2>Counts</h2>",
        _table(
            "counts",
            ("outcome", "runs"),
            [(outcome, str(count)) for outcome, count in report.counts.items()],
            numeric=(1,),
        ),
        "<h2>Latency (ms)</h2>",
        _table(
            "latency",
            LATENCY_KEYS,
            [tuple(number(report.latency_ms.get(key)) for key in LATENCY_KEYS)],
            numeric=tuple(range(len(LATENCY_KEYS))),
        ),
        "<h2>Invariants</h2>",
        _invariants(report),
        "<h2>Chaos events</h2>",
        _chaos(report),
        "<h2>Environment</h2>",
        _table(
            "environment",
            ("key", "value"),
            [(str(key), _text(value)) for key, value in report.environment.items()],
            numeric=(),
        ),
        "<h2>Scenario</h2>",
        f'<pre data-testid="scenario">{escape(_scenario_json(report))}</pre>',
        "</body></html>",
        "",
    ]
    return "\n".join(parts)


def _plots(report: StressReport, plots: Plots | PlotsUnavailable) -> str:
    if isinstance(plots, PlotsUnavailable):
        return (
            f'<p class="notice" data-testid="plots-unavailable" data-reason="{escape(plots.reason)}">'
            f"{escape(plots.message)}</p>"
        )
    note = ""
    total = chaos_total(report)
    if plots.chaos_marked < total:
        note = (
            f'<p data-testid="chaos-marked">The plots mark {plots.chaos_marked} of the '
            f"{total} chaos events (evenly spaced over the {len(report.chaos)} the report "
            "kept).</p>"
        )
    return (
        f"{note}"
        f'<div class="plot" data-testid="plot-throughput">{plots.throughput_svg}</div>\n'
        f'<div class="plot" data-testid="plot-latency">{plots.latency_svg}</div>'
    )


def _invariants(report: StressReport) -> str:
    rows = [
        '<table data-testid="invariants"><thead><tr><th>invariant</th><th>held</th>'
        "<th>detail</th></tr></thead><tbody>"
    ]
    for item in report.invariant_details:
        held = "yes" if item.held else "NO"
        broken = "" if item.held else ' class="broken"'
        rows.append(
            f'<tr{broken} data-testid="invariant" data-held="{str(item.held).lower()}">'
            f"<td>{escape(item.name)}</td><td>{held}</td><td>{escape(item.detail)}</td></tr>"
        )
    rows.append("</tbody></table>")
    return "".join(rows)


def _chaos(report: StressReport) -> str:
    if not chaos_total(report):
        return '<p data-testid="no-chaos">No chaos events.</p>'
    summary = _table(
        "chaos-summary",
        ("action", "outcome", "events"),
        [(action, outcome, str(count)) for (action, outcome), count in chaos_summary(report)],
        numeric=(2,),
    )
    rows = [
        f'<p data-testid="chaos-kept">{escape(chaos_kept_note(report))}</p>',
        '<table data-testid="chaos"><thead><tr><th>t (s)</th><th>action</th><th>target</th>'
        "<th>outcome</th></tr></thead><tbody>",
    ]
    for event in report.chaos[:MAX_CHAOS_ROWS]:
        rows.append(
            f'<tr data-testid="chaos-event"><td class="num">{event.t_s:.2f}</td>'
            f"<td>{escape(event.action)}</td><td>{escape(event.target)}</td>"
            f"<td>{escape(outcome_text(event))}</td></tr>"
        )
    rows.append("</tbody></table>")
    more = len(report.chaos) - MAX_CHAOS_ROWS
    tail = f"<p>({more} more kept in report.json)</p>" if more > 0 else ""
    return summary + "".join(rows) + tail


def _table(
    testid: str,
    header: tuple[str, ...],
    rows: Sequence[tuple[str, ...]],
    *,
    numeric: tuple[int, ...],
) -> str:
    out = [f'<table data-testid="{testid}">']
    if any(header):
        out.append(
            "<thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr></thead>"
        )
    out.append("<tbody>")
    for row in rows:
        cells = "".join(
            f'<td class="num">{escape(value)}</td>'
            if index in numeric
            else f"<td>{escape(value)}</td>"
            for index, value in enumerate(row)
        )
        out.append(f"<tr>{cells}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _scenario_json(report: StressReport) -> str:
    text = json.dumps(report.scenario, indent=2, ensure_ascii=False, default=str)
    if len(text) > MAX_SCENARIO_CHARS:
        return text[:MAX_SCENARIO_CHARS] + "\n... (truncated; see report.json)"
    return text
