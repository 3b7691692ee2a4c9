"""A fixed catalog of metric instruments, with bounded label series.

The instruments (`CATALOG`) are created once on an OpenTelemetry meter (the API's:
the application picks the SDK). Each has a fixed set of label keys; each instrument
accepts at most `max_series` distinct label combinations, and a new combination past
that is recorded under the aggregate series whose every label is `OVERFLOW`
(``"_other"``), so a high-cardinality value (a user-chosen agent name, a model id)
can never grow the exporter's state without limit. Label values are short strings;
anything else, or a longer string, is `OVERFLOW` too.

`snapshot()` returns content-free totals kept in process (counts and sums per
instrument, series in use, overflowed records): what the developer API serves.

`default_metrics()` is the process-wide catalog: it reads the kernel pool's
saturation at collection time and counts every kernel supervisor restart
(`supervision.on_restart`); the runtime's layers call its recorders.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from adk_actors.observability.semconv import MAPPING_VERSION
from supervision import RestartReport, kernel_stats, on_restart

OVERFLOW: Final = "_other"
DEFAULT_MAX_SERIES: Final = 100
MAX_LABEL_CHARS: Final = 64
METER_NAME: Final = "adk_actors"

Kind = Literal["counter", "histogram", "updown"]


@dataclass(frozen=True, slots=True)
class Instrument:
    name: str
    kind: Kind
    unit: str
    labels: tuple[str, ...]
    description: str


CATALOG: Final[tuple[Instrument, ...]] = (
    Instrument("adk.runs", "counter", "{run}", ("agent", "outcome"), "Stable runs ended"),
    Instrument(
        "adk.invocations", "counter", "{invocation}", ("agent", "outcome"), "Invocations ended"
    ),
    Instrument(
        "adk.invocation.duration", "histogram", "s", ("agent", "outcome"), "Invocation time"
    ),
    Instrument(
        "adk.model.calls", "counter", "{call}", ("provider", "model", "outcome"), "Model calls"
    ),
    Instrument("adk.model.duration", "histogram", "s", ("provider", "model"), "Model call time"),
    Instrument("adk.tool.calls", "counter", "{call}", ("agent", "tool", "outcome"), "Tool calls"),
    Instrument("adk.tool.duration", "histogram", "s", ("tool",), "Tool call time"),
    Instrument(
        "adk.tokens", "counter", "{token}", ("provider", "model", "type"), "Tokens (input/output)"
    ),
    Instrument(
        "adk.admission.queue", "updown", "{request}", ("lane",), "Requests waiting for admission"
    ),
    Instrument(
        "adk.admission.rejected", "counter", "{request}", ("lane", "reason"), "Admissions refused"
    ),
    Instrument("adk.restarts", "counter", "{restart}", ("supervisor",), "Child restarts"),
)
BY_NAME: Final[Mapping[str, Instrument]] = {item.name: item for item in CATALOG}

# gauges read at collection time (the pool's saturation, from the kernel's counters)
POOL_GAUGES: Final = (
    ("adk.pool.threads", "task_threads", "{thread}"),
    ("adk.pool.busy", "task_threads_busy", "{thread}"),
    ("adk.pool.abandoned", "task_threads_abandoned", "{thread}"),
    ("adk.pool.queued", "task_queue", "{task}"),
)
POOL_READING_SECONDS: Final = 1.0
"""One collection reads the pool's counters once: the gauges share a reading this fresh."""
UNNAMED_SUPERVISOR: Final = "_unnamed"
"""The ``supervisor`` label of a restart by a supervisor without a registered name
(its pid would be a new label value per supervisor: noise that fills the series)."""


class _Series:
    __slots__ = ("count", "overflowed", "seen", "total")

    def __init__(self) -> None:
        self.seen: set[tuple[str, ...]] = set()
        self.count = 0
        self.total = 0.0
        self.overflowed = 0


def _label(value: object) -> str:
    if isinstance(value, str) and 0 < len(value) <= MAX_LABEL_CHARS:
        return value
    if value is None or value == "":
        return "none"
    return OVERFLOW


