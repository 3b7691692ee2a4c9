"""The stress engine against the real runtime: counts add up, every invariant holds, the
report round-trips; and the invariant checks fail when the state is broken.

Follows behaviors §13's stable-runs suite (runs over many agents, one session each:
each holds exactly [message, reply], supervisor counts back to baseline), smaller."""

from __future__ import annotations

import _thread
import asyncio
import json
import random
import threading

import msgspec
import pytest

import adk_actors as adk
import supervision as sv
from adk_actors import stress
from adk_actors.agents import list_agents
from adk_actors.stress import engine, invariants
from adk_actors.stress.engine import Tally, halve_timeline
from adk_actors.stress.inprocess import InProcessTarget
from adk_actors.stress.latency import Reservoir, draw_delay
from adk_actors.stress.records import (
    Outcome,
    ProgressSnapshot,
    StressInterrupted,
    StressReport,
    TimelinePoint,
)
from adk_actors.stress.scenario import Model, load_scenario
from providers.errors import AdkError
from supervision import aio as sv_aio

ENGINE_INVARIANTS = {"engine_accounting", "no_unexpected_lost"}
TARGET_INVARIANTS = {
    "every_run_one_terminal",
    "sessions_bounded",
    "no_open_invocations",
    "no_leaked_permits",
    "no_leaked_processes",
    "no_leaked_threads",
    "supervisor_counts_baseline",
    "replies_match",
    "sessions_consistent",
}


def assert_held(report: StressReport) -> None:
    failed = [result for result in report.invariant_details if not result.held]
    assert failed == []
    assert report.passed
    assert set(report.invariants) >= ENGINE_INVARIANTS | TARGET_INVARIANTS


@pytest.mark.timeout(60)
def test_200_runs_over_8_agents_at_32_way() -> None:
    snapshots: list[ProgressSnapshot] = []
    report = stress.run_scenario(
        {
            "name": "runs-200",
            "count": 200,
            "agents": 8,
            "concurrency": 32,
            "model": {"latency": [0.001, 0.005]},
            "sample_interval_s": 0.05,
        },
        on_progress=snapshots.append,
    )
    assert_held(report)
    assert report.counts == {
        "completed": 200,
        "failed": 0,
        "cancelled": 0,
        "rejected": 0,
        "lost": 0,
    }
    assert report.scenario["name"] == "runs-200"
    latency = report.latency_ms
    assert set(latency) == {"p50", "p90", "p95", "p99", "max", "mean"}
    p50, p99, top = latency["p50"], latency["p99"], latency["max"]
    assert p50 is not None and p99 is not None and top is not None
    assert 1.0 <= p50 <= p99 <= top  # model delay >= 1 ms
    assert report.throughput_per_s > 0
    assert report.timeline and report.timeline[-1].completed == 200
    assert [point.t_s for point in report.timeline] == sorted(p.t_s for p in report.timeline)
    last = snapshots[-1]
    assert (last.started, last.completed, last.errors, last.in_flight, last.total) == (
        200,
        200,
        0,
        0,
        200,
    )
    assert (
        "sessions checked"
        in {r.name: r for r in report.invariant_details}["sessions_consistent"].detail
    )
    assert set(report.environment) == {"python", "cpu_count", "platform", "adk_version"}
    encoded = stress.encode_report(report)
    assert stress.decode_report(json.loads(json.dumps(encoded))) == report


@pytest.mark.timeout(60)
def test_rate_mode_rejects_arrivals_past_the_backlog() -> None:
    """Open loop: 300 arrivals/s against runs taking ~50 ms with at most 2 in flight,
    so most arrivals are rejected, none queued; every arrival still has one outcome."""
    report = stress.run_scenario(
        {
            "duration_s": 0.6,
            "rate_per_s": 300,
            "max_backlog": 2,
            "agents": 2,
            "model": {"latency": [0.05, 0.06]},
            "sample_interval_s": 0.1,
        }
    )
    assert_held(report)
    counts = report.counts
    assert counts["rejected"] > 0 and counts["completed"] > 0
    assert counts["failed"] == counts["cancelled"] == counts["lost"] == 0
    started = report.timeline[-1].started
    assert sum(counts.values()) == started


