"""Review of fb2eacc, findings 1, 3 and 4: what the session stores share with readers.

Finding 1: `freeze` leaves empty dict/list struct fields plain (msgspec omits only an
exact empty default), and the stores shared those objects between readers: one
reader's in-place edit showed for every other reader, and rewind and compaction then
stored it. Each reader now gets empty fields of its own (`providers.frozen.share` /
`reader_copy`). Finding 3: the LMDB event cache is bounded by encoded bytes too, and
`close()` empties it. Finding 4: a read that overlapped a delete does not put the
deleted session back into the cache.
"""

from __future__ import annotations

import threading

import msgspec
import pytest

import adk_actors as adk
from adk_actors import events as event_codec
from adk_actors.events import Event, EventActions
from adk_actors.sessions import core, event_cache
from adk_actors.sessions.event_cache import (
    DEFAULT_MAX_BYTES,
    MAX_BYTES_CEILING,
    EventCache,
    Pending,
)
from providers import content
from providers.frozen import (
    EMPTY_DICT,
    FrozenDict,
    FrozenList,
    empty_fields,
    freeze,
    reader_copy,
    share,
)

APP, USER = "app", "u"


@pytest.fixture(params=["memory", "lmdb"])
def sessions(request, tmp_path):
    if request.param == "memory":
        service = adk.sessions.InMemorySessionService()
    else:
        service = adk.sessions.LmdbSessionService(tmp_path / "sessions")
    yield service
    service.close()


def no_args_call(n: int) -> Event:
    """A call without arguments and an event without state changes: empty fields."""
    return Event.new(
        "Agent", f"inv-{n}", content.new([content.function_call("ping", {})], role="model")
    )


def text(n: int, size: int = 10) -> Event:
    return Event.new("Agent", f"inv-{n}", content.new(["x" * size], role="model"))


def fill(service, n: int, session_id: str = "s", size: int = 10) -> None:
    service.create_session(APP, USER, session_id)
    for i in range(n):
        service.add_event(APP, USER, session_id, text(i, size))


# -- finding 1 ------------------------------------------------------------------------------


def edit(mapping, key, value) -> None:
    """A reader's edit of an empty field of a read event: an action delta is the stored
    event's shared, read-only `EMPTY_DICT` (issue 20 s2) and refuses it; any other empty
    field (a call without arguments) is a plain one of the reader's own and takes it."""
    if mapping is EMPTY_DICT:
        with pytest.raises(TypeError):
            mapping[key] = value
        assert mapping == {}
    else:
        assert type(mapping) is dict
        mapping[key] = value


def test_one_readers_edit_of_an_empty_field_is_its_own(sessions):
    sessions.create_session(APP, USER, "s")
    appended = no_args_call(1)
    sessions.add_event(APP, USER, "s", appended)
    mine = sessions.get_session(APP, USER, "s").events[0]
    assert mine.actions.state_delta is EMPTY_DICT  # stored and shared: no per-read copy
    edit(mine.actions.state_delta, "user_tier", "gold")
    edit(mine.content.parts[0].args, "api_key", "sk-LEAK")
    theirs = sessions.get_session(APP, USER, "s").events[0]
    assert theirs.actions.state_delta == {} and theirs.content.parts[0].args == {}
    assert event_codec.encode(theirs) == event_codec.encode(appended)


def test_edits_of_a_read_never_reach_a_rewind_or_a_compaction(sessions, tmp_path):
    sessions.create_session(APP, USER, "s")
    for n in range(3):
        sessions.add_event(APP, USER, "s", no_args_call(n))
    got = sessions.get_session(APP, USER, "s").events
    edit(got[0].actions.state_delta, "user_tier", "gold")
    edit(got[0].content.parts[0].args, "api_key", "sk-LEAK")
    branch = sessions.rewind(APP, USER, "s", 3, "branch")
    assert "user_tier" not in branch.state
    summary = Event.new("Agent", "sum", content.new(["summary"], role="model"))
    sessions.compact_events(APP, USER, "s", [got[2].id], summary)
    for session_id in ("s", "branch"):
        for ev in sessions.get_session(APP, USER, session_id).events:
            assert ev.actions.state_delta == {}
            assert all(getattr(p, "args", {}) == {} for p in ev.content.parts)


