"""The stress engine: drives a `Target` with a scenario's load and chaos schedule and
builds the `StressReport`.

`run_scenario` is synchronous and runs its own asyncio loop on a thread of its own, so
it works from any thread (even one already running a loop); one scenario runs at a time
per process (``stress_already_running``). Load is closed-loop (at most `concurrency`
runs in flight) or open-loop (Poisson arrivals at `rate_per_s`; an arrival finding
`max_backlog` runs in flight is counted ``rejected``, never queued). Every run has its
own deadline; the engine samples a timeline point (and calls `on_progress`) every
`sample_interval_s`, and runs the chaos schedule from `start_after_s` with a seeded
generator. At the end it adds its own invariants to the target's.
"""

from __future__ import annotations

import asyncio
import datetime
import importlib.metadata
import os
import platform
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from adk_actors.stress import invariants
from adk_actors.stress.daemon_target import DaemonApiTarget
from adk_actors.stress.inprocess import InProcessTarget
from adk_actors.stress.latency import Reservoir, SampleReservoir
from adk_actors.stress.records import (
    REPORT_SCHEMA_VERSION,
    ChaosAction,
    ChaosEvent,
    ChaosOutcome,
    InvariantResult,
    Outcome,
    ProgressSnapshot,
    StressInterrupted,
    StressReport,
    TimelinePoint,
    chaos_event,
)
from adk_actors.stress.scenario import Scenario, encode_scenario, load_scenario
from adk_actors.stress.target import Target
from providers.errors import AdkError
from supervision.logs import get_logger

_log = get_logger("adk_actors.stress")

ProgressCallback = Callable[[ProgressSnapshot], None]
StopCallback = Callable[[int], None]

RUN_GRACE_S = 10.0
"""Past a run's own deadline, how long the engine waits for the target to end it
before counting it failed."""
CHAOS_TIMEOUT_S = 90.0
"""How long one chaos action may take: a listener restart takes up to 20 s, a daemon
restart up to about a minute; an action given up on would be recorded as skipped while
it goes on."""
MAX_CHAOS_IN_FLIGHT = 8
"""Chaos actions running at once; a scheduled action past it is recorded as skipped."""
MAX_CHAOS_EVENTS = 10_000
"""Chaos events kept in the report, a uniform sample over the whole run past it (all
are counted: `chaos_total`, `chaos_counts`)."""
MAX_TIMELINE = 10_000
"""Timeline points kept (even); when full, neighbouring points are merged pairwise and
later points each cover twice as many sample intervals (uniform resolution)."""
INTERVAL_RESERVOIR = 4096
LATENCY_QUANTILES = (50.0, 90.0, 95.0, 99.0)
_JOIN_POLL_S = 0.2
"""How often the caller's thread wakes while it waits (so Ctrl-C reaches it), and the
longest sleep between two open-loop arrivals."""

_running = threading.Lock()


def make_target(scenario: Scenario) -> Target:
    """The target a scenario names: the runtime in this process, or a daemon's API."""
    return DaemonApiTarget() if scenario.is_daemon else InProcessTarget()


