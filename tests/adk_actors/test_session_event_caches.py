"""Issue 20 §2: a session read decodes only what was appended since the last one.

The stores hand out frozen events (`providers.frozen`) and LMDB keeps them decoded per
session (`EventCache`); these tests check that the cache is invisible: the same
events with and without it, after appends, compactions, rewinds, deletes and writes
by another service; nobody can change stored history through an event they got;
only committed steps fill it; and it stays within its bound. Also: an invocation's
end and its ``temp:`` cleanup are one write, and a session's lock is reused.
"""

from __future__ import annotations

import copy
import pickle

import msgspec
import pytest

import adk_actors as adk
from adk_actors.events import Event, EventActions
from adk_actors.sessions.service import _RECENT_LOCKS, _SessionLocks
from providers import content

APP, USER = "app", "u"


def event(n: int, delta: dict | None = None) -> Event:
    call = content.function_call("lookup", {"city": f"C{n}", "tags": ["a", {"deep": [n]}]})
    return Event.new(
        "Agent",
        f"inv-{n}",
        content.new([call], role="model"),
        actions=EventActions(state_delta=delta or {}),
    )


@pytest.fixture(params=["memory", "lmdb"])
def sessions(request, tmp_path):
    if request.param == "memory":
        service = adk.sessions.InMemorySessionService()
    else:
        service = adk.sessions.LmdbSessionService(tmp_path / "sessions")
    yield service
    service.close()


@pytest.fixture
def pair(tmp_path):
    """Two LMDB services on one path: one caching, one not."""
    cached = adk.sessions.LmdbSessionService(tmp_path / "db")
    plain = adk.sessions.LmdbSessionService(tmp_path / "db", event_cache=0)
    yield cached, plain
    cached.close()
    plain.close()


def ids(service, session_id: str = "s") -> list[str]:
    return [e.id for e in service.get_session(APP, USER, session_id).events]


def fill(service, count: int, session_id: str = "s") -> list[Event]:
    service.create_session(APP, USER, session_id)
    added = [event(n, {"seen": [n]} if n == 0 else None) for n in range(count)]
    for item in added:
        service.add_event(APP, USER, session_id, item)
    return added


def test_returned_events_cannot_change_stored_history(sessions):
    added = fill(sessions, 3)
    stored = sessions.get_session(APP, USER, "s").events
    assert list(stored) == added  # equal to what was appended
    part = stored[0].content.parts[0]
    with pytest.raises(TypeError):
        part.args["city"] = "changed"
    with pytest.raises(TypeError):
        part.args["tags"].append("x")
    with pytest.raises(TypeError):
        part.args["tags"][1]["deep"].clear()
    with pytest.raises(TypeError):
        stored[0].actions.state_delta.update(k=1)
    with pytest.raises(TypeError):
        stored[0].actions.state_delta["seen"].append(1)
    added[1].content.parts[0].args["city"] = "changed by the appender"  # its own copy
    again = sessions.get_session(APP, USER, "s").events
    assert again[0].content.parts[0].args == {"city": "C0", "tags": ["a", {"deep": [0]}]}
    assert again[1].content.parts[0].args["city"] == "C1"


def test_a_copy_of_a_stored_event_is_mutable_and_encodes_the_same(sessions):
    fill(sessions, 1)
    (stored,) = sessions.get_session(APP, USER, "s").events
    args = stored.content.parts[0].args
    for thawed in (copy.copy(args), copy.deepcopy(args), pickle.loads(pickle.dumps(args))):
        thawed["city"] = "mine"
        assert type(thawed) is dict
    plain = msgspec.json.decode(msgspec.json.encode(stored), type=Event)
    assert msgspec.json.encode(stored) == msgspec.json.encode(plain)
    bare = Event.new("Agent", "i", content.new([content.function_call("now")], role="model"))
    sessions.add_event(APP, USER, "s", bare)  # empty args and delta: still left out
    stored_bare = sessions.get_session(APP, USER, "s").events[-1]
    assert msgspec.json.encode(stored_bare) == msgspec.json.encode(bare)
    assert b"state_delta" not in msgspec.json.encode(stored_bare)


def test_the_lmdb_cache_is_invisible_across_appends_compactions_and_rewinds(pair):
    cached, plain = pair
    fill(cached, 6)
    assert ids(cached) == ids(plain)
    cached.add_event(APP, USER, "s", event(6, {"k": 1}))  # appended after a cached read
    assert ids(cached) == ids(plain) and len(ids(cached)) == 7
    first_two = ids(plain)[:2]
    summary = Event.new("Agent", "inv-x", content.from_text("summary", role="model"))
    plain.compact_events(APP, USER, "s", first_two, summary)  # by the other service
    assert ids(cached) == ids(plain) and ids(cached)[0] == summary.id
    cached.rewind(APP, USER, "s", 3, "branch")
    assert ids(cached, "branch") == ids(plain, "branch") == ids(plain)[:3]
    assert cached.get_session(APP, USER, "s").events == plain.get_session(APP, USER, "s").events