def test_compacted_bytes_on_disk_hold_no_readers_edit(tmp_path):
    path = tmp_path / "db"
    service = adk.sessions.LmdbSessionService(path)
    service.create_session(APP, USER, "s")
    first, last = no_args_call(1), no_args_call(2)
    for ev in (first, last):
        service.add_event(APP, USER, "s", ev)
    service.get_session(APP, USER, "s").events[0].content.parts[0].args["api_key"] = "sk-LEAK"
    summary = Event.new("Agent", "sum", content.new(["summary"], role="model"))
    service.compact_events(APP, USER, "s", [last.id], summary)
    service.close()
    fresh = adk.sessions.LmdbSessionService(path, event_cache=0)
    try:
        stored = fresh.get_session(APP, USER, "s").events[0]
        assert event_codec.encode(stored) == event_codec.encode(first)
    finally:
        fresh.close()


def test_the_appenders_own_empty_fields_are_not_kept(sessions):
    sessions.create_session(APP, USER, "s")
    appended = no_args_call(1)
    sessions.add_event(APP, USER, "s", appended)
    # The appender's own event keeps plain empties it may edit (review of 4173fce, 2).
    appended.actions.state_delta["late"] = 1
    appended.content.parts[0].args["late"] = 1
    stored = sessions.get_session(APP, USER, "s").events[0]
    assert stored.actions.state_delta == {} and stored.content.parts[0].args == {}


def test_reader_copies_encode_as_the_original_and_share_the_rest():
    call = content.function_call("f", {"q": [1, {"deep": {}}]})
    original = Event.new(
        "Agent",
        "inv",
        content.new([call, content.function_call("g", {}), "text"], role="model"),
        actions=EventActions(policy_decisions=()),
    )
    stored, refill = share(original)
    one, two = reader_copy(stored, refill), reader_copy(stored, refill)
    for copy_ in (one, two):
        assert copy_ == original
        assert event_codec.encode(copy_) == event_codec.encode(original)
    assert one.actions.state_delta is two.actions.state_delta is EMPTY_DICT  # shared, read-only
    assert one.content.parts[1].args is not two.content.parts[1].args
    assert one.content.parts[0] is stored.content.parts[0]  # nothing empty: shared
    assert type(one.content.parts[0].args) is FrozenDict
    with pytest.raises(TypeError):
        one.content.parts[0].args["q"].append(2)
    assert empty_fields(freeze({"a": []})) is None  # an empty value inside a dict is frozen


def test_reader_copies_through_lists_of_structs():
    class Inner(msgspec.Struct, frozen=True, omit_defaults=True):  # its empty list stays plain
        values: list[int] = msgspec.field(default_factory=list)

    class Outer(msgspec.Struct, frozen=True):
        items: list[Inner]
        pair: tuple[Inner, Inner]

    stored, refill = share(Outer([Inner(), Inner([1])], (Inner([2]), Inner())))
    got = reader_copy(stored, refill)
    assert type(got.items) is FrozenList
    assert got == stored and got.items[0].values is not stored.items[0].values
    assert got.items[1] is stored.items[1] and got.pair[0] is stored.pair[0]
    assert got.pair[1].values is not stored.pair[1].values
    assert reader_copy(stored, None) is stored


# -- finding 3 ------------------------------------------------------------------------------


def test_the_lmdb_cache_is_bounded_by_encoded_bytes(tmp_path):
    size = 1000
    one = len(event_codec.encode(text(0, size)))
    service = adk.sessions.LmdbSessionService(tmp_path / "db", event_cache_bytes=10 * one)
    try:
        fill(service, 4, "a", size)
        fill(service, 4, "b", size)
        service.get_session(APP, USER, "a")
        assert len(service._events) == 4 and 4 * one - 8 <= service._events.size <= 4 * one + 8
        service.get_session(APP, USER, "b")
        assert len(service._events) == 8 and service._events.size <= 10 * one
        fill(service, 3, "c", size)
        service.get_session(APP, USER, "c")  # a, least recently used, goes
        assert len(service._events) == 7 and service._events.size <= 10 * one
        assert [len(ids) for ids in (ids_of(service, "a"), ids_of(service, "b"))] == [4, 4]
        fill(service, 6, "d", size)  # above half the bound: never kept
        service.get_session(APP, USER, "d")
        assert service._events.size <= 10 * one and len(ids_of(service, "d")) == 6
    finally:
        service.close()


