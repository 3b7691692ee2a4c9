"""The scenario file of `adk stress`: a strict msgspec struct with bounded numbers.

`load_scenario(data)` checks a decoded JSON object; `read_scenario(path)` reads and
checks a file. Every failure is ``AdkError(("invalid_stress_scenario", key), ...)``
naming the key (unknown keys too), never the value. Cross-field rules: exactly one
of `count`/`duration_s`, exactly one of `concurrency`/`rate_per_s`, `mix` only (and
always) with kind ``"mixed"``, listener and daemon kills only with a daemon target.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from adk_actors.stress.records import ChaosAction
from providers.errors import AdkError, decode_options

REASON = "invalid_stress_scenario"
MAX_COUNT = 1_000_000
MAX_CONCURRENCY = 4096
MAX_DURATION_S = 86_400.0
MAX_AGENTS = 10_000
MAX_RATE_PER_S = 100_000.0
MAX_TOOL_CALLS = 16
MAX_CHAOS_PER_S = 200.0
"""The highest total chaos rate the engine delivers as configured (its schedule keeps
absolute times); above it a scenario is refused, never silently under-delivered."""
MIN_LISTENER_EVERY_S = 0.5
MIN_DAEMON_EVERY_S = 2.0
"""A daemon restart takes about a second: a kill every 2 s or more (on average) leaves
it time to serve between kills."""
MAX_LATENCY_S = 60.0
DEFAULT_MAX_BACKLOG = 1024
MAX_BACKLOG = 100_000
DEFAULT_RUN_TIMEOUT_S = 60.0
MAX_RUN_TIMEOUT_S = 3600.0
MAX_SCENARIO_BYTES = 1_048_576
KINDS = ("runs", "workflows", "ambient", "approvals", "sessions", "mixed")
MIX_KINDS = ("runs", "workflows", "ambient", "approvals", "sessions")

Kind = Literal["runs", "workflows", "ambient", "approvals", "sessions", "mixed"]
_Name = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
_Latency = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_LATENCY_S)]
_Weight = Annotated[float, msgspec.Meta(ge=0.0, le=1_000_000.0)]
_ChaosRate = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_CHAOS_PER_S)]
_Every = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_DURATION_S)]
_Seed = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]


class Lognormal(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Model latency drawn from a lognormal with this median and 99th percentile."""

    distribution: Literal["lognormal"]
    median_s: Annotated[float, msgspec.Meta(gt=0.0, le=MAX_LATENCY_S)]
    p99_s: Annotated[float, msgspec.Meta(gt=0.0, le=MAX_LATENCY_S)]

    def __post_init__(self) -> None:
        if self.p99_s < self.median_s:
            raise ValueError("p99_s must be at least median_s")


