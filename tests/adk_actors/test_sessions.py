"""Session services, in memory and in LMDB: scopes, atomic steps, concurrency, durability."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.events import Event, EventActions
from adk_actors.sessions.memory import OWNER_NAME, DropTable, NewTable, Refused, Tables
from providers import content


@pytest.fixture(params=["memory", "lmdb"])
def sessions(request, tmp_path):
    if request.param == "memory":
        service = adk.sessions.InMemorySessionService()
        yield service
        service.close()
    else:
        service = adk.sessions.LmdbSessionService(tmp_path / "sessions")
        yield service
        service.close()


def event(text="hi", delta=None, author="user"):
    return Event.new(
        author, "inv-1", content.from_text(text), actions=EventActions(state_delta=delta or {})
    )


def reason(fn):
    with pytest.raises(adk.AdkError) as info:
        fn()
    return info.value.reason


def test_create_is_idempotent_and_never_overwrites(sessions):
    first = sessions.create_session("app", "u1", "s1", {"a": 1})
    again = sessions.create_session("app", "u1", "s1", {"a": 999, "b": 2})
    assert first.state == again.state == {"a": 1}
    generated = sessions.create_session("app", "u1")
    assert generated.id and generated.id != "s1"


def test_state_scopes(sessions):
    sessions.create_session("app", "u1", "s1", {"plain": 1, "user:name": "Ada", "app:version": "1"})
    sessions.create_session("app", "u2", "s9")
    assert sessions.get_session("app", "u2", "s9").state == {
        "app:version": "1"
    }  # app: reaches every user
    sessions.delete_session("app", "u1", "s1")
    later = sessions.create_session("app", "u1", "s2")
    assert later.state == {"app:version": "1", "user:name": "Ada"}  # user: reaches future sessions
    assert "plain" not in later.state


def test_temp_state_survives_events_until_cleared(sessions):
    sessions.create_session("app", "u", "s")
    sessions.add_event("app", "u", "s", event(delta={"temp:scratch": 1, "kept": True}))
    sessions.add_event("app", "u", "s", event("again"))
    assert sessions.get_session("app", "u", "s").state == {"temp:scratch": 1, "kept": True}
    sessions.clear_temp_state("app", "u", "s")
    assert sessions.get_session("app", "u", "s").state == {"kept": True}
    assert [e.text() for e in sessions.get_session("app", "u", "s").events] == ["hi", "again"]


def test_missing_sessions_are_not_found_and_nothing_leaks(sessions):
    for operation in (
        lambda: sessions.get_session("app", "u", "nope"),
        lambda: sessions.update_state("app", "u", "nope", {"user:leak": 1, "app:leak": 1}),
        lambda: sessions.add_event("app", "u", "nope", event(delta={"app:leak": 1})),
        lambda: sessions.clear_temp_state("app", "u", "nope"),
        lambda: sessions.delete_session("app", "u", "nope"),
    ):
        assert reason(operation) == "not_found"
    assert sessions.create_session("app", "u", "fresh").state == {}


def test_add_event_if_state_is_atomic(sessions):
    sessions.create_session("app", "u", "s", {"version": 1})
    sessions.add_event_if_state("app", "u", "s", event(delta={"version": 2}), {"version": 1})
    assert reason(
        lambda: sessions.add_event_if_state(
            "app", "u", "s", event(delta={"version": 3}), {"version": 1}
        )
    ) == ("conflict")
    session = sessions.get_session("app", "u", "s")
    assert session.state == {"version": 2} and len(session.events) == 1


def test_invalid_input_is_refused_and_changes_nothing(sessions):
    sessions.create_session("app", "u", "s", {"a": 1})
    assert (
        reason(lambda: sessions.update_state("app", "u", "s", {"bad": object()}))
        == "invalid_state_delta"
    )
    assert reason(lambda: sessions.create_session("", "u")) == "invalid_id"
    assert sessions.get_session("app", "u", "s").state == {"a": 1}


def test_listing_is_newest_first_with_ties_by_id(sessions):
    for name in ("b", "a", "c"):
        sessions.create_session("app", "u", name)
        time.sleep(0.002)
    sessions.update_state("app", "u", "a", {"touched": True})
    assert [s.id for s in sessions.list_sessions("app", "u")] == ["a", "c", "b"]
    assert [s.id for s in sessions.list_sessions("app", "u", limit=2)] == ["a", "c"]
    assert all(s.events == () for s in sessions.list_sessions("app", "u"))
    assert reason(lambda: sessions.list_sessions("app", "u", limit=501)) == "invalid_limit"


def test_concurrent_updates_and_creates_lose_nothing(sessions):
    sessions.create_session("app", "u", "counter")
    barrier = threading.Barrier(32)

    def update(n):
        barrier.wait()
        sessions.update_state("app", "u", "counter", {f"k{n}": n})

    threads = [threading.Thread(target=update, args=(n,)) for n in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sessions.get_session("app", "u", "counter").state == {f"k{n}": n for n in range(32)}

    created = []
    barrier2 = threading.Barrier(20)

    def create(n):
        barrier2.wait()
        created.append(sessions.create_session("app", "u", "same", {"creator": n}))

    threads = [threading.Thread(target=create, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({s.state["creator"] for s in created}) == 1  # every caller got the same session


def test_lmdb_sessions_survive_a_sigkilled_writer(tmp_path):
    path = tmp_path / "durable"
    script = textwrap.dedent(
        f"""
        import os, signal
        import adk_actors as adk
        from adk_actors.events import Event, EventActions
        from providers import content
        service = adk.sessions.LmdbSessionService({str(path)!r})
        service.create_session("app", "u", "s", {{"user:name": "Ada"}})
        for n in range(5):
            service.add_event("app", "u", "s", Event.new("user", "inv", content.from_text(f"m{{n}}"), actions=EventActions(state_delta={{"n": n}})))
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    completed = subprocess.run([sys.executable, "-c", script], cwd=os.getcwd(), timeout=60)
    assert completed.returncode == -signal.SIGKILL
    reader = adk.sessions.LmdbSessionService(path)
    session = reader.get_session("app", "u", "s")
    assert [e.text() for e in session.events] == [f"m{n}" for n in range(5)]
    assert session.state == {"user:name": "Ada", "n": 4}
    reader.close()


