"""Strict W3C Trace Context: accepted whole or refused whole, children keep the trace."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adk_actors.observability import TraceContext, TraceContextError, TraceState
from adk_actors.observability.trace_context import new_span_id

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def refused(why: str, traceparent: str, tracestate: str | None = None) -> None:
    with pytest.raises(TraceContextError) as caught:
        TraceContext.parse(traceparent, tracestate)
    assert caught.value.reason[1] == why, caught.value.reason


def test_parse_and_format_a_valid_traceparent():
    ctx = TraceContext.parse(VALID, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
    assert ctx.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert ctx.span_id == "00f067aa0ba902b7"
    assert ctx.sampled and ctx.flags == 1
    assert ctx.state.entries == (("congo", "t61rcWkgMzE"), ("rojo", "00f067aa0ba902b7"))
    assert ctx.traceparent() == VALID
    assert ctx.headers() == {
        "traceparent": VALID,
        "tracestate": "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
    }
    assert not TraceContext.parse(VALID[:-2] + "00").sampled


@pytest.mark.parametrize(
    ("why", "value"),
    [
        ("all_zero_trace_id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
        ("all_zero_parent_id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"),
        ("unsupported_version", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ("invalid_trace_id", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
        ("invalid_parent_id", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bZ-01"),
        ("invalid_flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g"),
        ("malformed", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"),
        ("malformed", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"),
        ("malformed", "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01"),
        ("malformed", " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ("malformed", "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ("malformed", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"),
        ("malformed", ""),
        ("oversized", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + "a" * 600),
    ],
)
def test_invalid_traceparents_are_refused_whole(why, value):
    refused(why, value)


def test_a_later_version_may_append_fields():
    ctx = TraceContext.parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future")
    assert ctx.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert ctx.traceparent().startswith("00-")  # we send the version we speak


@pytest.mark.parametrize(
    ("why", "value"),
    [
        ("duplicate_key", "a=1,b=2,a=3"),
        ("invalid_key", "A=1"),
        ("invalid_key", "=1"),
        ("invalid_value", "a=x=y"),
        ("invalid_value", "a="),
        ("invalid_value", "a=ctl\x01"),
        ("malformed_member", "a=1,justakey"),
        ("too_many_members", ",".join(f"k{n}=v" for n in range(33))),
        ("oversized", "a=" + "v" * 255 + ",b=" + "v" * 255),
    ],
)
def test_invalid_tracestates_refuse_the_whole_context(why, value):
    with pytest.raises(TraceContextError) as caught:
        TraceContext.parse(VALID, value)
    assert caught.value.reason == ("invalid_tracestate", why)


def test_tracestate_members_and_multi_tenant_keys():
    state = TraceState.parse(["a=1, ,b@vendor=2", "c=3"])  # headers combine; empties ignored
    assert state.entries == (("a", "1"), ("b@vendor", "2"), ("c", "3"))
    assert state.get("b@vendor") == "2" and state.get("zz") is None
    assert TraceState.parse("").entries == ()


def test_headers_duplicate_traceparent_is_refused_and_absence_is_none():
    assert TraceContext.from_headers({"accept": "*/*"}) is None
    with pytest.raises(TraceContextError) as caught:
        TraceContext.from_headers([("traceparent", VALID), ("Traceparent", VALID)])
    assert caught.value.reason == ("invalid_traceparent", "duplicate_header")
    ctx = TraceContext.from_headers(
        [("TraceParent", VALID), ("tracestate", "a=1"), ("tracestate", "b=2")]
    )
    assert ctx is not None and ctx.state.entries == (("a", "1"), ("b", "2"))


def test_child_keeps_trace_sampling_and_state_with_a_fresh_span_id():
    parent = TraceContext.parse(VALID[:-2] + "00", "a=1")
    children = [parent.child() for _ in range(50)]
    assert all(child.trace_id == parent.trace_id for child in children)
    assert all(child.flags == parent.flags and not child.sampled for child in children)
    assert all(child.state == parent.state for child in children)
    ids = {child.span_id for child in children}
    assert len(ids) == 50 and parent.span_id not in ids
    assert all(span_id != "0" * 16 for span_id in ids)


def test_constructed_contexts_are_checked_too():
    with pytest.raises(TraceContextError):
        TraceContext("0" * 32, new_span_id())
    with pytest.raises(TraceContextError):
        TraceContext("a" * 32, "b" * 16, flags=256)
    with pytest.raises(TraceContextError):
        TraceState((("a", "1"), ("a", "2")))


def test_otel_round_trip():
    ctx = TraceContext.parse(VALID, "a=1")
    otel = ctx.to_otel()
    assert otel.is_remote and otel.is_valid and otel.trace_flags.sampled
    assert TraceContext.from_otel(otel) == ctx


_hex = "0123456789abcdef"
_key = st.from_regex(r"[a-z][a-z0-9_\-*/]{0,20}", fullmatch=True)
_value = st.from_regex(r"[!-+\--<>-~]{1,20}", fullmatch=True)


@given(
    trace_id=st.text(_hex, min_size=32, max_size=32).filter(lambda s: s != "0" * 32),
    span_id=st.text(_hex, min_size=16, max_size=16).filter(lambda s: s != "0" * 16),
    flags=st.integers(0, 255),
    state=st.dictionaries(_key, _value, max_size=8),
)
def test_round_trip(trace_id, span_id, flags, state):
    ctx = TraceContext(trace_id, span_id, flags, TraceState(tuple(state.items())))
    headers = ctx.headers()
    assert TraceContext.from_headers(headers) == ctx
    assert TraceContext.parse(ctx.traceparent(), ctx.state.format()) == ctx


@given(st.text(max_size=80))
def test_arbitrary_text_is_parsed_whole_or_refused_typed(text):
    try:
        ctx = TraceContext.parse(text)
    except TraceContextError:
        return
    assert ctx.traceparent()[3:] == text[3:55]
