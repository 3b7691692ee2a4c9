"""What a stress run produces: outcomes, progress snapshots, timeline points, chaos
events, invariant results and the report, as frozen msgspec structs (JSON-safe).

`encode_report` / `decode_report` are the only way a report crosses a boundary (the
report files, the CLI's ``--json``), so a saved report always decodes strictly.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import msgspec

from adk_actors.outcomes import Cancelled, Completed
from adk_actors.workflows import outcomes as workflow_outcomes
from providers.errors import AdkError

REPORT_SCHEMA_VERSION = 2
"""2: `interrupted`, `chaos_total`, `chaos_counts`; chaos events carry a typed `action`,
`outcome` and a separate `reason`."""
MAX_CHAOS_REASON = 200
"""Characters kept of a chaos event's `reason` (and of its `target`)."""


class Outcome(StrEnum):
    """How one unit of stress work ended; exactly one per started run."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REJECTED = "rejected"
    LOST = "lost"
    """A run in flight when the daemon was SIGKILLed (allowed only then)."""


class ProgressSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """What the progress callback receives every sample interval."""

    elapsed_s: float
    started: int
    completed: int
    errors: int
    in_flight: int
    total: int | None
    duration_s: float | None
    throughput_per_s: float
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    latency_p99_ms: float | None
    restarts: int
    chaos_events: int


class TimelinePoint(msgspec.Struct, frozen=True, kw_only=True):
    """One sample of the run, `t_s` seconds after it started (throughput and latency
    percentiles over the interval that ended at `t_s`)."""

    t_s: float
    started: int
    completed: int
    errors: int
    in_flight: int
    throughput_per_s: float
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    latency_p99_ms: float | None


class ChaosAction(StrEnum):
    """What a chaos event does (the scenario's ``chaos`` keys without their unit)."""

    KILL_RUN_WORKERS = "kill_run_workers"
    KILL_AGENTS = "kill_agents"
    KILL_INVOCATION_SERVERS = "kill_invocation_servers"
    KILL_LISTENER = "kill_listener"
    KILL_DAEMON = "kill_daemon"


class ChaosOutcome(StrEnum):
    """How one chaos action ended; a skipped one says why in `ChaosEvent.reason`."""

    KILLED = "killed"
    RESTARTED = "restarted"
    """Killed, and its supervisor's replacement was seen."""
    SKIPPED = "skipped"


class ChaosEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One chaos action at `t_s`; `reason` says why it was skipped (empty otherwise)."""

    t_s: float
    action: ChaosAction
    target: str
    outcome: ChaosOutcome
    reason: str = ""


def chaos_event(
    action: str, outcome: ChaosOutcome, target: str = "", reason: str = ""
) -> ChaosEvent:
    """A chaos event as a target returns it (the engine fills `t_s`); `target` and
    `reason` are cut to `MAX_CHAOS_REASON` characters."""
    return ChaosEvent(
        t_s=0.0,
        action=ChaosAction(action),
        target=target[:MAX_CHAOS_REASON],
        outcome=outcome,
        reason=reason[:MAX_CHAOS_REASON],
    )


def outcome_of(result: object) -> Outcome:
    """The stress outcome of a run's terminal: a runtime outcome value (`Completed`,
    `Cancelled`, ... of runs or workflows), or a terminal's type name (the daemon's
    ``"completed"``, ``"cancelled"``, ...). Anything else (failed, paused, timed out,
    unknown, None) is `Outcome.FAILED`."""
    match result:
        case "completed" | Completed() | workflow_outcomes.Completed():
            return Outcome.COMPLETED
        case "cancelled" | Cancelled() | workflow_outcomes.Cancelled():
            return Outcome.CANCELLED
    return Outcome.FAILED


class InvariantResult(msgspec.Struct, frozen=True, kw_only=True):
    """One checked invariant; `detail` says what was measured (and what broke it)."""

    name: str
    held: bool
    detail: str


class StressReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole result of one scenario; `passed` is true when every invariant held.

    `interrupted`: the load was stopped early (Ctrl-C or the caller's stop), so the
    report covers what ran. `chaos` keeps at most the engine's cap of events;
    `chaos_total` counts every one and `chaos_counts` gives action -> outcome -> n
    exactly (``len(chaos) < chaos_total`` when some were not kept).
    """

    schema_version: int
    scenario: dict[str, Any]
    started_at: str
    duration_s: float
    counts: dict[str, int]
    latency_ms: dict[str, float | None]
    throughput_per_s: float
    restarts: int
    timeline: list[TimelinePoint]
    chaos: list[ChaosEvent]
    invariants: dict[str, bool]
    invariant_details: list[InvariantResult]
    environment: dict[str, Any]
    passed: bool
    interrupted: bool = False
    chaos_total: int = 0
    chaos_counts: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)


class StressInterrupted(KeyboardInterrupt):
    """Raised by `run_scenario` after a Ctrl-C, once the load stopped and the target
    closed: `report` is the report of what ran (``report.interrupted`` is true)."""

    def __init__(self, report: StressReport) -> None:
        super().__init__("the stress scenario was interrupted")
        self.report = report


def encode_report(report: StressReport) -> dict[str, Any]:
    """The report as JSON builtins (what report.json holds; equals its JSON round trip)."""
    encoded: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(report))
    return encoded


def decode_report(data: object) -> StressReport:
    """A report from JSON-safe builtins; `invalid_stress_report` when it does not fit."""
    try:
        report = msgspec.convert(data, StressReport, strict=True)
    except msgspec.ValidationError as error:
        raise AdkError("invalid_stress_report", f"stress report {error}") from None
    if report.schema_version != REPORT_SCHEMA_VERSION:
        raise AdkError("invalid_stress_report", "unsupported stress report schema_version")
    return report
