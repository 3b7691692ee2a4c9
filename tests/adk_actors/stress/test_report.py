"""The stress report files: report.json decodes strictly, report.md has the summary and
the invariants table, report.html is one self-contained page with matplotlib's plots
inline (the kept chaos events marked, evenly spaced past the cap) and every user string
escaped; the chaos total and exact counts, not only the kept events; without matplotlib
the page says which extra to install and the other files are unchanged."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from adk_actors.stress import report_plots
from adk_actors.stress.records import (
    REPORT_SCHEMA_VERSION,
    ChaosAction,
    ChaosEvent,
    ChaosOutcome,
    InvariantResult,
    Outcome,
    StressReport,
    TimelinePoint,
    decode_report,
)
from adk_actors.stress.report import PLOTS_FAILED, REPORT_FILES, write_reports
from adk_actors.stress.report_markdown import cell, render_markdown
from adk_actors.stress.report_plots import (
    FULL_HEIGHT_MARKS,
    PLOTS_UNAVAILABLE,
    Plots,
    PlotsUnavailable,
    make_plots,
)
from providers.errors import AdkError

HOSTILE = "<script>alert('x')</script> | pipe & <b>bold</b>"


def make_report(
    *,
    chaos: int = 6,
    failed: bool = False,
    name: str = "unit",
    points: int = 12,
    chaos_total: int | None = None,
    interrupted: bool = False,
) -> StressReport:
    """A report as the engine builds one: a timeline, chaos events, invariants."""
    timeline = [
        TimelinePoint(
            t_s=float(i),
            started=10 * i,
            completed=9 * i,
            errors=i // 5,
            in_flight=2,
            throughput_per_s=9.0 + (i % 3),
            latency_p50_ms=None if i == 0 else 4.0 + i % 2,
            latency_p95_ms=None if i == 0 else 8.0 + i % 3,
            latency_p99_ms=None if i == 0 else 12.0 + i % 4,
        )
        for i in range(points)
    ]
    events = [
        ChaosEvent(
            t_s=1.5 + i,
            action=(ChaosAction.KILL_RUN_WORKERS, ChaosAction.KILL_AGENTS)[i % 2],
            target=f"run-{i} {HOSTILE}",
            outcome=ChaosOutcome.KILLED if i % 3 else ChaosOutcome.SKIPPED,
            reason="" if i % 3 else "nothing running",
        )
        for i in range(chaos)
    ]
    chaos_counts: dict[str, dict[str, int]] = {}
    for event in events:
        by_outcome = chaos_counts.setdefault(event.action.value, {})
        by_outcome[event.outcome.value] = by_outcome.get(event.outcome.value, 0) + 1
    details = [
        InvariantResult(name="one_terminal_per_run", held=True, detail="108 runs, 108 terminals"),
        InvariantResult(name="no_leaked_permits", held=not failed, detail=f"leaked 0 {HOSTILE}"),
    ]
    counts = {outcome.value: 0 for outcome in Outcome}
    counts["completed"] = 100
    counts["failed"] = 8
    return StressReport(
        schema_version=REPORT_SCHEMA_VERSION,
        scenario={"name": name, "kind": "mixed", "target": "inprocess", "duration_s": 12.0},
        started_at="2026-12-01T08:00:00Z",
        duration_s=12.0,
        counts=counts,
        latency_ms={"p50": 4.5, "p90": 8.0, "p95": 9.0, "p99": 14.0, "max": 20.0, "mean": 5.0},
        throughput_per_s=9.0,
        restarts=4,
        timeline=timeline,
        chaos=events,
        invariants={item.name: item.held for item in details},
        invariant_details=details,
        environment={"python": "3.11", "cpu_count": 2},
        passed=not failed,
        interrupted=interrupted,
        chaos_total=len(events) if chaos_total is None else chaos_total,
        chaos_counts=chaos_counts,
    )


def test_write_reports_writes_three_well_formed_files(tmp_path: Path) -> None:
    """report.json decodes back to the same report, report.md carries the verdict, the
    counts, the latency and the invariants table, report.html has both plots inline."""
    report = make_report(name=f"mixed {HOSTILE}")
    paths = write_reports(report, tmp_path / "out")

    assert set(paths) == {"json", "markdown", "html"}
    assert {kind: path.name for kind, path in paths.items()} == REPORT_FILES
    assert decode_report(json.loads(paths["json"].read_text())) == report

    markdown = paths["markdown"].read_text()
    assert "**PASSED**: all 2 invariants held." in markdown
    assert "| invariant | held | detail |" in markdown
    assert "| one_terminal_per_run | yes | 108 runs, 108 terminals |" in markdown
    assert "| completed | 100 |" in markdown
    assert "| 4.50 | 8.00 | 9.00 | 14.00 | 20.00 | 5.00 |" in markdown
    assert "| kill_agents | killed | 2 |" in markdown
    assert "<script>" not in markdown and "&lt;script&gt;" in markdown

    page = paths["html"].read_text()
    assert page.count("<svg") == 2
    assert 'data-testid="plot-throughput"' in page and 'data-testid="plot-latency"' in page
    for series in ("p50", "p95", "p99"):
        assert f'id="latency-series-{series}"' in page
    assert 'id="throughput-series-throughput"' in page


def test_html_marks_every_chaos_event_in_both_plots(tmp_path: Path) -> None:
    report = make_report(chaos=7)
    page = write_reports(report, tmp_path)["html"].read_text()
    for plot in ("throughput", "latency"):
        marks = re.findall(rf'id="{plot}-chaos-(\d+)"', page)
        assert sorted(int(mark) for mark in marks) == list(range(7))
    assert page.count('data-testid="chaos-event"') == 7
    # The legend names each action once, whatever the number of marks.
    assert page.count("chaos: kill_agents") == 2  # once per plot


def test_the_report_counts_every_chaos_event_not_only_those_kept(tmp_path: Path) -> None:
    """Past the engine's cap the report keeps a sample of the events: the summary, the
    per-action table and the page give the total and the exact counts, and say the
    listed events are a sample (before: `len(report.chaos)`, silently short)."""
    kept = make_report(chaos=6)
    report = StressReport(
        **{
            **{field: getattr(kept, field) for field in kept.__struct_fields__},
            "chaos_total": 50_000,
            "chaos_counts": {
                "kill_agents": {"killed": 30_000},
                "kill_run_workers": {"killed": 20_000},
            },
        }
    )
    paths = write_reports(report, tmp_path)
    markdown = paths["markdown"].read_text()
    assert "| chaos events | 50000 |" in markdown
    assert "| kill_agents | killed | 30000 |" in markdown
    assert "6 of the 50000 events, a uniform sample kept by the engine:" in markdown
    page = paths["html"].read_text()
    assert "6 of the 50000 events, a uniform sample kept by the engine:" in page
    assert "The plots mark 6 of the 50000 chaos events" in page
    assert decode_report(json.loads(paths["json"].read_text())).chaos_total == 50_000


def test_a_skipped_event_shows_why_and_an_interrupted_run_says_so(tmp_path: Path) -> None:
    markdown = write_reports(make_report(interrupted=True), tmp_path)["markdown"].read_text()
    assert "| skipped: nothing running |" in markdown
    assert "| interrupted | yes: stopped early, the report covers what ran |" in markdown


def test_past_the_mark_cap_the_marks_span_the_whole_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: only the first events were marked, so the end of a long run had none."""
    monkeypatch.setattr(report_plots, "MAX_CHAOS_MARKS", 10)
    report = make_report(chaos=50, points=60)
    marked = report_plots.marked_events(report)
    assert len(marked) == 10
    assert marked[0] == report.chaos[0] and marked[-1] == report.chaos[-1]
    plots = make_plots(report)
    assert isinstance(plots, Plots) and plots.chaos_marked == 10


