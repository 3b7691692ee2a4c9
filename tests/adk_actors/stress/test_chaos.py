"""Chaos during load (in process): run workers, invocation servers and agents are killed
at random; every run still ends exactly once, nothing leaks, and the report lists every
chaos action with its time.

Follows the runtime's own chaos test (tests/adk_actors/test_runs_chaos.py) through the
harness: random kills during load lose nothing accepted and every run reaches exactly
one terminal outcome."""

from __future__ import annotations

from collections import Counter

import pytest

from adk_actors import stress
from adk_actors.stress.records import ChaosOutcome, StressReport

ACTIONS = {"kill_run_workers", "kill_invocation_servers", "kill_agents"}


def chaos_scenario(seed: int) -> dict[str, object]:
    return {
        "name": "chaos",
        "count": 600,
        "agents": 4,
        "concurrency": 32,
        "model": {"latency": [0.01, 0.03]},
        "sample_interval_s": 0.1,
        "seed": seed,
        "chaos": {
            "start_after_s": 0.05,
            "seed": seed,
            "kill_run_workers_per_s": 100,
            "kill_invocation_servers_per_s": 40,
            "kill_agents_per_s": 40,
        },
    }


@pytest.mark.timeout(90)
def test_kills_during_load_keep_every_invariant() -> None:
    report = stress.run_scenario(chaos_scenario(seed=7))
    failed = [result for result in report.invariant_details if not result.held]
    assert failed == []
    assert report.passed
    counts = report.counts
    assert counts["lost"] == 0 and counts["rejected"] == 0
    assert counts["completed"] > 0
    assert counts["failed"] > 0  # the kills really ended runs
    details = {result.name: result.detail for result in report.invariant_details}
    # the runtime answered each run once, and killed runs' sessions were checked too
    assert "without a terminal 0" in details["every_run_one_terminal"]
    assert "of runs that did not complete" in details["sessions_consistent"]
    assert {event.action for event in report.chaos} == ACTIONS
    outcomes = Counter((event.action, event.outcome) for event in report.chaos)
    assert outcomes[("kill_run_workers", "killed")] > 0
    assert outcomes[("kill_agents", "restarted")] > 0
    assert report.restarts == outcomes[("kill_agents", "restarted")]
    times = [event.t_s for event in report.chaos]
    assert times == sorted(times) and times[0] >= 0.05  # not before start_after_s
    assert all(
        (event.outcome is ChaosOutcome.SKIPPED) == bool(event.reason) for event in report.chaos
    )
    assert report.chaos_total == len(report.chaos)  # fewer than the cap: every one kept
    assert stress.decode_report(stress.encode_report(report)).chaos == report.chaos


@pytest.mark.timeout(90)
def test_kills_on_shared_lmdb_sessions_leave_whole_invocations() -> None:
    """Killed run workers, invocation servers and agents on shared LMDB sessions: every
    stored invocation still has exactly one terminal event, and every completed run's is
    whole (sessions_consistent). An invocation server killed on its way to its opening
    write once left that opening without a terminal (the harness found it); every write
    of the server is now fenced (tests/adk_actors/test_recovery.py has the interleaving
    made certain)."""
    scenario = chaos_scenario(seed=11) | {
        "kind": "sessions",
        "session_store": "lmdb",
        "tool_calls": 1,
        "chaos": {
            "start_after_s": 0.05,
            "seed": 11,
            "kill_run_workers_per_s": 100,
            "kill_invocation_servers_per_s": 40,
            "kill_agents_per_s": 40,
        },
    }
    report = stress.run_scenario(scenario)
    failed = [result for result in report.invariant_details if not result.held]
    assert failed == []
    assert report.counts["failed"] > 0 and report.counts["completed"] > 0
    assert report.invariants["sessions_consistent"]
    killed = Counter((event.action, event.outcome) for event in report.chaos)
    assert killed[("kill_invocation_servers", "killed")] > 0


@pytest.mark.timeout(60)
def test_chaos_waits_for_start_after_s() -> None:
    """A schedule that starts after the load is over does nothing."""
    scenario = chaos_scenario(seed=3) | {"count": 40}
    scenario["chaos"] = {"start_after_s": 30.0, "kill_run_workers_per_s": 100}
    report: StressReport = stress.run_scenario(scenario)
    assert report.passed
    assert report.chaos == [] and report.restarts == 0
    assert report.counts["completed"] == 40
