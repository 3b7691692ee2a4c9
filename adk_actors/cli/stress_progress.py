"""Live progress of ``adk stress``: a sink for the engine's `ProgressSnapshot`.

On a terminal it draws a rich `Live` view (a progress bar, by run count or by elapsed
time, and a small table: throughput, p50/p95/p99 latency, errors, in flight,
restarts, chaos events); otherwise it writes one plain line per snapshot. Either way
it writes to stderr, so stdout keeps only the command's result. The view refreshes
only when a snapshot arrives (no refresh thread).
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, Progress, TaskID, TextColumn
from rich.table import Table

from adk_actors.stress.records import ProgressSnapshot


class StressProgress:
    """Call it with each snapshot; close it (or use ``with``) when the run ends.
    `live` forces the terminal view on or off (default: on when `stream` is a TTY)."""

    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._console = Console(file=self._stream, stderr=True, highlight=False)
        self.live_mode = self._console.is_terminal if live is None else live
        self._progress = Progress(
            TextColumn("[bold]stress[/]"),
            BarColumn(),
            TextColumn("{task.description}"),
            console=self._console,
        )
        self._task: TaskID | None = None
        self._live: Live | None = None
        self.snapshots = 0

    def __call__(self, snapshot: ProgressSnapshot) -> None:
        self.snapshots += 1
        if self.live_mode:
            self._draw(snapshot)
        else:
            self._stream.write(plain_line(snapshot) + "\n")
            self._stream.flush()

    def __enter__(self) -> StressProgress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the live view (leaving its last frame on screen)."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _draw(self, snapshot: ProgressSnapshot) -> None:
        total, done, description = _progress_of(snapshot)
        description = f"{description} [dim]{snapshot.elapsed_s:.0f} s elapsed[/]"
        if self._task is None:
            self._task = self._progress.add_task(description, total=total)
        self._progress.update(self._task, total=total, completed=done, description=description)
        view = Group(self._progress, snapshot_table(snapshot))
        if self._live is None:
            self._live = Live(
                view, console=self._console, auto_refresh=False, redirect_stdout=False
            )
            self._live.start()
        self._live.update(view, refresh=True)


def _progress_of(snapshot: ProgressSnapshot) -> tuple[float, float, str]:
    """(total, done, text) of the bar: runs finished of `total`, else seconds of
    `duration_s`, else runs started (an unbounded bar)."""
    finished = max(snapshot.started - snapshot.in_flight, 0)
    if snapshot.total is not None:
        return float(snapshot.total), float(finished), f"{finished}/{snapshot.total} runs"
    if snapshot.duration_s is not None:
        elapsed = min(snapshot.elapsed_s, snapshot.duration_s)
        return (
            snapshot.duration_s,
            elapsed,
            f"{elapsed:.0f}/{snapshot.duration_s:.0f} s, {finished} runs",
        )
    return float(max(finished, 1)), float(finished), f"{finished} runs"


def snapshot_table(snapshot: ProgressSnapshot) -> Table:
    """The small live table of one snapshot."""
    table = Table(show_edge=False, header_style="bold", pad_edge=False)
    for column in (
        "throughput/s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "errors",
        "in flight",
        "restarts",
        "chaos",
    ):
        table.add_column(column, justify="right")
    table.add_row(
        f"{snapshot.throughput_per_s:.1f}",
        _ms(snapshot.latency_p50_ms),
        _ms(snapshot.latency_p95_ms),
        _ms(snapshot.latency_p99_ms),
        f"[red]{snapshot.errors}[/]" if snapshot.errors else "0",
        str(snapshot.in_flight),
        str(snapshot.restarts),
        str(snapshot.chaos_events),
    )
    return table


def plain_line(snapshot: ProgressSnapshot) -> str:
    """One line of progress for a log or a pipe."""
    _, _, description = _progress_of(snapshot)
    return (
        f"stress t={snapshot.elapsed_s:.1f}s {description} started={snapshot.started} "
        f"completed={snapshot.completed} errors={snapshot.errors} "
        f"in_flight={snapshot.in_flight} throughput={snapshot.throughput_per_s:.1f}/s "
        f"p50={_ms(snapshot.latency_p50_ms)}ms p95={_ms(snapshot.latency_p95_ms)}ms "
        f"p99={_ms(snapshot.latency_p99_ms)}ms restarts={snapshot.restarts} "
        f"chaos={snapshot.chaos_events}"
    )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
