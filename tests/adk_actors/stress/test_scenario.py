"""The stress scenario file: strict, bounded, and every refusal names its key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adk_actors import stress
from adk_actors.stress.scenario import (
    MAX_SCENARIO_BYTES,
    DaemonTarget,
    Lognormal,
    encode_scenario,
)
from providers.errors import AdkError

BASE: dict[str, Any] = {"count": 10, "concurrency": 2}


def refused(data: object) -> AdkError:
    with pytest.raises(AdkError) as caught:
        stress.load_scenario(data)
    return caught.value


def test_defaults_and_round_trip() -> None:
    scenario = stress.load_scenario(BASE)
    assert (scenario.kind, scenario.target, scenario.agents, scenario.session_store) == (
        "runs",
        "inprocess",
        8,
        "memory",
    )
    assert scenario.model.latency == (0.001, 0.005)
    assert stress.load_scenario(encode_scenario(scenario)) == scenario
    assert stress.load_scenario(scenario) == scenario
    json.dumps(encode_scenario(scenario))  # JSON-safe


def test_the_documented_example_loads() -> None:
    scenario = stress.load_scenario(
        {
            "name": "mixed",
            "kind": "mixed",
            "mix": {"runs": 0.6, "workflows": 0.2, "ambient": 0.1, "approvals": 0.1},
            "target": {"daemon": {"spawn": True}},
            "agents": 8,
            "count": 500,
            "duration_s": None,
            "concurrency": 64,
            "rate_per_s": None,
            "model": {"latency": {"distribution": "lognormal", "median_s": 0.01, "p99_s": 0.1}},
            "tool_calls": 0,
            "session_store": "lmdb",
            "chaos": {
                "start_after_s": 1.0,
                "seed": 7,
                "kill_run_workers_per_s": 5,
                "kill_agents_per_s": 1,
                "kill_daemon_every_s": 10,
            },
            "sample_interval_s": 1.0,
            "seed": 1,
        }
    )
    assert isinstance(scenario.target, DaemonTarget) and scenario.is_daemon
    assert isinstance(scenario.model.latency, Lognormal)
    assert scenario.chaos is not None
    assert scenario.chaos.rates() == {
        "kill_run_workers": 5.0,
        "kill_agents": 1.0,
        "kill_daemon": 0.1,
    }


def test_a_bad_kind_names_the_allowed_ones() -> None:
    error = refused({**BASE, "kind": "everything"})
    assert error.reason == ("invalid_stress_scenario", "kind")
    assert "'runs'" in str(error) and "'mixed'" in str(error)
    assert "everything" not in str(error)  # never the value


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"count": 10, "duration_s": 5, "concurrency": 2}, "count"),
        ({"concurrency": 2}, "count"),
        ({"count": 10, "concurrency": 2, "rate_per_s": 5}, "concurrency"),
        ({"count": 10}, "concurrency"),
        ({**BASE, "kind": "mixed"}, "mix"),
        ({**BASE, "mix": {"runs": 1}}, "mix"),
        ({**BASE, "kind": "mixed", "mix": {"runs": 0}}, "mix"),
        ({**BASE, "chaos": {"kill_listener_every_s": 5}}, "chaos"),
        ({**BASE, "chaos": {"kill_daemon_every_s": 5}}, "chaos"),
        ({**BASE, "target": {"daemon": {}}}, "target"),
        ({**BASE, "target": {"daemon": {"spawn": True, "url": "http://127.0.0.1:1"}}}, "target"),
        ({**BASE, "target": "elsewhere"}, "target"),
        ({**BASE, "model": {"latency": [0.5, 0.1]}}, "model"),
        (
            {
                **BASE,
                "model": {"latency": {"distribution": "lognormal", "median_s": 1, "p99_s": 0.5}},
            },
            "model",
        ),
        ({**BASE, "session_store": "redis"}, "session_store"),
        ({"count": True, "concurrency": 2}, "count"),  # a bool is not a number
        ({"count": "10", "concurrency": 2}, "count"),
    ],
)
def test_rules_between_keys_and_types(data: dict[str, Any], key: str) -> None:
    assert refused(data).reason == ("invalid_stress_scenario", key)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("count", 0),
        ("count", 1_000_001),
        ("concurrency", 0),
        ("concurrency", 4097),
        ("agents", 0),
        ("agents", 10_001),
        ("tool_calls", 17),
        ("sample_interval_s", 0.0),
        ("max_backlog", 0),
        ("run_timeout_s", 0),
    ],
)
def test_bounds(key: str, value: object) -> None:
    assert refused({**BASE, key: value}).reason == ("invalid_stress_scenario", key)


def test_duration_and_rate_bounds() -> None:
    assert refused({"duration_s": 86_401, "concurrency": 1}).reason == (
        "invalid_stress_scenario",
        "duration_s",
    )
    assert refused({"count": 1, "rate_per_s": 0}).reason == (
        "invalid_stress_scenario",
        "rate_per_s",
    )
    assert stress.load_scenario({"duration_s": 86_400, "rate_per_s": 100_000}).count is None


def test_unknown_keys_are_named() -> None:
    error = refused({**BASE, "workers": 4, "chaos": {}})
    assert error.reason == ("invalid_stress_scenario", ("unknown_keys", ["workers"]))
    nested = refused({**BASE, "chaos": {"kill_everything_per_s": 1}})
    assert nested.reason == ("invalid_stress_scenario", "chaos")


def test_not_an_object() -> None:
    assert refused([BASE]).reason == "invalid_stress_scenario"


def test_read_scenario(tmp_path: Path) -> None:
    good = tmp_path / "scenario.json"
    good.write_text(json.dumps({**BASE, "name": "from-file"}))
    assert stress.read_scenario(good).name == "from-file"
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(AdkError) as caught:
        stress.read_scenario(broken)
    assert caught.value.reason == ("invalid_stress_scenario", "file")
    with pytest.raises(AdkError) as missing:
        stress.read_scenario(tmp_path / "nowhere.json")
    assert missing.value.reason == ("invalid_stress_scenario", "file")
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({**BASE, "name": "x" * MAX_SCENARIO_BYTES}))
    with pytest.raises(AdkError) as too_big:
        stress.read_scenario(huge)
    assert too_big.value.reason == ("invalid_stress_scenario", "file")


DAEMON = {**BASE, "target": {"daemon": {"spawn": True}}}


@pytest.mark.parametrize(
    "chaos",
    [
        {"kill_listener_every_s": 1e-6},  # a million events a second
        {"kill_listener_every_s": 0.4},
        {"kill_daemon_every_s": 1.0},  # faster than a daemon restarts
        {"kill_agents_per_s": 201},
        {"kill_agents_per_s": 150, "kill_run_workers_per_s": 60},  # 210 in all
        {"kill_agents_per_s": 100, "kill_listener_every_s": 0.5, "kill_daemon_every_s": 0.5},
    ],
)
def test_chaos_rates_and_periods_are_bounded(chaos: dict[str, float]) -> None:
    """Periods are 0 (never) or at least their floor, and the rates add up to at most
    what the engine delivers as configured; typed refusals name the key."""
    assert refused({**DAEMON, "chaos": chaos}).reason == ("invalid_stress_scenario", "chaos")


def test_chaos_at_the_bounds_loads() -> None:
    chaos = {
        "kill_listener_every_s": 0.5,
        "kill_daemon_every_s": 2.0,
        "kill_agents_per_s": 100,
        "kill_run_workers_per_s": 97.5,
    }
    loaded = stress.load_scenario({**DAEMON, "chaos": chaos})
    assert loaded.chaos is not None
    assert sum(loaded.chaos.rates().values()) == pytest.approx(200.0)
