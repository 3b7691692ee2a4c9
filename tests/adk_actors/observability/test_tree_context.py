"""The application tree carries nothing of whoever started it (its trace span above all).

A server keeps a copy of its starter's context for life; the tree is often started
lazily inside a request, and its long-lived processes must not make later background
work a child of that ended request.
"""

from __future__ import annotations

from opentelemetry import trace

import adk_actors as adk
from adk_actors.app import APP_NAME
from adk_actors.observability import tracer
from supervision import Supervisor, whereis
from tests.adk_actors.observability.spans import kind


def _model(history, tools):
    return {"text": "ok"}


def _tree_processes():
    root = whereis(APP_NAME)
    assert root is not None
    found = [root]
    for child in Supervisor.which_children(root):
        if child.pid is not None:
            found.append(child.pid)
    # a server process keeps its starter's context (`context`); the task supervisor
    # is not a server and keeps none
    return [pid._process for pid in found if hasattr(pid._process, "context")]


def test_a_tree_started_inside_a_request_span_carries_none_of_it(spans):
    adk.stop()  # the fixture's tree: start it again inside a request
    with tracer().start_as_current_span("request-1") as request:
        adk.start()
    request_trace = request.get_span_context().trace_id

    processes = _tree_processes()
    assert len(processes) > 3
    for process in processes:
        carried = process.context.run(trace.get_current_span)
        assert not carried.get_span_context().is_valid, process.label

    agent = adk.spawn_agent("AfterRequest", {"provider": adk.ScriptedProvider(fn=_model)})
    runner = adk.Runner(agent, "obs", adk.sessions.InMemorySessionService())
    assert (
        getattr(adk.runs.wait(adk.runs.start(runner, "u", "s", "hi"), 10), "output", None) == "ok"
    )
    assert runner.run("u", "s2", "hi") == "ok"
    ours = [
        s
        for s in spans.get_finished_spans()
        if s.attributes.get("gen_ai.agent.name") == "AfterRequest"
    ]
    assert {kind(s) for s in ours} == {"invoke_agent", "chat"}
    assert all(s.context.trace_id != request_trace for s in ours)
    roots = [s for s in ours if s.parent is None]
    assert len(roots) == 2  # each run is a new trace of its own
