"""The in-process target: shared sessions on a real LMDB store, the workloads of a mixed
scenario, its own runtime when none is running, and the history check it relies on."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

import adk_actors as adk
from adk_actors import stress
from adk_actors.agents import list_agents
from adk_actors.outcomes import Cancelled, Completed
from adk_actors.sessions import InMemorySessionService
from adk_actors.stress.inprocess import InProcessTarget
from adk_actors.stress.invariants import check_history
from adk_actors.stress.records import InvariantResult, Outcome, ProgressSnapshot, StressReport
from adk_actors.stress.scenario import load_scenario
from providers.errors import AdkError


def held(report: StressReport) -> dict[str, bool]:
    failed = [result for result in report.invariant_details if not result.held]
    assert failed == []
    return report.invariants


@pytest.mark.timeout(60)
def test_shared_sessions_on_lmdb_hold_exactly_their_completed_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Follows behaviors §13 (sessions on LMDB under concurrent load): 240 runs with a
    tool round each over 16 shared sessions; every session holds, per completed run,
    the user message, the tool call and response, and the reply; the store lives in a
    temporary directory that is gone afterwards."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    stores: set[Path] = set()

    def seen(snapshot: ProgressSnapshot) -> None:
        stores.update(tmp_path.glob("adk-stress-*/sessions/*.mdb"))

    report = stress.run_scenario(
        {
            "kind": "sessions",
            "session_store": "lmdb",
            "count": 240,
            "agents": 4,
            "concurrency": 16,
            "tool_calls": 1,
            "sample_interval_s": 0.05,
        },
        on_progress=seen,
    )
    invariants = held(report)
    assert invariants["sessions_consistent"] and invariants["replies_match"]
    assert report.counts["completed"] == 240
    detail = {r.name: r.detail for r in report.invariant_details}["sessions_consistent"]
    assert detail == "16 sessions checked"
    assert stores  # a real LMDB environment was written
    assert list(tmp_path.glob("adk-stress-*")) == []  # and removed


@pytest.mark.timeout(60)
def test_shared_sessions_take_a_bounded_number_of_runs_each() -> None:
    """One agent gives 4 session slots; each slot's session takes 64 runs, then the
    next generation starts: 300 runs fill 8 sessions, every one checked."""
    report = stress.run_scenario({"kind": "sessions", "count": 300, "agents": 1, "concurrency": 8})
    held(report)
    detail = {r.name: r.detail for r in report.invariant_details}["sessions_consistent"]
    assert detail == "8 sessions checked"


@pytest.mark.timeout(60)
def test_runs_with_sessions_of_their_own_check_a_bounded_sample() -> None:
    report = stress.run_scenario(
        {"count": 120, "agents": 2, "concurrency": 16},
        target=InProcessTarget(checked_sessions=16),
    )
    held(report)
    details = {r.name: r.detail for r in report.invariant_details}
    assert details["sessions_consistent"] == "16 sessions checked"
    # the others were deleted as their runs ended: the store never grew with the load
    assert details["sessions_bounded"].startswith("16 sessions stored at the end (bound 32)")


@pytest.mark.timeout(60)
def test_failed_runs_sessions_are_checked_and_none_is_left_behind() -> None:
    """Kind runs under kills: the sample holds failed runs' sessions as well as
    completed ones', each stored invocation must end exactly once (killed ones closed by
    the lost-run path), and every unsampled session is deleted whatever its outcome."""
    report = stress.run_scenario(
        {
            "count": 160,
            "agents": 2,
            "concurrency": 16,
            "model": {"latency": [0.01, 0.02]},
            "sample_interval_s": 0.1,
            "chaos": {
                "start_after_s": 0.0,
                "seed": 5,
                "kill_run_workers_per_s": 60,
                "kill_invocation_servers_per_s": 60,
            },
        },
        target=InProcessTarget(checked_sessions=48),
    )
    held(report)
    assert report.counts["failed"] > 0
    details = {r.name: r.detail for r in report.invariant_details}
    assert "of runs that did not complete" in details["sessions_consistent"]
    stored = int(details["sessions_bounded"].split(" ")[0])
    assert stored <= 48


@pytest.mark.timeout(60)
def test_old_generations_of_shared_sessions_are_checked_and_deleted() -> None:
    """Kind sessions with 2 runs a session: one agent gives 4 slots, so 80 runs make 10
    generations of 4 sessions; each is checked once its runs ended and then deleted, so
    at most the two newest generations are stored at any time."""
    report = stress.run_scenario(
        {"kind": "sessions", "count": 80, "agents": 1, "concurrency": 4},
        target=InProcessTarget(runs_per_session=2),
    )
    held(report)
    details = {r.name: r.detail for r in report.invariant_details}
    assert details["sessions_consistent"] == "40 sessions checked"
    stored = int(details["sessions_bounded"].split(" ")[0])
    assert stored <= 8 and "40 deleted" in details["sessions_bounded"]


def test_the_target_options_are_bounded() -> None:
    for options in ({"runs_per_session": 0}, {"checked_sessions": 10_000}):
        with pytest.raises(AdkError) as caught:
            InProcessTarget(**options)  # type: ignore[arg-type]
        assert caught.value.reason[0] == "invalid_stress_target"


@pytest.mark.timeout(60)
def test_every_run_one_terminal_asks_the_runtime() -> None:
    """The check reads the runtime, not the engine's books: a run the runtime reports
    differently when asked again (here: a first answer that was not the run's terminal)
    and a run nobody could wait for both break it."""

    async def main() -> list[InvariantResult]:
        target = InProcessTarget()
        await target.open(load_scenario({"count": 1, "agents": 1, "concurrency": 1}))
        outcome = await target.run_one("runs", 0, time.monotonic() + 10)
        run_id = adk.runs.start(target._runners[0], "stress", "r1", "message 1", retention=0.5)
        answer = await adk.runs.wait_async(run_id, timeout=10)
        await target._cross_check(run_id, Cancelled("made up"))
        results = await target.close()
        assert outcome is Outcome.COMPLETED and isinstance(answer, Completed)
        return results

    results = {result.name: result for result in asyncio.run(main())}
    broken = results["every_run_one_terminal"]
    assert not broken.held
    assert "Cancelled, then Completed" in broken.detail


@pytest.mark.timeout(60)
def test_runs_take_admission_permits_that_all_return() -> None:
    """The stress Runners ask for permits as the daemon's do: the peak is seen during
    the load and every permit is back at the end."""
    report = stress.run_scenario({"count": 30, "agents": 2, "concurrency": 8})
    held(report)
    detail = {r.name: r.detail for r in report.invariant_details}["no_leaked_permits"]
    peak = int(detail.rsplit(" ", 1)[1])
    assert detail.startswith("admission active 0, queued 0") and peak >= 1


@pytest.mark.timeout(90)
def test_a_mixed_scenario_runs_every_kind() -> None:
    report = stress.run_scenario(
        {
            "kind": "mixed",
            "mix": {"runs": 2, "sessions": 1, "workflows": 1, "ambient": 1, "approvals": 1},
            "count": 90,
            "agents": 3,
            "concurrency": 12,
            "seed": 4,
        }
    )
    invariants = held(report)
    assert sum(report.counts.values()) == 90
    # each workload added its own invariants beside the target's and the engine's
    assert any(name.startswith("workflows_") for name in invariants)
    assert any(name.startswith("ambient_") for name in invariants)
    assert any(name.startswith("approvals_") for name in invariants)
    assert "sessions_consistent" in invariants


@pytest.mark.timeout(60)
def test_the_target_starts_and_stops_the_runtime_when_none_runs() -> None:
    adk.stop()
    assert not adk.app.running()
    report = stress.run_scenario({"count": 10, "agents": 2, "concurrency": 4})
    held(report)
    assert report.counts["completed"] == 10
    assert not adk.app.running()  # it stopped what it started


@pytest.mark.timeout(60)
def test_a_running_runtime_is_left_running_without_the_targets_agents() -> None:
    before = set(list_agents())
    report = stress.run_scenario({"count": 10, "agents": 2, "concurrency": 4})
    held(report)
    assert adk.app.running()
    assert set(list_agents()) == before


def test_check_history_finds_what_is_wrong() -> None:
    """The session check is not vacuous: real events from one echo run, then the
    ways a history can be wrong."""
    sessions = adk.sessions.InMemorySessionService()
    echo = adk.ScriptedProvider(fn=lambda history, tools: {"text": history[-1].text_value()})
    runner = adk.Runner(adk.spawn_agent("HistoryEcho", {"provider": echo}), "check", sessions)
    assert runner.run("u", "s", "message 3") == "message 3"
    events = sessions.get_session("check", "u", "s").events
    assert check_history("s", events, {3}, 2, exact=True) == []
    assert check_history("s", events, {3}, 4, exact=True) == ["s: run 3 holds 2 events, expected 4"]
    assert check_history("s", events, {3, 4}, 2, exact=True) == ["s: 1 completed runs are missing"]
    assert check_history("s", events, {3, 4}, 2, exact=False) == []
    doubled = check_history("s", [*events, *events], {3}, 2, exact=True)
    assert "s: run 3 has 2 terminal events" in doubled
    assert check_history("s", events[1:], {3}, 2, exact=True)[0] == (
        "s: an invocation opens without its user message"
    )
    assert check_history("s", events[:1], set(), 2, exact=True) == [
        "s: run 3 has 0 terminal events"  # an invocation that never ended
    ]
    sessions.close()


@pytest.mark.timeout(60)
def test_blocking_facade_calls_stay_off_the_engines_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """`runs.start` and the session deletes block their caller: the target makes them
    from a worker thread, so the loop that timestamps completions never stalls on them."""
    on_loop: list[str] = []

    def spy(name: str, call: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                asyncio.get_running_loop()
                on_loop.append(name)
            except RuntimeError:
                pass  # a worker thread: no loop runs here
            return call(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(adk.runs, "start", spy("runs.start", adk.runs.start))
    delete = InMemorySessionService.delete_session
    monkeypatch.setattr(InMemorySessionService, "delete_session", spy("delete_session", delete))
    report = stress.run_scenario(
        {"count": 40, "agents": 2, "concurrency": 8}, target=InProcessTarget(checked_sessions=4)
    )
    held(report)
    assert on_loop == []