def run_scenario(
    scenario: Scenario | dict[str, Any],
    *,
    on_progress: ProgressCallback | None = None,
    target: Target | None = None,
    stop: threading.Event | None = None,
    on_stop: StopCallback | None = None,
) -> StressReport:
    """Run `scenario` to its end and return the report (blocking).

    `target` overrides the one the scenario names (tests, embedding); `on_progress`
    is called on the engine's thread every sample interval and once at the end.
    Setting `stop` ends the load early: no new run starts, the runs in flight end,
    and the report (``interrupted``) covers what ran. A first Ctrl-C does the same
    (`on_stop` is called with the runs still in flight) and then raises
    `StressInterrupted` carrying that report; a second one leaves at once.
    """
    checked = load_scenario(scenario)
    chosen = target if target is not None else make_target(checked)
    if not _running.acquire(blocking=False):
        raise AdkError("stress_already_running", "a stress scenario is already running")
    stopping = stop if stop is not None else threading.Event()
    interrupted = False
    box: dict[str, Any] = {}
    finished = threading.Event()

    engine = _Engine(checked, chosen, stopping)

    def main() -> None:
        try:
            box["report"] = asyncio.run(engine.run(on_progress))
        except BaseException as error:
            box["error"] = error
        finally:
            finished.set()

    try:
        thread = threading.Thread(target=main, name="adk-stress-engine", daemon=True)
        thread.start()
        while True:
            # The whole wait is inside the try, wherever Ctrl-C lands; an event, not
            # `join`: an interrupted join can leave a live thread looking stopped.
            try:
                while not finished.wait(_JOIN_POLL_S):
                    pass
                break
            except KeyboardInterrupt:
                if interrupted:
                    raise
                interrupted = True
                stopping.set()
                in_flight = len(engine.tally.in_flight)
                _log.warning("adk.stress.interrupted", in_flight=in_flight)
                if on_stop is not None:
                    on_stop(in_flight)
        thread.join(_JOIN_POLL_S)  # it only returns from `main` now
    finally:
        _running.release()
    if "error" in box:
        raise box["error"]
    report: StressReport = box["report"]
    if interrupted:
        raise StressInterrupted(report)
    return report


async def run_scenario_async(
    scenario: Scenario,
    on_progress: ProgressCallback | None = None,
    target: Target | None = None,
    *,
    stop: threading.Event | None = None,
) -> StressReport:
    """`run_scenario` on the caller's loop (the caller keeps one scenario at a time)."""
    engine = _Engine(scenario, target if target is not None else make_target(scenario), stop)
    return await engine.run(on_progress)


class Tally:
    """What the engine counts: runs started and ended (by outcome), runs in flight (by
    index, so a second terminal for one run is seen), and latencies."""

    def __init__(self, seed: int) -> None:
        self.started = 0
        self.counts: dict[str, int] = {outcome.value: 0 for outcome in Outcome}
        self.in_flight: set[int] = set()
        self.duplicates = 0
        self.latency = Reservoir(seed=seed)
        self.interval = Reservoir(INTERVAL_RESERVOIR, seed=seed + 1)

    def begin(self, index: int) -> None:
        """Run `index` started."""
        self.started += 1
        self.in_flight.add(index)

    def end(self, index: int, outcome: Outcome, seconds: float) -> None:
        """Run `index` ended with `outcome` after `seconds` (completed runs' latency)."""
        if index not in self.in_flight:
            self.duplicates += 1
            return
        self.in_flight.discard(index)
        self.counts[outcome.value] += 1
        if outcome is Outcome.COMPLETED:
            self.latency.add(seconds * 1000.0)
            self.interval.add(seconds * 1000.0)

    @property
    def completed(self) -> int:
        return self.counts[Outcome.COMPLETED.value]

    @property
    def errors(self) -> int:
        return sum(self.counts.values()) - self.completed

    def invariants(self, daemon_kills: int) -> list[InvariantResult]:
        """The engine's own checks: its accounting (every run it started ended once in
        its books; the runtime's side is the target's ``every_run_one_terminal``), and
        LOST only after daemon kills."""
        return [
            invariants.one_terminal(
                self.started, self.counts, self.duplicates, len(self.in_flight)
            ),
            invariants.no_unexpected_lost(self.counts, daemon_kills),
        ]