@pytest.mark.timeout(60)
def test_runs_with_tool_rounds_and_a_lognormal_model() -> None:
    report = stress.run_scenario(
        {
            "count": 60,
            "agents": 3,
            "concurrency": 12,
            "tool_calls": 2,
            "model": {"latency": {"distribution": "lognormal", "median_s": 0.002, "p99_s": 0.01}},
        }
    )
    assert_held(report)
    assert report.counts["completed"] == 60


@pytest.mark.timeout(60)
def test_run_scenario_from_inside_a_running_loop() -> None:
    """The engine runs its own loop on its own thread, so an async caller can use it."""

    async def main() -> StressReport:
        return stress.run_scenario({"count": 20, "agents": 2, "concurrency": 4})

    report = asyncio.run(main())
    assert_held(report)
    assert report.counts["completed"] == 20


def test_one_scenario_at_a_time() -> None:
    started, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def slow(snapshot: ProgressSnapshot) -> None:
        started.set()
        release.wait(10)

    def first() -> None:
        try:
            stress.run_scenario(
                {"count": 4, "agents": 1, "concurrency": 1, "sample_interval_s": 0.05},
                on_progress=slow,
            )
        except BaseException as error:  # surfaced by the assert below
            errors.append(error)

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert started.wait(10)
        with pytest.raises(AdkError) as caught:
            stress.run_scenario({"count": 1, "concurrency": 1})
        assert caught.value.reason == "stress_already_running"
    finally:
        release.set()
        thread.join(30)
    assert errors == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("load", [{"concurrency": 4}, {"rate_per_s": 0.01}])
def test_stop_ends_the_load_early(load: dict[str, object]) -> None:
    """A 10-minute scenario stopped at its first sample: no new run starts, the runs in
    flight end, the target closes, and every invariant is still checked."""
    stop = threading.Event()
    report = stress.run_scenario(
        {"duration_s": 600, "agents": 2, "sample_interval_s": 0.1, **load},
        on_progress=lambda snapshot: stop.set(),
        stop=stop,
    )
    assert_held(report)
    assert report.interrupted  # the report says it covers only what ran
    assert report.duration_s < 60
    assert sum(report.counts.values()) == report.timeline[-1].started


@pytest.mark.timeout(60)
def test_ctrl_c_stops_the_load_then_closes_the_target() -> None:
    interrupts: list[int] = []

    def interrupt(snapshot: ProgressSnapshot) -> None:
        if not interrupts:
            interrupts.append(1)
            _thread.interrupt_main()  # what Ctrl-C does to the waiting caller

    stopping: list[int] = []
    with pytest.raises(StressInterrupted) as caught:
        stress.run_scenario(
            {"duration_s": 600, "agents": 2, "concurrency": 4, "sample_interval_s": 0.1},
            on_progress=interrupt,
            on_stop=stopping.append,
        )
    assert isinstance(caught.value, KeyboardInterrupt)  # plain callers still stop
    report = caught.value.report  # the report already built is handed back
    assert report.interrupted and report.invariant_details
    assert sum(report.counts.values()) == report.timeline[-1].started > 0
    assert len(stopping) == 1 and stopping[0] >= 0  # told how many runs were in flight
    assert interrupts == [1]
    assert [name for name in list_agents() if name.startswith("Stress_")] == []
    assert adk.runs.stats() == {"actors": 0, "retained": 0, "pending_handoffs": 0}
    report = stress.run_scenario({"count": 2, "agents": 1, "concurrency": 1})
    assert report.passed  # the lock was released, and nothing was left behind


def test_bad_scenarios_fail_before_anything_starts() -> None:
    with pytest.raises(AdkError) as caught:
        stress.run_scenario({"count": 1})
    assert caught.value.reason == ("invalid_stress_scenario", "concurrency")


# -- the checks can fail -------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_thread_left_behind_fails_the_report() -> None:
    """End to end: a thread started during the load and still alive at the end is a
    leak; the report fails and names it."""
    release = threading.Event()
    leaked: list[threading.Thread] = []

    def leak(snapshot: ProgressSnapshot) -> None:
        if not leaked:
            thread = threading.Thread(target=release.wait, name="left-behind", daemon=True)
            thread.start()
            leaked.append(thread)

    try:
        report = stress.run_scenario(
            {"duration_s": 0.3, "agents": 1, "concurrency": 2, "sample_interval_s": 0.05},
            on_progress=leak,
            target=InProcessTarget(settle_timeout=0.2),
        )
    finally:
        release.set()
    assert leaked
    assert not report.passed
    threads = {result.name: result for result in report.invariant_details}["no_leaked_threads"]
    assert not threads.held and "left-behind x1" in threads.detail
    assert report.invariants["no_leaked_threads"] is False
    assert report.invariants["every_run_one_terminal"] is True


