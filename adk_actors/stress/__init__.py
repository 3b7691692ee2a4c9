"""The stress harness behind `adk stress`: scenarios, the engine, targets, reports.

``run_scenario(load_scenario(data))`` drives the runtime in this process (or a daemon)
with the scenario's load and chaos schedule and returns a `StressReport` whose
invariants say whether the system held.

The names load on first use (PEP 562): the engine brings the daemon target (uvicorn,
the daemon, httpx) and the report matplotlib, which the records and the scenario file
(what the CLI's progress display and a report reader need) do not.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_WHERE = {
    "DaemonApiTarget": "daemon_target",
    "make_target": "engine",
    "run_scenario": "engine",
    "run_scenario_async": "engine",
    "InProcessTarget": "inprocess",
    "ChaosAction": "records",
    "ChaosEvent": "records",
    "ChaosOutcome": "records",
    "InvariantResult": "records",
    "Outcome": "records",
    "ProgressSnapshot": "records",
    "StressInterrupted": "records",
    "StressReport": "records",
    "TimelinePoint": "records",
    "chaos_event": "records",
    "decode_report": "records",
    "encode_report": "records",
    "outcome_of": "records",
    "write_reports": "report",
    "Scenario": "scenario",
    "encode_scenario": "scenario",
    "load_scenario": "scenario",
    "read_scenario": "scenario",
    "Target": "target",
}

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


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'adk_actors.stress' has no attribute {name!r}")
    return getattr(importlib.import_module(f"adk_actors.stress.{module}"), name)