class _Engine:
    def __init__(self, scenario: Scenario, target: Target, stop: threading.Event | None) -> None:
        self.scenario = scenario
        self.stop = stop
        self.target = target
        self.tally = Tally(scenario.seed)
        self.timeline: list[TimelinePoint] = []
        self.stride = 1
        """Sample intervals per timeline point (doubles at each compaction)."""
        self.last_weight = 0
        """Sample intervals merged into the newest point so far."""
        self.chaos_events: SampleReservoir[ChaosEvent] = SampleReservoir(
            MAX_CHAOS_EVENTS, rng=random.Random(scenario.seed + 3)
        )
        self.chaos_count = 0
        self.chaos_counts: dict[str, dict[str, int]] = {}
        self.daemon_kills = 0
        self.interrupted = False
        self.t0 = 0.0
        self.last_sample = (0.0, 0)
        self.load_done = asyncio.Event()
        self.kind_rng = random.Random(scenario.seed)
        self.arrival_rng = random.Random(scenario.seed + 2)
        self.tasks: set[asyncio.Task[None]] = set()
        self.on_progress: ProgressCallback | None = None

    async def run(self, on_progress: ProgressCallback | None) -> StressReport:
        self.on_progress = on_progress
        started_at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        await self.target.open(self.scenario)
        self.t0 = time.monotonic()
        self.last_sample = (self.t0, 0)
        background = [
            asyncio.create_task(self._sampler()),
            asyncio.create_task(self._chaos()),
        ]
        try:
            if self.scenario.rate_per_s is not None:
                await self._open_loop(self.scenario.rate_per_s)
            else:
                await self._closed_loop(self.scenario.concurrency or 1)
            while self.tasks:
                await asyncio.gather(*list(self.tasks))
        finally:
            self.load_done.set()
            await asyncio.gather(*background, return_exceptions=True)
            duration = time.monotonic() - self.t0
            self._sample()
            results = await self._close()
        results.extend(self.tally.invariants(self.daemon_kills))
        return self._report(started_at, duration, results)

    async def _close(self) -> list[InvariantResult]:
        """The target's invariants; a close that raises is a failed invariant of its own
        (the report is still written)."""
        try:
            return await self.target.close()
        except Exception as error:
            _log.warning("adk.stress.close_failed", error=type(error).__name__)
            detail = f"the target failed to close: {type(error).__name__}"
            return [InvariantResult(name="target_closed", held=False, detail=detail)]

    # -- load --------------------------------------------------------------------------------

    def _more(self, index: int) -> bool:
        if self.stop is not None and self.stop.is_set():
            self.interrupted = True
            return False
        if self.scenario.count is not None:
            return index < self.scenario.count
        assert self.scenario.duration_s is not None
        return time.monotonic() - self.t0 < self.scenario.duration_s

    async def _closed_loop(self, concurrency: int) -> None:
        slots = asyncio.Semaphore(concurrency)
        index = 0
        while self._more(index):
            await slots.acquire()
            if not self._more(index):
                slots.release()
                break
            self._spawn(index, slots)
            index += 1

    async def _open_loop(self, rate: float) -> None:
        index = 0
        due = time.monotonic()
        while self._more(index):
            wait = due - time.monotonic()
            if wait > 0:  # in slices, so the end of the duration or a stop is seen
                await asyncio.sleep(min(wait, _JOIN_POLL_S))
                continue
            if len(self.tally.in_flight) >= self.scenario.max_backlog:
                self.tally.begin(index)
                self.tally.end(index, Outcome.REJECTED, 0.0)
            else:
                self._spawn(index, None)
            index += 1
            due += self.arrival_rng.expovariate(rate)
            if index % 256 == 0:
                await asyncio.sleep(0)  # arrivals behind schedule never starve the runs

    def _spawn(self, index: int, slots: asyncio.Semaphore | None) -> None:
        kind = self._kind()
        self.tally.begin(index)
        task = asyncio.create_task(self._one(kind, index))
        self.tasks.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self.tasks.discard(finished)
            if slots is not None:
                slots.release()

        task.add_done_callback(done)

    def _kind(self) -> str:
        mix = self.scenario.mix
        if self.scenario.kind != "mixed" or mix is None:
            return self.scenario.kind
        weights = mix.weights()
        return self.kind_rng.choices(list(weights), weights=list(weights.values()))[0]

    async def _one(self, kind: str, index: int) -> None:
        begun = time.monotonic()
        deadline = begun + self.scenario.run_timeout_s
        try:
            outcome = await asyncio.wait_for(
                self.target.run_one(kind, index, deadline),
                self.scenario.run_timeout_s + RUN_GRACE_S,
            )
        except TimeoutError:
            _log.warning("adk.stress.run_overran", kind=kind, index=index)
            outcome = Outcome.FAILED
        except Exception as error:
            _log.warning(
                "adk.stress.run_raised", kind=kind, index=index, error=type(error).__name__
            )
            outcome = Outcome.FAILED
        self.tally.end(index, outcome, time.monotonic() - begun)

    # -- sampling ----------------------------------------------------------------------------

    async def _sampler(self) -> None:
        while not self.load_done.is_set():
            try:
                await asyncio.wait_for(self.load_done.wait(), self.scenario.sample_interval_s)
            except TimeoutError:
                self._sample()

    def _sample(self) -> None:
        now = time.monotonic()
        then, completed_then = self.last_sample
        tally = self.tally
        span = now - then
        throughput = (tally.completed - completed_then) / span if span > 0 else 0.0
        p50, _, p95, p99 = tally.interval.percentiles(*LATENCY_QUANTILES)
        point = TimelinePoint(
            t_s=round(now - self.t0, 6),
            started=tally.started,
            completed=tally.completed,
            errors=tally.errors,
            in_flight=len(tally.in_flight),
            throughput_per_s=throughput,
            latency_p50_ms=p50,
            latency_p95_ms=p95,
            latency_p99_ms=p99,
        )
        self._add_point(point)
        tally.interval = Reservoir(INTERVAL_RESERVOIR, seed=tally.started)
        self.last_sample = (now, tally.completed)
        if self.on_progress is not None:
            self._progress(point)

    def _add_point(self, point: TimelinePoint) -> None:
        """Add one interval's point: merged into the newest point until that covers
        `stride` intervals; a full timeline is halved by merging neighbours."""
        if self.timeline and self.last_weight < self.stride:
            before = self.timeline[-2] if len(self.timeline) > 1 else None
            self.timeline[-1] = merge_points(before, self.timeline[-1], point)
            self.last_weight += 1
            return
        if len(self.timeline) >= MAX_TIMELINE:
            self.timeline = halve_timeline(self.timeline)
            self.stride *= 2
        self.timeline.append(point)
        self.last_weight = 1

    def _progress(self, point: TimelinePoint) -> None:
        assert self.on_progress is not None
        snapshot = ProgressSnapshot(
            elapsed_s=point.t_s,
            started=point.started,
            completed=point.completed,
            errors=point.errors,
            in_flight=point.in_flight,
            total=self.scenario.count,
            duration_s=self.scenario.duration_s,
            throughput_per_s=point.throughput_per_s,
            latency_p50_ms=point.latency_p50_ms,
            latency_p95_ms=point.latency_p95_ms,
            latency_p99_ms=point.latency_p99_ms,
            restarts=self.target.restarts(),
            chaos_events=self.chaos_count,
        )
        try:
            self.on_progress(snapshot)
        except Exception as error:  # a broken display never stops the run
            _log.warning("adk.stress.progress_failed", error=type(error).__name__)

    # -- chaos -------------------------------------------------------------------------------

    async def _chaos(self) -> None:
        chaos = self.scenario.chaos
        rates = chaos.rates() if chaos is not None else {}
        if chaos is None or not rates:
            return
        rng = random.Random(chaos.seed)  # actions and victims
        timing = random.Random(chaos.seed)  # the times alone: the schedule is the seed's
        if await self._stopped_within(chaos.start_after_s):
            return
        actions, weights = list(rates), list(rates.values())
        total = sum(weights)
        running: set[asyncio.Task[None]] = set()
        due = time.monotonic()
        while True:
            # absolute times: the time an action takes never delays the next ones
            due += timing.expovariate(total)
            wait = due - time.monotonic()
            if wait > 0 and await self._stopped_within(wait):
                break
            if self.load_done.is_set():
                break
            action = rng.choices(actions, weights=weights)[0]
            at = time.monotonic() - self.t0
            if len(running) >= MAX_CHAOS_IN_FLIGHT:
                self._record(at, chaos_event(action, ChaosOutcome.SKIPPED, reason="busy"))
                await asyncio.sleep(0)
                continue
            task = asyncio.create_task(self._chaos_one(action, at, random.Random(rng.random())))
            running.add(task)
            task.add_done_callback(running.discard)
        if running:
            await asyncio.gather(*running, return_exceptions=True)

    async def _chaos_one(self, action: ChaosAction, at: float, rng: random.Random) -> None:
        try:
            event = await asyncio.wait_for(self.target.chaos(action, rng), CHAOS_TIMEOUT_S)
        except Exception as error:
            event = chaos_event(action, ChaosOutcome.SKIPPED, reason=type(error).__name__)
        self._record(at, event)

    def _record(self, at: float, event: ChaosEvent) -> None:
        """Count every event exactly (`chaos_counts`); keep a uniform sample of them."""
        self.chaos_count += 1
        by_outcome = self.chaos_counts.setdefault(event.action.value, {})
        by_outcome[event.outcome.value] = by_outcome.get(event.outcome.value, 0) + 1
        if event.action is ChaosAction.KILL_DAEMON and event.outcome is not ChaosOutcome.SKIPPED:
            self.daemon_kills += 1
        self.chaos_events.add(msgspec.structs.replace(event, t_s=round(at, 6)))

    async def _stopped_within(self, seconds: float) -> bool:
        """Sleep `seconds` unless the load ends first; true when it has ended."""
        try:
            await asyncio.wait_for(self.load_done.wait(), seconds)
        except TimeoutError:
            return False
        return True

    # -- the report --------------------------------------------------------------------------

    def _report(
        self, started_at: str, duration: float, results: list[InvariantResult]
    ) -> StressReport:
        latency = self.tally.latency
        p50, p90, p95, p99 = latency.percentiles(*LATENCY_QUANTILES)
        held = {result.name: result.held for result in results}
        return StressReport(
            schema_version=REPORT_SCHEMA_VERSION,
            scenario=encode_scenario(self.scenario),
            started_at=started_at,
            duration_s=round(duration, 6),
            counts=dict(self.tally.counts),
            latency_ms={
                "p50": p50,
                "p90": p90,
                "p95": p95,
                "p99": p99,
                "max": latency.maximum,
                "mean": latency.mean(),
            },
            throughput_per_s=self.tally.completed / duration if duration > 0 else 0.0,
            restarts=self.target.restarts(),
            timeline=list(self.timeline),
            chaos=sorted(self.chaos_events.items, key=lambda event: event.t_s),
            invariants=held,
            invariant_details=results,
            environment=_environment(),
            passed=all(result.held for result in results),
            interrupted=self.interrupted,
            chaos_total=self.chaos_count,
            chaos_counts={action: dict(n) for action, n in sorted(self.chaos_counts.items())},
        )


