"""A run whose ``invoke_agent`` span raises when it ends (an SDK span processor's bug)
still publishes its terminal and sends its end notification (the second review of
bd5d6c5, nit "wait_notifications(None) hangs": the ticket was announced before the
span's end, outside the ``finally`` that sends it)."""

from __future__ import annotations

import threading

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

import adk_actors as adk
from adk_actors import plugins as pl

AGENT = "EndRaisesS28"


class _RaisesOnEnd(SpanProcessor):
    """Raises from `on_end` for this test's agent's invocation span only."""

    def on_end(self, span: ReadableSpan) -> None:
        attributes = span.attributes or {}
        if span.name.startswith("invoke_agent") and attributes.get("gen_ai.agent.name") == AGENT:
            raise RuntimeError("processor bug")


def _run(runner: adk.Runner, message: str) -> object:
    """`runner.run` on a thread, bounded: a terminal never published would hang it."""
    answers: list[object] = []
    thread = threading.Thread(target=lambda: answers.append(runner.run("u", "r", message)))
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "the run's terminal was never published"
    return answers[0]


class _Counted(pl.Plugin):
    def __init__(self) -> None:
        super().__init__()
        self.ended = 0

    def after_run(self, ctx, value, config):
        self.ended += 1


def test_a_raising_span_end_still_publishes_the_terminal_and_notifies(spans):
    provider = trace.get_tracer_provider()
    provider.add_span_processor(_RaisesOnEnd())  # type: ignore[attr-defined]
    plugin = _Counted()
    agent = adk.spawn_agent(AGENT, {"provider": adk.ScriptedProvider(["fine", "again"])})
    sessions = adk.sessions.InMemorySessionService()
    runner = adk.Runner(agent, "obs", sessions, plugins=[{"plugin": plugin, "id": "c"}])
    try:
        assert _run(runner, "hi") == "fine"
        assert pl.wait_notifications(10)
        assert plugin.ended == 1
        assert _run(runner, "again") == "again"  # the lane was freed
        assert pl.wait_notifications(10)
        assert plugin.ended == 2
    finally:
        adk.stop_agent(agent)
        sessions.close()
