"""Issue 16 §2: a model call's token usage reaches the ``adk.tokens`` counter (by
``type``: input, output) and the ``chat`` span's ``gen_ai.usage.*`` attributes. The fake
Gemini server answers ``usageMetadata`` 3 prompt / 2 candidate tokens.

The global meter provider can be set once per process and `default_metrics()` binds
to it once, so the counter is read in a fresh interpreter with an in-memory reader."""

from __future__ import annotations

import textwrap

import adk_actors as adk
from providers.fake_gemini import FakeGemini
from tests.adk_actors.observability.spans import kind, run_fresh

KEY = "AIzaSyTEST-tokens-key-0123456789"

APP = textwrap.dedent(
    """
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

    import adk_actors as adk
    from providers.fake_gemini import FakeGemini

    def tokens():
        found = {}
        data = reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == "adk.tokens":
                        for point in metric.data.data_points:
                            found[point.attributes["type"]] = point.value
        return found

    adk.start()
    with FakeGemini() as fake:
        config = {"provider": "gemini", "model": "gemini-3.1-flash-lite",
                  "api_key": "@KEY@", "base_url": fake.base_url}
        agent = adk.spawn_agent("Metered", config)
        fake.reply_text("Hello")
        assert adk.invoke(agent, "hi", ("app", "u", "s1"), 10) == "Hello"
        assert tokens() == {"input": 3, "output": 2}, tokens()
        fake.reply_error(500, "boom")
        try:
            adk.invoke(agent, "hi", ("app", "u", "s2"), 10)
        except adk.AdkError:
            pass
        else:
            raise AssertionError("a failed call answered")
        assert tokens() == {"input": 3, "output": 2}, tokens()  # a failure counts none
    adk.stop()
    print("done")
    """
).replace("@KEY@", KEY)


def test_token_usage_reaches_the_tokens_counter_by_type(tmp_path):
    run_fresh(tmp_path / "app.py", APP)


def test_the_chat_span_carries_the_token_counts(spans):
    with FakeGemini() as fake:
        config = {
            "provider": "gemini",
            "model": "gemini-3.1-flash-lite",
            "api_key": KEY,
            "base_url": fake.base_url,
        }
        agent = adk.spawn_agent("MeteredSpan", config)
        fake.reply_text("Hello")
        assert adk.invoke(agent, "hi", ("app", "u", "s1"), 10) == "Hello"
    (chat,) = [
        s
        for s in spans.get_finished_spans()
        if kind(s) == "chat" and s.attributes.get("gen_ai.agent.name") == "MeteredSpan"
    ]
    assert chat.attributes["gen_ai.usage.input_tokens"] == 3
    assert chat.attributes["gen_ai.usage.output_tokens"] == 2
    assert chat.end_time >= chat.start_time  # the call's duration: the span's own times
