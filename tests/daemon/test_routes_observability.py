"""GET /dev/v1/observability: bounded, content-free, behind the daemon's token; and a
request's ``traceparent`` becoming the parent of the runtime's spans."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import adk_actors as adk
from adk_actors.daemon import routes_observability
from adk_actors.daemon.listener import stop_listener
from adk_actors.observability import CATALOG, default_metrics
from tests.daemon.conftest import DevServer, start_dev_server
from tests.helpers import global_sdk_provider

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN_ID = "00f067aa0ba902b7"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The real SDK's in-memory exporter on the global provider, for this test only.

    A global provider can be set once per process (another test module may have set
    one): the exporter is added to the SDK provider already global, or to one installed
    when there is none. Its processor is shut down after the test, so it keeps nothing
    of the spans later tests open."""
    provider = global_sdk_provider()
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    try:
        yield exporter
    finally:
        processor.shutdown()  # the exporter stops: later spans are dropped, not kept


def test_snapshot_is_bounded_and_content_free():
    server, listener = start_dev_server()  # the route is one of build_app's
    try:
        default_metrics().tool_call("SnapshotAgent", "SECRET-TOOL", "ok", 0.01)
        with server.anonymous() as anonymous:
            assert anonymous.get(routes_observability.PATH).status_code == 401
        answer = server.client.get(routes_observability.PATH)
        assert answer.status_code == 200
        body = answer.json()
        assert set(body) == {
            "schema_version",
            "mapping_version",
            "tracing",
            "metrics",
            "kernel",
            "content_captured",
        }
        assert body["content_captured"] is False
        assert set(body["metrics"]["instruments"]) == {item.name for item in CATALOG}
        assert body["metrics"]["instruments"]["adk.tool.calls"]["count"] >= 1
        assert body["kernel"]["processes"] > 0
        assert all(isinstance(value, int) for value in body["kernel"].values())
        assert "SECRET-TOOL" not in answer.text and "SnapshotAgent" not in answer.text
        assert len(answer.content) < 16_384
        assert server.client.post(routes_observability.PATH).status_code == 405
    finally:
        server.client.close()
        stop_listener(listener)


def _run_with(server: DevServer, headers: dict[str, str]) -> None:
    response = server.client.post(
        "/dev/v1/runs",
        json={
            "agent_name": "Traced",
            "app_name": "app",
            "user_id": "u",
            "session_id": "s",
            "message": "SECRET-PROMPT",
        },
        headers=headers,
    )
    assert response.status_code == 202, response.text
    adk.runs.wait(response.json()["run_id"], timeout=30.0)


def test_a_run_joins_the_trace_of_the_request_that_started_it(
    dev_server: DevServer, spans: InMemorySpanExporter
) -> None:
    adk.spawn_agent("Traced", {"provider": "scripted", "script": ["SECRET-ANSWER"]})
    _run_with(dev_server, {"traceparent": f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01"})

    joined = [
        span
        for span in spans.get_finished_spans()
        if span.context is not None and format(span.context.trace_id, "032x") == TRACE_ID
    ]
    kinds = {str(span.attributes.get("gen_ai.operation.name")) for span in joined}
    assert {"invoke_agent", "chat"} <= kinds
    turn = next(span for span in joined if span.name == "invoke_agent Traced")
    assert turn.parent is not None and turn.parent.is_remote
    assert format(turn.parent.span_id, "016x") == PARENT_SPAN_ID
    assert all(span.context.trace_flags.sampled for span in joined if span.context is not None)
    for span in joined:  # metadata only
        assert "SECRET" not in repr(dict(span.attributes or {}))


def test_an_invalid_traceparent_is_ignored(
    dev_server: DevServer, spans: InMemorySpanExporter
) -> None:
    adk.spawn_agent("Traced", {"provider": "scripted", "script": ["Done."]})
    _run_with(dev_server, {"traceparent": f"00-{'0' * 32}-{PARENT_SPAN_ID}-01"})  # all-zero id

    turns = [span for span in spans.get_finished_spans() if span.name == "invoke_agent Traced"]
    assert len(turns) == 1
    assert turns[0].parent is None  # a root of its own trace