def test_two_lmdb_services_share_one_path(tmp_path):
    one = adk.sessions.LmdbSessionService(tmp_path / "shared")
    two = adk.sessions.LmdbSessionService(tmp_path / "shared")
    one.create_session("app", "u", "s", {"x": 1})
    assert two.get_session("app", "u", "s").state == {"x": 1}
    one.close()
    two.close()


def test_session_pages_and_cursors(sessions):
    for n in range(7):
        sessions.create_session("app", "u", f"s{n}")
        time.sleep(0.001)
    first = sessions.query_sessions("app", "u", limit=3)
    assert [s.id for s in first.sessions] == ["s6", "s5", "s4"] and first.next_cursor
    second = sessions.query_sessions("app", "u", limit=3, cursor=first.next_cursor)
    third = sessions.query_sessions("app", "u", limit=3, cursor=second.next_cursor)
    assert [s.id for s in second.sessions + third.sessions] == ["s3", "s2", "s1", "s0"]
    assert third.next_cursor is None
    assert (
        reason(lambda: sessions.query_sessions("app", "u", limit=4, cursor=first.next_cursor))
        == "invalid_cursor"
    )
    assert (
        reason(lambda: sessions.query_sessions("app", "other", limit=3, cursor=first.next_cursor))
        == "invalid_cursor"
    )
    tampered = first.next_cursor[:-4] + (
        "AAAA" if not first.next_cursor.endswith("AAAA") else "BBBB"
    )
    assert (
        reason(lambda: sessions.query_sessions("app", "u", limit=3, cursor=tampered))
        == "invalid_cursor"
    )
    assert (
        reason(lambda: sessions.query_sessions("app", "u", limit=3, cursor="garbage"))
        == "invalid_cursor"
    )
    sessions.create_session("app", "u", "new")
    assert (
        reason(lambda: sessions.query_sessions("app", "u", limit=3, cursor=first.next_cursor))
        == "stale_cursor"
    )
    assert reason(lambda: sessions.query_sessions("app", "u", limit=501)) == "invalid_limit"


