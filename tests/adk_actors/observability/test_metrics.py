"""The metric catalog on the SDK, with bounded label series."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from adk_actors.observability import CATALOG, OVERFLOW, Metrics, default_metrics


def _collect(reader):
    points = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points[metric.name] = list(metric.data.data_points)
    return points


@pytest.fixture
def catalog():
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    stats = {
        "task_threads": 8,
        "task_threads_busy": 3,
        "task_threads_abandoned": 1,
        "task_queue": 2,
    }
    yield Metrics(provider, max_series=4, pool_stats=lambda: stats), reader
    provider.shutdown()


def test_the_catalog_is_fixed_and_covers_the_runtime():
    names = {item.name for item in CATALOG}
    assert names >= {
        "adk.runs",
        "adk.invocations",
        "adk.invocation.duration",
        "adk.model.calls",
        "adk.model.duration",
        "adk.tool.calls",
        "adk.tool.duration",
        "adk.tokens",
        "adk.admission.queue",
        "adk.restarts",
    }
    with pytest.raises(KeyError):
        Metrics(max_series=1).record("adk.made_up", 1)
    with pytest.raises(ValueError):
        Metrics(max_series=0)


def test_recorders_reach_the_sdk(catalog):
    metrics, reader = catalog
    metrics.invocation("Weather", "completed", 0.25)
    metrics.run("Weather", "completed")
    metrics.model_call("gemini", "gemini-3", "ok", 0.1, input_tokens=12, output_tokens=5)
    metrics.tool_call("Weather", "get_weather", "ok", 0.01)
    metrics.admission_queued("default", 2)
    metrics.admission_queued("default", -1)
    metrics.admission_rejected("default", "queue_full")
    metrics.restart("adk.runs")
    points = _collect(reader)
    assert points["adk.invocations"][0].value == 1
    assert dict(points["adk.invocations"][0].attributes) == {
        "agent": "Weather",
        "outcome": "completed",
    }
    assert points["adk.invocation.duration"][0].sum == pytest.approx(0.25)
    tokens = {p.attributes["type"]: p.value for p in points["adk.tokens"]}
    assert tokens == {"input": 12, "output": 5}
    assert points["adk.admission.queue"][0].value == 1
    assert points["adk.restarts"][0].value == 1
    assert points["adk.pool.busy"][0].value == 3 and points["adk.pool.threads"][0].value == 8
    assert points["adk.pool.abandoned"][0].value == 1 and points["adk.pool.queued"][0].value == 2


def test_label_series_overflow_into_one_aggregate(catalog):
    metrics, reader = catalog
    for n in range(50):
        metrics.tool_call("Agent", f"tool-{n}", "ok", 0.001)
    metrics.tool_call("Agent", "tool-0", "ok", 0.001)  # a known series stays itself
    metrics.record("adk.tool.calls", 1, agent="Agent", tool="x" * 500, outcome="ok")
    series = {
        tuple(sorted(p.attributes.items())): p.value for p in _collect(reader)["adk.tool.calls"]
    }
    assert len(series) == 5  # max_series distinct, plus the aggregate
    other = (("agent", OVERFLOW), ("outcome", OVERFLOW), ("tool", OVERFLOW))
    assert series[other] == 47
    assert sum(series.values()) == 52
    snapshot = metrics.snapshot()["instruments"]["adk.tool.calls"]
    assert snapshot == {
        "kind": "counter",
        "unit": "{call}",
        "count": 52,
        "sum": 52.0,
        "series": 4,
        "overflowed": 47,
    }


def test_labels_are_never_free_form(catalog):
    metrics, reader = catalog
    metrics.record("adk.runs", 1, agent=None, outcome={"not": "a label"}, unknown="dropped")
    (point,) = _collect(reader)["adk.runs"]
    assert dict(point.attributes) == {"agent": "none", "outcome": OVERFLOW}


def test_the_snapshot_is_content_free_and_bounded(catalog):
    metrics, _ = catalog
    metrics.tool_call("Agent", "SECRET-TOOL-NAME", "ok", 0.5)
    snapshot = metrics.snapshot()
    assert snapshot["mapping_version"].startswith("gen-ai-semconv")
    assert set(snapshot["instruments"]) == {item.name for item in CATALOG}
    assert "SECRET-TOOL-NAME" not in str(snapshot) and "Agent" not in str(snapshot)


def test_the_default_catalog_is_one_per_process():
    assert default_metrics() is default_metrics()
