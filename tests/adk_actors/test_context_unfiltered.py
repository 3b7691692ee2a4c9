"""Issue 20 §2: without a filter or a budget, context selection is skipped.

The shortcut must choose exactly what the full selection would: every past event, in
order, with the current one last. A policy that does filter still runs (and still
logs ``adk.context.build``); partial events a caller passes in are still dropped.
"""

from __future__ import annotations

import msgspec
import pytest
from structlog.testing import capture_logs

import adk_actors as adk
from adk_actors.events import Event
from adk_actors.runner.context import ContextPolicy
from providers import content
from providers.content import Content, FunctionCallPart, FunctionResponsePart


def history() -> list[Event]:
    events = []
    for n in range(6):
        call = Content("model", (FunctionCallPart("weather", {"n": n}, f"c{n}"),))
        reply = Content("tool", (FunctionResponsePart("weather", {"t": n}, f"c{n}"),))
        events += [
            Event.new("user", f"i{n}", content.from_text(f"q{n}")),
            Event.new("Agent", f"i{n}", call),
            Event.new("Agent", f"i{n}", reply),
            Event.new("Agent", f"i{n}", content.from_text(f"a{n}", role="model"), is_final=True),
        ]
    return events


def current() -> Event:
    return Event.new("user", "now", content.from_text("and now?"))


@pytest.mark.parametrize(
    "policy",
    [{}, {"authors": "all"}, {"include_partial": True}, {"max_input_events": 100}],
)
def test_no_filter_keeps_everything_as_the_full_selection_would(policy):
    past, now = history(), current()
    skipping = ContextPolicy.compile(policy)
    assert not skipping.selects
    full = ContextPolicy.compile({**policy, "exclude_authors": ["nobody"]})  # drops nothing
    assert full.selects
    assert skipping.select(past, now, "Agent") == full.select(past, now, "Agent")
    assert skipping.select(past, now, "Agent") == [*past, now]


def test_partial_events_passed_in_are_still_dropped():
    past, now = history(), current()
    past[1] = msgspec.structs.replace(past[1], partial=True)  # a call streaming in
    chosen = ContextPolicy.compile({}).select(past, now, "Agent")
    full = ContextPolicy.compile({"exclude_authors": ["nobody"]}).select(past, now, "Agent")
    assert chosen == full and past[1] not in chosen and past[2] not in chosen  # whole exchange


@pytest.mark.parametrize(
    ("policy", "kept"),
    [
        ({"authors": ["user"]}, 6),
        ({"exclude_authors": "all"}, 0),
        ({"final_only": True}, 12),  # user messages and final answers
        ({"content_types": ["text"]}, 12),
        ({"max_bytes": 10_000, "overflow": "truncate"}, 24),
    ],
)
def test_a_policy_that_selects_still_selects(policy, kept):
    past, now = history(), current()
    compiled = ContextPolicy.compile(policy)
    assert compiled.selects
    with capture_logs() as logs:
        chosen = compiled.select(past, now, "Agent")
    assert len(chosen) - 1 == kept and chosen[-1] is now
    assert [log["event"] for log in logs] == ["adk.context.build"]


def test_too_many_events_still_fail_without_a_filter():
    with pytest.raises(adk.AdkError) as info:
        ContextPolicy.compile({"max_input_events": 5}).select(history(), current(), "Agent")
    assert info.value.reason == ("context_input_too_many_events", 25)


def test_the_shortcut_logs_nothing():
    with capture_logs() as logs:
        ContextPolicy.compile({}).select(history(), current(), "Agent")
    assert logs == []