def test_many_chaos_events_are_still_each_marked(tmp_path: Path) -> None:
    """Past `FULL_HEIGHT_MARKS` the marks become short ticks, one per event still."""
    count = FULL_HEIGHT_MARKS + 20
    plots = make_plots(make_report(chaos=count, points=count + 4))
    assert isinstance(plots, Plots) and plots.chaos_marked == count
    marks = re.findall(r'id="latency-chaos-(\d+)"', plots.latency_svg)
    assert sorted(int(mark) for mark in marks) == list(range(count))


def test_html_is_self_contained_and_escapes_user_text(tmp_path: Path) -> None:
    """No script, no external resource, a CSP that forbids loading anything; every
    scenario and report string shows as text."""
    report = make_report(name=f"name {HOSTILE}", failed=True)
    page = write_reports(report, tmp_path)["html"].read_text()

    assert "<script" not in page.lower()
    assert "<link" not in page.lower()
    assert not re.search(r'\s(src|href)="https?:', page)
    assert "default-src 'none'" in page
    assert "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; | pipe &amp; &lt;b&gt;bold" in page
    assert '<span class="verdict failed" data-testid="verdict">FAILED</span>' in page
    assert page.count('data-testid="invariant" data-held="false"') == 1


def test_failed_invariant_in_markdown(tmp_path: Path) -> None:
    markdown = render_markdown(make_report(failed=True))
    assert "**FAILED**: 1 of 2 invariants failed (no_leaked_permits)." in markdown
    row = next(line for line in markdown.splitlines() if line.startswith("| no_leaked_permits"))
    assert row.startswith("| no_leaked_permits | **NO** | leaked 0 &lt;script&gt;")
    # The pipe in the detail is escaped: the row still has exactly three cells.
    assert len(re.split(r"(?<!\\)\|", row)) == 5


