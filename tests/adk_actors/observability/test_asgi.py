"""An HTTP request's `traceparent` is the parent of the invocations its handler starts."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

import adk_actors as adk
from adk_actors.observability.asgi import TraceContextMiddleware
from tests.adk_actors.observability.spans import kind

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


def _model(history, tools):
    if history[-1].role == "tool":
        return {"text": "sunny"}
    return {"tool_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]}


@adk.tool
def get_weather(city: str) -> dict:
    """The weather for a city."""
    return {"city": city, "forecast": "sunny"}


@pytest.fixture
def client():
    agent = adk.spawn_agent(
        "TracedHttp", {"provider": adk.ScriptedProvider(fn=_model)}, tools=[get_weather]
    )
    runner = adk.Runner(agent, "obs", adk.sessions.InMemorySessionService())

    async def run(request: Request) -> JSONResponse:
        session = request.path_params["session"]
        output = await run_in_threadpool(runner.run, "u", session, "weather?")
        async_output = await adk.aio.run(runner, "u", session + "-async", "weather?")
        return JSONResponse({"output": output, "async_output": async_output})

    app = TraceContextMiddleware(Starlette(routes=[Route("/run/{session}", run)]))
    with TestClient(app) as c:
        yield c


def _spans(spans):
    return [
        s
        for s in spans.get_finished_spans()
        if s.attributes.get("gen_ai.agent.name") == "TracedHttp"
    ]


def test_a_valid_traceparent_is_the_parent_of_the_runs(spans, client):
    answer = client.get(
        "/run/h1",
        headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "tracestate": "vendor=1"},
    )
    assert answer.json() == {"output": "sunny", "async_output": "sunny"}
    ours = _spans(spans)
    assert sum(1 for s in ours if kind(s) == "invoke_agent") == 2
    assert all(f"{s.context.trace_id:032x}" == TRACE_ID for s in ours)
    roots = [s for s in ours if kind(s) == "invoke_agent"]
    assert all(s.parent is not None and f"{s.parent.span_id:016x}" == PARENT_ID for s in roots)
    assert all(s.parent.is_remote for s in roots)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"traceparent": f"00-{'0' * 32}-{PARENT_ID}-01"},  # all-zero: invalid
        {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "tracestate": "a=1,a=2"},  # duplicate
        {"traceparent": f"00-{TRACE_ID.upper()}-{PARENT_ID}-01"},
    ],
)
def test_no_or_an_invalid_traceparent_starts_a_new_trace(spans, client, headers):
    assert client.get("/run/h2", headers=headers).status_code == 200
    ours = _spans(spans)
    assert ours and all(f"{s.context.trace_id:032x}" != TRACE_ID for s in ours)
    assert all(s.parent is None for s in ours if kind(s) == "invoke_agent")
