"""The runtime's part of a recording span's cost (issue 16 §4, the tracing overhead
row): the current context is read once and handed to the SDK, and the attribute
builders put their values directly, with what `semconv.checked` keeps.

Session 28's callgrind A/B of the span calls of one Runner run: the builders and the
context passed saved ~25,000 of ~860,000 instructions; the rest is the SDK's own work.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adk_actors.observability import runtime_span, semconv
from adk_actors.observability.tracing import start_span


class _Parents(SpanProcessor):
    """Records the parent context each span's `on_start` is handed."""

    def __init__(self) -> None:
        self.handed: dict[str, otel_context.Context | None] = {}

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        self.handed[span.name] = parent_context

    def on_end(self, span: ReadableSpan) -> None:
        return None


def _local_sdk() -> tuple[trace.Tracer, InMemorySpanExporter, _Parents]:
    """An SDK tracer on a provider of its own (the global one is left alone)."""
    exporter = InMemorySpanExporter()
    parents = _Parents()
    provider = TracerProvider()
    provider.add_span_processor(parents)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("adk_actors"), exporter, parents


def test_the_current_context_is_handed_to_the_sdk_once_read():
    """Session 28 (issue 16 §4): `runtime_span` and `start_span` pass the context they
    read to the SDK's tracer, so a span processor's `on_start` gets the parent's
    context (it got None, and the SDK read the current context again)."""
    local, exporter, parents = _local_sdk()
    with local.start_as_current_span("request") as request:
        opened = start_span(local, "invoke_agent Agent")
        with opened.activate(), runtime_span(local, "chat scripted") as chat:
            assert trace.get_current_span() is chat
        opened.end()
    assert trace.get_current_span() is trace.INVALID_SPAN
    for name, parent in (("invoke_agent Agent", request), ("chat scripted", None)):
        handed = parents.handed[name]
        assert handed is not None, name
        if parent is not None:
            assert trace.get_current_span(handed) is parent
    chat_span, invocation, request_span = exporter.get_finished_spans()
    assert invocation.parent is not None
    assert invocation.parent.span_id == request_span.context.span_id
    assert chat_span.parent is not None
    assert chat_span.parent.span_id == invocation.context.span_id


def test_the_new_span_keeps_what_else_the_context_carried():
    """The span made current is set in the context read (not a fresh one): another
    value current around the span stays current inside it."""
    local, _exporter, _parents = _local_sdk()
    key = otel_context.create_key("s28-request-id")
    token = otel_context.attach(otel_context.set_value(key, "r-1"))
    try:
        with runtime_span(local, "execute_tool get_weather") as span:
            assert trace.get_current_span() is span
            assert otel_context.get_value(key) == "r-1"
    finally:
        otel_context.detach(token)


class _Text(str):
    """A string subclass, as a caller could pass for a name."""


LONG = "n" * (semconv.MAX_VALUE_CHARS + 10)
VALUES: list[Any] = [
    "Weather",
    "",
    LONG,
    _Text("sub"),
    _Text(LONG),
    None,
    3,
    True,
    1.5,
    {"prompt": "PROMPT-MARKER"},
    b"RESULT-MARKER",
    ["ARGUMENT-MARKER"],
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_the_builders_keep_what_checked_keeps_in_its_order(value: Any):
    """Session 28: the builders no longer build a mapping for `checked`; the keys,
    their order and the values are what `checked` made of that mapping."""
    cases = (
        (
            semconv.invocation(value, invocation_id=value, session_id=value, run_id=value),
            {
                semconv.OPERATION_NAME: semconv.INVOKE_AGENT,
                semconv.AGENT_NAME: value,
                semconv.ADK_INVOCATION_ID: value,
                semconv.CONVERSATION_ID: value,
                semconv.ADK_RUN_ID: value,
            },
        ),
        (
            semconv.model_call(value, value, value),
            {
                semconv.OPERATION_NAME: semconv.CHAT,
                semconv.PROVIDER_NAME: value,
                semconv.REQUEST_MODEL: value,
                semconv.AGENT_NAME: value,
            },
        ),
        (
            semconv.tool_call(value, value, value),
            {
                semconv.OPERATION_NAME: semconv.EXECUTE_TOOL,
                semconv.TOOL_NAME: value,
                semconv.TOOL_CALL_ID: value,
                semconv.TOOL_TYPE: "function",
                semconv.AGENT_NAME: value,
            },
        ),
    )
    for built, mapping in cases:
        expected = semconv.checked(mapping)
        assert list(built.items()) == list(expected.items())
        assert [type(v) for v in built.values()] == [type(v) for v in expected.values()]
