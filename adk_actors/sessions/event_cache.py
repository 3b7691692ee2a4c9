"""Decoded events kept per session, so a read decodes only what was appended since.

LMDB stores events as bytes; decoding (and validating) a long history on every read
made a turn's cost grow with the session. `EventCache` keeps each session's decoded
events, frozen and shared (`providers.frozen.share`), with the record fields they
match. A read takes the cached prefix if it still holds for the record it read (same
creation, same compactions, and exactly one revision per event appended since) and
decodes only the events after it. Each reader gets `reader_copy`s: shared, except for
the empty dicts and lists `freeze` leaves plain, which are its own, so no reader's edit
reaches another reader or the cached (and later compacted or rewound) events.

Only committed data enters: a step collects its updates (`Pending`, stamped before its
transaction began) and the service applies them after its transaction committed (a
read-only one: at its end), so an aborted write leaves nothing behind. A deleted
session's entry is dropped, and a fill from a step that began before that drop is
refused (it may have read the session before the delete committed). Entries are
evicted least recently used first beyond `max_events` events or `max_bytes` encoded
bytes in all; a session above half of `max_bytes` is not kept at all.

One cache serves a whole LMDB path in a process: every service open on it (`join`),
so two services on one path, or a service opened again while another keeps the path
open, share their hits and one bound. Sharing needs no more than one service already
did across its threads: every step, whichever service runs it, stamps the one clock,
and every delete drops the one entry. The bound is the pair one joined service asked
for with the most bytes (ties: the most events): never the sum, never one service's
count with another's bytes; a `leave` takes that of those still joined, evicting down,
and the last one empties it.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

from adk_actors.events import Event
from adk_actors.sessions.core import SessionRecord
from providers.frozen import Refill

DEFAULT_MAX_EVENTS = 50_000
"""How many decoded events an LMDB service asks its path's cache to keep by default,
all sessions together."""
DEFAULT_MAX_BYTES = 64 << 20
"""How many encoded bytes of events an LMDB service asks its path's cache to keep by
default, all sessions together (decoded objects take a small multiple of that)."""
MAX_BYTES_CEILING = 1 << 30
"""The most `max_bytes` may be."""
_MAX_TOMBSTONES = 4096
"""Deleted keys remembered at once; beyond, every step that began before the oldest
forgotten drop may not fill at all."""


class _Entry(NamedTuple):
    created: float
    compactions: int
    revision: int
    events: tuple[Event, ...]
    refills: tuple[Refill | None, ...]
    """Per event: how a reader gets its own empty fields (`providers.frozen.share`)."""
    size: int
    """The events' encoded bytes."""


def _holds(entry: _Entry, record: SessionRecord) -> bool:
    """Are `entry`'s events the first events of `record` (nothing compacted or
    replaced since, only appended: one revision per appended event)?"""
    appended = record.event_count - len(entry.events)
    return (
        entry.created == record.created
        and entry.compactions == record.compactions
        and appended >= 0
        and record.revision - entry.revision == appended
    )


def reader_events(entry: _Entry) -> list[Event]:
    """`entry`'s events as one reader gets them (`providers.frozen.reader_copy`)."""
    return [
        event if refill is None else refill(event)  # `reader_copy`, inlined: per event
        for event, refill in zip(entry.events, entry.refills, strict=True)
    ]


class Pending:
    """A step's cache updates, applied only once its transaction committed. `started`
    is the cache's clock before the step's transaction began."""

    __slots__ = ("drops", "fills", "started")

    def __init__(self, started: int) -> None:
        self.started = started
        self.fills: list[tuple[bytes, _Entry]] = []
        self.drops: list[bytes] = []

    def fill(
        self,
        key: bytes,
        record: SessionRecord,
        events: Sequence[Event],
        refills: Sequence[Refill | None],
        size: int,
    ) -> None:
        """`events` (shared, with their `refills`) are all of `record`'s events, as
        this step read them; `size` their encoded bytes."""
        entry = _Entry(
            record.created, record.compactions, record.revision, tuple(events), tuple(refills), size
        )
        self.fills.append((key, entry))

    def drop(self, key: bytes) -> None:
        self.drops.append(key)


