"""One ``invoke_agent`` span per Runner invocation, owned by its invocation server
(issue 16 §2, INTERFACES contract 3): it covers admission, the lane, the turn and the
terminal; the turn's spans are its descendants; its parent is the caller's span."""

from __future__ import annotations

import pytest

import adk_actors as adk
from adk_actors.observability import tracer
from adk_actors.outcomes import Paused
from tests.adk_actors.observability.spans import kind


@adk.tool
def get_weather(city: str) -> dict:
    """The weather for a city."""
    return {"city": city, "forecast": "sunny"}


def weather_model(history, tools):
    if history[-1].role == "tool":
        return {"text": "sunny"}
    return {"tool_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]}


def _theirs(spans, agent: str):
    return [s for s in spans.get_finished_spans() if s.attributes.get("gen_ai.agent.name") == agent]


def _invocations(found):
    return [s for s in found if kind(s) == "invoke_agent"]


def _runner(name: str, provider, tools=()):
    agent = adk.spawn_agent(name, {"provider": provider}, tools=list(tools))
    return adk.Runner(agent, "obs", adk.sessions.InMemorySessionService())


def test_one_invocation_span_parents_the_turns_spans_under_the_callers_span(spans):
    runner = _runner("SpanOwner", adk.ScriptedProvider(fn=weather_model), [get_weather])
    with tracer().start_as_current_span("request") as request:
        assert runner.run("u", "s1", "weather?") == "sunny"
    ours = _theirs(spans, "SpanOwner")
    (invocation,) = _invocations(ours)  # the turn opened none of its own
    assert invocation.name == "invoke_agent SpanOwner"
    assert invocation.parent is not None
    assert invocation.parent.span_id == request.get_span_context().span_id
    assert invocation.attributes["adk.invocation.id"]
    assert invocation.attributes["gen_ai.conversation.id"] == "s1"
    assert invocation.status.status_code.name == "UNSET"
    chats = [s for s in ours if kind(s) == "chat"]
    tools = [s for s in ours if kind(s) == "execute_tool"]
    assert len(chats) == 2 and len(tools) == 1
    for span in (*chats, *tools):
        assert span.parent is not None
        assert span.parent.span_id == invocation.context.span_id


def test_a_stable_run_carries_its_run_id_and_each_invocation_has_its_own_span(spans):
    runner = _runner("SpanRuns", adk.ScriptedProvider(["one", "two"]))
    first = adk.runs.start(runner, "u", "r1", "hi")
    assert adk.runs.wait(first, 10).output == "one"
    assert runner.run("u", "r2", "hi") == "two"
    invocations = _invocations(_theirs(spans, "SpanRuns"))
    assert len(invocations) == 2
    assert [s.attributes.get("adk.run.id") for s in invocations].count(first) == 1
    assert len({s.context.trace_id for s in invocations}) == 2  # no caller span: own traces


def test_a_failed_invocation_span_carries_the_reason_code(spans):
    runner = _runner("SpanFails", adk.ScriptedProvider([{"error": "model_down"}]))
    with pytest.raises(adk.AdkError):
        runner.run("u", "f1", "hi")
    (invocation,) = _invocations(_theirs(spans, "SpanFails"))
    assert invocation.status.status_code.name == "ERROR"
    assert invocation.status.description is None
    assert invocation.attributes["error.type"] == "model_down"


def test_a_refused_invocation_still_ends_its_span(spans):
    agent = adk.spawn_agent("SpanRefused", {"provider": adk.ScriptedProvider(["never"])})
    sessions = adk.sessions.InMemorySessionService()
    runner = adk.Runner(agent, "obs", sessions, runtime_policy={"id": "empty"})
    with pytest.raises(adk.AdkError) as info:
        runner.run("u", "x1", "hi")
    assert info.value.reason[0] == "runtime_policy_denied"
    (invocation,) = _invocations(_theirs(spans, "SpanRefused"))  # refused before admission
    assert invocation.status.status_code.name == "ERROR"
    assert invocation.attributes["error.type"] == "runtime_policy_denied"


def test_a_cancelled_invocation_span_is_an_error_and_covers_the_turn(spans):
    runner = _runner("SpanCancel", adk.ScriptedProvider([{"text": "late", "delay": 30}]))
    stream = runner.run_async("u", "c1", "hi")
    items = iter(stream)
    next(items)  # the user's event: the turn runs
    adk.Runner.cancel(stream, "user_left")
    with pytest.raises(adk.AdkError) as info:
        list(items)
    assert info.value.reason == ("cancelled", "user_left")
    ours = _theirs(spans, "SpanCancel")
    (invocation,) = _invocations(ours)
    assert invocation.status.status_code.name == "ERROR"
    assert invocation.attributes["error.type"] == "cancelled"
    chats = [s for s in ours if kind(s) == "chat"]
    assert all(s.parent.span_id == invocation.context.span_id for s in chats)


class Publish(adk.Tool):
    name = "publish"
    description = "Publish a release."
    parameters = {"type": "object", "properties": {}, "required": []}

    def require_confirmation(self, args, ctx):
        return {"required": True, "hint": "Publish"}

    def execute(self, args, ctx):
        return {"published": True}


def test_a_paused_then_resumed_run_has_two_invocation_spans(spans):
    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "publish", "args": {}}]}, {"text": "Released."}]
    )
    runner = _runner("SpanResume", model, [Publish()])
    with tracer().start_as_current_span("first") as first:
        paused = runner.run("u", "p1", "Publish.")
    assert isinstance(paused, Paused)
    with tracer().start_as_current_span("second") as second:
        assert runner.resume("u", "p1", {"confirmed": True}) == "Released."
    invocations = _invocations(_theirs(spans, "SpanResume"))
    assert len(invocations) == 2
    paused_span, resumed_span = sorted(invocations, key=lambda s: s.start_time)
    assert paused_span.status.status_code.name == "UNSET"  # a pause is no error
    assert paused_span.parent.span_id == first.get_span_context().span_id
    assert resumed_span.parent.span_id == second.get_span_context().span_id
    assert (  # the same invocation, resumed: one span per server
        paused_span.attributes["adk.invocation.id"] == resumed_span.attributes["adk.invocation.id"]
    )


def test_a_sub_agent_called_as_a_tool_keeps_its_own_turn_span(spans):
    adk.spawn_agent("SpanHelper", {"provider": adk.ScriptedProvider(["helped"])})
    coordinator = adk.spawn_agent(
        "SpanCoordinator",
        {
            "provider": adk.ScriptedProvider(
                [{"tool_calls": [{"name": "SpanHelper", "args": {"prompt": "help"}}]}, "done"]
            ),
            "sub_agents": {"SpanHelper": {"description": "Helps."}},
        },
    )
    runner = adk.Runner(coordinator, "obs", adk.sessions.InMemorySessionService())
    assert runner.run("u", "t1", "go") == "done"
    (invocation,) = _invocations(_theirs(spans, "SpanCoordinator"))
    (helper,) = _invocations(_theirs(spans, "SpanHelper"))  # its turn's own span
    assert helper.context.span_id != invocation.context.span_id
