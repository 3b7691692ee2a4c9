"""`LmdbLedger`: the durable invocation ledger in an LMDB environment.

One named database (``adk.workflows.invocations``) keyed by invocation id, one
MessagePack `StoredInvocation` per key, one write transaction per ledger operation:
the rules of `ledger.py` read the record and decide inside that transaction, so a
check and its write are one atomic step for every thread and every OS process sharing
the path (LMDB's writer lock serialises them), and a process killed mid-step leaves
either the whole step or nothing. Reads are read-only transactions (snapshots).

LMDB allows one open of a path per process, so ledgers on one path share their
environment (reference-counted; `close` releases it). Within a process every
transaction on an environment passes one lock: that keeps a map resize safe (LMDB
needs no transaction of this process open) and costs nothing, since LMDB runs one
writer at a time anyway. A full map doubles up to `max_map_size`, then the step fails
``storage_full`` having written nothing; a map another process grew is adopted.

Listing and retention sweeps read pages of record summaries (id, phase, completion
time), decoding nothing else, one short read transaction per page.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import lmdb
import msgspec

from adk_actors.workflows.ledger import RuleLedger
from adk_actors.workflows.ledger_rules import MAX_RECORD_BYTES, Phase, StoredInvocation
from providers.errors import AdkError
from supervision import before_blocking, get_logger

DB_NAME = b"adk.workflows.invocations"
DEFAULT_MAP_SIZE = 1 << 28
DEFAULT_MAX_MAP_SIZE = 1 << 36
_MAX_READERS = 1024
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(StoredInvocation)
_log = get_logger("adk.workflows.ledger")


class _Summary(msgspec.Struct):
    """Enough of a record to list it and judge its retention (the rest is skipped)."""

    phase: Phase
    updated_at: float


_summary_decoder = msgspec.msgpack.Decoder(_Summary)


class _Env:
    """One LMDB environment of this process and the lock its transactions pass."""

    def __init__(self, path: str, map_size: int, max_map_size: int) -> None:
        self.env = lmdb.open(
            path, map_size=map_size, max_dbs=4, max_readers=_MAX_READERS, subdir=True
        )
        self.env.reader_check()  # free reader slots left by processes that died reading
        self.db = self.env.open_db(DB_NAME)
        self.max_map_size = max(max_map_size, self.env.info()["map_size"])
        self.lock = threading.RLock()
        self.users = 0

    def grow(self) -> None:
        """Double a full map (held lock: no transaction of this process is open)."""
        size = self.env.info()["map_size"]
        if size >= self.max_map_size:
            raise AdkError(
                "storage_full", f"the ledger reached its max_map_size ({self.max_map_size})"
            )
        self.env.set_mapsize(min(size * 2, self.max_map_size))
        _log.info("adk.workflows.ledger.map_grown", map_size=self.env.info()["map_size"])


_open: dict[str, _Env] = {}
_open_lock = threading.Lock()


def _acquire(path: str, map_size: int, max_map_size: int) -> _Env:
    with _open_lock:
        entry = _open.get(path)
        if entry is None:
            entry = _open[path] = _Env(path, map_size, max_map_size)
        entry.users += 1
        return entry


def _release(path: str) -> None:
    with _open_lock:
        entry = _open.get(path)
        if entry is None:
            return
        entry.users -= 1
        if entry.users == 0:
            del _open[path]
            with entry.lock:
                entry.env.close()


class LmdbLedger(RuleLedger):
    """The ledger under `path` (a directory, created if missing). Several ledgers,
    threads and OS processes may share one path. `map_size` is the initial map (an
    existing larger file keeps its size); it doubles up to `max_map_size`.
    `retention` (seconds; None: keep until `delete`) is how long a completed record
    stays; `max_record_bytes` bounds each record (``record_too_large``)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        map_size: int = DEFAULT_MAP_SIZE,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
        retention: float | None = None,
        max_record_bytes: int = MAX_RECORD_BYTES,
    ) -> None:
        for name, value in (("map_size", map_size), ("max_map_size", max_map_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1 << 16:
                raise AdkError(f"invalid_{name}", f"{name} is an int of at least 65536 bytes")
        super().__init__(retention=retention, max_record_bytes=max_record_bytes)
        Path(path).mkdir(parents=True, exist_ok=True)
        self._path = os.path.realpath(path)
        self._shared = _acquire(self._path, map_size, max_map_size)
        self._closed = False

    @property
    def path(self) -> str:
        """The environment's directory (resolved)."""
        return self._path

    def close(self) -> None:
        """Release this ledger's share of the environment (idempotent)."""
        if not self._closed:
            self._closed = True
            _release(self._path)

    def __enter__(self) -> LmdbLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LmdbLedger({self._path!r})"

    def _env(self) -> _Env:
        if self._closed:
            raise AdkError("ledger_closed", "this ledger was closed")
        return self._shared

    def _step(
        self,
        invocation_id: str,
        fn: Callable[[StoredInvocation | None], StoredInvocation | None],
    ) -> StoredInvocation | None:
        shared = self._env()
        key = invocation_id.encode("utf-8")
        before_blocking()  # a write transaction (fsync): a pooled handler hands over first
        with shared.lock:
            while True:
                try:
                    with shared.env.begin(write=True, db=shared.db) as txn:  # raise: abort
                        raw = txn.get(key)
                        current = None if raw is None else _decode(raw)
                        new = fn(current)
                        if new is current:
                            return new  # nothing to write
                        if new is None:
                            txn.delete(key)
                        else:
                            txn.put(key, _encoder.encode(new))
                        return new
                except lmdb.MapFullError:
                    shared.grow()  # aborted, nothing stayed: grow, then run it again
                except lmdb.MapResizedError:
                    shared.env.set_mapsize(0)  # another process grew it: adopt, run again
                except lmdb.DiskError:
                    raise AdkError("storage_full", "the disk under the ledger is full") from None

    def _read(self, fn: Callable[[Any], Any]) -> Any:
        shared = self._env()
        before_blocking()  # the lock a write holds through its fsync: hand over first
        with shared.lock:
            while True:
                try:
                    with shared.env.begin(write=False, db=shared.db) as txn:
                        return fn(txn)
                except lmdb.MapResizedError:
                    shared.env.set_mapsize(0)

    def _load(self, invocation_id: str) -> StoredInvocation | None:
        raw = self._read(lambda txn: txn.get(invocation_id.encode("utf-8")))
        return None if raw is None else _decode(raw)

    def _page(self, after: str | None, count: int) -> Sequence[tuple[str, Phase, float]]:
        return self._read(lambda txn: _summaries(txn, after, count))  # type: ignore[no-any-return]

    def raw_records(self) -> list[tuple[bytes, bytes]]:
        """Every stored (key, value) as bytes: for audits and tests that look at what
        is on disk (e.g. that no secret and no token is stored)."""

        def dump(txn: Any) -> list[tuple[bytes, bytes]]:
            return [(bytes(key), bytes(value)) for key, value in txn.cursor()]

        return self._read(dump)  # type: ignore[no-any-return]


def _summaries(txn: Any, after: str | None, count: int) -> list[tuple[str, Phase, float]]:
    """At most `count` (id, phase, updated_at) in id order, after `after`."""
    page: list[tuple[str, Phase, float]] = []
    cursor = txn.cursor()
    start = b"" if after is None else after.encode("utf-8")
    if not cursor.set_range(start):
        return page
    for key, value in cursor:
        if after is not None and bytes(key) == start:
            continue
        try:
            summary = _summary_decoder.decode(value)
        except msgspec.DecodeError:
            raise AdkError("invalid_ledger_record", "a stored record does not decode") from None
        page.append((bytes(key).decode("utf-8"), summary.phase, summary.updated_at))
        if len(page) >= count:
            break
    return page


def _decode(raw: bytes) -> StoredInvocation:
    try:
        return _decoder.decode(raw)
    except msgspec.DecodeError:
        raise AdkError("invalid_ledger_record", "a stored record does not decode") from None
