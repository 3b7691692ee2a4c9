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
`AdkError`'s reason code) and an ERROR status without a description. `start_span` opens
a span that outlives the callback that started it (`OpenSpan`: made current around
the work it covers, ended with an optional reason code by a later callback), with the
same rules.

Without an SDK a span is free: `runtime_span` sees that its tracer can only make
non-recording spans (the API's no-op tracer, or its proxy while the global provider is
unset or a no-op one) and opens nothing: no span, no context attached, no attributes
built when they are passed as a callable. The check reads the global provider on every
span, so an SDK installed later (after import, after the first runs) gets every span
from then on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import TracebackType
from typing import Final, TypeAlias

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import (
    INVALID_SPAN,
    NoOpTracer,
    NoOpTracerProvider,
    ProxyTracer,
    ProxyTracerProvider,
    Status,
    StatusCode,
)
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


_TRACER: Final = ProxyTracer(TRACER_NAME, attributes=semconv.SCOPE_ATTRIBUTES)


def tracer() -> trace.Tracer:
    """The runtime's tracer: one proxy on the global provider, made once (it resolves
    to the SDK's tracer once one is set), its instrumentation scope ``adk_actors`` with
    the semconv mapping's version (`semconv.SCOPE_ATTRIBUTES`). Every runtime span is
    made by it. `trace.get_tracer` would build a new tracer on every call, and read the
    environment while no provider is set."""
    return _TRACER


Attributes: TypeAlias = Mapping[str, AttributeValue]

_UNREAD: Final = object()
_NO_OP_PROVIDERS: Final = (NoOpTracerProvider, ProxyTracerProvider)


def _global_provider() -> object:
    """The global tracer provider as a `ProxyTracer` resolves it: the API's module
    global, None until an application sets one (read directly: `get_tracer_provider`
    also consults ``os.environ`` on every call while it is unset)."""
    provider = getattr(trace, "_TRACER_PROVIDER", _UNREAD)
    return trace.get_tracer_provider() if provider is _UNREAD else provider


def _no_sdk(tracer_: trace.Tracer) -> bool:
    """True when `tracer_` can only make non-recording spans: the API's no-op tracer,
    or its proxy while the global provider is unset or a no-op one. Anything else (an
    SDK's tracer, another implementation's) is used as it is."""
    kind = type(tracer_)
    if kind is ProxyTracer:
        resolved = getattr(tracer_, "_real_tracer", None)  # cached once a provider is set
        if resolved is not None:
            return type(resolved) is NoOpTracer
        provider = _global_provider()
        return provider is None or isinstance(provider, _NO_OP_PROVIDERS)
    return kind is NoOpTracer


def _making(tracer_: trace.Tracer) -> trace.Tracer | None:
    """The tracer that really makes `tracer_`'s spans, None when it can only make
    non-recording ones (`_no_sdk`): a proxy's resolved tracer (so a span skips the
    proxy's wrapper; resolved, as the proxy itself does, only once a real provider is
    set), any other tracer as it is."""
    kind = type(tracer_)
    if kind is ProxyTracer:
        resolved = getattr(tracer_, "_real_tracer", None)
        if resolved is None:
            provider = _global_provider()
            if provider is None or isinstance(provider, _NO_OP_PROVIDERS):
                return None
            resolved = getattr(tracer_, "_tracer", tracer_)  # resolves and caches
        return None if type(resolved) is NoOpTracer else resolved
    return None if kind is NoOpTracer else tracer_


def recording(tracer_: trace.Tracer) -> bool:
    """Whether spans from `tracer_` can record (False without an SDK): for a caller
    that has span work of its own to skip. Cheap; checked again on every call."""
    return not _no_sdk(tracer_)