def test_pools_are_held_to_their_bounds_not_to_the_baseline() -> None:
    """A pool that grew under load and kept its idle threads is no leak; one past its
    bound is, and so is a thread outside the pools over the baseline."""
    grown = {
        "tasks": {"threads": 23, "max_threads": 544},
        "dispatch": {"threads": 32, "max_threads": 32},
    }
    held = invariants.no_leaked_threads(14, 14, grown)
    assert held.held
    assert "pool threads/bound: dispatch 32/32, tasks 23/544" in held.detail
    over = grown | {"aio-blocking": {"threads": 257, "max_threads": 256}}
    leaked = invariants.no_leaked_threads(14, 14, over)
    assert not leaked.held and "over their bound: aio-blocking" in leaked.detail
    outside = invariants.no_leaked_threads(14, 15, grown, {"left-behind": 1})
    assert not outside.held and "new: left-behind x1" in outside.detail


@pytest.mark.timeout(60)
def test_pool_threads_started_under_load_do_not_fail_the_report() -> None:
    """Threads the kernel's bounded pools start during the load and keep idle (the
    asyncio bridge's executor never retires its threads) are held to the pool's bound,
    so the report passes and names the pool; the threads outside the pools are back to
    the baseline."""
    started: list[int] = []

    def grow(snapshot: ProgressSnapshot) -> None:
        if started:
            return
        before = sv.thread_pools().get("aio-blocking", {"threads": 0})["threads"]
        barrier = threading.Barrier(before + 8)

        async def burst() -> None:  # every call waits for all: each needs a thread
            await asyncio.gather(
                *(sv_aio.run_blocking(barrier.wait, 10.0) for _ in range(before + 8))
            )

        caller = threading.Thread(target=asyncio.run, args=(burst(),))
        caller.start()
        caller.join()
        started.append(sv.thread_pools()["aio-blocking"]["threads"] - before)

    report = stress.run_scenario(
        {"duration_s": 0.3, "agents": 1, "concurrency": 2, "sample_interval_s": 0.05},
        on_progress=grow,
    )
    assert started and started[0] >= 8
    assert_held(report)
    threads = {result.name: result for result in report.invariant_details}["no_leaked_threads"]
    assert "aio-blocking" in threads.detail and "new:" not in threads.detail


def test_the_settle_timeout_is_bounded() -> None:
    for bad in (0.0, 601.0):
        with pytest.raises(AdkError) as caught:
            InProcessTarget(settle_timeout=bad)
        assert caught.value.reason == "invalid_settle_timeout"


def test_the_engines_own_accounting_is_named_as_such() -> None:
    """The engine's books (not the runtime: see test_inprocess's cross-check)."""
    tally = Tally(seed=1)
    tally.begin(0)
    tally.begin(1)
    tally.end(0, Outcome.COMPLETED, 0.01)
    assert {r.name: r.held for r in tally.invariants(0)}["engine_accounting"] is False
    tally.end(1, Outcome.FAILED, 0.01)
    assert all(r.held for r in tally.invariants(0))
    tally.end(1, Outcome.COMPLETED, 0.01)  # the same run ends twice
    broken = {r.name: r for r in tally.invariants(0)}["engine_accounting"]
    assert not broken.held
    assert "duplicate terminals 1" in broken.detail
    assert tally.counts["completed"] == 1  # the second terminal was not counted


def test_lost_runs_need_a_daemon_kill() -> None:
    counts = {outcome.value: 0 for outcome in Outcome} | {"lost": 3}
    assert not invariants.no_unexpected_lost(counts, daemon_kills=0).held
    assert invariants.no_unexpected_lost(counts, daemon_kills=1).held
    assert not invariants.one_terminal(5, counts, 0, 0).held  # 3 ended of 5 started
    assert invariants.one_terminal(3, counts, 0, 0).held


