"""Issue 20 leftovers: one LMDB event cache per path.

Each LMDB service used to keep its own decoded events, so two services on one path (or
a service opened again while the old one was still open) decoded the same history
twice and kept it twice. The cache is now the path's (`EventCache.join`): every
service open on the path shares its hits and one bound (the largest asked for), and a
write through any of them is seen by all: appends and compactions through the record
each read checks (creation, compactions, one revision per appended event), deletes by
dropping the one entry. All against a real LMDB file in `tmp_path`.
"""

from __future__ import annotations

import threading

import pytest

import adk_actors as adk
from adk_actors import events as event_codec
from adk_actors.events import Event
from adk_actors.sessions import core
from providers import content

APP, USER = "app", "u"


def text(n: int, size: int = 10) -> Event:
    return Event.new("Agent", f"inv-{n}", content.new([f"{n}:" + "x" * size], role="model"))


def fill(service, count: int, session_id: str = "s", size: int = 10) -> list[Event]:
    service.create_session(APP, USER, session_id)
    added = [text(n, size) for n in range(count)]
    for item in added:
        service.add_event(APP, USER, session_id, item)
    return added


def ids(service, session_id: str = "s") -> list[str]:
    return [e.id for e in service.get_session(APP, USER, session_id).events]


def caches(*services) -> list:
    """The distinct caches behind `services`."""
    return list({id(service._events): service._events for service in services}.values())


@pytest.fixture
def open_services():
    opened: list = []

    def open_(path, **options):
        service = adk.sessions.LmdbSessionService(path, **options)
        opened.append(service)
        return service

    yield open_
    for service in opened:
        service.close()


def test_two_services_on_one_path_share_one_cache_and_its_hits(tmp_path, open_services):
    first = open_services(tmp_path / "db")
    (tmp_path / "link").symlink_to(tmp_path / "db")
    second = open_services(tmp_path / "link")  # the same path, spelled otherwise
    other = open_services(tmp_path / "other")
    assert first._events is second._events and first._events is not other._events
    fill(first, 5)
    read_first = first.get_session(APP, USER, "s").events
    read_second = second.get_session(APP, USER, "s").events
    assert [e.id for e in read_second] == [e.id for e in read_first]
    # a hit: the other service's read decoded nothing, it got the same frozen parts
    assert all(a.content is b.content for a, b in zip(read_first, read_second, strict=True))
    assert sum(len(cache) for cache in caches(first, second)) == 5  # kept once, not twice


def test_appends_through_either_service_are_read_by_the_other(tmp_path, open_services):
    first = open_services(tmp_path / "db")
    second = open_services(tmp_path / "db")
    plain = open_services(tmp_path / "db", event_cache=0)  # decodes from the file
    fill(first, 3)
    before = first.get_session(APP, USER, "s").events
    second.add_event(APP, USER, "s", text(10))
    after = first.get_session(APP, USER, "s").events
    assert [e.id for e in after] == ids(plain) and len(after) == 4
    assert all(a.content is b.content for a, b in zip(before, after[:3], strict=True))
    first.add_event_if_state(APP, USER, "s", text(11), {})
    assert ids(second) == ids(first) == ids(plain) and len(ids(second)) == 5
    summary = Event.new("Agent", "sum", content.from_text("summary", role="model"))
    second.compact_events(APP, USER, "s", ids(plain)[:2], summary)
    assert ids(first) == ids(plain) and ids(first)[0] == summary.id
    first.rewind(APP, USER, "s", 2, "branch")
    assert ids(second, "branch") == ids(plain, "branch") == ids(plain)[:2]


def test_a_delete_through_any_service_drops_the_entry_for_all(tmp_path, open_services):
    first = open_services(tmp_path / "db")
    second = open_services(tmp_path / "db")
    plain = open_services(tmp_path / "db", event_cache=0)
    fill(first, 4)
    assert len(ids(first)) == 4 and len(first._events) == 4
    second.delete_session(APP, USER, "s")
    assert len(first._events) == 0
    with pytest.raises(adk.AdkError) as info:
        first.get_session(APP, USER, "s")
    assert info.value.reason == "not_found"
    again = fill(second, 4)  # same id, same count: only the record tells them apart
    assert ids(first) == [e.id for e in again] and len(first._events) == 4
    plain.delete_session(APP, USER, "s")  # a service that keeps no events drops too
    assert len(first._events) == 0


