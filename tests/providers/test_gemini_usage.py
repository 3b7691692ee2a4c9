"""Issue 16 §2: token usage. Gemini's ``usageMetadata`` reaches the caller's
`metering()` as `TokenUsage` (promptTokenCount in, candidatesTokenCount out), beside
an answer that stays exactly what it was; a stream reports its last frame that
carries usage; absent or invalid counts report nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgspec
import pytest

import providers
from providers import content, protocol
from providers.content import Content
from providers.errors import AdkError
from providers.fake_gemini import FakeGemini, FakeResponse, candidate
from providers.outputs import ModelOutput, TokenUsage, metering, report_usage

KEY = "AIzaSyTEST-usage-key-0123456789"


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


@pytest.fixture
def config(fake: FakeGemini) -> dict[str, Any]:
    return {
        "provider": "gemini",
        "model": "gemini-3.1-flash-lite",
        "api_key": KEY,
        "base_url": fake.base_url,
    }


def ask() -> list[Content]:
    return [content.from_text("hi")]


def with_usage(parts: list[dict[str, Any]], usage: Any) -> dict[str, Any]:
    body = candidate(parts)
    if usage is None:
        del body["usageMetadata"]
    else:
        body["usageMetadata"] = usage
    return body


def test_generate_reports_usage_and_the_answer_is_unchanged(fake, config):
    fake.reply_text("Hello")
    with metering() as meter:
        assert providers.generate(config, ask()) == "Hello"  # still a plain str
    assert meter.usage == TokenUsage(input_tokens=3, output_tokens=2)
    fake.reply_text("again")
    assert providers.generate(config, ask()) == "again"  # outside metering: nothing to do


def test_async_calls_on_the_loop_report_usage(fake, config):
    fake.enqueue(
        FakeResponse.json(
            with_usage([{"text": "x"}], {"promptTokenCount": 11, "candidatesTokenCount": 7})
        )
    )

    async def call() -> tuple[ModelOutput, TokenUsage | None]:
        with metering() as meter:
            result = await protocol.agenerate(config, ask(), ())
        return result, meter.usage

    assert asyncio.run(call()) == ("x", TokenUsage(11, 7))


def test_a_stream_reports_the_last_frame_that_carries_usage(fake, config):
    fake.reply_stream(
        [
            with_usage([{"text": "one "}], {"promptTokenCount": 9}),
            with_usage([{"text": "two "}], {"promptTokenCount": 9, "candidatesTokenCount": 4}),
            with_usage([{"text": "three"}], None),  # no usage: the earlier report stands
        ]
    )
    deltas: list[str] = []
    with metering() as meter:
        assert providers.stream(config, ask(), (), deltas.append) == "one two three"
    assert deltas == ["one ", "two ", "three"]
    assert meter.usage == TokenUsage(9, 4)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (None, None),  # no usageMetadata
        ({}, None),  # neither count
        ({"totalTokenCount": 5}, None),
        ({"promptTokenCount": -1, "candidatesTokenCount": 2}, None),  # invalid
        ({"promptTokenCount": 5}, TokenUsage(5, 0)),  # proto3 JSON leaves a zero out
        ({"candidatesTokenCount": 6}, TokenUsage(0, 6)),
        ({"promptTokenCount": 0, "candidatesTokenCount": 0}, TokenUsage(0, 0)),
    ],
)
def test_missing_or_invalid_counts(fake, config, usage, expected):
    fake.enqueue(FakeResponse.json(with_usage([{"text": "ok"}], usage)))
    with metering() as meter:
        assert providers.generate(config, ask()) == "ok"
    assert meter.usage == expected


def test_a_blocked_prompt_still_reports_what_it_cost(fake, config):
    fake.enqueue(
        FakeResponse.json(
            {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 8}}
        )
    )
    with metering() as meter, pytest.raises(AdkError) as failure:
        providers.generate(config, ask())
    assert failure.value.reason == ("blocked", "SAFETY")
    assert meter.usage == TokenUsage(8, 0)


class _SyncOnly:
    """A custom provider with only the sync method: `agenerate` runs it on a pool thread."""

    name = "sync-usage"

    def generate(
        self, config: Mapping[str, Any], history: Sequence[Content], tools: Sequence[Any]
    ) -> ModelOutput:
        report_usage(TokenUsage(21, 13))
        return "from a thread"


def test_a_sync_provider_on_the_pool_reports_to_the_callers_meter():
    async def call() -> tuple[ModelOutput, TokenUsage | None]:
        with metering() as meter:
            result = await protocol.agenerate({"provider": _SyncOnly()}, ask(), ())
        return result, meter.usage

    assert asyncio.run(call()) == ("from a thread", TokenUsage(21, 13))


def test_meters_nest_and_token_usage_is_a_frozen_msgspec_struct():
    with metering() as outer:
        report_usage(TokenUsage(1, 1))
        with metering() as inner:
            report_usage(TokenUsage(2, 2))
            report_usage(None)  # unknown usage changes nothing
        assert inner.usage == TokenUsage(2, 2)
    assert outer.usage == TokenUsage(1, 1)
    usage = TokenUsage(input_tokens=3, output_tokens=4)
    assert msgspec.json.decode(msgspec.json.encode(usage), type=TokenUsage) == usage
    with pytest.raises(AttributeError):
        usage.input_tokens = 5  # type: ignore[misc]
