"""`LmdbSessionService`: durable sessions in an LMDB environment.

Every operation that may write is one write transaction (a crash leaves either the
whole step or none of it); a pure read (`get_session`, `list_sessions`, the queries)
is one read-only transaction: a consistent snapshot that costs no commit or fsync and
never waits for a writer. Records are msgspec MessagePack, events their versioned
JSON (the bytes `events.checked` produced when the event was appended: encoded once).
Continuations (``_adk:paused:`` keys) have their own named database, one entry per
key under the session's key, so a step rewrites only the small record. Several
services, threads and OS processes may share one path.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lmdb
import msgspec

from adk_actors import events as event_codec
from adk_actors.events import Event
from adk_actors.sessions.core import SessionRecord
from adk_actors.sessions.service import SessionService
from providers.errors import AdkError

_SEP = b"\x00"
_record_encoder = msgspec.msgpack.Encoder()
_record_decoder = msgspec.msgpack.Decoder(SessionRecord)
_state_decoder = msgspec.msgpack.Decoder(dict[str, Any])
_value_decoder = msgspec.msgpack.Decoder()
_DATABASES = ("sessions", "events", "scopes", "continuations")
_MAX_READERS = 1024
"""Read transactions at once (one per reading thread; LMDB's default is 126)."""


def _key(*parts: str) -> bytes:
    try:
        return _SEP.join(part.encode("utf-8") for part in parts) + _SEP
    except UnicodeEncodeError:
        raise AdkError("invalid_utf8", "names and keys must be valid UTF-8") from None


class _LmdbStorage:
    def __init__(self, txn: Any, dbs: dict[str, Any]) -> None:
        self._txn = txn
        self._dbs = dbs

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
        prefix = _key(record.app_name, record.user_id, record.id)
        return [event_codec.decode(value) for _, value in self._scan("events", prefix)]

    def get_continuation(self, record: SessionRecord, key: str) -> Any:
        raw = self._txn.get(_continuation_key(record, key), db=self._dbs["continuations"])
        return None if raw is None else _value_decoder.decode(raw)

    def put_continuation(self, record: SessionRecord, key: str, value: Any) -> None:
        db = self._dbs["continuations"]
        if value is None:
            self._txn.delete(_continuation_key(record, key), db=db)
        else:
            self._txn.put(_continuation_key(record, key), _record_encoder.encode(value), db=db)

    def continuations(self, record: SessionRecord) -> dict[str, Any]:
        prefix = _key(record.app_name, record.user_id, record.id)
        return {
            key[len(prefix) :].decode("utf-8"): _value_decoder.decode(value)
            for key, value in self._scan("continuations", prefix)
        }

    def _scan(self, db: str, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        cursor = self._txn.cursor(db=self._dbs[db])
        if not cursor.set_range(prefix):
            return
        for key, value in cursor:
            if not key.startswith(prefix):
                return
            yield bytes(key), bytes(value)


def _continuation_key(record: SessionRecord, key: str) -> bytes:
    """The session's key, then the state key: a session's continuations are one range."""
    return _key(record.app_name, record.user_id, record.id) + _key(key)[:-1]


_open: dict[str, list[Any]] = {}  # real path -> [env, dbs, users]
_open_lock = threading.Lock()


def _acquire(path: str, map_size: int) -> tuple[Any, dict[str, Any]]:
    """One environment per path in a process (LMDB allows no second open)."""
    with _open_lock:
        entry = _open.get(path)
        if entry is None:
            env = lmdb.open(
                path, map_size=map_size, max_dbs=8, max_readers=_MAX_READERS, subdir=True
            )
            env.reader_check()  # free the reader slots of processes that died reading
            dbs = {name: env.open_db(f"adk.sessions.{name}".encode()) for name in _DATABASES}
            entry = _open[path] = [env, dbs, 0]
        entry[2] += 1
        return entry[0], entry[1]


def _release(path: str) -> None:
    with _open_lock:
        entry = _open.get(path)
        if entry is None:
            return
        entry[2] -= 1
        if entry[2] == 0:
            del _open[path]
            entry[0].close()


class LmdbSessionService(SessionService):
    """Durable sessions under `path` (a directory; created if missing)."""

    def __init__(self, path: str | os.PathLike[str], *, map_size: int = 1 << 30) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        self._path = os.path.realpath(path)
        self._env, self._dbs = _acquire(self._path, map_size)
        self._closed = False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            _release(self._path)

    def _run(self, operation: Callable[..., Any], *args: Any) -> Any:
        with self._env.begin(write=True) as txn:  # an exception aborts the whole step
            return operation(_LmdbStorage(txn, self._dbs), *args)

    def _read(self, operation: Callable[..., Any], *args: Any) -> Any:
        """A read-only transaction: a snapshot, no commit (a write in it raises)."""
        with self._env.begin(write=False) as txn:
            return operation(_LmdbStorage(txn, self._dbs), *args)