def test_event_pages_filters_and_staleness(sessions):
    sessions.create_session("app", "u", "s")
    for n in range(5):
        sessions.add_event("app", "u", "s", event(f"u{n}"))
        sessions.add_event("app", "u", "s", event(f"a{n}", author="Agent"))
    page = sessions.query_events("app", "u", "s", limit=4)
    assert [e.text() for e in page.events] == ["u0", "a0", "u1", "a1"]
    rest = sessions.query_events("app", "u", "s", limit=4, cursor=page.next_cursor)
    assert [e.text() for e in rest.events] == ["u2", "a2", "u3", "a3"]
    agent_only = sessions.query_events("app", "u", "s", limit=10, author="Agent")
    assert [e.text() for e in agent_only.events] == [
        f"a{n}" for n in range(5)
    ] and agent_only.next_cursor is None
    assert reason(
        lambda: sessions.query_events(
            "app", "u", "s", limit=4, cursor=page.next_cursor, author="Agent"
        )
    ) == ("invalid_cursor")
    sessions.create_session("app", "u", "other")
    assert (
        reason(lambda: sessions.query_events("app", "u", "other", limit=4, cursor=page.next_cursor))
        == "invalid_cursor"
    )
    sessions.add_event("app", "u", "s", event("late"))
    assert (
        reason(lambda: sessions.query_events("app", "u", "s", limit=4, cursor=rest.next_cursor))
        == "stale_cursor"
    )
    assert reason(lambda: sessions.query_events("app", "u", "missing")) == "not_found"


def test_rewind_branches_without_touching_the_source(sessions):
    sessions.create_session(
        "app", "u", "src", {"topic": "OTP", "api_key": "k", "_internal": 1, "temp:x": 1}
    )
    for n in range(4):
        sessions.add_event("app", "u", "src", event(f"m{n}", delta={"step": n}))
    branch = sessions.rewind("app", "u", "src", 2, "branch", expected_event_count=4)
    assert [e.text() for e in branch.events] == ["m0", "m1"]
    assert branch.state == {"topic": "OTP", "step": 1}  # no temp:, internal or secret keys
    source = sessions.get_session("app", "u", "src")
    assert len(source.events) == 4 and source.state["step"] == 3
    assert reason(lambda: sessions.rewind("app", "u", "src", 1, "src")) == "invalid_rewind_target"
    assert reason(lambda: sessions.rewind("app", "u", "src", 1, "branch")) == "already_exists"
    assert (
        reason(lambda: sessions.rewind("app", "u", "src", 1, "b2", expected_event_count=3))
        == "stale_branch_plan"
    )
    assert reason(lambda: sessions.rewind("app", "u", "src", 9, "b3")) == "invalid_rewind_point"
    assert (
        reason(lambda: sessions.rewind("app", "u", "src", 1, "b4", destructive=True))
        == "destructive_rewind_unsupported"
    )


def test_rewind_refuses_to_replay_shared_or_transient_state(sessions):
    sessions.create_session("app", "u", "shared")
    sessions.add_event("app", "u", "shared", event(delta={"user:pref": 1}))
    assert (
        reason(lambda: sessions.rewind("app", "u", "shared", 1, "x"))
        == "shared_state_replay_blocked"
    )
    sessions.create_session("app", "u", "transient")
    sessions.add_event("app", "u", "transient", event(delta={"temp:scratch": 1}))
    assert (
        reason(lambda: sessions.rewind("app", "u", "transient", 1, "y"))
        == "transient_state_replay_blocked"
    )
    assert reason(lambda: sessions.get_session("app", "u", "x")) == "not_found"  # nothing created