class RuntimeSpan:
    """What `runtime_span` returns: entering it starts the span and makes it current
    (or, without an SDK, does nothing and gives the API's non-recording
    `INVALID_SPAN`); leaving it ends the span, `failed` on an exception.

    The span is started with `Tracer.start_span` and made current with the context
    API directly: what ``start_as_current_span`` does, without its three nested
    generator context managers (the proxy's, the SDK's, ``use_span``) on every span.
    The current context is read once and passed (``context=``) to the tracer and to
    the new span's context: the SDK's tracer, sampler and `set_span_in_context` would
    each read it again."""

    __slots__ = ("_attributes", "_name", "_span", "_token", "_tracer")

    def __init__(
        self,
        tracer_: trace.Tracer,
        name: str,
        attributes: Attributes | Callable[[], Attributes] | None,
    ) -> None:
        self._tracer = tracer_
        self._name = name
        self._attributes = attributes
        self._token: object = None
        self._span: trace.Span = INVALID_SPAN

    def __enter__(self) -> trace.Span:
        making = _making(self._tracer)
        if making is None:
            return INVALID_SPAN
        attributes = self._attributes
        if callable(attributes):
            attributes = attributes()
        parent = otel_context.get_current()
        span_ = self._span = making.start_span(
            self._name,
            context=parent,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )
        self._token = otel_context.attach(trace.set_span_in_context(span_, parent))
        return span_

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        token = self._token
        if token is None:
            return
        self._token = None
        span_ = self._span
        try:
            if exc is not None:
                failed(span_, exc)
        finally:
            otel_context.detach(token)  # type: ignore[arg-type]
            span_.end()


def runtime_span(
    tracer_: trace.Tracer,
    name: str,
    attributes: Attributes | Callable[[], Attributes] | None = None,
) -> RuntimeSpan:
    """`tracer_.start_as_current_span(name, attributes=...)` that never records an
    exception's message or stack trace: a failure passing through sets `error.type`
    (`failed`) and re-raises. `attributes` may be a callable, called only when a span
    is really started. Without an SDK nothing is started (see the module's doc)."""
    return RuntimeSpan(tracer_, name, attributes)


class _Activation:
    """`OpenSpan.activate`'s context manager: the span current for the block."""

    __slots__ = ("_span", "_token")

    def __init__(self, span_: trace.Span) -> None:
        self._span = span_
        self._token: object = None

    def __enter__(self) -> None:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))

    def __exit__(self, *exc: object) -> None:
        otel_context.detach(self._token)  # type: ignore[arg-type]


_INACTIVE: Final[AbstractContextManager[None]] = nullcontext()


class OpenSpan:
    """A span started now and ended later (by another callback): no-op when no SDK.

    Not current by itself: `activate` makes it current for a block, so the spans and
    tasks started inside are its descendants. `end` is idempotent."""

    __slots__ = ("_span",)

    def __init__(self, span_: trace.Span | None) -> None:
        self._span = span_

    def activate(self) -> AbstractContextManager[None]:
        """Make the span current for the block (nothing without an SDK or once ended)."""
        span_ = self._span
        return _INACTIVE if span_ is None else _Activation(span_)

    def end(self, error_type: str | None = None) -> None:
        """End the span, failed with `error_type` (a reason code) when given; a second
        call does nothing."""
        span_, self._span = self._span, None
        if span_ is None:
            return
        if error_type is not None:
            failed(span_, error_type)
        span_.end()


def start_span(
    tracer_: trace.Tracer,
    name: str,
    attributes: Callable[[], Attributes] | None = None,
) -> OpenSpan:
    """Start a span, child of the current one, without making it current (see
    `OpenSpan`). `attributes` is called only when a span is really started; without an
    SDK nothing is started (see the module's doc)."""
    making = _making(tracer_)
    if making is None:
        return OpenSpan(None)
    return OpenSpan(
        making.start_span(
            name,
            context=otel_context.get_current(),  # read once (see `RuntimeSpan`)
            attributes=None if attributes is None else attributes(),
            record_exception=False,
            set_status_on_exception=False,
        )
    )


def failed(span_: trace.Span, cause: object) -> None:
    """Mark `span_` failed: `error.type` is an `AdkError`'s reason code, another
    exception's class name, or `cause` itself as a reason code (bounded); the status is
    ERROR with no description. An exception's message is never read. Nothing is
    built for a span that does not record (no SDK, sampled out, ended)."""
    if not span_.is_recording():
        return
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
