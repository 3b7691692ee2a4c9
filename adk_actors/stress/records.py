"""What a stress run produces: outcomes, progress snapshots, timeline points, chaos
events, invariant results and the report, as frozen msgspec structs (JSON-safe).

`encode_report` / `decode_report` are the only way a report crosses a boundary (the
report files, the CLI's ``--json``), so a saved report always decodes strictly.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import msgspec

from providers.errors import AdkError

REPORT_SCHEMA_VERSION = 1


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


class ChaosEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One chaos action: `outcome` is ``"killed"``, ``"restarted"`` or ``"skipped: <why>"``."""

    t_s: float
    action: str
    target: str
    outcome: str


class InvariantResult(msgspec.Struct, frozen=True, kw_only=True):
    """One checked invariant; `detail` says what was measured (and what broke it)."""

    name: str
    held: bool
    detail: str


class StressReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole result of one scenario; `passed` is true when every invariant held."""

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
