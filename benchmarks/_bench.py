"""What the peer benchmarks share.

`mcp_calls.py`, `a2a_tasks.py`: a server in a child process that prints its URL, and
the table's first line. `kernel.py`, `events.py`: the machine facts and load average
(`machine_facts`), sides run in turn round by round with the first side rotating
(`interleaved`), and a row whose headline is the median of the per-round ratios with
their min-max spread (`Compared`, `print_table`).
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import importlib.metadata
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any


@contextlib.contextmanager
def url_process(argv: list[str], name: str, *, stderr: IO[Any] | None = None) -> Iterator[str]:
    """Run `argv`, a server that prints its URL as its first line and serves until its
    stdin closes; yield that URL, then close stdin and wait (killed after 15 s)."""
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the {name} server did not start")
        yield url
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def print_header(benchmark: str, package: str) -> None:
    """``# <benchmark> benchmark  <date>  <package> <version>  python <version>``."""
    print(
        f"# {benchmark} benchmark  {datetime.date.today()}"
        f"  {package} {importlib.metadata.version(package)}  python {sys.version.split()[0]}"
    )


# -- machine facts -----------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else `platform.processor()`."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, or "n/a" where the OS has none."""
    if not hasattr(os, "getloadavg"):
        return "n/a"
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def machine_facts(*packages: str) -> list[str]:
    """Date (UTC), CPU count and model, RAM, Python, platform, the versions of `packages`,
    and the load average, one fact a line."""
    now = datetime.datetime.now(datetime.UTC)
    facts = [
        f"date      {now.isoformat(timespec='seconds')}",
        f"cpus      {os.cpu_count()} ({cpu_model()})",
    ]
    try:
        import psutil  # type: ignore[import-untyped]

        facts.append(f"ram       {psutil.virtual_memory().total / 2**30:.1f} GiB")
    except ImportError:
        pass
    facts += [
        f"python    {platform.python_implementation()} {platform.python_version()}",
        f"platform  {platform.platform()}",
    ]
    facts += [f"{name:9s} {importlib.metadata.version(name)}" for name in packages]
    facts.append(f"load avg  {load_average()} (1, 5, 15 min)")
    return facts


def print_facts(title: str, *packages: str) -> None:
    """`title`, then the machine facts indented, then a blank line (flushed)."""
    print(title)
    for fact in machine_facts(*packages):
        print("  " + fact)
    print(flush=True)