def test_a_read_overlapping_a_delete_through_another_service_is_not_cached(tmp_path, open_services):
    reader_service = open_services(tmp_path / "db")
    deleter = open_services(tmp_path / "db")
    fill(reader_service, 5)
    read, deleted = threading.Event(), threading.Event()

    def slow_reader(storage):
        session = core.get(storage, APP, USER, "s")  # decoded: a fill is pending
        read.set()
        assert deleted.wait(10)
        return session

    result: list = []
    thread = threading.Thread(target=lambda: result.append(reader_service._read(slow_reader)))
    thread.start()
    assert read.wait(10)
    deleter.delete_session(APP, USER, "s")
    deleted.set()
    thread.join(10)
    assert len(result[0].events) == 5  # the reader saw its snapshot
    assert len(deleter._events) == 0  # and did not put the deleted session back


def test_the_bound_holds_across_services(tmp_path, open_services):
    first = open_services(tmp_path / "db", event_cache=5)
    second = open_services(tmp_path / "db", event_cache=5)
    fill(first, 4, "a")
    fill(first, 3, "b")
    first.get_session(APP, USER, "a")
    second.get_session(APP, USER, "b")  # was 4 + 3 in two caches
    assert sum(len(cache) for cache in caches(first, second)) <= 5
    assert ids(second, "a") and ids(first, "b")  # still read right
    assert sum(len(cache) for cache in caches(first, second)) <= 5


def test_the_bound_is_the_largest_asked_and_falls_back_when_its_service_closes(tmp_path):
    size = 1000
    one = len(event_codec.encode(text(0, size)))
    small = adk.sessions.LmdbSessionService(
        tmp_path / "db", event_cache=5, event_cache_bytes=100 * one
    )
    big = adk.sessions.LmdbSessionService(
        tmp_path / "db", event_cache=8, event_cache_bytes=200 * one
    )
    plain = adk.sessions.LmdbSessionService(tmp_path / "db", event_cache=0)
    cache = small._events
    try:
        # one service's pair, never axes mixed (review of b26e68e, 2)
        assert (cache.max_events, cache.max_bytes) == (8, 200 * one)
        fill(small, 3, "a", size)
        fill(small, 4, "b", size)
        small.get_session(APP, USER, "a")
        big.get_session(APP, USER, "b")
        assert len(cache) == 7  # within the larger count bound
        big.close()
        assert (cache.max_events, cache.max_bytes) == (5, 100 * one)
        assert len(cache) == 4  # evicted down: a, least recently used, went
        assert len(ids(plain, "a")) == 3 and len(cache) == 4  # plain reads add nothing
        small.close()
        assert len(cache) == 0 and cache.size == 0 and not cache.enabled  # nobody asks
        assert len(ids(plain, "b")) == 4 and len(cache) == 0
    finally:
        for service in (small, big, plain):
            service.close()


def test_a_service_opened_again_reuses_what_the_old_one_cached(tmp_path):
    old = adk.sessions.LmdbSessionService(tmp_path / "db")
    fill(old, 6)
    before = old.get_session(APP, USER, "s").events
    new = adk.sessions.LmdbSessionService(tmp_path / "db")  # opened before the old closes
    old.close()
    try:
        after = new.get_session(APP, USER, "s").events
        assert all(a.content is b.content for a, b in zip(before, after, strict=True))
        assert len(new._events) == 6
    finally:
        new.close()
    assert len(new._events) == 0  # the last one closed: emptied


def test_concurrent_appends_and_reads_through_two_services_never_read_stale(
    tmp_path, open_services
):
    services = [open_services(tmp_path / "db"), open_services(tmp_path / "db")]
    plain = open_services(tmp_path / "db", event_cache=0)
    services[0].create_session(APP, USER, "s")
    reads: list[list[str]] = []
    failures: list[str] = []
    lock = threading.Lock()

    def worker(number: int) -> None:
        service = services[number % 2]
        for n in range(25):
            appended = text(1000 * number + n)
            service.add_event(APP, USER, "s", appended)
            seen = ids(service)
            if appended.id not in seen:
                failures.append(f"{number}: its own append {n} not read")
            with lock:
                reads.append(seen)

    threads = [threading.Thread(target=worker, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures
    final = ids(plain)
    assert len(final) == 100
    assert all(seen == final[: len(seen)] for seen in reads)  # every read a prefix
    assert ids(services[0]) == ids(services[1]) == final
