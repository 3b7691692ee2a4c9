"""`get_or_create_session` (START's request in session 27, issue 20 §2 hand-off
plumbing): an invocation's first read in one call, the same session `get_session` and
`create_session` gave, on both backends."""

from __future__ import annotations

import threading

import pytest

import adk_actors as adk
from adk_actors.events import Event
from providers import content

APP, USER = "app", "u"


@pytest.fixture(params=["memory", "lmdb"])
def sessions(request, tmp_path):
    if request.param == "memory":
        service = adk.sessions.InMemorySessionService()
    else:
        service = adk.sessions.LmdbSessionService(tmp_path / "sessions")
    yield service
    service.close()


def test_a_missing_session_is_created_empty(sessions):
    got = sessions.get_or_create_session(APP, USER, "new")
    assert (got.id, got.state, got.events) == ("new", {}, ())
    assert sessions.get_session(APP, USER, "new") == got


def test_an_existing_session_is_read_unchanged(sessions):
    sessions.create_session(APP, USER, "s", {"kept": 1, "user:tier": "gold"})
    sessions.add_event(
        APP,
        USER,
        "s",
        Event.new("user", "i", content.from_text("hi")),
        runtime_delta={"_adk:open:i": "t"},
    )
    got = sessions.get_or_create_session(APP, USER, "s")
    assert got == sessions.get_session(APP, USER, "s")
    assert got.state == {"kept": 1, "user:tier": "gold"} and len(got.events) == 1
    internal = sessions.get_or_create_session(APP, USER, "s", include_internal=True)
    assert internal.state["_adk:open:i"] == "t"


def test_ids_are_checked_before_anything(sessions):
    for bad in ("", "a\x00b", None):
        with pytest.raises(adk.AdkError) as info:
            sessions.get_or_create_session(APP, USER, bad)
        assert info.value.reason == "invalid_id"
    assert sessions.list_sessions(APP, USER) == []


def test_racing_callers_get_one_session(sessions):
    results: list = []
    threads = [
        threading.Thread(
            target=lambda: results.append(sessions.get_or_create_session(APP, USER, "raced"))
        )
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(results) == 8 and len({r.last_update_time for r in results}) == 1
    assert [s.id for s in sessions.list_sessions(APP, USER)] == ["raced"]
