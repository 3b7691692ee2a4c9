"""The stress harness behind `adk stress`: scenarios, the engine, targets, reports.

``run_scenario(load_scenario(data))`` drives the runtime in this process (or a daemon)
with the scenario's load and chaos schedule and returns a `StressReport` whose
invariants say whether the system held.
"""

from __future__ import annotations

from adk_actors.stress.daemon_target import DaemonApiTarget
from adk_actors.stress.engine import make_target, run_scenario, run_scenario_async
from adk_actors.stress.inprocess import InProcessTarget
from adk_actors.stress.records import (
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
    decode_report,
    encode_report,
    outcome_of,
)
from adk_actors.stress.report import write_reports
from adk_actors.stress.scenario import Scenario, encode_scenario, load_scenario, read_scenario
from adk_actors.stress.target import Target

__all__ = [
    "ChaosAction",
    "ChaosEvent",
    "ChaosOutcome",
    "DaemonApiTarget",
    "InProcessTarget",
    "InvariantResult",
    "Outcome",
    "ProgressSnapshot",
    "Scenario",
    "StressInterrupted",
    "StressReport",
    "Target",
    "TimelinePoint",
    "chaos_event",
    "decode_report",
    "encode_report",
    "encode_scenario",
    "load_scenario",
    "make_target",
    "outcome_of",
    "read_scenario",
    "run_scenario",
    "run_scenario_async",
    "write_reports",
]