class OtherCpu:
    """The share of the machine's CPU time that other processes used since `start()`
    (Linux: /proc/stat's busy time less this process's own CPU time; None elsewhere).
    Unlike the load average it leaves out this benchmark's own threads."""

    def __init__(self) -> None:
        self.start()

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat", encoding="ascii") as stat:
                ticks = [int(field) for field in stat.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        hz = os.sysconf("SC_CLK_TCK")
        own = os.times()
        idle = ticks[3] + ticks[4]  # idle, iowait
        return sum(ticks) / hz, (sum(ticks) - idle) / hz, own.user + own.system

    def start(self) -> None:
        self._start = self._sample()

    def share(self) -> float | None:
        end = self._sample()
        if end is None or self._start is None or end[0] <= self._start[0]:
            return None
        total, busy, own = (e - s for e, s in zip(end, self._start, strict=True))
        return min(1.0, max(0.0, (busy - own) / total))


def fmt_share(share: float | None) -> str:
    return "n/a" if share is None else f"{share:.0%}"


# -- interleaved rounds ------------------------------------------------------------------------


def interleaved(
    sides: Mapping[str, Callable[[], float]],
    rounds: int,
    others: list[float | None] | None = None,
) -> dict[str, list[float]]:
    """Run every side once per round, `rounds` rounds, and return each side's figures in
    round order. Within a round the sides run in turn and the first side rotates
    (a, b, c; b, c, a; ...; with two sides: alternates), so a drift of the machine's load
    reaches every side and round i of one side can be paired with round i of another.
    `gc.collect()` runs before each side. With `others`, each round appends the share
    of CPU time other processes used during it (`OtherCpu`)."""
    names = list(sides)
    runs: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        shift = round_ % len(names)
        meter = OtherCpu()
        for name in names[shift:] + names[:shift]:
            gc.collect()
            runs[name].append(sides[name]())
        if others is not None:
            others.append(meter.share())
    return runs


def round_ratios(ours: Sequence[float], peer: Sequence[float]) -> list[float]:
    """ours[i] / peer[i]: the ratio of each round, both sides measured in that round."""
    return [o / p for o, p in zip(ours, peer, strict=True)]


def median_ratio(ours: Sequence[float], peer: Sequence[float]) -> float:
    """The median of the per-round ratios (the headline of a comparison)."""
    return statistics.median(round_ratios(ours, peer))


@dataclass
class Compared:
    """One row: per-round figures of our side and, if there is one, the peer's (same
    rounds, same order). Headline: the median of the per-round ratios; spread: their
    minimum and maximum. `ours`/`peer` columns show each side's median round."""

    name: str
    unit: str
    ours_runs: list[float]
    peer_runs: list[float] | None = None
    goal: str = ""
    detail: str = ""
    others: list[float | None] | None = None  # other processes' CPU share per round

    @property
    def ours(self) -> float:
        return statistics.median(self.ours_runs)

    @property
    def peer(self) -> float | None:
        return None if self.peer_runs is None else statistics.median(self.peer_runs)

    @property
    def ratios(self) -> list[float] | None:
        return None if self.peer_runs is None else round_ratios(self.ours_runs, self.peer_runs)

    @property
    def ratio(self) -> float | None:
        ratios = self.ratios
        return None if ratios is None else statistics.median(ratios)

    @property
    def spread(self) -> str:
        ratios = self.ratios
        if ratios is None:
            return "n/a"
        return f"{min(ratios):.2f}-{max(ratios):.2f}x"


def fmt_num(value: float) -> str:
    """1,234 from 1,000 up; 12.3 from 10; 1.234 below."""
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def fmt_list(values: Sequence[float]) -> str:
    """Values joined by "/", e.g. every round's figure."""
    return "/".join(fmt_num(v) for v in values)


def print_table(
    rows: Sequence[Compared],
    *,
    ours: str = "ours",
    peer: str = "peer",
    met: Callable[[Compared], bool | None] | None = None,
) -> None:
    """A table, one line per row: name, unit, ours, peer (median rounds), the median of
    the per-round ratios, their min-max, and the goal if any row has one (with "met" if
    `met` is given);
    then per row a detail line with every round's ratio, the row's `detail` and the
    share of CPU other processes used in each round."""
    goals = met is not None or any(row.goal for row in rows)
    header = ["row", "unit", ours, peer, "median ratio", "min-max"]
    header += ["goal"] if goals else []
    header += ["met"] if met is not None else []
    lines = []
    for row in rows:
        cells = [
            row.name,
            row.unit,
            fmt_num(row.ours),
            "n/a" if row.peer is None else fmt_num(row.peer),
            "n/a" if row.ratio is None else f"{row.ratio:.2f}x",
            row.spread,
        ]
        if goals:
            cells.append(row.goal or "none")
        if met is not None:
            verdict = met(row)
            cells.append("-" if verdict is None else ("yes" if verdict else "NO"))
        lines.append(cells)
    widths = [max(len(cell) for cell in column) for column in zip(header, *lines, strict=True)]
    for cells in [header, ["-" * w for w in widths], *lines]:
        print("  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip())
    print()
    for row in rows:
        ratios = row.ratios
        per_round = (
            "" if ratios is None else "ratios " + "/".join(f"{r:.2f}x" for r in ratios) + "; "
        )
        noise = ""
        if row.others:
            noise = "; other processes' CPU per round " + "/".join(map(fmt_share, row.others))
        print(f"{row.name}: {per_round}{row.detail}{noise}")


def print_grid(header: Sequence[str], lines: Sequence[Sequence[str]]) -> None:
    """A plain table: `header`, a rule, then `lines`, each column left-aligned to its
    widest cell (for figures `print_table` has no column for, such as a latency bound)."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *lines, strict=True)]
    for cells in [header, ["-" * w for w in widths], *lines]:
        print("  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip())
    print()
