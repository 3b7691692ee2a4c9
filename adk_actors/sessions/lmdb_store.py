"""`LmdbSessionService`: durable sessions in an LMDB environment.

Every operation that may write is one write transaction (a crash leaves either the
whole step or none of it); a pure read (`get_session`, `list_sessions`, the queries)
is one read-only transaction: a consistent snapshot that costs no commit or fsync and
never waits for a writer. Records are msgspec MessagePack, events their versioned
JSON (the bytes `events.checked` produced when the event was appended: encoded once).
Continuations (``_adk:paused:`` keys) have their own named database, one entry per
key under the session's key, so a step rewrites only the small record. Several
services, threads and OS processes may share one path; in a process, the services on
one LMDB file share one environment (`_acquire`: by the file's identity, not its path).

Keys are the ids joined by NUL, which no id holds (`core.check_id`: three ids of at
most 128 bytes keep every key under LMDB's 511-byte limit); a continuation whose
state key would make its key too long is filed under the SHA-256 of that state key
and stores the key beside its value.

A full map grows: a write that meets ``MDB_MAP_FULL`` is aborted (nothing of it
stays), the map doubles (`set_mapsize`, once no transaction of this process is
open: every transaction passes a gate that a resize closes) up to `max_map_size`,
and the step runs again; at the ceiling (or on a full disk) the step fails
``storage_full``, having written nothing. A map another process grew is adopted
(``MDB_MAP_RESIZED``). Opening a path for the first time in a process closes, with
one ``abandoned`` error event each, the invocations left open by a process that is
gone (`recover_abandoned`; see `owner`).
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lmdb
import msgspec

from adk_actors import events as event_codec
from adk_actors.events import Event
from adk_actors.sessions import core, owner
from adk_actors.sessions.core import SessionRecord
from adk_actors.sessions.event_cache import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_EVENTS,
    MAX_BYTES_CEILING,
    EventCache,
    Pending,
    reader_events,
)
from adk_actors.sessions.service import SessionService
from providers.errors import AdkError
from providers.frozen import freeze, share
from supervision import before_blocking
from supervision.logs import get_logger

_SEP = b"\x00"
_record_encoder = msgspec.msgpack.Encoder()
_record_decoder = msgspec.msgpack.Decoder(SessionRecord)
_state_decoder = msgspec.msgpack.Decoder(dict[str, Any])
_value_decoder = msgspec.msgpack.Decoder()
_DATABASES = ("sessions", "events", "scopes", "continuations")
_MAX_READERS = 1024
"""Read transactions at once (one per reading thread; LMDB's default is 126)."""
_MAX_KEY_BYTES = 511
"""LMDB's key limit (its default build)."""
_HASHED = b"\x01"
"""Starts a continuation key's tail filed under a hash (a state key never starts so:
a continuation's key starts with ``_adk:paused:``)."""
DEFAULT_MAP_SIZE = 1 << 30
DEFAULT_MAX_MAP_SIZE = 1 << 36
"""How far a full map may grow by default (64 GiB of address space; the file grows
only with its data)."""
_OPEN_MARK = core.OPEN_PREFIX.encode()
_log = get_logger("adk.sessions")


def _key(*parts: str) -> bytes:
    try:
        return _SEP.join(part.encode("utf-8") for part in parts) + _SEP
    except UnicodeEncodeError:
        raise AdkError("invalid_utf8", "names and keys must be valid UTF-8") from None


class _LmdbStorage:
    def __init__(
        self, txn: Any, dbs: dict[str, Any], cache: EventCache | None, pending: Pending
    ) -> None:
        self._txn = txn
        self._dbs = dbs
        self._cache = cache
        """The path's decoded events (None: this service keeps none, ``event_cache=0``)."""
        self.pending = pending
        """Cache updates of this step (a delete's drop, whatever the service): applied
        once its transaction committed."""

    def get_session(self, app: str, user: str, session_id: str) -> SessionRecord | None:
        raw = self._txn.get(_key(app, user, session_id), db=self._dbs["sessions"])
        return None if raw is None else _record_decoder.decode(raw)

    def put_session(self, record: SessionRecord) -> None:
        self._txn.put(
            _key(record.app_name, record.user_id, record.id),
            _record_encoder.encode(record),
            db=self._dbs["sessions"],
        )

    def delete_session(self, app: str, user: str, session_id: str) -> None:
        self._txn.delete(_key(app, user, session_id), db=self._dbs["sessions"])
        self.pending.drop(_key(app, user, session_id))
        for db in ("events", "continuations"):
            for key, _ in list(self._scan(db, _key(app, user, session_id))):
                self._txn.delete(key, db=self._dbs[db])

    def list_sessions(self, app: str, user: str) -> list[SessionRecord]:
        return [
            _record_decoder.decode(value) for _, value in self._scan("sessions", _key(app, user))
        ]

    def get_scope_state(self, scope: tuple[str, ...]) -> dict[str, Any]:
        raw = self._txn.get(_key(*scope), db=self._dbs["scopes"])
        return {} if raw is None else dict(_state_decoder.decode(raw))

    def put_scope_state(self, scope: tuple[str, ...], state: dict[str, Any]) -> None:
        self._txn.put(_key(*scope), _record_encoder.encode(state), db=self._dbs["scopes"])

    def append_event(
        self, record: SessionRecord, seq: int, event: Event, encoded: bytes | None = None
    ) -> None:
        key = _key(record.app_name, record.user_id, record.id) + struct.pack(">Q", seq)
        data = encoded if encoded is not None else event_codec.encode(event)
        self._txn.put(key, data, db=self._dbs["events"])

    def replace_events(self, record: SessionRecord, events: list[Event]) -> None:
        prefix = _key(record.app_name, record.user_id, record.id)
        for key, _ in list(self._scan("events", prefix)):
            self._txn.delete(key, db=self._dbs["events"])
        for seq, event in enumerate(events, start=1):
            self.append_event(record, seq, event)

    def events(self, record: SessionRecord) -> list[Event]:
        """The session's events, frozen, each reader with empty fields of its own
        (`providers.frozen.reader_copy`): the cached ones (`EventCache`), then those
        appended since, decoded now (and cached once this step committed)."""
        prefix = _key(record.app_name, record.user_id, record.id)
        if self._cache is None or not self._cache.enabled:
            return [freeze(event_codec.decode(v)) for _, v in self._scan("events", prefix)]
        cached = self._cache.prefix(prefix, record)
        if cached is not None and len(cached.events) == record.event_count:
            return reader_events(cached)
        events, refills, size = [], [], 0
        if cached is not None:
            events, refills, size = [*cached.events], [*cached.refills], cached.size
        start = prefix + struct.pack(">Q", len(events) + 1)
        for _, value in self._scan("events", prefix, start):
            event, refill = share(event_codec.decode(value))
            events.append(event)
            refills.append(refill)
            size += len(value)
        self.pending.fill(prefix, record, events, refills, size)
        return [e if r is None else r(e) for e, r in zip(events, refills, strict=True)]

    def get_continuation(self, record: SessionRecord, key: str) -> Any:
        lmdb_key, hashed = _continuation_key(record, key)
        raw = self._txn.get(lmdb_key, db=self._dbs["continuations"])
        if raw is None:
            return None
        if not hashed:
            return _value_decoder.decode(raw)
        stored_key, value = _value_decoder.decode(raw)
        return value if stored_key == key else None

    def put_continuation(self, record: SessionRecord, key: str, value: Any) -> None:
        db = self._dbs["continuations"]
        lmdb_key, hashed = _continuation_key(record, key)
        if value is None:
            self._txn.delete(lmdb_key, db=db)
        else:
            self._txn.put(
                lmdb_key, _record_encoder.encode([key, value] if hashed else value), db=db
            )

    def continuations(self, record: SessionRecord) -> dict[str, Any]:
        prefix = _key(record.app_name, record.user_id, record.id)
        found: dict[str, Any] = {}
        for key, value in self._scan("continuations", prefix):
            tail = key[len(prefix) :]
            if tail.startswith(_HASHED):
                stored_key, found_value = _value_decoder.decode(value)
                found[stored_key] = found_value
            else:
                found[tail.decode("utf-8")] = _value_decoder.decode(value)
        return found

    def open_invocations(self) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
        """(app, user, session id, {invocation id: marker}) of every session that holds
        an open invocation (a record is decoded only if its bytes name one)."""
        for _, raw in self._scan("sessions", b""):
            if _OPEN_MARK not in raw:
                continue
            record = _record_decoder.decode(raw)
            markers = {
                key[len(core.OPEN_PREFIX) :]: value
                for key, value in record.state.items()
                if key.startswith(core.OPEN_PREFIX)
            }
            if markers:
                yield record.app_name, record.user_id, record.id, markers

    def _scan(
        self, db: str, prefix: bytes, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Entries under `prefix` in key order (from `start`, if given)."""
        cursor = self._txn.cursor(db=self._dbs[db])
        if not cursor.set_range(prefix if start is None else start):
            return
        for key, value in cursor:
            if not key.startswith(prefix):
                return
            yield bytes(key), bytes(value)


def _continuation_key(record: SessionRecord, key: str) -> tuple[bytes, bool]:
    """The session's key, then the state key: a session's continuations are one range.
    A state key too long for that is replaced by its hash (True: the value then holds
    the key too)."""
    prefix = _key(record.app_name, record.user_id, record.id)
    tail = _key(key)[:-1]
    if len(prefix) + len(tail) <= _MAX_KEY_BYTES:
        return prefix + tail, False
    return prefix + _HASHED + hashlib.sha256(tail).hexdigest().encode(), True


class _Env:
    """One LMDB environment of this process (LMDB allows no second open of a file),
    shared by its services, with the gate its transactions pass (a resize waits until
    none is open, and none begins while it runs) and the path's decoded events (one
    `EventCache` for all its services: shared hits, one bound)."""

    def __init__(
        self,
        env: Any,
        dbs: dict[str, Any],
        max_map_size: int,
        identity: _Identity,
        lock_identity: _Identity,
    ) -> None:
        self.env = env
        self.dbs = dbs
        self.identity = identity
        """Its data file's (device, inode): its key in `_open`."""
        self.lock_identity = lock_identity
        self.events = EventCache(0, 0)
        """Bounded by the services that join it (`LmdbSessionService`)."""
        self.users = 0
        self.max_map_size = max(max_map_size, env.info()["map_size"])
        self.map_size: int = env.info()["map_size"]
        self._gate = threading.Condition(threading.Lock())
        self._active = 0
        self._resizing = False
        self._depth = threading.local()

    def enter(self) -> None:
        depth: int = getattr(self._depth, "n", 0)
        if depth == 0:  # a nested step (same thread) is already counted
            with self._gate:
                while self._resizing:
                    self._gate.wait()
                self._active += 1
        self._depth.n = depth + 1

    def leave(self) -> None:
        depth: int = self._depth.n - 1
        self._depth.n = depth
        if depth == 0:
            with self._gate:
                self._active -= 1
                if self._resizing and not self._active:
                    self._gate.notify_all()

    def resize(self, seen: int | None) -> None:
        """Grow a full map (`seen`: its size when the step failed; doubled up to the
        ceiling, else ``storage_full``), or adopt another process's growth (None)."""
        if getattr(self._depth, "n", 0):
            raise AdkError("storage_full", "the session store is full (a nested step)")
        with self._gate:
            while self._resizing:
                self._gate.wait()
            self._resizing = True
            try:
                while self._active:
                    self._gate.wait()
                if seen is None:
                    self.env.set_mapsize(0)
                elif self.map_size == seen:  # nobody grew it meanwhile
                    if seen >= self.max_map_size:
                        raise AdkError(
                            "storage_full",
                            f"the session store reached its max_map_size ({self.max_map_size})",
                        )
                    self.env.set_mapsize(min(seen * 2, self.max_map_size))
                    _log.info("adk.sessions.map_grown", map_size=self.env.info()["map_size"])
                self.map_size = self.env.info()["map_size"]
            finally:
                self._resizing = False
                self._gate.notify_all()


_Identity = tuple[int, int]
"""A file's (device, inode): what names one LMDB file, whatever path reaches it."""
_open: dict[_Identity, _Env] = {}  # its data file's identity -> the open environment
_open_lock = threading.Lock()


def _identity(path: str, name: str) -> _Identity | None:
    """The (device, inode) of `path`/`name` now (None: no such file)."""
    try:
        found = os.stat(os.path.join(path, name))
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


def _acquire(path: str, map_size: int, max_map_size: int) -> tuple[_Env, bool]:
    """The environment of the LMDB file `path` names now (True: opened just now, by
    this call). Keyed by the files' identity, not the path: two paths naming one file
    (a bind mount) share one environment, and a path whose files were replaced while
    this process keeps the old ones open (removed, then created again by someone else)
    gets a new environment on the new files, never the old ones. A new data file
    beside a lock file open here is refused (``session_store_replaced``): opening it
    would open that lock file twice in this process, which LMDB forbids. An open
    file's inode cannot be reused, so the check cannot mistake a new file for an open
    one."""
    with _open_lock:
        data, lock = _identity(path, "data.mdb"), _identity(path, "lock.mdb")
        entry = None if data is None else _open.get(data)
        if entry is not None:
            entry.users += 1
            return entry, False
        if lock is not None and any(open_.lock_identity == lock for open_ in _open.values()):
            raise AdkError(
                "session_store_replaced",
                "the session store's files were replaced while this process keeps them "
                "open: close its services, then open it again",
            )
        env = lmdb.open(path, map_size=map_size, max_dbs=8, max_readers=_MAX_READERS, subdir=True)
        try:
            env.reader_check()  # free the reader slots of processes that died reading
            dbs = {name: env.open_db(f"adk.sessions.{name}".encode()) for name in _DATABASES}
            data, lock = _identity(path, "data.mdb"), _identity(path, "lock.mdb")
            if data is None or lock is None or data in _open:  # replaced while opening
                raise AdkError(
                    "session_store_replaced", "the session store's files changed while opening"
                )
            entry = _open[data] = _Env(env, dbs, max_map_size, data, lock)
        except BaseException:
            env.close()
            raise
        entry.users += 1
        return entry, True


def _release_locked(entry: _Env) -> None:
    """One user of `entry` fewer; the last one closes it (`_open_lock` held)."""
    entry.users -= 1
    if entry.users == 0:
        if _open.get(entry.identity) is entry:
            del _open[entry.identity]
        entry.env.close()


def _close_service(shared: _Env, asked: tuple[int, int]) -> None:
    """A service on `shared` is done: it leaves the path's cache (the bound falls back
    to the rest's; the last one empties it) and releases the environment."""
    with _open_lock:
        shared.events.leave(*asked)
        _release_locked(shared)


def _service_dropped(shared: _Env, asked: tuple[int, int]) -> None:
    """`_close_service` for a service collected without `close()` (its
    `weakref.finalize`). The collector may run this in any thread at any allocation,
    even one holding `_open_lock` or the cache's lock, so it never waits for them:
    if either is taken, a short-lived thread does the closing once they are free."""
    if _open_lock.acquire(blocking=False):
        try:
            if shared.events.leave(*asked, blocking=False):
                _release_locked(shared)
                return
        finally:
            _open_lock.release()
    threading.Thread(
        target=_close_service, args=(shared, asked), name="adk-sessions-dropped", daemon=True
    ).start()


class LmdbSessionService(SessionService):
    """Durable sessions under `path` (a directory; created if missing).

    `map_size` is the initial map (the environment's first opener in a process sets
    it; an existing larger file keeps its size); a full map doubles up to
    `max_map_size`, then a write fails ``storage_full``. Unless `recover` is False,
    the first open of the path in this process closes the invocations left open by
    a process that is gone (`recover_abandoned`). `event_cache` is how many decoded
    events may be kept, all sessions together, and `event_cache_bytes` how many
    encoded bytes of them (`EventCache`; either 0: this service keeps and uses none;
    at most `MAX_BYTES_CEILING`), so a read decodes only the events appended since the
    last one. The cache is the path's: every service open on the path in this process
    shares it, bounded by the bounds one of them asked for (the most bytes; ties: the
    most events). `close()` leaves it (and the path's environment); a service dropped
    without `close()` leaves when it is collected.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        map_size: int = DEFAULT_MAP_SIZE,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
        recover: bool = True,
        event_cache: int = DEFAULT_MAX_EVENTS,
        event_cache_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        for name, value in (("map_size", map_size), ("max_map_size", max_map_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1 << 12:
                raise AdkError(f"invalid_{name}", f"{name} is an int of at least 4096 bytes")
        if isinstance(event_cache, bool) or not isinstance(event_cache, int) or event_cache < 0:
            raise AdkError("invalid_event_cache", "event_cache is an int of at least 0")
        if (
            isinstance(event_cache_bytes, bool)
            or not isinstance(event_cache_bytes, int)
            or not 0 <= event_cache_bytes <= MAX_BYTES_CEILING
        ):
            raise AdkError(
                "invalid_event_cache_bytes",
                f"event_cache_bytes is an int of 0..{MAX_BYTES_CEILING}",
            )
        Path(path).mkdir(parents=True, exist_ok=True)
        self._path = os.path.realpath(path)
        self._shared, opened = _acquire(self._path, map_size, max_map_size)
        self._env, self._dbs = self._shared.env, self._shared.dbs
        self._asked = (event_cache, event_cache_bytes)
        self._events = self._shared.events
        """The path's cache, shared with every service on it."""
        try:
            self._events.join(*self._asked)
        except BaseException:
            with _open_lock:
                _release_locked(self._shared)  # joined nothing: only the env to release
            raise
        self._closing = weakref.finalize(self, _service_dropped, self._shared, self._asked)
        """Leaves the cache and releases the env exactly once: run by `close()`, or by
        the collector if the service is dropped unclosed (its bound and the path's
        events are not kept for the life of the process; review of b26e68e, 1)."""
        self._closing.atexit = False  # at exit, another thread may still be in the env
        self._cached = self._events if event_cache and event_cache_bytes else None
        """What this service's steps read and fill (None: it keeps no events)."""
        if opened and recover:
            try:
                self.recover_abandoned()
            except AdkError as error:  # e.g. storage_full: the store still opens
                _log.warning("adk.sessions.recovery_failed", reason=str(error.reason)[:200])
            except BaseException:
                self.close()  # the store is not opened: nothing of it stays held
                raise

    def close(self) -> None:
        """Leave the path's cache (the last service empties it) and release the env.
        Idempotent, also when threads race: `detach` hands the closing to one caller
        (the finalizer's registry entry is removed atomically; review of b26e68e, 3)."""
        if self._closing.detach() is not None:
            _close_service(self._shared, self._asked)

    def recover_abandoned(self) -> int:
        """Close every invocation held open by a process that is gone (`owner`): one
        ``abandoned`` error event each, stored once however many processes recover at
        the same time (each closes only the exact marker it read). Invocations of this
        process, of live ones, and markers without an owner (written before owners
        were recorded) stay open; paused invocations are not open and stay resumable.
        Returns how many it closed."""
        gone: dict[str, bool] = {}
        found = self._read(lambda storage: list(storage.open_invocations()))
        closed = 0
        for app, user, session_id, markers in found:
            dead = {}
            for invocation_id, value in markers.items():
                holder = owner.owner_of(value)
                if holder is None:
                    continue
                if holder not in gone:
                    gone[holder] = owner.owner_gone(holder)
                if gone[holder]:
                    dead[invocation_id] = value
            if dead:
                events = self._locked(core.close_abandoned, app, user, session_id, dead)
                closed += len(events)
        if closed:
            _log.info("adk.sessions.abandoned_closed", count=closed)
        return closed

    def _run(self, operation: Callable[..., Any], *args: Any) -> Any:
        # A write waits for LMDB's process-wide writer lock and commits with fsync: a
        # pooled handler (the invocation server storing an event after publishing the
        # last) first hands the servers it readied to idle threads.
        before_blocking()
        shared = self._shared
        while True:
            seen: int | None = shared.map_size
            shared.enter()
            try:
                pending = Pending(self._events.stamp())  # before the snapshot: see EventCache
                with self._env.begin(write=True) as txn:  # an exception aborts the whole step
                    storage = _LmdbStorage(txn, self._dbs, self._cached, pending)
                    result = operation(storage, *args)
                self._events.apply(storage.pending)  # committed: its reads may be cached
                return result
            except lmdb.MapFullError:
                pass  # aborted: nothing of it stays; grow below, then run it again
            except lmdb.MapResizedError:
                seen = None  # another process grew the map: adopt it, then run it again
            except lmdb.DiskError:
                raise AdkError("storage_full", "the disk under the session store is full") from None
            finally:
                shared.leave()
            shared.resize(seen)

    def _read(self, operation: Callable[..., Any], *args: Any) -> Any:
        """A read-only transaction: a snapshot, no commit (a write in it raises)."""
        shared = self._shared
        while True:
            shared.enter()
            try:
                pending = Pending(self._events.stamp())
                with self._env.begin(write=False) as txn:
                    storage = _LmdbStorage(txn, self._dbs, self._cached, pending)
                    result = operation(storage, *args)
                self._events.apply(storage.pending)
                return result
            except lmdb.MapResizedError:
                pass
            finally:
                shared.leave()
            shared.resize(None)
