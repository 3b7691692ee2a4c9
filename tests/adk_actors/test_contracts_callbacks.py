"""Contracts, history policy, global instruction, callbacks, telemetry, parallel tools."""

from __future__ import annotations

import threading
import time

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import adk_actors as adk

_exporter = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(_exporter))
trace.set_tracer_provider(_provider)


def reason(fn):
    with pytest.raises(adk.AdkError) as info:
        fn()
    return info.value.reason


def test_input_and_output_contracts():
    model = adk.ScriptedProvider(['{"answer": 42}', '{"answer": "forty-two"}'])
    agent = adk.spawn_agent(
        "Contract",
        {
            "provider": model,
            "input_schema": {
                "type": "object",
                "properties": {"question": {"type": "string"}},
                "required": ["question"],
            },
            "output_schema": {
                "type": "object",
                "properties": {"answer": {"type": "integer"}},
                "required": ["answer"],
            },
        },
    )
    assert adk.prompt(agent, '{"question": "meaning of life"}') == '{"answer": 42}'
    bad_input = reason(lambda: adk.prompt(agent, '{"q": 1}'))
    assert bad_input[0] == "invalid_input" and bad_input[1]["kind"] == "required"
    assert model.calls == 1  # refused before any provider I/O
    bad_output = reason(lambda: adk.prompt(agent, '{"question": "again"}'))
    assert bad_output == (
        "invalid_output",
        {"kind": "type", "path": ["answer"], "constraint": "type"},
    )
    assert reason(lambda: adk.prompt(agent, "not json")) == (
        "invalid_input",
        {"kind": "not_json", "path": [], "constraint": "json"},
    )


def test_history_policy_exclude():
    model = adk.ScriptedProvider(fn=lambda history, tools: {"text": str(len(history))})
    agent = adk.spawn_agent("Forgetful", {"provider": model, "history_policy": "exclude"})
    assert [adk.prompt(agent, "x") for _ in range(3)] == ["1", "1", "1"]


def test_global_instruction_crosses_delegation_but_local_instructions_do_not():
    seen = {}

    def child(history, tools):
        seen["child"] = [c.text_value() for c in history if c.role == "system"]
        return {"text": "child answer"}

    adk.spawn_agent("Child", {"provider": adk.ScriptedProvider(fn=child)})
    parent_model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "Child", "args": {"prompt": "help"}}]}, {"text": "done"}],
        record_histories=10,
    )
    parent = adk.spawn_agent(
        "Parent",
        {
            "provider": parent_model,
            "global_instruction": "You are on the docs team.",
            "sub_agents": {"Child": {}},
        },
    )
    assert adk.prompt(parent, "go") == "done"
    assert seen["child"] == ["You are on the docs team."]
    assert parent_model.histories[0][0].text_value() == "You are on the docs team."


def test_callbacks_continue_replace_halt_and_never_crash_the_agent():
    calls = []

    @adk.tool
    def lookup(key: str) -> dict:
        calls.append(key)
        return {"value": key.upper()}

    def before_tool(ctx, call):
        if call.args["key"] == "cached":
            return {"replace": {"value": "FROM CACHE"}}
        return None

    def after_model(ctx, output):
        if output == "secret draft":
            return {"halt": "policy"}
        return None

    def broken(ctx, value):
        raise RuntimeError("callback bug with api_key=AIzaSECRET")

    model = adk.ScriptedProvider(
        [
            {
                "tool_calls": [
                    {"name": "lookup", "args": {"key": "cached"}},
                    {"name": "lookup", "args": {"key": "live"}},
                ]
            },
            "fine",
            "secret draft",
        ],
        record_histories=10,
    )
    agent = adk.spawn_agent(
        "Hooked",
        {
            "provider": model,
            "callbacks": {
                "before_tool": before_tool,
                "after_model": after_model,
                "after_tool": broken,
            },
        },
        tools=[lookup],
    )
    assert adk.prompt(agent, "q1") == "fine"
    assert calls == ["live"]  # the cached call was replaced and never ran
    responses = [p.response for p in model.histories[1][-1].parts]
    assert responses == [{"value": "FROM CACHE"}, {"value": "LIVE"}]
    assert reason(lambda: adk.prompt(agent, "q2")) == ("callback_halted", "after_model", "policy")
    assert adk.agent_info(agent)["completed"] == 2  # still alive and serving
    assert reason(
        lambda: adk.spawn_agent("X", {"provider": model, "callbacks": {"before_lunch": broken}})
    ) == (
        "unknown_callbacks",
        ("before_lunch",),
    )