def merge_points(
    before: TimelinePoint | None, first: TimelinePoint, second: TimelinePoint
) -> TimelinePoint:
    """One point covering `first`'s and `second`'s intervals (neighbours; `before` is
    the point ending where `first`'s interval starts, None at the start of the run).
    Counts are cumulative (the later point's); throughput is recomputed over the whole
    span; each latency percentile is the larger of the two, so a spike never vanishes."""
    start_t = before.t_s if before is not None else 0.0
    start_completed = before.completed if before is not None else 0
    span = second.t_s - start_t
    throughput = (second.completed - start_completed) / span if span > 0 else 0.0
    return msgspec.structs.replace(
        second,
        throughput_per_s=throughput,
        latency_p50_ms=_larger(first.latency_p50_ms, second.latency_p50_ms),
        latency_p95_ms=_larger(first.latency_p95_ms, second.latency_p95_ms),
        latency_p99_ms=_larger(first.latency_p99_ms, second.latency_p99_ms),
    )


def halve_timeline(points: list[TimelinePoint]) -> list[TimelinePoint]:
    """`points` with each pair of neighbours merged (an odd last point kept as is)."""
    merged: list[TimelinePoint] = []
    for n in range(0, len(points) - 1, 2):
        before = merged[-1] if merged else None
        merged.append(merge_points(before, points[n], points[n + 1]))
    if len(points) % 2:
        merged.append(points[-1])
    return merged


def _larger(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return b if a is None else a
    return max(a, b)


def _environment() -> dict[str, Any]:
    try:
        version = importlib.metadata.version("adk-actors")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return {
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "adk_version": version,
    }