def test_leaks_break_their_invariants() -> None:
    leaked = invariants.no_leaked_permits({"active": 1, "queued": 0}, 4)
    assert not leaked.held and "active 1" in leaked.detail
    assert not invariants.no_leaked_permits({"active": 0, "queued": 2}, 4).held
    assert invariants.no_leaked_permits({"active": 0, "queued": 0}, 4).held
    unexercised = invariants.no_leaked_permits({"active": 0, "queued": 0}, 0)
    assert not unexercised.held and "not exercised" in unexercised.detail
    assert invariants.no_leaked_permits({"active": 0, "queued": 0}, 0, exercised=False).held
    with pytest.raises(KeyError):  # a renamed status key fails loudly, never reads as 0
        invariants.no_leaked_permits({"permits": 0, "queued": 0}, 4)
    stored = invariants.sessions_bounded(stored=300, bound=272, deleted=10)
    assert not stored.held and "300 sessions stored" in stored.detail
    assert invariants.sessions_bounded(stored=12, bound=272, deleted=900).held
    twice = invariants.runs_one_terminal(3, 3, {}, ["run-1: Completed, then Failed"])
    assert not twice.held and "then Failed" in twice.detail
    unanswered = invariants.runs_one_terminal(3, 2, {"not_found": 1}, [])
    assert not unanswered.held and "not_found 1" in unanswered.detail
    assert invariants.runs_one_terminal(3, 3, {}, []).held
    assert not invariants.no_leaked_processes(baseline=20, now=21).held
    assert invariants.no_leaked_processes(baseline=20, now=20).held
    threads = invariants.no_leaked_threads(10, 11, new_threads={"worker": 1})
    assert not threads.held and "new: worker x1" in threads.detail
    assert invariants.no_leaked_threads(10, 10).held
    assert not invariants.no_open_invocations({"actors": 0, "retained": 1}).held
    off = invariants.supervisor_counts(
        {"adk.runs": 0, "adk.agents": 8}, {"adk.runs": 2, "adk.agents": 8}
    )
    assert not off.held and "adk.runs 2 (baseline 0)" in off.detail
    problems = [f"s{n}: run {n} holds 3 events, expected 2" for n in range(7)]
    result = invariants.sessions_consistent(7, problems)
    assert not result.held and "(+2 more)" in result.detail
    assert not invariants.replies_match(1, ["run 0 answered something else"]).held


def test_reservoir_percentiles_and_bounds() -> None:
    reservoir = Reservoir(100, seed=3)
    assert reservoir.percentiles(50.0) == [None] and reservoir.mean() is None
    for value in range(1, 1001):
        reservoir.add(float(value))
    p50, p99 = reservoir.percentiles(50.0, 99.0)
    assert p50 is not None and p99 is not None and p50 < p99
    assert reservoir.count == 1000 and reservoir.maximum == 1000.0 and reservoir.mean() == 500.5
    exact = Reservoir(10)
    for sample in (5.0, 1.0, 3.0, 2.0, 4.0):
        exact.add(sample)
    assert exact.percentiles(0.0, 50.0, 100.0) == [1.0, 3.0, 5.0]
    with pytest.raises(ValueError):
        Reservoir(0)


def test_model_delays_follow_the_scenario() -> None:
    rng = random.Random(5)
    uniform = Model(latency=(0.01, 0.02)).latency
    assert all(0.01 <= draw_delay(uniform, rng) <= 0.02 for _ in range(200))
    lognormal = load_scenario(
        {
            "count": 1,
            "concurrency": 1,
            "model": {"latency": {"distribution": "lognormal", "median_s": 0.01, "p99_s": 0.1}},
        }
    ).model.latency
    draws = sorted(draw_delay(lognormal, rng) for _ in range(2000))
    assert 0.007 < draws[1000] < 0.014  # the median
    assert draws[-1] <= 0.4  # capped at four times the 99th percentile


