"""Events: exact JSON round trips, versioning, JSON-safety."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import adk_actors as adk
from adk_actors import events
from adk_actors.events import Event, EventActions, Pause, PolicyDecision
from providers import content
from providers.errors import AdkError


def sample() -> Event:
    return Event.new(
        "WeatherAgent",
        "inv-1",
        content.new(
            [
                content.function_call(
                    "get_weather", {"city": "Tokyo"}, id="c1", thought_signature="c2ln"
                )
            ],
            role="model",
        ),
        actions=EventActions(
            state_delta={"user:last_city": "Tokyo", "temp:x": 1},
            artifact_delta={"report.pdf": 3},
            pause=Pause(
                reason="human_in_the_loop",
                continuation_id="inv-1",
                tool_name="publish",
                call_id="c1",
            ),
            policy_decisions=(
                PolicyDecision(
                    decision_id="d1",
                    policy_id="p",
                    operation="tool_call",
                    subject="publish",
                    outcome="allow",
                    reason="allowed",
                ),
            ),
        ),
        provider_metadata={
            "schema_version": 1,
            "provider": "gemini",
            "type": "google_search_grounding",
            "metadata": {},
        },
    )


def test_round_trip_is_exact():
    event = sample()
    data = events.encode(event)
    assert events.decode(data) == event
    assert events.encode(events.decode(data)) == data
    assert events.from_dict(events.to_dict(event)) == event
    assert b'"schema_version":1' in data


def test_defaults_are_compact_and_text_is_visible_text():
    event = Event.new("user", "inv-2", content.from_text("Hello"))
    as_dict = events.to_dict(event)
    assert set(as_dict) == {
        "schema_version",
        "id",
        "invocation_id",
        "author",
        "timestamp",
        "content",
        "actions",
    }
    assert event.text() == "Hello" and not event.partial and not event.is_final


def test_unknown_schema_versions_and_malformed_data_are_refused():
    as_dict = events.to_dict(sample())
    with pytest.raises(AdkError) as info:
        events.from_dict({**as_dict, "schema_version": 2})
    assert info.value.reason == ("unsupported_event_schema_version", 2)
    for bad in (
        b"{",
        b"[]",
        b'{"schema_version": 1}',
        msgspec.json.encode({**as_dict, "partial": "yes"}),
    ):
        with pytest.raises(AdkError) as info:
            events.decode(bad)
        assert info.value.reason == "invalid_event"


def test_non_json_state_is_refused_at_encode():
    event = Event.new("agent", "inv-3", actions=EventActions(state_delta={"when": object()}))
    with pytest.raises(AdkError) as info:
        events.encode(event)
    assert info.value.reason == "invalid_event"


def test_facade_reexports():
    assert adk.Event is Event and adk.content is content and adk.AdkError is AdkError
    assert (
        adk.providers.generate(
            {"provider": adk.ScriptedProvider(["ok"])}, [content.from_text("hi")]
        )
        == "ok"
    )


json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=12), json_values, max_size=5), st.booleans(), st.booleans())
def test_any_json_state_delta_round_trips(delta, partial, final):
    event = Event.new(
        "agent",
        "inv",
        content.from_text("x", role="model"),
        actions=EventActions(state_delta=delta),
        partial=partial,
        is_final=final,
    )
    assert events.decode(events.encode(event)) == event


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_fail_typed(data):
    try:
        events.decode(data)
    except AdkError as error:
        assert (
            error.reason == "invalid_event"
            or error.reason in content.CONTENT_REASONS
            or error.reason[0] == "unsupported_event_schema_version"
        )


# -- hardening: one content validation path, deep and mistyped input -------------------


def _with_content(content_dict):
    as_dict = events.to_dict(Event.new("user", "inv", content.from_text("hi")))
    return {**as_dict, "content": content_dict}


@pytest.mark.parametrize(
    "content_dict",
    [
        {"role": "robot", "parts": [{"type": "text", "text": "x"}]},
        {"role": "user", "parts": []},
        {
            "role": "user",
            "parts": [{"type": "file_data", "file_uri": "ftp://h/x", "mime_type": "text/plain"}],
        },
        {
            "role": "user",
            "parts": [
                {"type": "file_data", "file_uri": "https://h/x", "mime_type": "text/plain\n"}
            ],
        },
        {
            "role": "user",
            "parts": [{"type": "inline_data", "mime_type": "image/png", "data": "not base64"}],
        },
        {"role": "user", "parts": [{"type": "function_call", "name": "", "args": {}}]},
        {"role": "user", "parts": [{"type": "text", "text": "x"}] * 65},
    ],
)
def test_decode_validates_content_exactly_as_content_validate(content_dict):
    with pytest.raises(AdkError) as expected:
        content.validate(content_dict)
    for decode in (
        lambda: events.decode(msgspec.json.encode(_with_content(content_dict))),
        lambda: events.from_dict(_with_content(content_dict)),
    ):
        with pytest.raises(AdkError) as info:
            decode()
        assert info.value.reason == expected.value.reason


def test_deep_or_mistyped_input_is_an_adk_error():
    def nested(depth):
        return b"[" * depth + b"]" * depth

    base = msgspec.json.encode(
        _with_content(
            {
                "role": "user",
                "parts": [{"type": "function_call", "name": "f", "args": {"x": "HOLE"}}],
            }
        )
    )
    for depth in (70, 100_000):
        deep = base.replace(b'"HOLE"', nested(depth))
        with pytest.raises(AdkError) as info:
            events.decode(deep)
        assert info.value.reason == "json_too_deep"
    state = base.replace(
        b'"actions":{}', b'"actions":{"state_delta":{"x":' + nested(100_000) + b"}}"
    )
    assert state != base
    with pytest.raises(AdkError) as info:
        events.decode(state)
    assert info.value.reason == "json_too_deep"
    for bad in (5, None, [b"{}"], b"[" * 100_000):
        with pytest.raises(AdkError) as info:
            events.decode(bad)
        assert info.value.reason == "invalid_event"
    value = []
    for _ in range(100_000):
        value = [value]
    for build in (
        lambda: events.encode(Event.new("a", "i", actions=EventActions(state_delta={"x": value}))),
        lambda: events.from_dict({"x": value}),
        lambda: events.from_dict({"x": "\ud800"}),
        lambda: events.from_dict({"x": object()}),
        lambda: events.from_dict(5),
    ):
        with pytest.raises(AdkError):
            build()


def test_event_payloads_are_redacted_but_never_cut():
    """Review finding: the log-sized scan limit once cut a stored tool response at
    64 KiB. Events redact secrets and keep every byte of everything else."""
    big = "x" * 100_000
    event = Event.new(
        "tool",
        "inv",
        content.Content(
            "model", (content.FunctionCallPart("f", {"api_key": "k-1", "q": big}, "c"),)
        ),
    )
    (call,) = event.content.parts
    assert call.args == {"api_key": "[redacted]", "q": big}
