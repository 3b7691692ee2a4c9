"""``adk stress SCENARIO.json [--report-dir DIR] [--json]``: run a stress scenario, show
its progress on stderr, write report.json / report.md / report.html into DIR, and
print a summary (or, with ``--json``, the report itself as one JSON line).

Exit codes (as ``adk eval run``'s gate): 0 every invariant held, 2 an invariant
failed, 1 nothing conclusive ran (a refused scenario file or command line, a run or
report that failed, a report directory that cannot be written: checked before the
run), 130 interrupted. A command line click refuses exits 1 here too, so 2 always
means "the system broke an invariant".

SIGTERM is a first Ctrl-C: the load stops, the runs in flight end, the target closes
(a spawned daemon is drained), and the report of what ran is written and summarised
before the exit 130. A second signal leaves at once: a spawned daemon is SIGKILLed and
its directory removed first (`daemon_lifetime.reap_all`), and no report is written.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from adk_actors.cli.output import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, CliError, Output
from adk_actors.cli.sanitize import markup
from adk_actors.cli.stress_progress import StressProgress
from adk_actors.stress.daemon_lifetime import reap_all
from adk_actors.stress.engine import run_scenario
from adk_actors.stress.records import StressInterrupted, StressReport, encode_report
from adk_actors.stress.report import check_report_dir, write_reports
from adk_actors.stress.scenario import read_scenario
from providers.errors import AdkError

EXIT_INVARIANT_FAILED = 2
DEFAULT_REPORT_DIR = "stress-report"
LATENCY_KEYS = ("p50", "p95", "p99", "max")


def exit_code_for(report: StressReport) -> int:
    """0 when the report passed and every invariant held, else 2."""
    held = (
        report.passed
        and all(report.invariants.values())
        and all(item.held for item in report.invariant_details)
    )
    return EXIT_OK if held else EXIT_INVARIANT_FAILED


class _UsageRefused(click.UsageError):
    """A command line click refused, exiting 1 (not click's 2)."""

    exit_code = EXIT_ERROR


class _StressCommand(click.Command):
    """A click command whose usage errors exit 1, keeping 2 for a failed invariant."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as error:
            raise _UsageRefused(error.format_message(), error.ctx) from None


@click.command("stress", cls=_StressCommand)
@click.argument("scenario_path", metavar="SCENARIO.json")
@click.option(
    "--report-dir",
    default=DEFAULT_REPORT_DIR,
    metavar="DIR",
    show_default=True,
    help="Where report.json, report.md and report.html go (created if missing).",
)
@click.option("--json", "json_mode", is_flag=True, help="Print the report as one JSON line.")
def stress_command(scenario_path: str, report_dir: str, json_mode: bool) -> None:
    """Run a stress scenario (load, chaos, invariant checks) and write its report.

    Exit codes: 0 every invariant held, 2 an invariant failed, 1 error.
    """
    output = Output(json_mode)
    try:
        report, paths = _run(scenario_path, Path(report_dir), output)
    except CliError as error:
        output.fail(error)
    output.emit(encode_report(report), _render_summary)
    output.note(
        "reports: " + ", ".join(str(path) for path in paths.values()),
        "dim",
    )
    if report.interrupted:
        output.note("interrupted: the report covers what ran before the stop", "bold yellow")
        raise SystemExit(EXIT_INTERRUPTED)
    code = exit_code_for(report)
    if code != EXIT_OK:
        failed = [item.name for item in report.invariant_details if not item.held]
        output.note(f"invariants failed: {', '.join(failed) or 'see the report'}", "bold red")
    raise SystemExit(code)


def _run(
    scenario_path: str, report_dir: Path, output: Output
) -> tuple[StressReport, dict[str, Path]]:
    try:
        scenario = read_scenario(scenario_path)
        check_report_dir(report_dir)  # before the run, not after hours of it
    except AdkError as error:
        raise CliError.from_adk(error, EXIT_ERROR) from None
    try:
        with _stop_signals(), StressProgress() as progress:
            report = run_scenario(
                scenario, on_progress=progress, on_stop=partial(_stopping, output)
            )
    except StressInterrupted as stopped:
        report = stopped.report
    except KeyboardInterrupt:
        killed = reap_all()
        output.note(
            f"left at once: no report written; {killed} spawned daemon(s) killed", "bold red"
        )
        raise SystemExit(EXIT_INTERRUPTED) from None
    except AdkError as error:
        raise CliError.from_adk(error, EXIT_ERROR) from None
    try:
        paths = write_reports(report, report_dir)
    except AdkError as error:
        raise CliError.from_adk(error, EXIT_ERROR) from None
    return report, paths


@contextmanager
def _stop_signals() -> Iterator[None]:
    """While the scenario runs, SIGTERM is a Ctrl-C too (the engine stops at the first
    and leaves at the second)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _stopping(output: Output, in_flight: int) -> None:
    """The engine's `on_stop`: say what the first Ctrl-C (or SIGTERM) does."""
    output.note(
        f"stopping: waiting for {in_flight} run(s) in flight, then the report is written "
        "(Ctrl-C again to leave at once)",
        "bold yellow",
    )


def _render_summary(console: Console, report: Any) -> None:
    """The report for people: verdict, counts, latency, throughput, invariants."""
    scenario = report.get("scenario", {})
    name = scenario.get("name") if isinstance(scenario, dict) else None
    verdict = "[bold green]PASSED[/]" if report.get("passed") else "[bold red]FAILED[/]"
    console.print(
        f"{verdict} stress scenario [bold]{markup(str(name or 'stress'))}[/] "
        f"in {float(report.get('duration_s', 0.0)):.1f} s: "
        f"{float(report.get('throughput_per_s', 0.0)):.1f} runs/s, "
        f"{int(report.get('restarts', 0))} restarts, "
        f"{_chaos_count(report)} chaos events"
        + (" [bold yellow](interrupted)[/]" if report.get("interrupted") else "")
    )
    counts = report.get("counts", {})
    console.print(
        "counts: " + ", ".join(f"{markup(str(key))} {value}" for key, value in counts.items())
    )
    latency = report.get("latency_ms", {})
    console.print(
        "latency ms: " + ", ".join(f"{key} {_number(latency.get(key))}" for key in LATENCY_KEYS)
    )
    table = Table(show_edge=False, header_style="bold")
    table.add_column("invariant")
    table.add_column("held")
    table.add_column("detail")
    for item in report.get("invariant_details", []):
        held = bool(item.get("held"))
        table.add_row(
            markup(str(item.get("name", ""))),
            "[green]yes[/]" if held else "[bold red]NO[/]",
            markup(str(item.get("detail", ""))[:300]),
        )
    console.print(table)


def _chaos_count(report: Any) -> str:
    """Every chaos event (`chaos_total`), and how many the report kept when fewer."""
    kept = len(report.get("chaos", []))
    total = int(report.get("chaos_total", kept))
    return f"{total} ({kept} kept)" if kept < total else str(total)


def _number(value: object) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "-"
