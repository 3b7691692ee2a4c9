"""Write a stress report's three files: report.json (`encode_report`, decodes with
`decode_report`), report.md (`report_markdown`) and report.html (`report_html`, with
the matplotlib plots of `report_plots` inline).

Without matplotlib the JSON and Markdown are unchanged and the page says, in place of
the plots, which extra to install (`PlotsUnavailable`, also logged); a plot that
fails to draw is reported the same way (``stress_plots_failed``). Each file is
written to a temporary name and renamed, so a reader never sees half a report; a
directory that cannot be written fails as ``stress_report_write_failed``.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from adk_actors.stress.records import StressReport, encode_report
from adk_actors.stress.report_html import render_html
from adk_actors.stress.report_markdown import render_markdown
from adk_actors.stress.report_plots import Plots, PlotsUnavailable, Plotter, make_plots
from providers.errors import AdkError
from supervision.logs import get_logger

_log = get_logger("adk_actors.stress")

PLOTS_FAILED = "stress_plots_failed"
REPORT_FILES = {"json": "report.json", "markdown": "report.md", "html": "report.html"}

__all__ = [
    "PLOTS_FAILED",
    "REPORT_FILES",
    "Plots",
    "PlotsUnavailable",
    "Plotter",
    "check_report_dir",
    "make_plots",
    "render_html",
    "render_markdown",
    "write_reports",
]


def write_reports(
    report: StressReport, directory: Path | str, *, plotter: Plotter = make_plots
) -> dict[str, Path]:
    """Write report.json, report.md and report.html into `directory` (created if
    missing); returns their paths by format. `plotter` draws the plots (tests pass
    one that has no matplotlib)."""
    target = Path(directory)
    document = json.dumps(encode_report(report), indent=2, ensure_ascii=False) + "\n"
    plots = _draw(plotter, report)
    texts = {
        "json": document,
        "markdown": render_markdown(report),
        "html": render_html(report, plots),
    }
    try:
        target.mkdir(parents=True, exist_ok=True)
        paths = {kind: _write(target / REPORT_FILES[kind], text) for kind, text in texts.items()}
    except OSError as error:
        raise AdkError(
            "stress_report_write_failed",
            f"cannot write the stress report into {target}: {error.strerror or error}",
        ) from None
    _log.info(
        "stress_report_written",
        directory=str(target),
        passed=report.passed,
        plots=isinstance(plots, Plots),
    )
    return paths


def check_report_dir(directory: Path | str) -> None:
    """Create `directory` if missing and see that a file can be written in it, before
    a run whose report would go there (``stress_report_write_failed`` if not)."""
    target = Path(directory)
    try:
        target.mkdir(parents=True, exist_ok=True)
        descriptor, probe = tempfile.mkstemp(prefix=".write-probe.", dir=target)
        os.close(descriptor)
        os.unlink(probe)
    except OSError as error:
        raise AdkError(
            "stress_report_write_failed",
            f"cannot write the stress report into {target}: {error.strerror or error}",
        ) from None


def _draw(plotter: Plotter, report: StressReport) -> Plots | PlotsUnavailable:
    """The plots, or why there are none: a plot that cannot be drawn never costs the
    JSON and Markdown reports."""
    try:
        return plotter(report)
    except Exception as error:
        _log.warning("stress_plots_failed", error=type(error).__name__)
        return PlotsUnavailable(
            reason=PLOTS_FAILED,
            message=f"the plots could not be drawn ({type(error).__name__}); see report.json",
        )


def _write(path: Path, text: str) -> Path:
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(descriptor, 0o644)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