def test_compact_events_replaces_a_contiguous_run_atomically(sessions):
    sessions.create_session("app", "u", "s")
    stored = [sessions.add_event("app", "u", "s", event(f"m{n}", {"n": n})) for n in range(5)]
    page = sessions.query_events("app", "u", "s", limit=2)
    ids = [e.id for e in stored]
    summary = Event.new("Agent", "compaction", content.from_text("m1-m3", role="model"))
    compacted = sessions.compact_events("app", "u", "s", ids[1:4], summary)
    assert [e.text() for e in compacted.events] == ["m0", "m1-m3", "m4"]
    assert compacted.state["n"] == 4  # the compacted events' state stays applied
    assert reason(lambda: sessions.query_events("app", "u", "s", 2, page.next_cursor)) == (
        "stale_cursor"
    )
    before = sessions.get_session("app", "u", "s").events
    for bad in ([ids[4], ids[0]], [ids[0], ids[4]], [ids[1]], ["nope"], [ids[0], ids[0]]):
        assert reason(lambda bad=bad: sessions.compact_events("app", "u", "s", bad, summary)) == (
            "conflict"
        )
    assert sessions.get_session("app", "u", "s").events == before  # nothing written
    with_state = Event.new("Agent", "c", actions=EventActions(state_delta={"x": 1}))
    assert reason(lambda: sessions.compact_events("app", "u", "s", [ids[0]], with_state)) == (
        "invalid_compaction"
    )
    assert reason(lambda: sessions.compact_events("app", "u", "gone", [ids[0]], summary)) == (
        "not_found"
    )


def test_a_held_session_lock_never_blocks_another_session(sessions):
    sessions.create_session("app", "u", "a")
    sessions.create_session("app", "u", "b")
    entered = threading.Event()
    release = threading.Event()
    done = []

    def hold_a() -> None:
        with sessions.lock("app", "u", "a"):
            sessions.update_state("app", "u", "a", {"k": 1})  # re-entrant for the holder
            entered.set()
            release.wait(10)

    def write_a() -> None:
        sessions.update_state("app", "u", "a", {"k": 2})
        done.append("a")

    holder = threading.Thread(target=hold_a)
    holder.start()
    assert entered.wait(5)
    writer = threading.Thread(target=write_a)
    writer.start()
    sessions.update_state("app", "u", "b", {"k": 3})  # another session: not blocked
    assert sessions.get_session("app", "u", "b").state["k"] == 3
    writer.join(0.2)
    assert done == [] and sessions.get_session("app", "u", "b").events == ()
    release.set()
    holder.join(5)
    writer.join(5)
    assert done == ["a"] and sessions.get_session("app", "u", "a").state["k"] == 2


def test_a_compaction_makes_an_older_rewind_plan_stale(sessions):
    sessions.create_session("app", "u", "src")
    ids = [sessions.add_event("app", "u", "src", event(f"m{n}")).id for n in range(3)]
    planned = sessions.get_session("app", "u", "src")
    summary = Event.new("Agent", "c", content.from_text("m0+m1", role="model"))
    sessions.compact_events("app", "u", "src", ids[:2], summary)
    sessions.add_event("app", "u", "src", event("m3"))  # the count is 3 again
    assert len(sessions.get_session("app", "u", "src").events) == len(planned.events)
    for plan in ({"expected_event_count": 3}, {"expected_revision": planned.revision}):
        assert reason(lambda plan=plan: sessions.rewind("app", "u", "src", 2, "b", **plan)) == (
            "stale_branch_plan"
        )
    now = sessions.get_session("app", "u", "src")
    branch = sessions.rewind("app", "u", "src", 2, "b", expected_revision=now.revision)
    assert [e.text() for e in branch.events] == ["m0+m1", "m2"]


# -- continuations (``_adk:paused:`` keys) and read-only steps -----------------------------------

PAUSED = "_adk:paused:inv-1"
OPEN = "_adk:open:inv-1"


