"""`start_span` / `OpenSpan` (INTERFACES contract 2, issue 16): a span started by one
callback and ended by another, current only where it is activated; and
`TurnOptions(own_span=False)`: a turn whose caller owns its ``invoke_agent`` span."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import adk_actors as adk
from adk_actors.agents.calls import ask
from adk_actors.agents.messages import GetSpec
from adk_actors.agents.scope import Scope, TurnOptions
from adk_actors.agents.turn import run_turn
from adk_actors.agents.turn_outcome import TurnCompleted
from adk_actors.observability import semconv, tracer
from adk_actors.observability.tracing import OpenSpan, start_span
from providers import content
from supervision import Task
from tests.adk_actors.observability.spans import kind


def _local_sdk() -> tuple[trace.Tracer, InMemorySpanExporter]:
    """An SDK tracer on a provider of its own (the global one is left alone)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("adk_actors"), exporter


def test_an_open_span_is_a_child_of_the_current_span_and_not_current_itself():
    local, exporter = _local_sdk()
    with local.start_as_current_span("request") as request:
        opened = start_span(local, "invoke_agent Agent", lambda: {"gen_ai.agent.name": "Agent"})
        assert trace.get_current_span() is request  # started, not made current
    assert exporter.get_finished_spans()[-1].name == "request"
    opened.end()
    (_request, span) = exporter.get_finished_spans()
    assert span.name == "invoke_agent Agent"
    assert span.parent is not None and span.parent.span_id == request.get_span_context().span_id
    assert span.attributes["gen_ai.agent.name"] == "Agent"
    assert span.status.status_code.name == "UNSET"


def test_activate_makes_it_current_for_the_block_only():
    local, exporter = _local_sdk()
    before = trace.get_current_span()
    opened = start_span(local, "invoke_agent Agent")
    with opened.activate(), local.start_as_current_span("chat model"):
        pass
    assert trace.get_current_span() is before
    opened.end()
    chat, invocation = exporter.get_finished_spans()
    assert chat.parent is not None
    assert chat.parent.span_id == invocation.context.span_id


def test_end_is_idempotent_and_a_failure_carries_only_its_reason():
    local, exporter = _local_sdk()
    opened = start_span(local, "invoke_agent Agent")
    opened.end("turn_timeout")
    opened.end()  # a second end: nothing more
    opened.end("other")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code.name == "ERROR"
    assert span.status.description is None
    assert span.attributes["error.type"] == "turn_timeout"
    with opened.activate():  # an ended span is never made current again
        assert trace.get_current_span() is not span


def test_a_reason_code_is_bounded_like_every_error_type():
    local, exporter = _local_sdk()
    start_span(local, "invoke_agent Agent").end("x" * 10_000)
    (span,) = exporter.get_finished_spans()
    assert span.attributes["error.type"] == "x" * semconv.MAX_VALUE_CHARS


def test_without_an_sdk_nothing_is_started_nor_built():
    built: list[int] = []
    before = trace.get_current_span()
    opened = start_span(trace.NoOpTracer(), "invoke_agent Agent", lambda: built.append(1) or {})
    assert isinstance(opened, OpenSpan)
    with opened.activate():
        assert trace.get_current_span() is before
    opened.end("failed")
    assert built == []


def _weather(city: str) -> dict:
    """Get the weather for a city."""
    return {"city": city, "forecast": "sunny"}


def _model(history, tools):
    if history[-1].role == "tool":
        return {"text": "sunny"}
    return {"tool_calls": [{"name": "_weather", "args": {"city": "Tokyo"}}]}


def _turn(agent: str, options: TurnOptions) -> object:
    """The agent's turn in a task started here, as a Runner's invocation server starts
    it (the task carries the current context)."""
    spec = ask(agent, GetSpec(), 5)
    message = content.from_text("weather?")
    task = Task.start(run_turn, spec, [], message, Scope("app", "u", "s"), "e-1", options)
    outcome = task.wait(10)
    assert isinstance(outcome, TurnCompleted)
    return outcome.output


def _ours(spans: InMemorySpanExporter, trace_id: int) -> list:
    return [s for s in spans.get_finished_spans() if s.context.trace_id == trace_id]


def test_a_turn_without_its_own_span_puts_its_spans_under_the_callers(spans):
    """What the invocation server does (INTERFACES contract 3): its own invoke_agent
    span, activated around the turn's start, and the turn opens none."""
    adk.spawn_agent("Owned", {"provider": adk.ScriptedProvider(fn=_model)}, [adk.tool(_weather)])
    opened = start_span(tracer(), "invoke_agent Owned", lambda: semconv.invocation("Owned"))
    with opened.activate():
        assert _turn("Owned", TurnOptions(own_span=False)) == "sunny"
    opened.end()
    (invocation,) = [s for s in spans.get_finished_spans() if kind(s) == "invoke_agent"]
    ours = _ours(spans, invocation.context.trace_id)
    assert sorted(kind(s) for s in ours) == ["chat", "chat", "execute_tool", "invoke_agent"]
    for span in ours:
        if span is not invocation:
            assert span.parent is not None
            assert span.parent.span_id == invocation.context.span_id


def test_a_turn_opens_its_own_span_by_default(spans):
    adk.spawn_agent("Owner", {"provider": adk.ScriptedProvider(fn=_model)}, [adk.tool(_weather)])
    with tracer().start_as_current_span("request") as request:
        assert _turn("Owner", TurnOptions()) == "sunny"
    ours = _ours(spans, request.get_span_context().trace_id)
    (invocation,) = [s for s in ours if kind(s) == "invoke_agent"]
    assert invocation.parent is not None
    assert invocation.parent.span_id == request.get_span_context().span_id
    assert invocation.attributes["gen_ai.agent.name"] == "Owner"
    assert sorted(kind(s) for s in ours if s.name != "request") == [
        "chat",
        "chat",
        "execute_tool",
        "invoke_agent",
    ]
    for span in ours:
        if kind(span) in ("chat", "execute_tool"):
            assert span.parent is not None
            assert span.parent.span_id == invocation.context.span_id
