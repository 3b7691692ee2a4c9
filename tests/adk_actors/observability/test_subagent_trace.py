"""A sub-agent's spans join its caller's trace (issue 16 §2: "child spans keep the
caller's trace"; DESIGN.md §5.1: spans are descendants of their invocation's span):
an AgentTool turn's `invoke_agent` span is a child of the calling `execute_tool` span,
and a direct `adk.invoke` / `prompt` inside an application span is that span's child.
Before, the agent process started the turn in its own context: a new trace."""

from __future__ import annotations

import adk_actors as adk
from adk_actors.observability import tracer
from tests.adk_actors.observability.spans import kind


def _of(spans, agent: str, operation: str):
    return [
        s
        for s in spans.get_finished_spans()
        if s.attributes.get("gen_ai.agent.name") == agent and kind(s) == operation
    ]


def test_an_agent_tool_turn_is_a_child_of_the_calling_execute_tool_span(spans):
    adk.spawn_agent("TraceHelper", {"provider": adk.ScriptedProvider(["helped"])})
    coordinator = adk.spawn_agent(
        "TraceCoordinator",
        {
            "provider": adk.ScriptedProvider(
                [{"tool_calls": [{"name": "TraceHelper", "args": {"prompt": "help"}}]}, "done"]
            ),
            "sub_agents": {"TraceHelper": {"description": "Helps."}},
        },
    )
    runner = adk.Runner(coordinator, "obs", adk.sessions.InMemorySessionService())
    with tracer().start_as_current_span("request") as request:
        assert runner.run("u", "t1", "go") == "done"
    (invocation,) = _of(spans, "TraceCoordinator", "invoke_agent")
    (call,) = _of(spans, "TraceCoordinator", "execute_tool")
    (helper,) = _of(spans, "TraceHelper", "invoke_agent")
    (helper_chat,) = _of(spans, "TraceHelper", "chat")
    trace_id = request.get_span_context().trace_id
    assert {s.context.trace_id for s in (invocation, call, helper, helper_chat)} == {trace_id}
    assert call.parent is not None and call.parent.span_id == invocation.context.span_id
    assert helper.parent is not None and helper.parent.span_id == call.context.span_id
    assert helper_chat.parent is not None
    assert helper_chat.parent.span_id == helper.context.span_id


def test_a_direct_invoke_and_prompt_are_children_of_the_application_span(spans):
    agent = adk.spawn_agent("TraceDirect", {"provider": adk.ScriptedProvider(["a", "b"])})
    with tracer().start_as_current_span("job") as job:
        assert adk.invoke(agent, "one", ("obs", "u", "s")) == "a"
        assert adk.prompt(agent, "two") == "b"
    turns = _of(spans, "TraceDirect", "invoke_agent")
    assert len(turns) == 2
    for turn in turns:
        assert turn.context.trace_id == job.get_span_context().trace_id
        assert turn.parent is not None and turn.parent.span_id == job.get_span_context().span_id


def test_without_a_caller_span_each_direct_turn_is_a_trace_of_its_own(spans):
    agent = adk.spawn_agent("TraceAlone", {"provider": adk.ScriptedProvider(["a", "b"])})
    assert adk.prompt(agent, "one") == "a"
    assert adk.prompt(agent, "two") == "b"
    turns = _of(spans, "TraceAlone", "invoke_agent")
    assert len(turns) == 2
    assert all(turn.parent is None for turn in turns)
    assert turns[0].context.trace_id != turns[1].context.trace_id