def internal_state(sessions, session_id="s"):
    """The state as the runtime reads it, its own ``_adk:`` keys included."""
    return sessions.get_session("app", "u", session_id, include_internal=True).state


def continuation(size=64):
    return {"kind": "tool_confirmation", "calls": [{"id": "c1", "args": {"blob": "x" * size}}]}


def test_continuations_read_back_compare_and_delete_like_state(sessions):
    sessions.create_session("app", "u", "s", {"topic": "OTP"})
    paused = continuation()
    sessions.add_event("app", "u", "s", event("pause"), runtime_delta={OPEN: None, PAUSED: paused})
    assert internal_state(sessions) == {"topic": "OTP", PAUSED: paused}
    assert sessions.list_sessions("app", "u", include_internal=True)[0].state[PAUSED] == paused
    # the runtime's keys are its own: never in a state shown to callers
    assert sessions.get_session("app", "u", "s").state == {"topic": "OTP"}
    assert sessions.list_sessions("app", "u")[0].state == {"topic": "OTP"}
    assert sessions.query_sessions("app", "u").sessions[0].state == {"topic": "OTP"}
    for wrong in ({PAUSED: continuation(65)}, {PAUSED: None}, {PAUSED: paused, OPEN: "t"}):
        claim = event("resume")
        assert reason(
            lambda wrong=wrong, claim=claim: sessions.add_event_if_state(
                "app", "u", "s", claim, wrong, runtime_delta={PAUSED: None, OPEN: "t"}
            )
        ) == ("conflict")
    claimed = {PAUSED: None, OPEN: "t"}
    sessions.add_event_if_state(
        "app", "u", "s", event("resume"), {PAUSED: paused, OPEN: None}, runtime_delta=claimed
    )
    assert internal_state(sessions) == {"topic": "OTP", OPEN: "t"}
    assert reason(  # claimed once: a second claim of the same continuation conflicts
        lambda: sessions.add_event_if_state(
            "app", "u", "s", event("again"), {PAUSED: paused}, runtime_delta={PAUSED: None}
        )
    ) == ("conflict")
    sessions.add_event_if_state("app", "u", "s", event("step"), {OPEN: "t", PAUSED: None})
    assert [e.text() for e in sessions.get_session("app", "u", "s").events] == [
        "pause",
        "resume",
        "step",
    ]


def test_continuations_die_with_their_session_and_are_never_branched(sessions):
    sessions.create_session("app", "u", "s", {"topic": "OTP"})
    sessions.add_event("app", "u", "s", event("m0", {"step": 0}))
    sessions.add_event("app", "u", "s", event("pause"), runtime_delta={PAUSED: continuation()})
    branch = sessions.rewind("app", "u", "s", 2, "branch")
    assert branch.state == {"topic": "OTP", "step": 0}
    assert sessions.get_session("app", "u", "branch").state == branch.state
    assert PAUSED in internal_state(sessions)  # the source keeps it
    sessions.delete_session("app", "u", "s")
    assert sessions.create_session("app", "u", "s").state == {}  # same id: nothing left over


def test_a_continuation_in_an_older_record_still_reads_compares_and_moves_out(sessions):
    from adk_actors.sessions import core

    def older_layout(storage, app, user, session_id, value):  # how records held them before
        record = storage.get_session(app, user, session_id)
        record.state[PAUSED] = value
        storage.put_session(record)

    sessions.create_session("app", "u", "s")
    paused = continuation()
    sessions._run(older_layout, "app", "u", "s", paused)
    assert internal_state(sessions) == {PAUSED: paused}
    sessions.add_event_if_state(
        "app", "u", "s", event("resume"), {PAUSED: paused}, runtime_delta={PAUSED: None}
    )
    assert internal_state(sessions) == {}
    sessions._run(older_layout, "app", "u", "s", paused)
    sessions.add_event("app", "u", "s", event("again"), runtime_delta={PAUSED: {"new": 1}})
    record = sessions._run(core.require, "app", "u", "s")
    assert PAUSED not in record.state  # moved to its own table on its first change
    assert internal_state(sessions) == {PAUSED: {"new": 1}}