class Model(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The scripted model: `latency` is ``[low, high]`` seconds (uniform) or a
    `Lognormal`."""

    latency: tuple[_Latency, _Latency] | Lognormal = (0.001, 0.005)

    def __post_init__(self) -> None:
        if isinstance(self.latency, tuple) and self.latency[1] < self.latency[0]:
            raise ValueError("latency high must be at least low")


class Mix(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Relative weights of the kinds a ``"mixed"`` scenario picks from."""

    runs: _Weight = 0.0
    workflows: _Weight = 0.0
    ambient: _Weight = 0.0
    approvals: _Weight = 0.0
    sessions: _Weight = 0.0

    def __post_init__(self) -> None:
        if not sum(self.weights().values()) > 0:
            raise ValueError("at least one weight must be positive")

    def weights(self) -> dict[str, float]:
        """Kind -> weight, in a stable order."""
        return {kind: float(getattr(self, kind)) for kind in MIX_KINDS}


class DaemonSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Spawn ``adk serve`` (``"spawn": true``) or drive the daemon at ``"url"``."""

    spawn: bool = False
    url: Annotated[str, msgspec.Meta(min_length=1, max_length=2048)] | None = None

    def __post_init__(self) -> None:
        if self.spawn == (self.url is not None):
            raise ValueError("exactly one of spawn (true) and url is required")


class DaemonTarget(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``{"daemon": {...}}``: the daemon's /dev/v1 API is the target."""

    daemon: DaemonSpec


class Chaos(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The chaos schedule: rates (per second) of each kill, from `start_after_s` on,
    drawn from `seed`; listener and daemon kills every so many seconds (0: never)."""

    start_after_s: Annotated[float, msgspec.Meta(ge=0.0, le=MAX_DURATION_S)] = 1.0
    seed: _Seed = 7
    kill_run_workers_per_s: _ChaosRate = 0.0
    kill_agents_per_s: _ChaosRate = 0.0
    kill_invocation_servers_per_s: _ChaosRate = 0.0
    kill_listener_every_s: _Every = 0.0
    kill_daemon_every_s: _Every = 0.0

    def __post_init__(self) -> None:
        for key, period, floor in (
            ("kill_listener_every_s", self.kill_listener_every_s, MIN_LISTENER_EVERY_S),
            ("kill_daemon_every_s", self.kill_daemon_every_s, MIN_DAEMON_EVERY_S),
        ):
            if 0 < period < floor:
                raise ValueError(f"{key} is 0 (never) or at least {floor} s")
        if sum(self.rates().values()) > MAX_CHAOS_PER_S:
            raise ValueError(f"the chaos rates add up to more than {MAX_CHAOS_PER_S} per s")

    def rates(self) -> dict[ChaosAction, float]:
        """Action -> events per second, for the actions this schedule runs (rate > 0)."""
        every = {
            ChaosAction.KILL_LISTENER: self.kill_listener_every_s,
            ChaosAction.KILL_DAEMON: self.kill_daemon_every_s,
        }
        rates = {
            ChaosAction.KILL_RUN_WORKERS: float(self.kill_run_workers_per_s),
            ChaosAction.KILL_AGENTS: float(self.kill_agents_per_s),
            ChaosAction.KILL_INVOCATION_SERVERS: float(self.kill_invocation_servers_per_s),
            **{action: 1.0 / period for action, period in every.items() if period > 0},
        }
        return {action: rate for action, rate in rates.items() if rate > 0}


class Scenario(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One stress scenario (the file `adk stress` reads). `max_backlog` bounds the runs
    in flight in rate mode (arrivals past it are counted ``rejected``); `run_timeout_s`
    is each run's deadline."""

    name: _Name = "stress"
    kind: Kind = "runs"
    mix: Mix | None = None
    target: Literal["inprocess"] | DaemonTarget = "inprocess"
    agents: Annotated[int, msgspec.Meta(ge=1, le=MAX_AGENTS)] = 8
    count: Annotated[int, msgspec.Meta(ge=1, le=MAX_COUNT)] | None = None
    duration_s: Annotated[float, msgspec.Meta(gt=0.0, le=MAX_DURATION_S)] | None = None
    concurrency: Annotated[int, msgspec.Meta(ge=1, le=MAX_CONCURRENCY)] | None = None
    rate_per_s: Annotated[float, msgspec.Meta(gt=0.0, le=MAX_RATE_PER_S)] | None = None
    max_backlog: Annotated[int, msgspec.Meta(ge=1, le=MAX_BACKLOG)] = DEFAULT_MAX_BACKLOG
    run_timeout_s: Annotated[float, msgspec.Meta(gt=0.0, le=MAX_RUN_TIMEOUT_S)] = (
        DEFAULT_RUN_TIMEOUT_S
    )
    model: Model = msgspec.field(default_factory=Model)
    tool_calls: Annotated[int, msgspec.Meta(ge=0, le=MAX_TOOL_CALLS)] = 0
    session_store: Literal["memory", "lmdb"] = "memory"
    chaos: Chaos | None = None
    sample_interval_s: Annotated[float, msgspec.Meta(ge=0.05, le=3600.0)] = 1.0
    seed: _Seed = 1

    @property
    def is_daemon(self) -> bool:
        """Whether the daemon (spawned or at a URL) is the target."""
        return isinstance(self.target, DaemonTarget)


def load_scenario(data: object) -> Scenario:
    """A checked `Scenario` from a decoded JSON object (or a `Scenario`, checked again)."""
    if isinstance(data, Scenario):
        data = encode_scenario(data)
    if not isinstance(data, dict):
        raise AdkError(REASON, "a stress scenario must be a JSON object")
    scenario = decode_options(Scenario, data, REASON, what="stress scenario")
    _check_rules(scenario)
    return scenario


def read_scenario(path: str | Path) -> Scenario:
    """Read and check a scenario file (at most 1 MiB of JSON)."""
    file = Path(path)
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_SCENARIO_BYTES + 1)
    except OSError as error:
        raise AdkError(
            (REASON, "file"), f"cannot read the scenario file: {error.strerror}"
        ) from None
    if len(raw) > MAX_SCENARIO_BYTES:
        raise AdkError((REASON, "file"), f"a scenario file is at most {MAX_SCENARIO_BYTES} bytes")
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise AdkError((REASON, "file"), "the scenario file is not valid JSON") from None
    return load_scenario(data)


def encode_scenario(scenario: Scenario) -> dict[str, Any]:
    """The scenario as JSON builtins (every field, defaults included; lists, never
    tuples, so it equals its own JSON round trip)."""
    encoded: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(scenario))
    return encoded


def _check_rules(scenario: Scenario) -> None:
    """The rules between keys that a field's own constraints cannot say."""
    if (scenario.count is None) == (scenario.duration_s is None):
        raise AdkError((REASON, "count"), "exactly one of count and duration_s is required")
    if (scenario.concurrency is None) == (scenario.rate_per_s is None):
        raise AdkError(
            (REASON, "concurrency"), "exactly one of concurrency and rate_per_s is required"
        )
    if scenario.kind == "mixed" and scenario.mix is None:
        raise AdkError((REASON, "mix"), "kind 'mixed' needs mix weights")
    if scenario.kind != "mixed" and scenario.mix is not None:
        raise AdkError((REASON, "mix"), "mix is only for kind 'mixed'")
    chaos = scenario.chaos
    if (
        chaos is not None
        and not scenario.is_daemon
        and (chaos.kill_listener_every_s > 0 or chaos.kill_daemon_every_s > 0)
    ):
        raise AdkError((REASON, "chaos"), "listener and daemon kills need a daemon target")
    if scenario.rate_per_s is not None and not math.isfinite(scenario.rate_per_s):
        raise AdkError((REASON, "rate_per_s"), "rate_per_s must be finite")