def test_spans_carry_metadata_never_content():
    _exporter.clear()
    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "echo_tool", "args": {"text": "private words"}}]}, "the answer"]
    )

    @adk.tool
    def echo_tool(text: str) -> str:
        return text

    agent = adk.spawn_agent("Traced", {"provider": model}, tools=[echo_tool])
    adk.prompt(agent, "confidential question")
    # only this agent's spans: a turn abandoned by an earlier test may end its span late
    spans = [
        span
        for span in _exporter.get_finished_spans()
        if span.attributes.get("gen_ai.agent.name") == "Traced"
    ]
    kinds = [span.attributes.get("gen_ai.operation.name") for span in spans]
    assert kinds.count("chat") == 2 and kinds.count("execute_tool") == 1 and "invoke_agent" in kinds
    tool_span = next(span for span in spans if span.name == "execute_tool echo_tool")
    assert tool_span.attributes["gen_ai.tool.name"] == "echo_tool"
    assert tool_span.end_time >= tool_span.start_time  # the duration: the span's own times
    flat = str([dict(span.attributes) for span in spans])
    assert "private words" not in flat and "confidential" not in flat and "the answer" not in flat


def test_parallel_tools_bounded_ordered_with_barriers_and_timeouts():
    running = []
    peak = []
    lock = threading.Lock()
    order = []

    def make(name, safe, delay):
        class T(adk.Tool):
            parallel_safe = safe
            parameters = {"type": "object", "properties": {"n": {"type": "integer"}}}

            def execute(self, args, ctx):
                with lock:
                    running.append(1)
                    peak.append(len(running))
                    order.append(("start", name, args["n"]))
                time.sleep(delay)
                with lock:
                    running.pop()
                    order.append(("end", name, args["n"]))
                return {"n": args["n"]}

        T.name = name
        return T()

    safe, unsafe, slow = (
        make("safe", True, 0.05),
        make("unsafe", False, 0.01),
        make("slow", True, 1.0),
    )
    calls = (
        [{"name": "safe", "args": {"n": i}} for i in range(3)]
        + [{"name": "unsafe", "args": {"n": 3}}]
        + [
            {"name": "safe", "args": {"n": 4}},
            {"name": "slow", "args": {"n": 5}},
        ]
    )
    model = adk.ScriptedProvider([{"tool_calls": calls}, "done"], record_histories=10)
    agent = adk.spawn_agent(
        "Parallel",
        {
            "provider": model,
            "tool_execution": {"mode": "parallel", "max_concurrency": 2, "tool_timeout": 0.3},
        },
        tools=[safe, unsafe, slow],
    )
    assert adk.prompt(agent, "go") == "done"
    responses = [p.response for p in model.histories[1][-1].parts]
    assert [r.get("n") for r in responses[:5]] == [0, 1, 2, 3, 4]  # committed in call order
    assert responses[5]["success"] is False and responses[5]["error"]["reason"] == "tool_timeout"
    assert max(peak) <= 2
    unsafe_start = order.index(("start", "unsafe", 3))
    assert all(order.index(("end", "safe", i)) < unsafe_start for i in range(3))  # a barrier
    assert order.index(("end", "unsafe", 3)) < order.index(("start", "safe", 4))


def test_model_and_tool_calls_are_counted_failed_ones_too(monkeypatch):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from adk_actors.agents import tool_round, turn
    from adk_actors.observability import Metrics

    reader = InMemoryMetricReader()
    metrics = Metrics(MeterProvider(metric_readers=[reader]))
    monkeypatch.setattr(turn, "default_metrics", lambda: metrics)
    monkeypatch.setattr(tool_round, "default_metrics", lambda: metrics)

    @adk.tool
    def failing_tool(text: str) -> str:
        raise ValueError("no")

    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "failing_tool", "args": {"text": "x"}}]}, {"error": "boom"}]
    )
    agent = adk.spawn_agent("Counted", {"provider": model}, tools=[failing_tool])
    with pytest.raises(adk.AdkError):
        adk.prompt(agent, "go")

    points = {
        metric.name: [(dict(point.attributes), point.value) for point in metric.data.data_points]
        for resource in reader.get_metrics_data().resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name in ("adk.model.calls", "adk.tool.calls")
    }
    model_calls = {labels["outcome"]: value for labels, value in points["adk.model.calls"]}
    assert model_calls == {"ok": 1, "error": 1}  # the failed call is counted as well
    assert points["adk.tool.calls"] == [
        ({"agent": "Counted", "tool": "failing_tool", "outcome": "error"}, 1)
    ]
