"""Review of 4173fce (shared empty containers), findings 1 to 5: every test fails there.

4173fce made every empty dict/list `freeze` met one shared `EMPTY_DICT`/`EMPTY_LIST`
and every event's empty deltas `EMPTY_DICT` from construction on. Now `freeze` gives
each empty container inside a payload its own read-only object (finding 1), only the
stored form of `EventActions` shares `EMPTY_DICT` while an event the user builds,
decodes or deep copies keeps plain editable empties (finding 2), a struct defaulting
to `EMPTY_*` encodes the same frozen (finding 3), refill plans holding a dict's keys
never reach the compile cache (finding 4), and `share` refuses to store once the shared
empties were changed through a bypass (finding 5).
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import msgspec
import pytest

import adk_actors as adk
from adk_actors import events as event_codec
from adk_actors.events import Event, EventActions
from adk_actors.plugins.pipeline import isolated
from providers import content, frozen
from providers.content import FunctionResponsePart
from providers.frozen import (
    EMPTY_DICT,
    EMPTY_LIST,
    SharedEmptyChanged,
    freeze,
    reader_copy,
    share,
)

APP, USER = "app", "u"
DELTAS = ("state_delta", "artifact_delta", "requested_tool_confirmations")


@pytest.fixture(params=["memory", "lmdb"])
def sessions(request, tmp_path):
    if request.param == "memory":
        service = adk.sessions.InMemorySessionService()
    else:
        service = adk.sessions.LmdbSessionService(tmp_path / "sessions")
    yield service
    service.close()


def _stored_history(sessions: Any) -> list[Event]:
    """Two stored events whose call arguments hold several empty lists and dicts."""
    sessions.create_session(APP, USER, "s")
    for name, args in (
        ("search", {"filters": [], "tags": [], "opts": {}}),
        ("lookup", {"ids": [], "extra": {}}),
    ):
        call = content.new([content.function_call(name, args)], role="model")
        sessions.add_event(APP, USER, "s", Event.new("Agent", f"inv-{name}", call))
    return list(sessions.get_session(APP, USER, "s").events)


# -- finding 1: deep copies and pickles of stored history alias no empty container ----------


def test_finding_1_a_deep_copy_of_read_history_gives_every_empty_its_own(sessions):
    history = _stored_history(sessions)
    mine = copy.deepcopy([event.content for event in history])
    mine[0].parts[0].args["filters"].append("lang:en")
    mine[0].parts[0].args["opts"]["k"] = 1
    assert mine[0].parts[0].args["tags"] == []
    assert mine[1].parts[0].args == {"ids": [], "extra": {}}
    events = copy.deepcopy(history)  # whole events: their deltas are the user's now
    events[0].actions.state_delta["user_tier"] = "gold"
    assert events[1].actions.state_delta == {}
    assert sessions.get_session(APP, USER, "s").events[1].actions.state_delta == {}


def test_finding_1_a_pickle_of_read_history_gives_every_empty_its_own(sessions):
    again = pickle.loads(pickle.dumps(_stored_history(sessions)))
    first, second = again[0].content.parts[0].args, again[1].content.parts[0].args
    assert first["filters"] is not second["ids"] and first["filters"] is not first["tags"]
    assert first["opts"] is not second["extra"]
    assert again[0].actions.state_delta is not again[1].actions.state_delta
    first["filters"].append("x")
    assert second["ids"] == [] and first["tags"] == []


def test_finding_1_freeze_makes_no_two_empties_of_a_payload_one_object():
    payload = freeze({"a": [], "b": [], "c": {}, "d": {}, "e": [[], {}]})
    inner = [payload["a"], payload["b"], payload["c"], payload["d"], *payload["e"]]
    assert len({id(value) for value in inner}) == len(inner)
    assert not any(value is EMPTY_LIST or value is EMPTY_DICT for value in inner)
    copied = copy.deepcopy(payload)
    copied["a"].append(1)
    copied["c"]["k"] = 1
    assert copied["b"] == [] and copied["d"] == {} and copied["e"] == [[], {}]


def test_finding_1_a_plugin_hooks_isolated_copy_of_stored_contents(sessions):
    history = _stored_history(sessions)
    contents = isolated([event.content for event in history])
    contents[0].parts[0].args["filters"].append("x")
    assert contents[0].parts[0].args["tags"] == [] and contents[1].parts[0].args["ids"] == []


@adk.tool
def lookup_customer(name: str) -> dict[str, Any]:
    """Look up a customer (a response with two empty lists)."""
    return {"name": name, "notes": [], "flags": []}


def _mark_first_response(ctx: Any, contents: Any) -> None:
    """A `before_model` callback that edits its deep copy in place, as it may."""
    responses = [p for c in contents for p in c.parts if isinstance(p, FunctionResponsePart)]
    if len(responses) >= 2:
        responses[0].response["notes"].append("reviewed")


def test_finding_1_a_before_model_edit_of_stored_history_reaches_only_its_target():
    sessions = adk.sessions.InMemorySessionService()
    calls = [{"tool_calls": [{"name": "lookup_customer", "args": {"name": who}}]} for who in "AB"]
    provider = adk.ScriptedProvider([calls[0], "found A", calls[1], "found B"], record_histories=10)
    agent = adk.spawn_agent(
        "Marker",
        {"provider": provider, "callbacks": {"before_model": _mark_first_response}},
        tools=[lookup_customer],
    )
    runner = adk.Runner(agent, APP, sessions)
    runner.run(USER, "s", "find A")
    runner.run(USER, "s", "find B")
    seen = [
        dict(part.response)
        for item in provider.histories[-1]
        for part in item.parts
        if isinstance(part, FunctionResponsePart)
    ]
    assert seen[0] == {"name": "A", "notes": ["reviewed"], "flags": []}
    assert seen[1] == {"name": "B", "notes": [], "flags": []}


# -- finding 2: events the user builds or copies keep plain, editable empty deltas -------------


def _users_events(stored: Event) -> dict[str, Event]:
    """Every way user code gets an event of its own."""
    made = Event.new("Agent", "inv")
    data = event_codec.encode(made)
    return {
        "Event.new": made,
        "EventActions()": Event.new("Agent", "inv", actions=EventActions()),
        "decode": event_codec.decode(data),
        "msgspec decode": msgspec.json.decode(data, type=Event),
        "deepcopy of a read": copy.deepcopy(stored),
        "pickle of a read": pickle.loads(pickle.dumps(stored)),
        "built from a read's deltas": Event.new(
            "Agent",
            "inv",
            actions=EventActions(**{name: getattr(stored.actions, name) for name in DELTAS}),
        ),
    }


def test_finding_2_events_of_the_users_own_have_editable_empty_deltas(sessions):
    sessions.create_session(APP, USER, "s")
    sessions.add_event(APP, USER, "s", Event.new("Agent", "inv"))
    stored = sessions.get_session(APP, USER, "s").events[0]
    for how, event in _users_events(stored).items():
        before = event_codec.encode(event)
        for name in DELTAS:
            delta = getattr(event.actions, name)
            assert type(delta) is dict and delta == {}, how
        assert "actions" not in msgspec.json.decode(before) or b"_delta" not in before, how
        event.actions.state_delta["user:tier"] = "gold"
        event.actions.artifact_delta["f.txt"] = 1
        event.actions.requested_tool_confirmations["c1"] = {"hint": "ok"}
        assert b'"user:tier":"gold"' in event_codec.encode(event), how
    again = sessions.get_session(APP, USER, "s").events[0]  # nothing reached the store
    assert all(getattr(again.actions, name) == {} for name in DELTAS)
    assert Event.new("Agent", "later").actions.state_delta == {}


def test_finding_2_stored_events_share_read_only_empties_and_encode_the_same(sessions):
    sessions.create_session(APP, USER, "s")
    appended = Event.new("Agent", "inv", content.new(["hi"], role="model"))
    sessions.add_event(APP, USER, "s", appended)
    one = sessions.get_session(APP, USER, "s").events[0]
    two = sessions.get_session(APP, USER, "s").events[0]
    for name in DELTAS:
        assert getattr(one.actions, name) is EMPTY_DICT is getattr(two.actions, name)
    with pytest.raises(TypeError):
        one.actions.state_delta["user:tier"] = "gold"
    assert one == appended and appended == one and one.actions == EventActions()
    assert isinstance(one.actions, EventActions) and repr(one.actions) == repr(appended.actions)
    original = event_codec.encode(appended)
    assert event_codec.encode(one) == original
    assert msgspec.msgpack.encode(one) == msgspec.msgpack.encode(appended)
    assert msgspec.to_builtins(one) == msgspec.to_builtins(appended)
    # `structs.replace` of a stored event's actions with empty deltas still omits them.
    replaced = msgspec.structs.replace(one.actions, state_delta={}, escalate=True)
    assert msgspec.json.encode(replaced) == b'{"escalate":true}'
    filled = msgspec.structs.replace(one.actions, state_delta={"a": 1})
    assert msgspec.json.encode(filled) == b'{"state_delta":{"a":1}}'


# -- finding 3: a struct defaulting to EMPTY_DICT / EMPTY_LIST encodes the same frozen -------


class _Doc(msgspec.Struct, omit_defaults=True):
    tags: list[str] = EMPTY_LIST
    meta: dict[str, Any] = EMPTY_DICT


@pytest.mark.parametrize(
    "doc", [_Doc(), _Doc(tags=[], meta={}), _Doc(tags=["a"]), _Doc(meta={"k": []})]
)
def test_finding_3_freeze_keeps_the_encoding_of_a_struct_with_shared_empty_defaults(doc):
    original = msgspec.json.encode(doc)
    assert msgspec.json.encode(freeze(doc)) == original
    stored, refill = share(doc)
    assert msgspec.json.encode(stored) == original
    assert msgspec.json.encode(reader_copy(stored, refill)) == original


# -- finding 4: a dict's keys never reach the compile cache -----------------------------------


class _Note(msgspec.Struct, omit_defaults=True):
    tags: list[str] = msgspec.field(default_factory=list)


def test_finding_4_values_keyed_by_data_compile_no_refiller_each():
    cache = getattr(frozen, "_compiled", None) or frozen._refiller
    cache.cache_clear()
    for n in range(300):
        share({f"note:{n}": _Note(), "fixed": [_Note(tags=["t"])]})
        share(Event.new("Agent", "inv", actions=EventActions(state_delta={f"n:{n}": _Note()})))
    assert cache.cache_info().misses < 10
    stored, refill = share({"note:1": _Note(), "other": {"deep": _Note()}})
    one, two = reader_copy(stored, refill), reader_copy(stored, refill)
    one["note:1"].tags.append("mine")
    one["other"]["deep"].tags.append("mine")
    assert two["note:1"].tags == [] and two["other"]["deep"].tags == []
    assert reader_copy(stored, refill) == {"note:1": _Note(), "other": {"deep": _Note()}}


# -- finding 5: a bypass of the read-only guard on the shared empties stops the store -----------


@pytest.mark.parametrize("shared", [EMPTY_DICT, EMPTY_LIST], ids=["dict", "list"])
def test_finding_5_a_changed_shared_empty_refuses_every_store(sessions, shared):
    sessions.create_session(APP, USER, "s")
    sessions.add_event(APP, USER, "s", Event.new("Agent", "inv-1"))
    try:
        if shared is EMPTY_DICT:  # e.g. a plugin working around the TypeError
            dict.update(sessions.get_session(APP, USER, "s").events[0].actions.state_delta, k=1)
        else:
            list.append(EMPTY_LIST, 1)
        with pytest.raises(SharedEmptyChanged):
            share(Event.new("Agent", "inv-2"))
        with pytest.raises(SharedEmptyChanged):  # memory shares on append, LMDB on a read
            sessions.add_event(APP, USER, "s", Event.new("Agent", "inv-3"))
            sessions.get_session(APP, USER, "s")
        with pytest.raises(SharedEmptyChanged):
            freeze(Event.new("Agent", "inv-4"))  # what LMDB's raw reads freeze
        assert Event.new("Agent", "inv-5").actions.state_delta == {}  # new events: untouched
    finally:
        dict.clear(EMPTY_DICT)
        list.clear(EMPTY_LIST)
    history = sessions.get_session(APP, USER, "s").events
    assert all(event.actions.state_delta == {} for event in history)
    assert event_codec.encode(history[0]).count(b"state_delta") == 0
