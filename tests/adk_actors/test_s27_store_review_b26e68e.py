"""Regression tests for the review of b26e68e (the LMDB event cache per path and
`get_or_create_session`; /tmp/s27/REVIEW_STORE.md), one per finding:

1. a service dropped without `close()` kept the path's cache bound and its events for
   the life of the process;
2. the shared bound mixed one service's count with another's bytes;
3. two concurrent `close()`s of one service left the cache twice (another service's
   bound went with it), and an open whose recovery raised a non-`AdkError` kept its
   join and env;
4. `get_or_create_session(include_internal=True)` could raise ``not_found`` when a
   delete came between its create and its re-read;
7. a path whose store was removed and created again while open was served by the old
   (deleted) file;
8. a branch's revision started `len(kept)` above now, so a branch deleted and created
   again repeated the old revisions.

Each fails on b26e68e. All against real LMDB files in `tmp_path`; interleavings are
forced (a trace hook, a held lock, a step hook), never timed.
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import threading
import time
import weakref

import pytest

import adk_actors as adk
from adk_actors.events import Event
from adk_actors.sessions import lmdb_store
from adk_actors.sessions.records import revision_base
from providers import content

APP, USER = "app", "u"


def text(n: int) -> Event:
    return Event.new("Agent", f"inv-{n}", content.new([f"{n}:" + "x" * 100], role="model"))


def fill(service, count: int, session_id: str = "s") -> None:
    service.create_session(APP, USER, session_id)
    for n in range(count):
        service.add_event(APP, USER, session_id, text(n))


def bound(cache) -> tuple[int, int]:
    return cache.max_events, cache.max_bytes


def is_open(path) -> bool:
    """Does this process hold an environment on the LMDB file `path` names now?"""
    try:
        found = os.stat(path / "data.mdb")
    except FileNotFoundError:
        return False
    keys = {(found.st_dev, found.st_ino), os.path.realpath(path)}  # b26e68e: by path
    return any(key in lmdb_store._open for key in keys)


# -- finding 1: a dropped service ----------------------------------------------------------


def test_a_service_dropped_without_close_frees_the_paths_events_and_env(tmp_path):
    """Finding 1: the only service on a path, dropped unclosed: its events and the env go."""
    service = adk.sessions.LmdbSessionService(tmp_path / "db")
    fill(service, 20)
    service.get_session(APP, USER, "s")
    cache = weakref.ref(service._events)
    assert len(service._events) == 20
    del service
    gc.collect()
    assert cache() is None or len(cache()) == 0  # type: ignore[arg-type]
    assert not is_open(tmp_path / "db")
    again = adk.sessions.LmdbSessionService(tmp_path / "db")  # opens afresh, same data
    try:
        assert len(again.get_session(APP, USER, "s").events) == 20
    finally:
        again.close()


def test_a_dropped_services_bound_is_no_longer_kept_for_the_others(tmp_path):
    """Finding 1: a big-bound service dropped unclosed no longer holds its bound over a
    smaller one still open on the path."""
    small = adk.sessions.LmdbSessionService(tmp_path / "db", event_cache=5)
    big = adk.sessions.LmdbSessionService(
        tmp_path / "db", event_cache=100, event_cache_bytes=128 << 20
    )
    cache = small._events
    try:
        assert bound(cache) == (100, 128 << 20)
        fill(big, 8)
        big.get_session(APP, USER, "s")
        assert len(cache) == 8
        del big
        gc.collect()
        assert bound(cache) == (5, lmdb_store.DEFAULT_MAX_BYTES)
        assert len(cache) == 0  # the 8-event session is above the new bound: evicted
        assert len(small.get_session(APP, USER, "s").events) == 8
    finally:
        small.close()
    assert not is_open(tmp_path / "db")


def test_a_service_collected_while_the_open_lock_is_held_is_closed_later_not_deadlocked(
    tmp_path,
):
    """Finding 1: the collector may finalize a dropped service in a thread that holds
    the registry's lock (any allocation can start a collection): the finalizer must not
    wait for it (a deadlock) but still leave once the lock is free."""
    small = adk.sessions.LmdbSessionService(tmp_path / "db", event_cache=5)
    big = adk.sessions.LmdbSessionService(tmp_path / "db", event_cache=100)
    cache = small._events
    try:
        with lmdb_store._open_lock:
            del big
            gc.collect()  # runs the finalizer here, in the thread holding the lock
            assert bound(cache) == (100, lmdb_store.DEFAULT_MAX_BYTES)
        deadline = time.monotonic() + 10
        while bound(cache) != (5, lmdb_store.DEFAULT_MAX_BYTES) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert bound(cache) == (5, lmdb_store.DEFAULT_MAX_BYTES)
    finally:
        small.close()
    deadline = time.monotonic() + 10
    while is_open(tmp_path / "db") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not is_open(tmp_path / "db")


# -- finding 2: one coherent bound ---------------------------------------------------------


def test_the_shared_bound_is_one_pair_a_service_asked_for(tmp_path):
    """Finding 2: (50,000 events, 1 MiB) and (10 events, 1 GiB) used to give
    (50,000, 1 GiB), a pair nobody asked for; now the pair with the most bytes."""
    many = adk.sessions.LmdbSessionService(
        tmp_path / "db", event_cache=50_000, event_cache_bytes=1 << 20
    )
    large = adk.sessions.LmdbSessionService(
        tmp_path / "db", event_cache=10, event_cache_bytes=1 << 30
    )
    tie = adk.sessions.LmdbSessionService(
        tmp_path / "db", event_cache=20, event_cache_bytes=1 << 30
    )
    cache = many._events
    try:
        assert bound(cache) == (20, 1 << 30)  # most bytes; ties: most events
        tie.close()
        assert bound(cache) == (10, 1 << 30)
        large.close()
        assert bound(cache) == (50_000, 1 << 20)
    finally:
        for service in (many, large, tie):
            service.close()


# -- finding 3: close and a failed open ----------------------------------------------------


def test_two_threads_closing_one_service_leave_once(tmp_path):
    """Finding 3: both closers are held in lockstep at every line of `close` (a trace
    hook), so a check-then-set lets both through; the other service's cache and env
    must survive."""
    closing = adk.sessions.LmdbSessionService(tmp_path / "db")
    other = adk.sessions.LmdbSessionService(tmp_path / "db", event_cache=7)
    fill(other, 3)
    other.get_session(APP, USER, "s")
    cache = other._events
    code = lmdb_store.LmdbSessionService.close.__code__
    lockstep = threading.Barrier(2, timeout=1)

    def trace(frame, event, arg):
        if frame.f_code is not code:
            return None

        def each_line(frame, event, arg):
            if event == "line":
                try:
                    lockstep.wait()
                except threading.BrokenBarrierError:
                    pass  # the other closer took another path: no more lockstep
            return each_line

        return each_line

    def close() -> None:
        sys.settrace(trace)
        try:
            closing.close()
        finally:
            sys.settrace(None)

    threads = [threading.Thread(target=close) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    try:
        assert cache.enabled and bound(cache) == (7, lmdb_store.DEFAULT_MAX_BYTES)
        assert len(other.get_session(APP, USER, "s").events) == 3  # env still open
        closing.close()  # once more: nothing
        assert cache.enabled and is_open(tmp_path / "db")
    finally:
        other.close()
    assert not is_open(tmp_path / "db") and not cache.enabled


class _RecoveryCrashes(adk.sessions.LmdbSessionService):
    """A service whose recovery fails with something other than an `AdkError`."""

    def recover_abandoned(self) -> int:
        raise RuntimeError("recovery crashed")


def test_an_open_whose_recovery_crashes_keeps_nothing_of_the_path(tmp_path):
    """Finding 3 (second half): the join and the env user of a failed open are given
    back, so its bound does not outlive it and the env closes."""
    with pytest.raises(RuntimeError):
        _RecoveryCrashes(tmp_path / "db", event_cache=9, event_cache_bytes=1 << 30)
    assert not is_open(tmp_path / "db")
    service = adk.sessions.LmdbSessionService(tmp_path / "db")
    try:
        assert bound(service._events) == (
            lmdb_store.DEFAULT_MAX_EVENTS,
            lmdb_store.DEFAULT_MAX_BYTES,
        )
    finally:
        service.close()
    assert not is_open(tmp_path / "db")


# -- finding 4: get_or_create_session in one write step ------------------------------------


class _DeletedAfterEachWrite(adk.sessions.LmdbSessionService):
    """After each of its write steps commits, another service on the path (its own
    session locks) deletes the session: the latest a concurrent delete can land."""

    other: adk.sessions.LmdbSessionService
    writes = 0

    def _run(self, operation, *args):
        result = super()._run(operation, *args)
        self.writes += 1
        try:
            self.other.delete_session(APP, USER, "s")
        except adk.AdkError as error:
            assert error.reason == "not_found"
        return result


def test_get_or_create_with_internal_state_survives_a_delete_right_after_its_create(tmp_path):
    """Finding 4: a miss used to be three steps (read, create, read again); a delete
    after the create made it raise ``not_found``. Now the create and its view are one
    write step."""
    service = _DeletedAfterEachWrite(tmp_path / "db")
    service.other = adk.sessions.LmdbSessionService(tmp_path / "db")
    try:
        got = service.get_or_create_session(APP, USER, "s", include_internal=True)
        assert (got.id, got.state, got.events) == ("s", {}, ())
        assert service.writes == 1
        plain = service.get_or_create_session(APP, USER, "s")  # deleted: created again
        assert plain.id == "s" and service.writes == 2
    finally:
        service.other.close()
        service.close()


@pytest.mark.parametrize("backend", ["memory", "lmdb"])
def test_get_or_create_with_internal_state_on_a_miss_is_one_write_step(tmp_path, backend):
    """Finding 4, both backends: a miss with `include_internal` runs the pure read,
    then one step that creates and reads (`core.get_or_create`), not a create and a
    second read. (Memory's `_read` is its `_run`: an operation is counted once.)"""
    if backend == "memory":
        service = adk.sessions.InMemorySessionService()
    else:
        service = adk.sessions.LmdbSessionService(tmp_path / "db")
    operations: list[str] = []
    run, read = service._run, service._read

    def record(step, operation, *args):
        if not operations or operations[-1] != operation.__name__:
            operations.append(operation.__name__)
        return step(operation, *args)

    service._run = lambda operation, *args: record(run, operation, *args)
    service._read = lambda operation, *args: record(read, operation, *args)
    try:
        got = service.get_or_create_session(APP, USER, "s", include_internal=True)
        assert (got.id, got.state, got.events) == ("s", {}, ())
        assert operations == ["find", "get_or_create"]
        service.add_event(APP, USER, "s", text(0), runtime_delta={"_adk:open:inv-0": "token"})
        operations.clear()
        again = service.get_or_create_session(APP, USER, "s", include_internal=True)
        assert again.state == {"_adk:open:inv-0": "token"} and operations == ["find"]
    finally:
        service.close()


# -- finding 7: a path whose store was replaced --------------------------------------------


def test_a_path_removed_and_created_again_while_open_serves_the_new_store(tmp_path):
    """Finding 7: the env was keyed by the path, so a service opened on a path whose
    store was removed (and created again) while another service kept it open read and
    wrote the deleted file. Now it gets the file the path names."""
    path = tmp_path / "db"
    old = adk.sessions.LmdbSessionService(path)
    fill(old, 2)
    shutil.rmtree(path)
    new = adk.sessions.LmdbSessionService(path)
    try:
        assert new._shared is not old._shared
        with pytest.raises(adk.AdkError) as info:
            new.get_session(APP, USER, "s")  # the new store is empty
        assert info.value.reason == "not_found"
        new.create_session(APP, USER, "fresh")
        assert len(old.get_session(APP, USER, "s").events) == 2  # old keeps its file
        again = adk.sessions.LmdbSessionService(path)  # the new file's env, shared
        assert again._shared is new._shared
        again.close()
    finally:
        old.close()
        new.close()
    reopened = adk.sessions.LmdbSessionService(path)
    try:
        assert [s.id for s in reopened.list_sessions(APP, USER)] == ["fresh"]
    finally:
        reopened.close()


def test_a_path_whose_data_file_alone_was_replaced_is_refused(tmp_path):
    """Finding 7: a new data file beside the open lock file would open that lock file
    twice in this process (LMDB forbids it): refused, typed, until the old closes."""
    path = tmp_path / "db"
    old = adk.sessions.LmdbSessionService(path)
    fill(old, 1)
    (path / "data.mdb").unlink()
    try:
        with pytest.raises(adk.AdkError) as info:
            adk.sessions.LmdbSessionService(path)
        assert info.value.reason == "session_store_replaced"
    finally:
        old.close()
    fresh = adk.sessions.LmdbSessionService(path)
    try:
        assert fresh.list_sessions(APP, USER) == []
    finally:
        fresh.close()


# -- finding 8: a branch's revision --------------------------------------------------------


def test_a_branch_deleted_and_created_again_never_repeats_a_revision():
    """Finding 8: a branch of N events started at now + N µs, so one deleted and
    created again within N µs started below it, and N appends later showed the old
    revision again (a stale branch plan accepted). Now a branch starts at now. (The
    rule is `branching.rewind`'s, for both backends; memory is fast enough to create
    again well within N µs, LMDB's commits are not.)"""
    service = adk.sessions.InMemorySessionService()
    kept = 3000
    try:
        fill(service, kept, "src")
        branch = service.rewind(APP, USER, "src", kept, "b")
        assert branch.revision <= revision_base()  # a revision is never ahead of now
        service.delete_session(APP, USER, "b")
        again = service.create_session(APP, USER, "b")
        assert again.revision > branch.revision
    finally:
        service.close()