def test_markdown_cell_is_one_line_without_table_or_html_syntax() -> None:
    assert cell("a|b\nc <i>d</i> `e`") == "a\\|b c &lt;i&gt;d&lt;/i&gt; \\`e\\`"
    assert len(cell("x" * 10_000)) == 500


def test_without_matplotlib_the_page_says_which_extra_to_install(tmp_path: Path) -> None:
    """The plotting backend is missing (`figure_class=None`): a typed condition, not a
    crash; JSON and Markdown are the same as with plots."""
    report = make_report()
    no_backend = functools.partial(make_plots, figure_class=None)
    with capture_logs() as logged:
        missing = no_backend(report)
    assert isinstance(missing, PlotsUnavailable)
    assert missing.reason == PLOTS_UNAVAILABLE
    assert [entry["event"] for entry in logged] == ["stress_plots_unavailable"]
    assert logged[0]["log_level"] == "warning"

    paths = write_reports(report, tmp_path / "plain", plotter=no_backend)
    with_plots = write_reports(report, tmp_path / "plots")
    page = paths["html"].read_text()
    assert "<svg" not in page
    assert 'data-testid="plots-unavailable"' in page
    assert "adk-actors[stress]" in page
    assert 'data-testid="invariants"' in page and 'data-testid="counts"' in page
    assert paths["json"].read_text() == with_plots["json"].read_text()
    assert paths["markdown"].read_text() == with_plots["markdown"].read_text()


def test_a_plot_that_fails_to_draw_costs_only_the_plots(tmp_path: Path) -> None:
    def broken(report: StressReport) -> Plots:
        raise ValueError("no such scale")

    paths = write_reports(make_report(), tmp_path, plotter=broken)
    page = paths["html"].read_text()
    assert f'data-reason="{PLOTS_FAILED}"' in page and "<svg" not in page
    assert "ValueError" in page
    assert decode_report(json.loads(paths["json"].read_text())) == make_report()


def test_a_report_without_chaos_or_samples_still_renders(tmp_path: Path) -> None:
    report = make_report(chaos=0, points=0)
    plots = make_plots(report)
    assert isinstance(plots, Plots) and plots.chaos_marked == 0
    paths = write_reports(report, tmp_path)
    assert "No chaos events." in paths["markdown"].read_text()
    page = paths["html"].read_text()
    assert 'data-testid="no-chaos"' in page and page.count("<svg") == 2


def test_an_unwritable_directory_is_a_typed_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(AdkError) as caught:
        write_reports(make_report(), blocker / "reports")
    assert caught.value.reason == "stress_report_write_failed"
    assert list(tmp_path.iterdir()) == [blocker]


def test_rewriting_replaces_the_files_and_leaves_no_temporaries(tmp_path: Path) -> None:
    write_reports(make_report(failed=True), tmp_path)
    paths = write_reports(make_report(), tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(REPORT_FILES.values())
    assert decode_report(json.loads(paths["json"].read_text())).passed is True