def test_a_deleted_and_recreated_session_never_shows_old_events(pair):
    cached, plain = pair
    fill(cached, 4)
    assert len(ids(cached)) == 4
    plain.delete_session(APP, USER, "s")
    again = fill(plain, 4)  # same id, same count: only the record tells them apart
    assert ids(cached) == [e.id for e in again]


def test_appends_by_another_service_are_read(pair):
    cached, plain = pair
    fill(cached, 2)
    assert len(ids(cached)) == 2
    plain.add_event(APP, USER, "s", event(9))
    assert ids(cached)[-1] == ids(plain)[-1] and len(ids(cached)) == 3


def test_only_committed_steps_fill_the_cache(tmp_path):
    writer = adk.sessions.LmdbSessionService(tmp_path / "db", event_cache=0)
    fill(writer, 3)
    service = adk.sessions.LmdbSessionService(tmp_path / "db")
    try:
        summary = Event.new("Agent", "inv-x", content.from_text("summary", role="model"))
        with pytest.raises(adk.AdkError) as info:  # reads the events, then refuses
            service.compact_events(APP, USER, "s", ["no-such-id"], summary)
        assert info.value.reason == "conflict"
        assert len(service._events) == 0  # the aborted step left nothing behind
        service.get_session(APP, USER, "s")
        assert len(service._events) == 3
    finally:
        service.close()
        writer.close()


def test_the_lmdb_cache_is_bounded(tmp_path):
    service = adk.sessions.LmdbSessionService(tmp_path / "db", event_cache=5)
    try:
        fill(service, 4, "a")
        fill(service, 3, "b")
        service.get_session(APP, USER, "a")
        assert len(service._events) == 4
        service.get_session(APP, USER, "b")  # evicts a: 4 + 3 > 5
        assert len(service._events) == 3
        fill(service, 6, "c")
        service.get_session(APP, USER, "c")  # too big to keep at all
        assert len(service._events) <= 5
        assert len(ids(service, "c")) == 6 and len(ids(service, "a")) == 4
    finally:
        service.close()


@pytest.mark.parametrize("value", [-1, True, "10", 1.5])
def test_event_cache_is_a_count(tmp_path, value):
    with pytest.raises(adk.AdkError) as info:
        adk.sessions.LmdbSessionService(tmp_path / "db", event_cache=value)
    assert info.value.reason == "invalid_event_cache"


def test_an_end_clears_temp_state_in_its_own_step(sessions):
    sessions.create_session(APP, USER, "s", {"temp:scratch": 1, "kept": 2})
    sessions.add_event(APP, USER, "s", event(0), runtime_delta={"_adk:open:i": "t"})
    with pytest.raises(adk.AdkError) as info:  # a refused end clears nothing
        sessions.add_event_if_state(
            APP, USER, "s", event(1), {"_adk:open:i": "other"}, clear_temp=True
        )
    assert info.value.reason == "conflict"
    state = sessions.get_session(APP, USER, "s").state
    assert state == {"temp:scratch": 1, "kept": 2}
    sessions.add_event_if_state(
        APP,
        USER,
        "s",
        event(2, {"temp:late": 3, "plain": 4}),
        {"_adk:open:i": "t"},
        runtime_delta={"_adk:open:i": None},
        clear_temp=True,
    )
    assert sessions.get_session(APP, USER, "s", include_internal=True).state == {
        "kept": 2,
        "plain": 4,
    }


def test_runs_leave_no_temp_state_and_read_their_history(sessions):
    seen = []

    def model(history, tools):
        seen.append([item.text_value() for item in history])
        return {"text": "done"}

    agent = adk.spawn_agent("Agent", {"provider": adk.ScriptedProvider(fn=model)})
    runner = adk.Runner(agent, APP, sessions)
    sessions.create_session(APP, USER, "s", {"temp:scratch": 1, "kept": 2})
    assert runner.run(USER, "s", "first") == "done"
    assert runner.run(USER, "s", "second") == "done"
    assert seen == [["first"], ["first", "done", "second"]]
    assert sessions.get_session(APP, USER, "s").state == {"kept": 2}


def test_a_sessions_lock_is_reused_and_the_recent_ones_are_bounded():
    locks = _SessionLocks()
    first = locks.get(("a", "u", "s"))
    assert locks.get(("a", "u", "s")) is first  # nobody held it in between
    for n in range(_RECENT_LOCKS + 10):
        locks.get(("a", "u", f"other-{n}"))
    assert len(locks._recent) == _RECENT_LOCKS
    held = locks.get(("a", "u", "s"))
    for n in range(_RECENT_LOCKS + 10):
        locks.get(("a", "u", f"more-{n}"))
    assert locks.get(("a", "u", "s")) is held  # held by someone: still the one lock


def test_a_branch_replays_state_as_plain_values(sessions):
    fill(sessions, 2)
    sessions.rewind(APP, USER, "s", 2, "branch")
    replayed = sessions.get_session(APP, USER, "branch").state["seen"]
    assert replayed == [0] and type(replayed) is list
