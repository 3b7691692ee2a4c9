"""Configuring the OpenTelemetry SDK for an application (`adk serve`, the examples).

The library itself uses only the API; an application calls `configure_from_env()`
once at start. When ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or the traces-only
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set it installs the SDK's
`TracerProvider` with the official OTLP/HTTP (protobuf) span exporter behind a
`BatchSpanProcessor`, and a `MeterProvider` exporting the metric catalog the same
way; otherwise it does nothing. ``OTEL_SDK_DISABLED=true`` turns it off. The
exporters read the rest of the standard variables (headers, timeouts, compression);
the resource takes ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES``.

Needs ``opentelemetry-sdk`` and ``opentelemetry-exporter-otlp-proto-http``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from opentelemetry import metrics, trace

from adk_actors.observability.tracing import export_requested
from providers.errors import AdkError

try:  # the `otlp` extra: the application's choice, never needed to import the library
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    sdk_installed = True
except ImportError:
    sdk_installed = False

DEFAULT_SERVICE_NAME = "adk-actors"


@dataclass(frozen=True, slots=True)
class Telemetry:
    """What `configure_from_env` installed; `shutdown` flushes and stops both."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider | None
    traces_endpoint: str

    def force_flush(self, timeout_millis: int = 10_000) -> bool:
        return self.tracer_provider.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        if self.meter_provider is not None:
            self.meter_provider.shutdown()


_lock = threading.Lock()
_installed: Telemetry | None = None


def _endpoint(env: Mapping[str, str], signal: str) -> str | None:
    specific = env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
    if specific:
        return specific
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if not base:
        return None
    return f"{base.rstrip('/')}/v1/{signal}"


def configure_from_env(
    environ: Mapping[str, str] | None = None,
    *,
    set_global: bool = True,
    metrics_interval_millis: int = 60_000,
) -> Telemetry | None:
    """Install the SDK with OTLP/HTTP export when the environment names an endpoint
    (see the module doc); None when it does not. Idempotent: a second call returns
    what the first installed. With ``set_global=False`` the providers are returned
    only (for tests and applications that install them themselves). Without the
    `otlp` extra installed, an endpoint is refused with ``otlp_unavailable``."""
    global _installed
    env = os.environ if environ is None else environ
    traces = _endpoint(env, "traces")
    if not export_requested(env) or traces is None:
        return None
    if not sdk_installed:
        raise AdkError(
            "otlp_unavailable",
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK or OTLP exporter "
            "is not installed (install adk-actors[otlp])",
        )
    with _lock:
        if set_global and _installed is not None:
            return _installed
        name = env.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME
        resource = Resource.create({SERVICE_NAME: name})
        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces)))
        meter_provider: MeterProvider | None = None
        metrics_endpoint = _endpoint(env, "metrics")
        if metrics_endpoint is not None:
            reader = PeriodicExportingMetricReader(
                OTLPMetricExporter(endpoint=metrics_endpoint),
                export_interval_millis=metrics_interval_millis,
            )
            meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
        telemetry = Telemetry(tracer_provider, meter_provider, traces)
        if set_global:
            trace.set_tracer_provider(tracer_provider)
            if meter_provider is not None:
                metrics.set_meter_provider(meter_provider)
            _installed = telemetry
        return telemetry