def test_a_held_session_lock_blocks_that_sessions_reads(sessions):
    sessions.create_session("app", "u", "a")
    sessions.create_session("app", "u", "b")
    entered = threading.Event()
    release = threading.Event()
    reads = []

    def hold_a() -> None:
        with sessions.lock("app", "u", "a"):
            sessions.get_session("app", "u", "a")  # re-entrant for the holder
            entered.set()
            release.wait(10)

    def read_a() -> None:
        sessions.get_session("app", "u", "a")
        reads.append("get")
        sessions.query_events("app", "u", "a")
        reads.append("query_events")

    holder = threading.Thread(target=hold_a)
    holder.start()
    assert entered.wait(5)
    reader = threading.Thread(target=read_a)
    reader.start()
    sessions.get_session("app", "u", "b")  # another session: not blocked
    reader.join(0.2)
    assert reads == []
    release.set()
    holder.join(5)
    reader.join(5)
    assert reads == ["get", "query_events"]


def raw_record(service, app, user, session_id):
    """A session's record as LMDB stores it (encoded bytes)."""
    from adk_actors.sessions import lmdb_store

    with service._env.begin() as txn:
        return txn.get(lmdb_store._key(app, user, session_id), db=service._dbs["sessions"])


def test_lmdb_keeps_continuations_out_of_the_record(tmp_path):
    service = adk.sessions.LmdbSessionService(tmp_path / "s")
    service.create_session("app", "u", "s")
    service.add_event("app", "u", "s", event("open"), runtime_delta={OPEN: "t"})
    empty = len(raw_record(service, "app", "u", "s"))
    marker = "continuation-marker-" * 4096  # 80 KiB
    for n in range(4):
        service.add_event("app", "u", "s", event(f"p{n}"), runtime_delta={f"{PAUSED}{n}": [marker]})
    service.add_event_if_state("app", "u", "s", event("step"), {OPEN: "t"})
    raw = raw_record(service, "app", "u", "s")
    assert b"continuation-marker" not in raw and len(raw) < empty + 256
    assert b"_adk:open:inv-1" in raw  # open markers are small: they stay in the record
    state = internal_state(service)
    assert [state[f"{PAUSED}{n}"] for n in range(4)] == [[marker]] * 4
    service.close()
    reopened = adk.sessions.LmdbSessionService(tmp_path / "s")  # durable, like the record
    assert internal_state(reopened) == state
    reopened.close()


def test_lmdb_reads_open_no_write_transaction(tmp_path):
    """LMDB has one writer at a time: with the write transaction held elsewhere, every
    read still completes (a read-only snapshot) while a write waits for it."""
    service = adk.sessions.LmdbSessionService(tmp_path / "s")
    service.create_session("app", "u", "s", {"x": 1})
    service.create_session("app", "u", "other")
    service.add_event("app", "u", "s", event(), runtime_delta={PAUSED: continuation()})
    held = threading.Event()
    release = threading.Event()

    def hold_the_writer() -> None:
        with service._env.begin(write=True):
            held.set()
            release.wait(10)

    done = []

    def read() -> None:
        for _ in range(5):
            assert service.get_session("app", "u", "s").state["x"] == 1
            service.list_sessions("app", "u")
            service.query_sessions("app", "u")
            service.query_events("app", "u", "s")
        assert reason(lambda: service.get_session("app", "u", "missing")) == "not_found"
        done.append("read")

    def write() -> None:  # another session: its session lock is no obstacle to the reads
        service.update_state("app", "u", "other", {"x": 2})
        done.append("write")

    writer = threading.Thread(target=hold_the_writer)
    writer.start()
    assert held.wait(5)
    try:
        threads = [threading.Thread(target=read), threading.Thread(target=write)]
        for thread in threads:
            thread.start()
        threads[0].join(5)
        threads[1].join(0.2)
        assert done == ["read"]  # the reads finished; the write still waits
    finally:
        release.set()
        writer.join(5)
    threads[1].join(5)
    assert done == ["read", "write"]
    assert service.get_session("app", "u", "other").state["x"] == 2
    service.close()


