"""The runtime's tracer, and crossing between W3C headers and the current span.

The library uses the OpenTelemetry API only: without an SDK every span is a no-op.
The kernel carries the caller's context into the processes and tasks a call starts
(see `supervision`'s docs), so a span opened by the runtime on any of its threads is
a child of the span current where the work was started: an application's request
span, or a remote parent made current with `remote_parent`.

Every runtime span is opened with `runtime_span`: OpenTelemetry's default would record an
exception passing through it (its message and stack trace as an ``exception`` event,
its message as the status description), and a message can hold a credential or
prompt text. `runtime_span` records only `error.type` (the exception's class name, or an
`AdkError`'s reason code) and an ERROR status without a description.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode
from opentelemetry.util.types import AttributeValue

from adk_actors.observability import semconv
from adk_actors.observability.trace_context import TraceContext
from providers.errors import AdkError

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
def runtime_span(
    tracer_: trace.Tracer, name: str, attributes: Mapping[str, AttributeValue] | None = None
) -> Iterator[trace.Span]:
    """`tracer_.start_as_current_span(name, attributes=...)` that never records an
    exception's message or stack trace: a failure passing through sets `error.type`
    (`failed`) and re-raises."""
    with tracer_.start_as_current_span(
        name, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as current_span:
        try:
            yield current_span
        except BaseException as exc:
            failed(current_span, exc)
            raise


def failed(span_: trace.Span, cause: object) -> None:
    """Mark `span_` failed: `error.type` is an `AdkError`'s reason code, another
    exception's class name, or `cause` itself as a reason code (bounded); the status is
    ERROR with no description. An exception's message is never read."""
    if isinstance(cause, AdkError):
        span_.set_attributes(semconv.error(cause.reason))
    elif isinstance(cause, BaseException):
        span_.set_attributes(semconv.checked({semconv.ERROR_TYPE: type(cause).__name__}))
    else:
        span_.set_attributes(semconv.error(cause))
    span_.set_status(Status(StatusCode.ERROR))


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
