"""Issue 20 §2 (a shared frozen empty default for stored Event fields) and a review leftover.

A STORED event's empty `state_delta`, `artifact_delta` and
`requested_tool_confirmations` are the one shared, read-only `providers.frozen.EMPTY_DICT`
(the shared form `freeze` makes of `EventActions`), so a store hands the stored event
itself to every reader (no per-read copy); an event the user builds, decodes or deep
copies keeps plain empty dicts of its own (review of 4173fce, finding 2). The encoding must stay byte for byte
what it was when those fields defaulted to a new empty dict per event: events written
before (LMDB files) decode, and an event encodes as it did. `_OldEventActions` /
`_OldEvent` below are the schema as it was, to compare against.

Review leftover (Low): a user struct holding an empty list, inside a dict value of a
stored event, was one object shared by every reader of the event: one reader's edit
showed for the others.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from adk_actors import events as event_codec
from adk_actors.events import Event, EventActions
from adk_actors.events.event import Pause, PolicyDecision, new_event_id
from providers import content
from providers.content import Content
from providers.frozen import (
    EMPTY_DICT,
    EMPTY_LIST,
    FrozenDict,
    FrozenList,
    freeze,
    reader_copy,
    share,
)

# -- the schema before issue 20 §2 (empty fields: a new dict per event) ------------------------


class _OldEventActions(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    state_delta: dict[str, Any] = msgspec.field(default_factory=dict)
    artifact_delta: dict[str, int] = msgspec.field(default_factory=dict)
    transfer_to_agent: str | None = None
    transfer_index: int | None = None
    escalate: bool = False
    skip_summarization: bool = False
    pause: Pause | None = None
    long_running_operation: dict[str, Any] | None = None
    requested_tool_confirmations: dict[str, Any] = msgspec.field(default_factory=dict)
    policy_decisions: tuple[PolicyDecision, ...] = ()
    resume: dict[str, Any] | None = None


class _OldEvent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    schema_version: int
    id: str
    invocation_id: str
    author: str
    timestamp: float
    content: Content | None = None
    actions: _OldEventActions = msgspec.field(default_factory=_OldEventActions)
    partial: bool = False
    is_final: bool = False
    branch: str | None = None
    provider_metadata: dict[str, Any] | None = None
    error: Any = None


ACTIONS: list[dict[str, Any]] = [
    {},
    {"state_delta": {}},
    {"artifact_delta": {}},
    {"requested_tool_confirmations": {}},
    {"state_delta": {}, "artifact_delta": {}, "requested_tool_confirmations": {}},
    {"state_delta": {"a": 1}},
    {"state_delta": {"a": {}}, "artifact_delta": {"f.txt": 2}},
    {"requested_tool_confirmations": {"c1": {"hint": "ok"}}, "escalate": True},
    {"state_delta": freeze({"a": [1, {}]}), "transfer_to_agent": "Other"},
    {"pause": Pause(reason="r", continuation_id="c", details={})},
]


def _pair(actions: dict[str, Any]) -> tuple[Event, _OldEvent]:
    """The same event in this schema and in the old one."""
    common = {
        "schema_version": 1,
        "id": "e1",
        "invocation_id": "inv",
        "author": "Agent",
        "timestamp": 1.5,
        "content": content.new([content.function_call("ping", {})], role="model"),
    }
    return (
        Event(**common, actions=EventActions(**actions)),
        _OldEvent(**common, actions=_OldEventActions(**actions)),
    )


@pytest.mark.parametrize("actions", ACTIONS, ids=range(len(ACTIONS)))
def test_encodings_are_byte_identical_to_the_old_schema(actions):
    new, old = _pair(actions)
    old_bytes = msgspec.json.encode(old)
    assert event_codec.encode(new) == old_bytes
    assert event_codec.encode(freeze(new)) == old_bytes  # as a store keeps it
    assert event_codec.encode(share(new)[0]) == old_bytes
    decoded = event_codec.decode(old_bytes)  # what an LMDB file written before holds
    assert decoded == new and event_codec.encode(decoded) == old_bytes
    replaced = msgspec.structs.replace(new.actions, state_delta={})  # post_init runs too
    old_replaced = msgspec.structs.replace(old.actions, state_delta={})
    assert msgspec.json.encode(replaced) == msgspec.json.encode(old_replaced)


def test_explicit_empty_fields_in_old_bytes_decode_to_plain_empties_of_the_event():
    # Review of 4173fce, finding 2: a decoded event is the user's, with editable empties.
    data = (
        b'{"schema_version":1,"id":"e","invocation_id":"i","author":"a","timestamp":1.0,'
        b'"actions":{"state_delta":{},"artifact_delta":{},"requested_tool_confirmations":{}}}'
    )
    event = event_codec.decode(data)
    for empty in (
        event.actions.state_delta,
        event.actions.artifact_delta,
        event.actions.requested_tool_confirmations,
    ):
        assert type(empty) is dict and empty == {}
    assert event_codec.encode(event) == msgspec.json.encode(
        msgspec.json.decode(data, type=_OldEvent)
    )
    event.actions.state_delta["user_tier"] = "gold"
    assert event_codec.decode(data).actions.state_delta == {}


def test_an_event_without_changes_is_stored_as_it_is_and_read_only():
    event = Event.new("Agent", "inv", content.new(["hi"], role="model"))
    assert type(event.actions.state_delta) is dict  # the user's own event: editable
    stored, refill = share(event)
    assert refill is None and reader_copy(stored, refill) is stored  # no per-read copy
    assert stored.actions.state_delta is EMPTY_DICT
    assert stored.actions.requested_tool_confirmations is EMPTY_DICT
    with pytest.raises(TypeError):
        stored.actions.state_delta["user_tier"] = "gold"
    assert event_codec.encode(stored) == event_codec.encode(event)
    assert stored == event and event == stored
    assert (stored.actions != event.actions) is False and (event.actions != stored.actions) is False
    assert repr(stored.actions) == repr(event.actions)


def test_empty_containers_freeze_to_read_only_empties_of_their_own():
    # Review of 4173fce, finding 1: no empty container is shared inside a payload.
    class Plain(msgspec.Struct):  # no omit_defaults: an empty list is written either way
        items: list[int] = msgspec.field(default_factory=list)
        table: dict[str, int] = msgspec.field(default_factory=dict)

    frozen = freeze(Plain())
    assert type(frozen.items) is FrozenList and type(frozen.table) is FrozenDict
    assert frozen.items is not EMPTY_LIST and frozen.table is not EMPTY_DICT
    assert msgspec.json.encode(frozen) == msgspec.json.encode(Plain())
    payload = freeze({"a": [], "b": {}, "c": [], "d": {}})
    assert payload == {"a": [], "b": {}, "c": [], "d": {}}
    assert len({id(value) for value in payload.values()}) == 4
    assert all(value is not EMPTY_LIST and value is not EMPTY_DICT for value in payload.values())


def test_event_ids_are_uuid4_hex():
    import uuid

    for _ in range(200):
        made = new_event_id()
        parsed = uuid.UUID(hex=made)
        assert parsed.hex == made and parsed.version == 4 and parsed.variant == uuid.RFC_4122
    assert len({new_event_id() for _ in range(1000)}) == 1000


# -- review leftover: a struct with an empty list inside a dict value ---------------------------


class Note(msgspec.Struct, omit_defaults=True):
    """A user struct whose empty list must stay plain (msgspec omits only an exact [])."""

    tags: list[str] = msgspec.field(default_factory=list)


def _edit_is_private(first: Any, second: Any) -> None:
    """One reader's edit of its plain empty list is never seen by the other reader."""
    assert type(first.tags) is list and first.tags is not second.tags
    first.tags.append("secret")
    assert second.tags == []


def test_an_empty_list_in_a_struct_in_a_dict_value_is_not_shared_between_readers():
    event = Event.new(
        "Agent", "inv", actions=EventActions(state_delta={"note": Note(), "n": [Note()]})
    )
    original = event_codec.encode(event)
    stored, refill = share(event)
    one, two = reader_copy(stored, refill), reader_copy(stored, refill)
    _edit_is_private(one.actions.state_delta["note"], two.actions.state_delta["note"])
    _edit_is_private(one.actions.state_delta["n"][0], two.actions.state_delta["n"][0])
    three = reader_copy(stored, refill)
    assert three.actions.state_delta["note"].tags == []
    assert event_codec.encode(three) == original == event_codec.encode(stored)
