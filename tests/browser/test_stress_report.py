"""A stress report page (report.html from `write_reports`) in Debian's chromium: the
two matplotlib plots render inline with a mark for each chaos event, the tables show
the counts and invariants, user text stays text, and the page loads nothing else."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser, Request, expect

from adk_actors.stress.records import (
    ChaosEvent,
    InvariantResult,
    Outcome,
    StressReport,
    TimelinePoint,
)
from adk_actors.stress.report import write_reports
from tests.browser.conftest import save_screenshot

NAME = "browser <img src=x onerror=window.__pwned=1>"


def _report() -> StressReport:
    timeline = [
        TimelinePoint(
            t_s=float(i),
            started=20 * i,
            completed=19 * i,
            errors=i // 4,
            in_flight=3,
            throughput_per_s=18.0 + (i % 4),
            latency_p50_ms=5.0 + (i % 2),
            latency_p95_ms=9.0 + (i % 3),
            latency_p99_ms=14.0 + (i % 5),
        )
        for i in range(1, 16)
    ]
    chaos = [
        ChaosEvent(
            t_s=2.0 + 2.5 * i,
            action=("kill_run_workers", "kill_agents", "kill_invocation_servers")[i % 3],
            target=f"<b>target-{i}</b>",
            outcome="killed",
        )
        for i in range(5)
    ]
    details = [
        InvariantResult(name="every_run_one_terminal", held=True, detail="started 300, ended 300"),
        InvariantResult(name="no_leaked_permits", held=False, detail="admission active <1>"),
    ]
    counts = {outcome.value: 0 for outcome in Outcome}
    counts.update(completed=285, failed=15)
    return StressReport(
        schema_version=1,
        scenario={"name": NAME, "kind": "mixed", "target": "inprocess"},
        started_at="2026-12-01T08:00:00Z",
        duration_s=15.0,
        counts=counts,
        latency_ms={"p50": 5.5, "p90": 9.0, "p95": 10.0, "p99": 16.0, "max": 22.0, "mean": 6.0},
        throughput_per_s=19.0,
        restarts=5,
        timeline=timeline,
        chaos=chaos,
        invariants={item.name: item.held for item in details},
        invariant_details=details,
        environment={"python": "3.11"},
        passed=False,
    )


def test_report_page_shows_plots_marks_and_tables(browser: Browser, tmp_path: Path) -> None:
    page_path = write_reports(_report(), tmp_path)["html"]
    context = browser.new_context()
    page = context.new_page()
    requests: list[Request] = []
    errors: list[str] = []
    page.on("request", lambda request: requests.append(request))
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto(page_path.as_uri())

        expect(page.get_by_test_id("title")).to_have_text(f"Stress report: {NAME}")
        expect(page.get_by_test_id("verdict")).to_have_text("FAILED")
        for plot in ("throughput", "latency"):
            svg = page.locator(f"[data-testid=plot-{plot}] svg")
            expect(svg).to_be_visible()
            box = svg.bounding_box()
            assert box is not None and box["width"] > 400 and box["height"] > 150, box
            marks = page.locator(f"[data-testid=plot-{plot}] g[id^='{plot}-chaos-']")
            expect(marks).to_have_count(5)
            expect(marks.first.locator("path")).to_have_count(1)
        for series in ("p50", "p95", "p99"):
            # One marker per timeline point drawn on each percentile's line.
            expect(page.locator(f"g#latency-series-{series} use")).to_have_count(15)
        expect(page.locator("[data-testid=plot-latency] svg")).to_contain_text("p99")
        expect(page.locator("[data-testid=plot-latency] svg")).to_contain_text(
            "chaos: kill_invocation_servers"
        )

        counts = page.get_by_test_id("counts").locator("tbody tr")
        expect(counts.first).to_have_text("completed285")
        invariants = page.get_by_test_id("invariant")
        expect(invariants).to_have_count(2)
        expect(page.locator("[data-testid=invariant][data-held=false]")).to_have_text(
            "no_leaked_permitsNOadmission active <1>"
        )
        expect(page.get_by_test_id("chaos-event")).to_have_count(5)
        expect(page.get_by_test_id("chaos-event").first).to_contain_text("<b>target-0</b>")

        # User text is text: no element was made from it, no handler ran.
        assert page.locator("img, b").count() == 0
        assert page.evaluate("window.__pwned") is None
        assert errors == []
        assert [request.url for request in requests] == [page_path.as_uri()]
        save_screenshot(page, "stress-report.png")
    finally:
        context.close()