class EventCache:
    """Frozen decoded events per session key, at most `max_events` events and
    `max_bytes` encoded bytes in all (either 0: off); the bounds of the services that
    `join` it, once one has."""

    def __init__(
        self, max_events: int = DEFAULT_MAX_EVENTS, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.enabled = max_events > 0 and max_bytes > 0
        self._asked: Counter[tuple[int, int]] = Counter()
        """The (max_events, max_bytes) each joined service asked for."""
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self._size = 0
        self._bytes = 0
        self._clock = itertools.count(1)
        self._dropped: OrderedDict[bytes, int] = OrderedDict()
        self._floor = 0
        """Fills from steps that began before this tick are refused (tombstones of
        drops before it were forgotten)."""
        self._lock = threading.Lock()

    def join(self, max_events: int, max_bytes: int) -> None:
        """A service now uses this cache and asked for these bounds (either 0: it keeps
        no events, but its deletes still drop entries)."""
        with self._lock:
            self._asked[max_events, max_bytes] += 1
            self._bound()

    def leave(self, max_events: int, max_bytes: int, *, blocking: bool = True) -> bool:
        """A service that joined with these bounds is closed: the bound becomes that of
        the services still joined; once nobody asks, the cache is empty. Not
        `blocking`: False (and nothing done) if the lock is taken."""
        if not self._lock.acquire(blocking=blocking):
            return False
        try:
            self._asked[max_events, max_bytes] -= 1
            if self._asked[max_events, max_bytes] <= 0:
                del self._asked[max_events, max_bytes]
            self._bound()
        finally:
            self._lock.release()
        return True

    def _bound(self) -> None:
        """Take the bounds one joined service asked for, the pair with the most bytes
        (ties: the most events), evicting down to it (lock held). One pair, never
        axes mixed from two services: the cache never holds more than some service
        asked for (review of b26e68e, 2); a service that asked for more events in
        fewer bytes may get fewer events than it asked, never more memory used."""
        wanted = [asked for asked in self._asked if asked[0] > 0 and asked[1] > 0]
        self.max_events, self.max_bytes = max(
            wanted, key=lambda asked: (asked[1], asked[0]), default=(0, 0)
        )
        self.enabled = bool(wanted)
        if not self.enabled:
            self._entries.clear()
            self._size = self._bytes = 0
        self._evict()

    def stamp(self) -> int:
        """The clock now: taken by a step before its transaction begins."""
        return next(self._clock)

    def prefix(self, key: bytes, record: SessionRecord) -> _Entry | None:
        """The cached first events of `record` (None if none hold)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or not _holds(entry, record):
                return None
            self._entries.move_to_end(key)
            return entry

    def apply(self, pending: Pending) -> None:
        """Take a committed step's updates."""
        if not pending.fills and not pending.drops:
            return
        with self._lock:
            for key in pending.drops:
                self._remove(key)
                self._dropped.pop(key, None)
                self._dropped[key] = next(self._clock)
                while len(self._dropped) > _MAX_TOMBSTONES:
                    self._floor = max(self._floor, self._dropped.popitem(last=False)[1])
            for key, entry in pending.fills:
                if not self._admits(key, entry, pending.started):
                    continue
                self._remove(key)
                self._entries[key] = entry
                self._size += len(entry.events)
                self._bytes += entry.size
            self._evict()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._size = self._bytes = 0

    def __len__(self) -> int:
        """How many events are cached, all sessions together."""
        return self._size

    @property
    def size(self) -> int:
        """How many encoded bytes of events are cached, all sessions together."""
        return self._bytes

    def _evict(self) -> None:
        """Least recently used first, until within the bounds (lock held)."""
        while (self._size > self.max_events or self._bytes > self.max_bytes) and self._entries:
            self._remove(next(iter(self._entries)))

    def _admits(self, key: bytes, entry: _Entry, started: int) -> bool:
        """May a step that began at `started` cache `entry` (not too big, not read
        before a drop of its key, not older than what is cached)?"""
        if not self.enabled:  # every caching service closed during the step
            return False
        if len(entry.events) > self.max_events or entry.size > self.max_bytes // 2:
            return False
        if started < self._floor or started < self._dropped.get(key, 0):
            return False  # it may have read the session before a delete committed
        current = self._entries.get(key)
        return current is None or current.revision <= entry.revision

    def _remove(self, key: bytes) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._size -= len(old.events)
            self._bytes -= old.size
