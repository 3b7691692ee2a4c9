"""The in-process target: shared sessions on a real LMDB store, the workloads of a mixed
scenario, its own runtime when none is running, and the history check it relies on."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

import adk_actors as adk
from adk_actors import stress
from adk_actors.agents import list_agents
from adk_actors.stress.invariants import check_history
from adk_actors.stress.records import ProgressSnapshot, StressReport


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
    report = stress.run_scenario({"count": 600, "agents": 4, "concurrency": 32})
    held(report)
    detail = {r.name: r.detail for r in report.invariant_details}["sessions_consistent"]
    assert detail == "512 sessions checked"


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