class Metrics:
    """The catalog on one meter provider (the global one by default)."""

    def __init__(
        self,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        max_series: int = DEFAULT_MAX_SERIES,
        pool_stats: Callable[[], Mapping[str, int]] | None = None,
    ) -> None:
        if type(max_series) is not int or max_series < 1:
            raise ValueError("max_series is a positive int")
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(METER_NAME)
        self.max_series = max_series
        self._lock = threading.Lock()
        self._series = {item.name: _Series() for item in CATALOG}
        self._record: dict[str, Callable[..., None]] = {}
        for item in CATALOG:
            if item.kind == "counter":
                self._record[item.name] = meter.create_counter(
                    item.name, item.unit, item.description
                ).add
            elif item.kind == "updown":
                self._record[item.name] = meter.create_up_down_counter(
                    item.name, item.unit, item.description
                ).add
            else:
                self._record[item.name] = meter.create_histogram(
                    item.name, item.unit, item.description
                ).record
        if pool_stats is not None:
            reading = _PoolReading(pool_stats)
            for name, key, unit in POOL_GAUGES:
                meter.create_observable_gauge(
                    name, [reading.gauge(key)], unit, f"kernel pool: {key}"
                )

    def record(self, name: str, value: float, **labels: object) -> None:
        """Add to a counter, or record a histogram sample. Never raises for a label:
        an unknown key is ignored, a missing one is ``"none"``. An unknown instrument
        is a programming error (`KeyError`)."""
        item = BY_NAME[name]
        values = tuple(_label(labels.get(key)) for key in item.labels)
        series = self._series[name]
        with self._lock:
            if values not in series.seen:
                if len(series.seen) < self.max_series:
                    series.seen.add(values)
                else:
                    series.overflowed += 1
                    values = tuple(OVERFLOW for _ in item.labels)
            series.count += 1
            series.total += value
        self._record[name](value, dict(zip(item.labels, values, strict=True)))

    # -- what the runtime records -----------------------------------------------------

    def invocation(self, agent: str, outcome: str, seconds: float) -> None:
        self.record("adk.invocations", 1, agent=agent, outcome=outcome)
        self.record("adk.invocation.duration", seconds, agent=agent, outcome=outcome)

    def run(self, agent: str, outcome: str) -> None:
        self.record("adk.runs", 1, agent=agent, outcome=outcome)

    def model_call(
        self,
        provider: str,
        model: str,
        outcome: str,
        seconds: float,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
    ) -> None:
        self.record("adk.model.calls", 1, provider=provider, model=model, outcome=outcome)
        self.record("adk.model.duration", seconds, provider=provider, model=model)
        for kind, count in (("input", input_tokens), ("output", output_tokens)):
            if type(count) is int and count > 0:
                self.record("adk.tokens", count, provider=provider, model=model, type=kind)

    def tool_call(self, agent: str, tool: str, outcome: str, seconds: float) -> None:
        self.record("adk.tool.calls", 1, agent=agent, tool=tool, outcome=outcome)
        self.record("adk.tool.duration", seconds, tool=tool)

    def admission_queued(self, lane: str, delta: int) -> None:
        self.record("adk.admission.queue", delta, lane=lane)

    def admission_rejected(self, lane: str, reason: str) -> None:
        self.record("adk.admission.rejected", 1, lane=lane, reason=reason)

    def restart(self, supervisor: str) -> None:
        self.record("adk.restarts", 1, supervisor=supervisor)

    def restarted(self, report: RestartReport) -> None:
        """A `supervision.on_restart` listener: one `restart` per kernel child restart,
        labelled with the supervisor's registered name (`UNNAMED_SUPERVISOR` without one)."""
        name = report.supervisor
        self.restart(UNNAMED_SUPERVISOR if name.startswith("<") else name)

    def snapshot(self) -> dict[str, Any]:
        """Totals per instrument: ``count`` (records), ``sum``, ``series`` in use and
        ``overflowed`` records; no label values, so nothing a caller named."""
        with self._lock:
            instruments = {
                name: {
                    "kind": BY_NAME[name].kind,
                    "unit": BY_NAME[name].unit,
                    "count": series.count,
                    "sum": round(series.total, 6),
                    "series": len(series.seen),
                    "overflowed": series.overflowed,
                }
                for name, series in self._series.items()
            }
        return {
            "mapping_version": MAPPING_VERSION,
            "max_series": self.max_series,
            "instruments": instruments,
        }


class _PoolReading:
    """The pool counters, read at most once per `POOL_READING_SECONDS` (`kernel_stats`
    walks the process table: the four gauges of one collection share one walk)."""

    __slots__ = ("_at", "_lock", "_stats", "_values")

    def __init__(self, stats: Callable[[], Mapping[str, int]]) -> None:
        self._stats = stats
        self._lock = threading.Lock()
        self._at = -POOL_READING_SECONDS
        self._values: Mapping[str, int] = {}

    def value(self, key: str) -> int:
        with self._lock:
            now = time.monotonic()
            if now - self._at >= POOL_READING_SECONDS:
                self._values = self._stats()
                self._at = now
            return int(self._values.get(key, 0))

    def gauge(self, key: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(self.value(key))]

        return observe


_default: Metrics | None = None
_default_lock = threading.Lock()


def default_metrics() -> Metrics:
    """The process-wide catalog on the global meter provider (created on first use,
    with the kernel pool's gauges, and subscribed once to every supervisor restart)."""
    global _default
    if _default is not None:
        return _default
    with _default_lock:
        if _default is None:
            created = Metrics(pool_stats=kernel_stats)
            on_restart(created.restarted)
            _default = created
        return _default