def ids_of(service, session_id: str) -> list[str]:
    return [e.id for e in service.get_session(APP, USER, session_id).events]


def test_close_empties_the_cache(tmp_path):
    service = adk.sessions.LmdbSessionService(tmp_path / "db")
    fill(service, 3)
    service.get_session(APP, USER, "s")
    assert len(service._events) == 3
    service.close()
    assert len(service._events) == 0 and service._events.size == 0


def test_a_big_session_is_not_kept_by_default(tmp_path):
    assert 0 < DEFAULT_MAX_BYTES <= MAX_BYTES_CEILING
    service = adk.sessions.LmdbSessionService(tmp_path / "db", event_cache_bytes=1 << 16)
    try:
        fill(service, 3, size=20_000)  # ~60 KB: above half of 64 KiB
        assert len(ids_of(service, "s")) == 3
        assert len(service._events) == 0
    finally:
        service.close()


@pytest.mark.parametrize("value", [-1, True, "10", 1.5, MAX_BYTES_CEILING + 1])
def test_event_cache_bytes_is_bounded(tmp_path, value):
    with pytest.raises(adk.AdkError) as info:
        adk.sessions.LmdbSessionService(tmp_path / "db", event_cache_bytes=value)
    assert info.value.reason == "invalid_event_cache_bytes"


def test_no_cache_when_either_bound_is_zero(tmp_path):
    service = adk.sessions.LmdbSessionService(tmp_path / "db", event_cache_bytes=0)
    try:
        service.create_session(APP, USER, "s")
        call = content.function_call("f", {"q": 1})
        service.add_event(APP, USER, "s", Event.new("A", "i", content.new([call], role="model")))
        got = service.get_session(APP, USER, "s").events
        assert len(got) == 1 and len(service._events) == 0
        with pytest.raises(TypeError):  # still read-only without a cache
            got[0].content.parts[0].args["q"] = 2
    finally:
        service.close()


# -- finding 4 ------------------------------------------------------------------------------


def test_a_read_overlapping_a_delete_does_not_cache_the_deleted_session(tmp_path):
    service = adk.sessions.LmdbSessionService(tmp_path / "db")
    try:
        fill(service, 5)
        service._events.clear()
        read, deleted = threading.Event(), threading.Event()

        def slow_reader(storage):
            session = core.get(storage, APP, USER, "s")  # decoded: a fill is pending
            read.set()
            assert deleted.wait(10)
            return session

        result: list = []
        reader = threading.Thread(target=lambda: result.append(service._read(slow_reader)))
        reader.start()
        assert read.wait(10)
        service.delete_session(APP, USER, "s")
        deleted.set()
        reader.join(10)
        assert len(result[0].events) == 5  # the reader saw its snapshot
        assert len(service._events) == 0
        fill(service, 2)  # re-created: read and cached afresh
        assert len(ids_of(service, "s")) == 2 and len(service._events) == 2
    finally:
        service.close()


def record(session_id: str, events: int) -> core.SessionRecord:
    return core.SessionRecord(
        id=session_id,
        app_name=APP,
        user_id=USER,
        state={},
        created=1.0,
        last_update=1.0,
        event_count=events,
        revision=events,
    )


def cached_fill(cache: EventCache, started: int, key: bytes) -> None:
    pending = Pending(started)
    shared = [share(text(0))]
    pending.fill(key, record(key.decode(), 1), [e for e, _ in shared], [r for _, r in shared], 10)
    cache.apply(pending)


def test_fills_that_began_before_a_drop_are_refused_even_once_it_is_forgotten(monkeypatch):
    monkeypatch.setattr(event_cache, "_MAX_TOMBSTONES", 2)
    cache = EventCache()
    early = cache.stamp()
    drops = Pending(cache.stamp())
    drops.drops.extend([b"a", b"b", b"c"])  # a's tombstone is forgotten: the floor rises
    cache.apply(drops)
    for key in (b"a", b"c", b"z"):
        cached_fill(cache, early, key)
    assert len(cache) == 0
    for key in (b"a", b"c", b"z"):
        cached_fill(cache, cache.stamp(), key)
    assert len(cache) == 3