# -- the in-memory service and its session owner --------------------------------------------


def test_creating_an_in_memory_service_starts_nothing():
    adk.stop()
    service = adk.sessions.InMemorySessionService()
    assert not adk.app.running()
    with pytest.raises(adk.AdkError) as info:
        service.create_session("app", "u", "s")
    assert info.value.reason == "unavailable" and "adk.start()" in str(info.value)
    assert not adk.app.running()
    adk.start()  # the same service works once the application runs
    assert service.create_session("app", "u", "s").id == "s"
    assert service.get_session("app", "u", "s").id == "s"
    service.close()
    assert reason(lambda: service.get_session("app", "u", "s")) == "unavailable"


def test_a_closed_service_that_never_ran_stays_closed():
    service = adk.sessions.InMemorySessionService()
    service.close()
    assert reason(lambda: service.create_session("app", "u", "s")) == "unavailable"


def test_first_operations_from_many_threads_share_one_table():
    service = adk.sessions.InMemorySessionService()
    start = threading.Barrier(16)

    def first_use(n: int) -> None:
        start.wait(5)
        service.create_session("app", "u", f"s{n}")

    threads = [threading.Thread(target=first_use, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(service.list_sessions("app", "u")) == 16  # every thread wrote into one table
    service.close()


def test_the_session_owner_refuses_malformed_requests_and_changes_nothing():
    service = adk.sessions.InMemorySessionService()
    service.create_session("app", "u", "s", {"x": 1})
    table_id = service._tables.table_id
    for request in (
        ("new_table",),
        ("drop_table", table_id),
        DropTable(str(table_id)),
        DropTable(True),
        "drop_table",
        None,
    ):
        answer = sv.call(OWNER_NAME, request)
        assert type(answer) is Refused and answer.reason == "invalid_request", request
    sv.cast(OWNER_NAME, DropTable(table_id))  # a cast is not the protocol: ignored
    sv.send(OWNER_NAME, DropTable(table_id))
    assert service.get_session("app", "u", "s").state == {"x": 1}  # the table is intact
    assert sv.call(OWNER_NAME, DropTable(table_id + 10_000)) is False  # unknown: no change
    other = sv.call(OWNER_NAME, NewTable())
    assert isinstance(other, Tables) and other.table_id != table_id
    assert sv.call(OWNER_NAME, DropTable(other.table_id)) is True
    assert service.get_session("app", "u", "s").state == {"x": 1}
    assert sv.call(OWNER_NAME, DropTable(table_id)) is True  # dropped by its owner
    assert reason(lambda: service.get_session("app", "u", "s")) == "unavailable"
    service.close()


# -- ids: one rule, every call, both backends ----------------------------------------------------

BAD_IDS = [
    "",
    "x" * 129,  # over 128 bytes
    "é" * 65,  # 65 characters, 130 bytes
    "a\x00b",  # NUL: LMDB's key separator
    "a\nb",
    "tab\there",
    "del\x7f",
    "c1\x85",
    None,
    5,
    b"bytes",
]
GOOD_IDS = ["a", "x" * 128, "é" * 64, "with space", "日本語", "emoji-\U0001f600\u200d", "a:b/c"]


def every_call(sessions, app, user, session_id):
    """Every service call that names ids (reads included)."""
    return [
        lambda: sessions.create_session(app, user, session_id),
        lambda: sessions.get_session(app, user, session_id),
        lambda: sessions.list_sessions(app, user),
        lambda: sessions.delete_session(app, user, session_id),
        lambda: sessions.update_state(app, user, session_id, {"a": 1}),
        lambda: sessions.take_state(app, user, session_id, "a", None),
        lambda: sessions.add_event(app, user, session_id, event()),
        lambda: sessions.add_event_if_state(app, user, session_id, event(), {}),
        lambda: sessions.query_sessions(app, user),
        lambda: sessions.query_events(app, user, session_id),
        lambda: sessions.rewind(app, user, session_id, 0, "target"),
        lambda: sessions.compact_events(app, user, session_id, ["x"], event()),
        lambda: sessions.clear_temp_state(app, user, session_id),
        lambda: sessions.lock(app, user, session_id).__enter__(),
    ]


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
def test_every_call_checks_every_id_on_both_backends(sessions, bad):
    for where in range(3):
        ids = ["app", "u", "s"]
        ids[where] = bad
        calls = every_call(sessions, *ids)
        if where == 2:  # list and query_sessions name no session; a None one is created
            skip = (2, 8, 0) if bad is None else (2, 8)
            calls = [c for n, c in enumerate(calls) if n not in skip]
        for call in calls:
            assert reason(call) == "invalid_id", (where, call)
    sessions.create_session("app", "u", "s")
    assert reason(lambda: sessions.rewind("app", "u", "s", 0, bad)) in ("invalid_id",)
    assert [s.id for s in sessions.list_sessions("app", "u")] == ["s"]


def test_a_lone_surrogate_in_any_id_is_invalid_utf8_on_every_call(sessions):
    for where in range(3):
        ids = ["app", "u", "s"]
        ids[where] = "ok\ud800"
        calls = every_call(sessions, *ids)
        if where == 2:
            calls = [c for n, c in enumerate(calls) if n not in (2, 8)]
        for call in calls:
            assert reason(call) == "invalid_utf8"


@pytest.mark.parametrize("good", GOOD_IDS, ids=repr)
def test_the_longest_and_widest_ids_work_on_both_backends(sessions, good):
    sessions.create_session(good, good, good, {"user:k": 1})
    paused = {"_adk:paused:" + "i" * 128: {"big": "x" * 100}}  # the longest key of all
    sessions.add_event(good, good, good, event(), runtime_delta=paused)
    session = sessions.get_session(good, good, good, include_internal=True)
    assert session.id == good and len(session.events) == 1
    assert session.state["_adk:paused:" + "i" * 128] == {"big": "x" * 100}
    assert [s.id for s in sessions.list_sessions(good, good)] == [good]
    assert sessions.take_state(good, good, good, "user:k") == 1
    sessions.delete_session(good, good, good)


def test_a_nul_in_a_user_id_never_reaches_another_users_session(sessions):
    sessions.create_session("app", "alice", "s1", {"secret": 1})
    sessions.add_event("app", "alice", "s1", event("alice's words"))
    for user, session_id in (("alice\x00s1", "x"), ("alice\x00s1\x00", "x"), ("alice", "s1\x00")):
        assert reason(lambda u=user, s=session_id: sessions.get_session("app", u, s)) == (
            "invalid_id"
        )
        if user != "alice":
            assert reason(lambda u=user: sessions.list_sessions("app", u)) == "invalid_id"
            assert reason(lambda u=user: sessions.query_sessions("app", u)) == "invalid_id"
    assert sessions.list_sessions("app", "alice")[0].state == {"secret": 1}


def test_any_state_key_fits_an_lmdb_key(tmp_path):
    store = adk.sessions.LmdbSessionService(tmp_path / "s")
    longest = "x" * 128
    store.create_session(longest, longest, longest)
    keys = {"_adk:paused:" + "k" * n: n for n in (1, 100, 124, 125, 400, 5000)}
    runtime = {k: {"n": n} for k, n in keys.items()}
    store.add_event(longest, longest, longest, event(), runtime_delta=runtime)
    state = store.get_session(longest, longest, longest, include_internal=True).state
    assert {k: state[k] for k in keys} == {k: {"n": n} for k, n in keys.items()}
    store.add_event(longest, longest, longest, event(), runtime_delta=dict.fromkeys(keys))
    state = store.get_session(longest, longest, longest, include_internal=True).state
    assert not any(k in state for k in keys)
    store.close()
