"""The ``invoke_agent`` span when its server is killed, and the plugin hooks' spans
inside the run's trace (review of runner/plugins, findings 6 and 8), with the real SDK.
"""

from __future__ import annotations

import gc
import threading
import time

import adk_actors as adk
import supervision as sv
from adk_actors import plugins as pl
from adk_actors.observability import tracer
from tests.adk_actors.observability.spans import kind


def _until(check, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        gc.collect()
        time.sleep(0.01)
    return True


def _invocations(spans, agent: str):
    return [
        s
        for s in spans.get_finished_spans()
        if kind(s) == "invoke_agent" and s.attributes.get("gen_ai.agent.name") == agent
    ]


def test_finding_6_a_killed_invocation_servers_span_ends_as_killed(spans):
    entered = threading.Event()
    gate = threading.Event()

    def model(history, tools):
        entered.set()
        gate.wait(10)
        return {"text": "late"}

    agent = adk.spawn_agent("KilledSpan", {"provider": adk.ScriptedProvider(fn=model)})
    sessions = adk.sessions.InMemorySessionService()
    runner = adk.Runner(agent, "obs", sessions)
    pid = runner.start_invocation("u", "k", "hi")
    assert entered.wait(10)
    sv.exit(pid, "kill")  # no terminate runs
    gate.set()
    assert _until(lambda: len(_invocations(spans, "KilledSpan")) == 1)
    (invocation,) = _invocations(spans, "KilledSpan")
    assert invocation.status.status_code.name == "ERROR"
    assert invocation.attributes["error.type"] == "killed"
    assert _until(lambda: any(s.parent for s in spans.get_finished_spans() if kind(s) == "chat"))
    chats = [s for s in spans.get_finished_spans() if kind(s) == "chat"]
    assert all(s.parent.span_id == invocation.context.span_id for s in chats)
    sessions.close()


def test_finding_6_a_normally_ended_span_is_not_ended_again(spans):
    agent = adk.spawn_agent("OnceSpan", {"provider": adk.ScriptedProvider(["fine"])})
    sessions = adk.sessions.InMemorySessionService()
    assert adk.Runner(agent, "obs", sessions).run("u", "o", "hi") == "fine"
    gc.collect()  # the finalizer of its state runs: a no-op once ended
    (invocation,) = _invocations(spans, "OnceSpan")
    assert invocation.status.status_code.name == "UNSET"
    sessions.close()


@adk.tool
def lookup(city: str) -> dict:
    """Look a city up."""
    return {"city": city}


class Traced(pl.Plugin):
    """Each hook opens a span of its own."""

    def on_event(self, ctx, value, config):
        with tracer().start_as_current_span("on_event work"):
            pass

    def after_run(self, ctx, value, config):
        with tracer().start_as_current_span("after_run work"):
            pass

    def on_run_error(self, ctx, value, config):
        with tracer().start_as_current_span("on_run_error work"):
            pass


def test_finding_8_hook_spans_are_children_of_the_invocation_span(spans):
    replies = [{"tool_calls": [{"name": "lookup", "args": {"city": "Oslo"}}]}, {"text": "ok"}]
    agent = adk.spawn_agent(
        "TracedHooks", {"provider": adk.ScriptedProvider(replies)}, tools=[lookup]
    )
    sessions = adk.sessions.InMemorySessionService()
    runner = adk.Runner(agent, "obs", sessions, plugins=[{"plugin": Traced(), "id": "t"}])
    with tracer().start_as_current_span("request"):
        assert runner.run("u", "t", "hi") == "ok"
    assert pl.wait_notifications(10)
    (invocation,) = _invocations(spans, "TracedHooks")
    finished = spans.get_finished_spans()
    on_event = [s for s in finished if s.name == "on_event work"]
    after_run = [s for s in finished if s.name == "after_run work"]
    assert len(on_event) == 3 and len(after_run) == 1  # tool call, tool result, final
    for span in (*on_event, *after_run):
        assert span.parent is not None
        assert span.parent.span_id == invocation.context.span_id
        assert span.context.trace_id == invocation.context.trace_id
    sessions.close()


def test_finding_8_on_run_error_spans_join_the_failed_runs_trace(spans):
    agent = adk.spawn_agent(
        "TracedFail", {"provider": adk.ScriptedProvider([{"error": "model_down"}])}
    )
    sessions = adk.sessions.InMemorySessionService()
    runner = adk.Runner(agent, "obs", sessions, plugins=[{"plugin": Traced(), "id": "t"}])
    try:
        runner.run("u", "f", "hi")
    except adk.AdkError:
        pass
    assert pl.wait_notifications(10)
    (invocation,) = _invocations(spans, "TracedFail")
    (failed,) = [s for s in spans.get_finished_spans() if s.name == "on_run_error work"]
    assert failed.parent is not None and failed.parent.span_id == invocation.context.span_id
    sessions.close()
