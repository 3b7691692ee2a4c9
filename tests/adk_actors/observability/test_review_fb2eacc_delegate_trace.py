"""Review of fb2eacc/036a208, finding 6: `delegate()` carries the caller's context like
`prompt`/`invoke` do, so its turn's `invoke_agent` span is a child of the caller's
current span, not of the span that was current when the agent was spawned."""

from __future__ import annotations

import queue

import adk_actors as adk
from adk_actors.observability import tracer
from tests.adk_actors.observability.spans import kind


def test_a_delegated_turn_is_a_child_of_the_callers_span_not_the_spawners(spans):
    with tracer().start_as_current_span("boot") as boot:
        agent = adk.spawn_agent("TraceDelegate", {"provider": adk.ScriptedProvider(["a", "b"])})
    with tracer().start_as_current_span("job") as job:
        replies: queue.Queue = queue.Queue()
        adk.delegate(agent, "one", reply_to=replies)
        assert replies.get(timeout=10).value == "a"
    adk.delegate(agent, "two", reply_to=replies)  # no caller span: not under boot either
    assert replies.get(timeout=10).value == "b"
    turns = [
        s
        for s in spans.get_finished_spans()
        if s.attributes.get("gen_ai.agent.name") == "TraceDelegate" and kind(s) == "invoke_agent"
    ]
    assert len(turns) == 2
    first, second = sorted(turns, key=lambda s: s.start_time)
    assert first.parent is not None and first.parent.span_id == job.get_span_context().span_id
    assert first.context.trace_id == job.get_span_context().trace_id
    assert second.context.trace_id != boot.get_span_context().trace_id
    assert second.parent is None
