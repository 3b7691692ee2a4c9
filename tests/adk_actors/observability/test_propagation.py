"""Spans join the caller's trace across the runtime's threads and tasks."""

from __future__ import annotations

import asyncio
import threading

from opentelemetry import trace

import adk_actors as adk
from adk_actors.observability import TraceContext, remote_parent, tracer
from tests.adk_actors.observability.spans import kind


def weather_model(history, tools):
    if history[-1].role == "tool":
        return {"text": "sunny"}
    return {"tool_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]}


@adk.tool
def get_weather(city: str) -> dict:
    """The weather for a city."""
    return {"city": city, "forecast": "sunny"}


def _agent(name: str):
    return adk.spawn_agent(
        name, {"provider": adk.ScriptedProvider(fn=weather_model)}, tools=[get_weather]
    )


def _theirs(spans, agent: str):
    return [s for s in spans.get_finished_spans() if s.attributes.get("gen_ai.agent.name") == agent]


def _assert_children_of(found, parent_span_context, all_spans):
    """Every span is in the parent's trace, and walking up from any of them reaches
    the parent span (through the runtime's own spans only)."""
    assert found
    by_id = {s.context.span_id: s for s in all_spans}
    for span in found:
        assert span.context.trace_id == parent_span_context.trace_id
        node = span
        while node.parent is not None and node.parent.span_id != parent_span_context.span_id:
            assert node.parent.span_id in by_id, "a parent outside the runtime's spans"
            node = by_id[node.parent.span_id]
        assert node.parent is not None, f"{span.name} does not descend from the parent"


def test_runner_run_inside_a_request_span_is_its_child(spans):
    agent = _agent("TracedWeather")
    runner = adk.Runner(agent, "obs", adk.sessions.InMemorySessionService())
    with tracer().start_as_current_span("request") as request:
        assert runner.run("u", "s1", "weather?") == "sunny"
    finished = spans.get_finished_spans()
    ours = _theirs(spans, "TracedWeather")
    assert {kind(s) for s in ours} == {"invoke_agent", "chat", "execute_tool"}
    _assert_children_of(ours, request.get_span_context(), finished)
    request_span = next(s for s in finished if s.name == "request")
    assert request_span.parent is None


def test_concurrent_requests_keep_their_own_traces(spans):
    agent = _agent("TracedConcurrent")
    runner = adk.Runner(agent, "obs", adk.sessions.InMemorySessionService())
    contexts: dict[int, trace.SpanContext] = {}
    errors: list[BaseException] = []

    def request(n: int) -> None:
        try:
            with tracer().start_as_current_span(f"request-{n}") as span:
                contexts[n] = span.get_span_context()
                assert runner.run("u", f"c{n}", "weather?") == "sunny"
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=request, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    finished = spans.get_finished_spans()
    ours = _theirs(spans, "TracedConcurrent")
    traces = {ctx.trace_id for ctx in contexts.values()}
    assert len(traces) == 8
    assert {s.context.trace_id for s in ours} == traces  # none lost, none mixed
    for ctx in contexts.values():
        _assert_children_of([s for s in ours if s.context.trace_id == ctx.trace_id], ctx, finished)


def test_a_remote_parent_from_headers_is_joined_with_its_sampling(spans):
    agent = _agent("TracedRemote")
    runner = adk.Runner(agent, "obs", adk.sessions.InMemorySessionService())
    parent = TraceContext.parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    with remote_parent(parent):
        assert runner.run("u", "r1", "weather?") == "sunny"
    ours = _theirs(spans, "TracedRemote")
    assert ours and all(f"{s.context.trace_id:032x}" == parent.trace_id for s in ours)
    roots = [s for s in ours if s.parent is not None and s.parent.is_remote]
    assert roots and all(f"{s.parent.span_id:016x}" == parent.span_id for s in roots)


def test_without_a_current_span_an_invocation_starts_its_own_trace(spans):
    agent = _agent("TracedAlone")
    runner = adk.Runner(agent, "obs", adk.sessions.InMemorySessionService())
    assert runner.run("u", "a1", "weather?") == "sunny"
    ours = _theirs(spans, "TracedAlone")
    assert ours and len({s.context.trace_id for s in ours}) == 1
    assert sum(1 for s in ours if s.parent is None) == 1


def test_an_async_request_handler_awaiting_the_runner_is_the_parent(spans):

    agent = _agent("TracedAsync")
    runner = adk.Runner(agent, "obs", adk.sessions.InMemorySessionService())

    async def handler():  # what an instrumented ASGI endpoint does
        with tracer().start_as_current_span("request") as request:
            assert await adk.aio.run(runner, "u", "as1", "weather?") == "sunny"
            events = [event async for event in runner.run_async("u", "as2", "weather?")]
            assert events
            return request.get_span_context()

    request_context = asyncio.run(handler())
    ours = _theirs(spans, "TracedAsync")
    assert {kind(s) for s in ours} == {"invoke_agent", "chat", "execute_tool"}
    _assert_children_of(ours, request_context, spans.get_finished_spans())
    assert sum(1 for s in ours if kind(s) == "invoke_agent") == 2


def test_a_stable_run_started_inside_a_request_is_its_child(spans):
    agent = _agent("TracedRun")
    runner = adk.Runner(agent, "obs", adk.sessions.InMemorySessionService())
    with tracer().start_as_current_span("request") as request:
        run_id = adk.runs.start(runner, "u", "rs1", "weather?")
    outcome = adk.runs.wait(run_id, timeout=30)  # waited for outside the request span
    assert outcome.output == "sunny"
    ours = _theirs(spans, "TracedRun")
    assert {kind(s) for s in ours} == {"invoke_agent", "chat", "execute_tool"}
    _assert_children_of(ours, request.get_span_context(), spans.get_finished_spans())


def test_an_unsampled_caller_is_not_sampled_on_the_runtimes_threads_either(spans):
    agent = _agent("TracedUnsampled")
    runner = adk.Runner(agent, "obs", adk.sessions.InMemorySessionService())
    parent = TraceContext.parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
    with remote_parent(parent):
        assert runner.run("u", "un1", "weather?") == "sunny"
    assert _theirs(spans, "TracedUnsampled") == []  # the SDK's parent-based sampler agreed
