"""The runtime's tracer, and crossing between W3C headers and the current span.

The library uses the OpenTelemetry API only: without an SDK every span is a no-op.
The kernel carries the caller's context into the processes and tasks a call starts
(see `supervision`'s docs), so a span opened by the runtime on any of its threads is
a child of the span current where the work was started: an application's request
span, or a remote parent made current with `remote_parent`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Final

from opentelemetry import context as otel_context
from opentelemetry import trace

from adk_actors.observability.trace_context import TraceContext

TRACER_NAME: Final = "adk_actors"


def export_requested(environ: Mapping[str, str]) -> bool:
    """True when the environment asks for OTLP export (an endpoint is set and the SDK
    is not disabled): what an application checks before it imports
    `adk_actors.observability.sdk`, which needs the SDK and the OTLP exporter."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(
        environ.get(name, "").strip()
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def tracer() -> trace.Tracer:
    """The runtime's tracer (on the global provider; a proxy until one is set)."""
    return trace.get_tracer(TRACER_NAME)


@contextmanager
def remote_parent(parent: TraceContext | None) -> Iterator[None]:
    """Make `parent` (e.g. parsed from an inbound request's headers) the current span
    context for the block, so spans started in it, and the work it starts, join that
    trace with its sampling decision. None leaves the current context as it is."""
    if parent is None:
        yield
        return
    span = trace.NonRecordingSpan(parent.to_otel())
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        yield
    finally:
        otel_context.detach(token)


@contextmanager
def from_headers(headers: Mapping[str, str]) -> Iterator[TraceContext | None]:
    """`remote_parent` for an inbound request: parses `traceparent` / `tracestate`
    strictly (a malformed header raises `TraceContextError`, nothing is joined)."""
    parent = TraceContext.from_headers(headers)
    with remote_parent(parent):
        yield parent


def current() -> TraceContext | None:
    """The current span's context as W3C fields (None when there is no valid span)."""
    return TraceContext.from_otel(trace.get_current_span().get_span_context())


def inject_headers(headers: Mapping[str, str] | None = None) -> dict[str, str]:
    """`headers` plus ``traceparent`` / ``tracestate`` of the current span, to send
    on an outbound request (unchanged when there is no current span)."""
    out = dict(headers or {})
    found = current()
    if found is not None:
        out.update(found.headers())
    return out
