"""Observability on OpenTelemetry: W3C trace context, span attributes, metrics.

The library uses the OpenTelemetry API only; `adk_actors.observability.sdk` (not
imported here) configures the SDK for an application.
"""

from adk_actors.observability import semconv
from adk_actors.observability.metrics import CATALOG, OVERFLOW, Metrics, default_metrics
from adk_actors.observability.trace_context import (
    TraceContext,
    TraceContextError,
    TraceState,
)
from adk_actors.observability.tracing import (
    OpenSpan,
    current,
    export_requested,
    failed,
    from_headers,
    inject_headers,
    recording,
    remote_parent,
    runtime_span,
    start_span,
    tracer,
)

__all__ = [
    "CATALOG",
    "OVERFLOW",
    "Metrics",
    "OpenSpan",
    "TraceContext",
    "TraceContextError",
    "TraceState",
    "current",
    "default_metrics",
    "export_requested",
    "failed",
    "from_headers",
    "inject_headers",
    "recording",
    "remote_parent",
    "runtime_span",
    "semconv",
    "start_span",
    "tracer",
]
