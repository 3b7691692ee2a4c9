"""Decoded events kept per session, so a read decodes only what was appended since.

LMDB stores events as bytes; decoding (and validating) a long history on every read
made a turn's cost grow with the session. `EventCache` keeps each session's decoded
events, frozen (`providers.frozen`: read-only, so every reader may share them), with
the record fields they match. A read takes the cached prefix if it still holds for
the record it read (same creation, same compactions, and exactly one revision per
event appended since) and decodes only the events after it.

Only committed data enters: a step collects its updates (`Pending`) and the service
applies them after its transaction committed (a read-only one: at its end), so an
aborted write leaves nothing behind. Entries are evicted least recently used first
beyond `max_events` events in all; a deleted session's entry is dropped.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

from adk_actors.events import Event
from adk_actors.sessions.core import SessionRecord

DEFAULT_MAX_EVENTS = 50_000
"""How many decoded events an LMDB service keeps by default, all sessions together."""


class _Entry(NamedTuple):
    created: float
    compactions: int
    revision: int
    events: tuple[Event, ...]


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


class Pending:
    """A step's cache updates, applied only once its transaction committed."""

    __slots__ = ("drops", "fills")

    def __init__(self) -> None:
        self.fills: list[tuple[bytes, _Entry]] = []
        self.drops: list[bytes] = []

    def fill(self, key: bytes, record: SessionRecord, events: Sequence[Event]) -> None:
        """`events` are all of `record`'s events, as this step read them."""
        self.fills.append(
            (key, _Entry(record.created, record.compactions, record.revision, tuple(events)))
        )

    def drop(self, key: bytes) -> None:
        self.drops.append(key)


class EventCache:
    """Frozen decoded events per session key, at most `max_events` in all (0: off)."""

    def __init__(self, max_events: int = DEFAULT_MAX_EVENTS) -> None:
        self.max_events = max_events
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def prefix(self, key: bytes, record: SessionRecord) -> tuple[Event, ...]:
        """The cached first events of `record` (empty if none hold)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or not _holds(entry, record):
                return ()
            self._entries.move_to_end(key)
            return entry.events

    def apply(self, pending: Pending) -> None:
        """Take a committed step's updates."""
        if not pending.fills and not pending.drops:
            return
        with self._lock:
            for key in pending.drops:
                self._remove(key)
            for key, entry in pending.fills:
                if len(entry.events) > self.max_events:
                    continue
                current = self._entries.get(key)
                if current is not None and current.revision > entry.revision:
                    continue  # a newer snapshot is already here
                self._remove(key)
                self._entries[key] = entry
                self._size += len(entry.events)
            while self._size > self.max_events and self._entries:
                _, evicted = self._entries.popitem(last=False)
                self._size -= len(evicted.events)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._size = 0

    def __len__(self) -> int:
        """How many events are cached, all sessions together."""
        return self._size

    def _remove(self, key: bytes) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._size -= len(old.events)