def test_decode_report_refuses_a_bad_report() -> None:
    with pytest.raises(AdkError) as caught:
        stress.decode_report({"schema_version": 1})
    assert caught.value.reason == "invalid_stress_report"
    report = stress.run_scenario({"count": 2, "agents": 1, "concurrency": 1})
    encoded = stress.encode_report(report)
    with pytest.raises(AdkError):
        stress.decode_report(encoded | {"schema_version": 1})
    with pytest.raises(AdkError):
        stress.decode_report(encoded | {"extra": True})
    assert msgspec.json.decode(msgspec.json.encode(encoded)) == encoded


# -- chaos schedule, chaos counts, timeline --------------------------------------------------


def _scheduled(seed: int, rate: float, window: float) -> int:
    """How many events the seeded schedule has due within `window` seconds."""
    rng, due, n = random.Random(seed), 0.0, 0
    while True:
        due += rng.expovariate(rate)
        if due > window:
            return n
        n += 1


@pytest.mark.timeout(60)
def test_chaos_is_delivered_at_its_rate_and_counted_past_the_kept_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At the highest rate allowed the seeded schedule is delivered (absolute times:
    the time each action takes never delays the next), every event is counted exactly
    (`chaos_total`, `chaos_counts`) although only a few are kept, and the kept ones are a
    sample of the whole run, not its first events."""
    monkeypatch.setattr(engine, "MAX_CHAOS_EVENTS", 20)
    report = stress.run_scenario(
        {
            "duration_s": 1.2,
            "agents": 2,
            "concurrency": 4,
            "sample_interval_s": 0.2,
            "chaos": {"start_after_s": 0.0, "seed": 3, "kill_run_workers_per_s": 200},
        }
    )
    # the schedule runs from the start until the load is over (about `duration_s`)
    scheduled = _scheduled(3, 200.0, report.duration_s - 0.05)
    assert report.chaos_total >= 0.97 * scheduled
    assert len(report.chaos) == 20 < report.chaos_total
    counted = sum(n for outcomes in report.chaos_counts.values() for n in outcomes.values())
    assert counted == report.chaos_total
    assert set(report.chaos_counts) == {"kill_run_workers"}
    assert max(event.t_s for event in report.chaos) > 0.6  # not only the first 20 events
    assert stress.decode_report(json.loads(json.dumps(stress.encode_report(report)))) == report


def _point(t: float, completed: int, p99: float | None) -> TimelinePoint:
    return TimelinePoint(
        t_s=t,
        started=completed,
        completed=completed,
        errors=0,
        in_flight=0,
        throughput_per_s=0.0,
        latency_p50_ms=p99,
        latency_p95_ms=p99,
        latency_p99_ms=p99,
    )


def test_halving_the_timeline_merges_neighbours() -> None:
    """Merged pairs keep the cumulative counts, recompute throughput over their span and
    keep the larger percentile (a spike never vanishes)."""
    points = [
        _point(1.0, 10, 5.0),
        _point(2.0, 30, 50.0),
        _point(3.0, 30, None),
        _point(4.0, 70, 1.0),
    ]
    merged = halve_timeline(points)
    assert [p.t_s for p in merged] == [2.0, 4.0]
    assert [p.completed for p in merged] == [30, 70]
    assert [p.throughput_per_s for p in merged] == [15.0, 20.0]
    assert [p.latency_p99_ms for p in merged] == [50.0, 1.0]
    assert halve_timeline(points[:3])[-1] == points[2]  # an odd last point is kept


@pytest.mark.timeout(60)
def test_a_full_timeline_keeps_uniform_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the cap, points are merged pairwise (the merge itself is
    `test_halving_the_timeline_merges_neighbours`): the timeline stays within its cap,
    in time order, over the whole run, and no completion is lost from the throughput
    series. (Its spacing in seconds is not asserted: sample ticks run late on a loaded
    machine.)"""
    monkeypatch.setattr(engine, "MAX_TIMELINE", 6)
    report = stress.run_scenario(
        {"duration_s": 1.3, "agents": 1, "concurrency": 2, "sample_interval_s": 0.05}
    )
    timeline = report.timeline
    assert 3 <= len(timeline) <= 6
    starts = [0.0] + [p.t_s for p in timeline[:-1]]
    spans = [p.t_s - start for p, start in zip(timeline, starts, strict=True)]
    assert all(span > 0 for span in spans)
    delivered = sum(p.throughput_per_s * span for p, span in zip(timeline, spans, strict=True))
    assert delivered == pytest.approx(timeline[-1].completed)
