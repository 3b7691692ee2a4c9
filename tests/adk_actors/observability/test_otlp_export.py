"""End to end: `configure_from_env` sends the runtime's spans over OTLP/HTTP to a
loopback collector stand-in, which decodes the protobuf requests."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip(
    "opentelemetry.exporter.otlp.proto.http", reason="the OTLP exporter is a dev dependency"
)

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from adk_actors.observability import export_requested
from adk_actors.observability.sdk import configure_from_env
from adk_actors.observability.semconv import MAPPING_VERSION
from tests.adk_actors.observability.spans import KIND_OF_LEGACY_NAME

ROOT = Path(__file__).resolve().parents[3]

APP = textwrap.dedent(
    """
    import adk_actors as adk
    from adk_actors.observability import default_metrics, tracer
    from adk_actors.observability.sdk import configure_from_env

    telemetry = configure_from_env()
    assert telemetry is not None

    def model(history, tools):
        if history[-1].role == "tool":
            return {"text": "sunny"}
        return {"tool_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]}

    @adk.tool
    def get_weather(city: str) -> dict:
        \"\"\"The weather for a city.\"\"\"
        return {"city": city, "forecast": "sunny"}

    adk.start()
    agent = adk.spawn_agent("Exported", {"provider": adk.ScriptedProvider(fn=model)},
                            tools=[get_weather])
    runner = adk.Runner(agent, "obs", adk.sessions.InMemorySessionService())
    with tracer().start_as_current_span("request"):
        assert runner.run("u", "s", "weather in Tokyo?") == "sunny"
    default_metrics().tool_call("Exported", "get_weather", "ok", 0.01)
    adk.stop()
    telemetry.shutdown()
    print("done")
    """
)


def _kind(span) -> str:
    """A span's gen-AI operation: its attribute, or what its older name means."""
    for attribute in span.attributes:
        if attribute.key == "gen_ai.operation.name":
            return str(attribute.value.string_value)
    return KIND_OF_LEGACY_NAME[span.name]


class _Collector(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.content_types: set[str] = set()


class _Handler(BaseHTTPRequestHandler):
    server: _Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.content_types.add(self.headers["Content-Type"])
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            self.server.traces.append(request)
        elif self.path == "/v1/metrics":
            metrics_request = ExportMetricsServiceRequest()
            metrics_request.ParseFromString(body)
            self.server.metrics.append(metrics_request)
        else:
            self.send_response(404)
            self.end_headers()
            return
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector():
    server = _Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_spans_reach_a_loopback_collector_with_their_structure(collector, tmp_path):
    script = tmp_path / "app.py"
    script.write_text(APP)
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")} | {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_port}",
        "OTEL_SERVICE_NAME": "obs-e2e",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "done" in done.stdout
    assert collector.content_types == {"application/x-protobuf"}
    spans = []
    scope_of = {}  # span id -> the instrumentation scope it was exported under
    for request in collector.traces:
        for resource_spans in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}.get(
                "service.name"
            )
            assert service == "obs-e2e"
            for scope in resource_spans.scope_spans:
                spans.extend(scope.spans)
                scope_of.update({span.span_id: scope.scope for span in scope.spans})
    by_id = {span.span_id: span for span in spans}
    (request_span,) = [span for span in spans if span.name == "request"]
    assert request_span.parent_span_id == b""
    ours = [span for span in spans if span.name != "request"]
    kinds = {span.span_id: _kind(span) for span in ours}
    assert set(kinds.values()) == {"invoke_agent", "chat", "execute_tool"}
    for span in ours:
        assert span.trace_id == request_span.trace_id
        node = span
        while node.parent_span_id != request_span.span_id:
            node = by_id[node.parent_span_id]  # every ancestor was exported too
    turn = next(span for span in ours if kinds[span.span_id] == "invoke_agent")
    assert turn.parent_span_id == request_span.span_id
    model = [span for span in ours if kinds[span.span_id] == "chat"]
    assert len(model) == 2 and all(span.parent_span_id == turn.span_id for span in model)
    tool = next(span for span in ours if kinds[span.span_id] == "execute_tool")
    attributes = {a.key: a.value for a in tool.attributes}
    assert attributes["gen_ai.agent.name"].string_value == "Exported"
    assert attributes["gen_ai.tool.name"].string_value == "get_weather"
    for span in ours:  # the mapping's version: once, on the runtime's scope
        scope = scope_of[span.span_id]
        assert scope.name == "adk_actors"
        assert {a.key: a.value.string_value for a in scope.attributes} == {
            "adk.semconv.version": MAPPING_VERSION
        }
        assert "adk.semconv.version" not in {a.key for a in span.attributes}
    metric_names = {
        metric.name
        for request in collector.metrics
        for resource_metrics in request.resource_metrics
        for scope in resource_metrics.scope_metrics
        for metric in scope.metrics
    }
    assert {"adk.tool.calls", "adk.tool.duration", "adk.pool.threads"} <= metric_names
    flat = str([list(span.attributes) for span in spans])
    assert "Tokyo" not in flat and "sunny" not in flat


def test_configure_from_env_does_nothing_without_an_endpoint():
    assert not export_requested({}) and not export_requested({"OTEL_EXPORTER_OTLP_ENDPOINT": " "})
    assert export_requested({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1"})
    assert configure_from_env({}) is None
    assert (
        configure_from_env(
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"}
        )
        is None
    )


def test_configure_from_env_endpoints():
    telemetry = configure_from_env(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/"}, set_global=False
    )
    assert telemetry is not None and telemetry.meter_provider is not None
    assert telemetry.traces_endpoint == "http://127.0.0.1:4318/v1/traces"
    telemetry.shutdown()
    only_traces = configure_from_env(
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/custom"}, set_global=False
    )
    assert only_traces is not None and only_traces.meter_provider is None
    assert only_traces.traces_endpoint == "http://127.0.0.1:4318/custom"
    only_traces.shutdown()
