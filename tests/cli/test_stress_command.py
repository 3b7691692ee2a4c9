"""``adk stress``: the exit codes (0 every invariant held, 2 one failed, 1 a refused
scenario or command line), the progress sink's plain and live modes, and the CI
scenario (examples/stress/ci-20s.json) run end to end through the real CLI: mixed
load with chaos on the in-process runtime, every invariant held."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from adk_actors.cli.output import EXIT_INTERRUPTED
from adk_actors.cli.stress_command import EXIT_INVARIANT_FAILED, exit_code_for
from adk_actors.cli.stress_progress import StressProgress, plain_line
from adk_actors.stress.daemon_lifetime import parent_death_supported
from adk_actors.stress.daemon_spawn import alive, descendants
from adk_actors.stress.records import (
    InvariantResult,
    Outcome,
    ProgressSnapshot,
    StressReport,
    decode_report,
)
from tests.cli.conftest import ADK, REPO, base_env, json_lines, run_adk

CI_SCENARIO = REPO / "examples" / "stress" / "ci-20s.json"


def _report(*held: bool) -> StressReport:
    details = [
        InvariantResult(name=f"invariant_{index}", held=ok, detail="checked")
        for index, ok in enumerate(held)
    ]
    return StressReport(
        schema_version=1,
        scenario={"name": "exit-codes", "kind": "runs"},
        started_at="2026-12-01T08:00:00Z",
        duration_s=1.0,
        counts={outcome.value: 0 for outcome in Outcome},
        latency_ms={"p50": None, "p90": None, "p95": None, "p99": None, "max": None, "mean": None},
        throughput_per_s=0.0,
        restarts=0,
        timeline=[],
        chaos=[],
        invariants={item.name: item.held for item in details},
        invariant_details=details,
        environment={},
        passed=all(held),
    )


def _snapshot(
    index: int, *, total: int | None = 100, duration_s: float | None = None
) -> ProgressSnapshot:
    return ProgressSnapshot(
        elapsed_s=float(index),
        started=10 * index,
        completed=9 * index,
        errors=index,
        in_flight=1,
        total=total,
        duration_s=duration_s,
        throughput_per_s=9.5,
        latency_p50_ms=1.5,
        latency_p95_ms=2.5,
        latency_p99_ms=None,
        restarts=index,
        chaos_events=2 * index,
    )


def test_exit_code_is_0_when_every_invariant_held_else_2() -> None:
    assert exit_code_for(_report(True, True)) == 0
    assert exit_code_for(_report(True, False)) == EXIT_INVARIANT_FAILED == 2
    # A report whose verdict disagrees with its invariants is not a pass either.
    held = _report(True)
    contradicting = StressReport(
        **{
            **{field: getattr(held, field) for field in held.__struct_fields__},
            "invariants": {"invariant_0": False},
        }
    )
    assert exit_code_for(contradicting) == 2


def test_plain_progress_is_one_line_per_snapshot() -> None:
    stream = io.StringIO()
    with StressProgress(stream) as progress:
        assert progress.live_mode is False
        progress(_snapshot(1))
        progress(_snapshot(2, total=None, duration_s=20.0))
    lines = stream.getvalue().splitlines()
    assert lines == [plain_line(_snapshot(1)), plain_line(_snapshot(2, total=None, duration_s=20))]
    assert lines[0].startswith("stress t=1.0s 9/100 runs started=10 completed=9 errors=1 ")
    assert (
        "in_flight=1 throughput=9.5/s p50=1.5ms p95=2.5ms p99=-ms restarts=1 chaos=2" in (lines[0])
    )
    assert lines[1].startswith("stress t=2.0s 2/20 s, 19 runs ")


def test_live_progress_draws_a_bar_and_the_table() -> None:
    stream = io.StringIO()
    with StressProgress(stream, live=True) as progress:
        for index in range(1, 4):
            progress(_snapshot(index))
    frame = stream.getvalue()
    assert "29/100 runs" in frame
    for header in ("throughput/s", "p50 ms", "p95 ms", "p99 ms", "errors", "in flight"):
        assert header in frame
    assert "restarts" in frame and "chaos" in frame
    assert "stress t=" not in frame  # no plain lines in live mode


@pytest.mark.parametrize(
    ("content", "detail"),
    [
        ("{not json", "file"),
        (
            json.dumps({"kind": "runs", "count": 5, "concurrency": 2, "surprise": 1}),
            ["unknown_keys", ["surprise"]],
        ),
        (json.dumps({"kind": "runs", "count": 5, "duration_s": 5, "concurrency": 2}), "count"),
    ],
)
def test_a_refused_scenario_exits_1_with_the_reason(
    tmp_path: Path, content: str, detail: object
) -> None:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(content)
    report_dir = tmp_path / "reports"
    result = run_adk("stress", str(scenario), "--report-dir", str(report_dir), "--json")
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    (error,) = json_lines(result.stderr)
    assert error["status"] == "error"
    assert error["reason"] == "invalid_stress_scenario"
    assert error["details"][0] == detail
    assert not report_dir.exists()


def test_a_missing_scenario_file_and_a_bad_command_line_exit_1(tmp_path: Path) -> None:
    missing = run_adk("stress", str(tmp_path / "absent.json"))
    assert missing.returncode == 1
    assert "invalid_stress_scenario" in missing.stderr
    usage = run_adk("stress")
    assert usage.returncode == 1
    assert "SCENARIO.json" in usage.stderr


def test_a_small_scenario_prints_a_summary_and_writes_reports(tmp_path: Path) -> None:
    scenario = tmp_path / "small.json"
    scenario.write_text(
        json.dumps(
            {
                "name": "small <runs>",
                "kind": "runs",
                "agents": 2,
                "count": 40,
                "concurrency": 4,
                "model": {"latency": [0.0, 0.001]},
                "sample_interval_s": 0.2,
            }
        )
    )
    report_dir = tmp_path / "out"
    result = run_adk("stress", str(scenario), "--report-dir", str(report_dir))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASSED stress scenario small <runs>" in result.stdout
    assert "completed 40" in result.stdout
    assert sorted(path.name for path in report_dir.iterdir()) == [
        "report.html",
        "report.json",
        "report.md",
    ]
    report = decode_report(json.loads((report_dir / "report.json").read_text()))
    assert report.counts["completed"] == 40 and report.passed


@pytest.mark.timeout(180)
def test_ci_scenario_through_the_cli_holds_every_invariant(tmp_path: Path) -> None:
    """What CI runs: the 20-second mixed scenario with chaos, in process, through
    ``adk stress --json``; exit 0, every invariant true, chaos events recorded, the
    three report files written, one plain progress line per sample on stderr."""
    report_dir = tmp_path / "stress-report"
    result = run_adk(
        "stress", str(CI_SCENARIO), "--report-dir", str(report_dir), "--json", timeout=150
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    (document,) = json_lines(result.stdout)
    report = decode_report(document)
    assert report.passed
    assert report.invariants and all(report.invariants.values()), report.invariant_details
    assert all(item.held for item in report.invariant_details)
    assert report.scenario["name"] == "ci-20s"
    assert report.chaos, "the CI scenario runs chaos"
    assert report.counts["completed"] > 0
    assert report.duration_s >= 20.0
    assert decode_report(json.loads((report_dir / "report.json").read_text())) == report
    assert "<svg" in (report_dir / "report.html").read_text()
    progress = [line for line in result.stderr.splitlines() if line.startswith("stress t=")]
    assert len(progress) >= 10


# -- stopping: signals, a spawned daemon, the report of what ran ---------------------------


class _Harness:
    """``adk stress`` running in the background: its stderr lines as they come, the
    daemons it spawned (found under /proc), and signals sent to it."""

    def __init__(self, scenario: dict[str, Any], tmp_path: Path, *extra: str) -> None:
        path = tmp_path / "scenario.json"
        path.write_text(json.dumps(scenario))
        self.tmpdir = tmp_path / "tmp"
        self.tmpdir.mkdir()
        self.report_dir = tmp_path / "out"
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [*ADK, "stress", str(path), "--report-dir", str(self.report_dir), *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=base_env(TMPDIR=str(self.tmpdir)),
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            assert self.process.poll() is None, self.lines
            assert time.monotonic() < deadline, f"no {text!r} in {self.lines[-20:]}"
            time.sleep(0.05)

    def daemons(self) -> list[int]:
        return [
            pid
            for pid in descendants(self.process.pid)
            if "adk_actors.daemon" in _cmdline(pid) and alive(pid)
        ]

    def finish(self, timeout: float = 90.0) -> tuple[int, str]:
        assert self.process.stdout is not None  # stderr is the reader thread's
        stdout = self.process.stdout.read()
        code = self.process.wait(timeout)
        self._reader.join(5.0)
        return code, stdout

    def workdirs(self) -> list[str]:
        return sorted(path.name for path in self.tmpdir.glob("adk-stress-daemon-*"))


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _gone(pids: list[int], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


needs_proc = pytest.mark.skipif(
    not Path("/proc/self/task").is_dir(), reason="finds the spawned daemon under /proc"
)
SPAWNED = {
    "name": "spawned",
    "kind": "runs",
    "target": {"daemon": {"spawn": True}},
    "agents": 2,
    "duration_s": 120,
    "concurrency": 2,
    "model": {"latency": [0.01, 0.02]},
    "sample_interval_s": 0.2,
}


@needs_proc
@pytest.mark.timeout(120)
def test_sigterm_stops_a_spawned_daemon_run_and_writes_what_ran(tmp_path: Path) -> None:
    """SIGTERM (CI cancelling a job) is a first Ctrl-C: the load stops, the spawned
    daemon is drained and its directory removed, the report of what ran is written and
    summarised, exit 130. (Before: the harness died at once, leaving the daemon running
    and its directory behind.)"""
    harness = _Harness(SPAWNED, tmp_path)
    harness.wait_for("stress t=")
    daemons = harness.daemons()
    assert len(daemons) == 1 and harness.workdirs(), harness.lines
    harness.process.send_signal(signal.SIGTERM)
    code, stdout = harness.finish()
    assert code == EXIT_INTERRUPTED, harness.lines
    assert _gone(daemons), f"daemon {daemons} still running"
    assert harness.workdirs() == []
    assert any("stopping: waiting for" in line for line in harness.lines), harness.lines
    assert "stress scenario spawned" in stdout and "(interrupted)" in stdout
    report = decode_report(json.loads((harness.report_dir / "report.json").read_text()))
    assert report.interrupted and report.counts["completed"] > 0
    assert report.invariants["daemon_clean_exit"] is True


@needs_proc
@pytest.mark.timeout(120)
def test_a_second_signal_leaves_at_once_and_still_kills_the_daemon(tmp_path: Path) -> None:
    """A second signal while the first stop waits for slow runs: the harness leaves
    at once without a report, and the spawned daemon and its directory go with it."""
    slow = {**SPAWNED, "model": {"latency": [20.0, 20.0]}, "sample_interval_s": 0.1}
    harness = _Harness(slow, tmp_path)
    harness.wait_for("in_flight=2")
    daemons = harness.daemons()
    assert len(daemons) == 1, harness.lines
    harness.process.send_signal(signal.SIGTERM)
    harness.wait_for("stopping:")
    harness.process.send_signal(signal.SIGINT)
    code, _ = harness.finish()
    assert code == EXIT_INTERRUPTED, harness.lines
    assert _gone(daemons), f"daemon {daemons} still running"
    assert harness.workdirs() == []
    assert any("left at once: no report written" in line for line in harness.lines)
    assert not (harness.report_dir / "report.json").exists()


@needs_proc
@pytest.mark.timeout(120)
@pytest.mark.skipif(not parent_death_supported(), reason="needs prctl(PR_SET_PDEATHSIG)")
def test_a_sigkilled_harness_takes_its_daemon_with_it(tmp_path: Path) -> None:
    """Nothing in the harness runs after SIGKILL: the kernel's parent-death signal ends
    the daemon (its directory stays: nobody is left to remove it)."""
    harness = _Harness(SPAWNED, tmp_path)
    harness.wait_for("stress t=")
    daemons = harness.daemons()
    assert len(daemons) == 1, harness.lines
    harness.process.kill()
    harness.finish()
    assert _gone(daemons), f"daemon {daemons} still running"


def test_ctrl_c_keeps_the_report_already_built(tmp_path: Path) -> None:
    """A first Ctrl-C in process: exit 130 with the report of what ran written and
    summarised (before: exit 130 with nothing written and nothing said)."""
    scenario = {**SPAWNED, "target": "inprocess", "name": "in-process"}
    harness = _Harness(scenario, tmp_path)
    harness.wait_for("stress t=")
    harness.process.send_signal(signal.SIGINT)
    code, stdout = harness.finish()
    assert code == EXIT_INTERRUPTED, harness.lines
    assert "stress scenario in-process" in stdout
    assert any("interrupted: the report covers what ran" in line for line in harness.lines)
    assert sorted(path.name for path in harness.report_dir.iterdir()) == [
        "report.html",
        "report.json",
        "report.md",
    ]
    report = decode_report(json.loads((harness.report_dir / "report.json").read_text()))
    assert report.interrupted and report.duration_s < 120


@pytest.mark.timeout(60)
def test_an_unwritable_report_dir_is_refused_before_the_run(tmp_path: Path) -> None:
    """Before: the whole scenario ran, then the report could not be written."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    scenario = tmp_path / "long.json"
    scenario.write_text(json.dumps({**SPAWNED, "target": "inprocess"}))
    result = run_adk(
        "stress", str(scenario), "--report-dir", str(blocker / "sub"), "--json", timeout=40
    )
    assert result.returncode == 1, result.stderr
    (error,) = json_lines(result.stderr)
    assert error["reason"] == "stress_report_write_failed"
    assert "Not a directory" in error["message"]
