"""Without an SDK a runtime span is free: nothing is started, no context attached, no
attribute built; an SDK installed afterwards gets the usual spans.

The global tracer provider can be set once per process (and this package's conftest
sets one), so the global no-SDK path runs in a fresh interpreter.
"""

from __future__ import annotations

import textwrap

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adk_actors.observability import failed, recording, runtime_span, semconv, tracing
from providers.errors import AdkError
from tests.adk_actors.observability.spans import run_fresh


class _Counted:
    """Attributes passed as a callable, counting how often they are built."""

    def __init__(self) -> None:
        self.built = 0

    def __call__(self) -> dict[str, object]:
        self.built += 1
        return semconv.tool_call("Agent", "get_weather", "call-1")


def _local_sdk() -> tuple[trace.Tracer, InMemorySpanExporter]:
    """An SDK tracer on a provider of its own (the global one is left alone)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("adk_actors"), exporter


def test_a_no_op_tracer_starts_nothing_and_builds_no_attributes():
    noop = trace.NoOpTracer()
    attributes = _Counted()
    before = trace.get_current_span()
    assert not recording(noop)
    with runtime_span(noop, "execute_tool get_weather", attributes) as span:
        assert span is trace.INVALID_SPAN and not span.is_recording()
        assert trace.get_current_span() is before  # no context attached
    assert attributes.built == 0


def test_a_failure_through_a_no_op_span_builds_nothing_and_is_raised(monkeypatch):
    built: list[object] = []
    monkeypatch.setattr(semconv, "checked", lambda found: built.append(found) or {})
    monkeypatch.setattr(semconv, "error", lambda found: built.append(found) or {})
    with (
        pytest.raises(AdkError),
        runtime_span(trace.NoOpTracer(), "chat model", _Counted()),
    ):
        raise AdkError(("provider_auth_failed", "401"), "a message")
    failed(trace.INVALID_SPAN, "tool_failed")
    assert built == []


def test_an_sdk_tracer_builds_callable_attributes_once_and_records_the_span():
    sdk_tracer, exporter = _local_sdk()
    attributes = _Counted()
    assert recording(sdk_tracer)
    with runtime_span(sdk_tracer, "execute_tool get_weather", attributes) as span:
        assert span.is_recording()
        assert trace.get_current_span() is span
    assert attributes.built == 1
    (finished,) = exporter.get_finished_spans()
    assert finished.name == "execute_tool get_weather"
    assert finished.attributes["gen_ai.operation.name"] == "execute_tool"
    assert finished.attributes["gen_ai.tool.call.id"] == "call-1"


def test_an_sdk_span_still_records_error_type_only():
    sdk_tracer, exporter = _local_sdk()
    with pytest.raises(RuntimeError), runtime_span(sdk_tracer, "chat model"):
        raise RuntimeError("secret text")
    (finished,) = exporter.get_finished_spans()
    assert finished.attributes["error.type"] == "RuntimeError"
    assert finished.status.status_code.name == "ERROR"
    assert finished.status.description is None and not finished.events


APP = textwrap.dedent(
    """
    import adk_actors as adk
    from opentelemetry import trace
    from adk_actors.observability import (
        TraceContext, current, recording, remote_parent, semconv, tracing,
    )

    started = []  # every span the API's no-op tracer is asked for
    no_op_start = trace.NoOpTracer.start_span
    def counting_start(self, name, *args, **kwargs):
        started.append(name)
        return no_op_start(self, name, *args, **kwargs)
    trace.NoOpTracer.start_span = counting_start

    failures = []  # error attributes built for a failed span
    error = semconv.error
    def counting_error(reason):
        failures.append(reason)
        return error(reason)
    semconv.error = counting_error

    seen = []
    def model(history, tools):
        if history[-1].role == "tool":
            return {"text": "sunny"}
        return {"tool_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]}

    @adk.tool
    def get_weather(city: str) -> dict:
        \"\"\"The weather for a city.\"\"\"
        seen.append(current())
        return {"city": city, "forecast": "sunny"}

    @adk.tool
    def broken(city: str) -> dict:
        \"\"\"Always fails.\"\"\"
        raise RuntimeError("secret text")

    def failing_model(history, tools):
        if history[-1].role == "tool":
            return {"text": "done"}
        return {"tool_calls": [{"name": "broken", "args": {"city": "Tokyo"}}]}

    adk.start()
    runtime_tracer = trace.get_tracer("adk_actors")
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert not recording(runtime_tracer)
    agent = adk.spawn_agent("NoSdk", {"provider": adk.ScriptedProvider(fn=model)},
                            tools=[get_weather])
    runner = adk.Runner(agent, "obs", adk.sessions.InMemorySessionService())
    flaky = adk.spawn_agent("NoSdkFlaky", {"provider": adk.ScriptedProvider(fn=failing_model)},
                            tools=[broken])
    flaky_runner = adk.Runner(flaky, "obs", adk.sessions.InMemorySessionService())

    # no SDK: the turns run, and no runtime span reaches the API, nothing is built
    assert runner.run("u", "s1", "weather?") == "sunny"
    assert flaky_runner.run("u", "f1", "weather?") == "done"
    parent = TraceContext.parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    with remote_parent(parent):  # a remote parent still reaches the tool, as with the API
        assert runner.run("u", "s2", "weather?") == "sunny"
    assert started == [] and failures == [], (started, failures)
    assert seen[0] is None and seen[1] == parent, seen

    # the application installs the SDK after import and after the first runs
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    assert recording(runtime_tracer)
    with trace.get_tracer("app").start_as_current_span("request") as request:
        assert runner.run("u", "s3", "weather?") == "sunny"
    assert flaky_runner.run("u", "f2", "weather?") == "done"
    adk.stop()

    spans = exporter.get_finished_spans()
    ours = [s for s in spans if s.attributes.get("gen_ai.agent.name") == "NoSdk"]
    kinds = sorted(s.attributes["gen_ai.operation.name"] for s in ours)
    assert kinds == ["chat", "chat", "execute_tool", "invoke_agent"], kinds
    (turn,) = [s for s in ours if s.attributes["gen_ai.operation.name"] == "invoke_agent"]
    assert turn.name == "invoke_agent NoSdk"
    assert turn.attributes["gen_ai.agent.name"] == "NoSdk"
    for span in ours:  # the mapping's version is said once, on the runtime's scope
        assert span.instrumentation_scope.name == "adk_actors"
        assert span.instrumentation_scope.attributes == semconv.SCOPE_ATTRIBUTES
        assert semconv.ADK_SEMCONV not in span.attributes
    assert turn.parent.span_id == request.get_span_context().span_id
    for span in ours:
        assert span.context.trace_id == request.get_span_context().trace_id
        if span is not turn:
            assert span.parent.span_id == turn.context.span_id, span.name
    (tool,) = [s for s in ours if s.attributes["gen_ai.operation.name"] == "execute_tool"]
    assert tool.name == "execute_tool get_weather"
    assert tool.attributes["gen_ai.tool.name"] == "get_weather"
    assert tool.attributes["adk.tool.success"] is True
    (chat, _) = [s for s in ours if s.attributes["gen_ai.operation.name"] == "chat"]
    assert chat.attributes["gen_ai.provider.name"] == "scripted"
    assert seen[2] is not None and seen[2].span_id == f"{tool.context.span_id:016x}"
    (failed_tool,) = [s for s in spans if s.name == "execute_tool broken"]
    assert failed_tool.attributes["error.type"] == "RuntimeError"
    assert failed_tool.status.status_code.name == "ERROR"
    assert failures == ["RuntimeError"] and started == [], (failures, started)
    print("done")
    """
)


def test_no_sdk_is_the_fast_path_and_a_later_sdk_gets_the_usual_spans(tmp_path):
    run_fresh(tmp_path / "app.py", APP)


def test_the_global_check_follows_the_provider(monkeypatch):
    """The provider is read on every span: unset or a no-op one means no SDK; an SDK
    provider set later is seen at once by a proxy tracer obtained before it."""
    proxy = trace.ProxyTracer("adk_actors")
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    assert not recording(proxy)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", trace.NoOpTracerProvider())
    assert not recording(proxy)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", TracerProvider())
    assert recording(proxy)
    assert tracing._no_sdk(trace.NoOpTracer())
