"""`SqliteLedger`: the `Ledger` protocol on SQLite, written from the protocol alone.

It shares no code with `RuleLedger`: each fenced write is one conditional ``UPDATE``
(``WHERE phase = 'running' AND owner = digest AND now < lease_until``) inside one
``BEGIN IMMEDIATE`` transaction, and a refused one is diagnosed in the same
transaction. It knows nothing of owner liveness, so a crashed owner's claim waits for
its lease. The tests run the protocol suite and durable workflows on it: what a
second store (a SQL database) needs is the protocol, nothing more.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

from adk_actors.workflows.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
from adk_actors.workflows.ledger_rules import InvocationRecord, check_metadata
from providers.errors import AdkError
from supervision import Pid
from supervision.leases import token_digest

_SCHEMA = """
CREATE TABLE IF NOT EXISTS invocations (
    id TEXT PRIMARY KEY,
    workflow_id TEXT NOT NULL,
    workflow_version INTEGER NOT NULL,
    kind TEXT NOT NULL,
    checkpoint BLOB NOT NULL,
    phase TEXT NOT NULL,
    outcome TEXT,
    owner TEXT,
    lease_until REAL NOT NULL,
    revision INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
)"""
_COLUMNS = (
    "id, workflow_id, workflow_version, kind, checkpoint, phase, outcome, owner, "
    "lease_until, revision, created_at, updated_at"
)
_FENCE = "WHERE id = ? AND phase = 'running' AND owner = ? AND ? < lease_until"


class SqliteLedger:
    """A ledger in one SQLite file (several connections and processes may share it)."""

    def __init__(self, path: str) -> None:
        self._db = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=10.0
        )
        self._lock = threading.Lock()
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def _tx(self, fn: Callable[[sqlite3.Cursor], Any]) -> Any:
        with self._lock:
            cursor = self._db.cursor()
            cursor.execute("BEGIN IMMEDIATE")
            try:
                result = fn(cursor)
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
            cursor.execute("COMMIT")
            return result

    def create(self, invocation_id: str, metadata: Any, checkpoint: Checkpoint) -> None:
        meta, data, now = check_metadata(metadata), encode_checkpoint(checkpoint), time.time()
        row = (invocation_id, meta.workflow_id, meta.workflow_version, meta.kind, data)

        def insert(cursor: sqlite3.Cursor) -> None:
            try:
                cursor.execute(
                    f"INSERT INTO invocations ({_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, 'ready', NULL, NULL, 0.0, 0, ?, ?)",
                    (*row, now, now),
                )
            except sqlite3.IntegrityError:
                raise AdkError("already_exists", "an invocation with this id exists") from None

        self._tx(insert)

    def get(self, invocation_id: str) -> InvocationRecord:
        with self._lock:
            row = self._db.execute(
                f"SELECT {_COLUMNS} FROM invocations WHERE id = ?", (invocation_id,)
            ).fetchone()
        if row is None:
            raise AdkError("not_found", "no invocation with this id")
        iid, wid, version, kind, data, phase, outcome, owner, until, revision, created, updated = (
            row
        )
        return InvocationRecord(
            invocation_id=iid,
            workflow_id=wid,
            workflow_version=version,
            kind=kind,
            checkpoint=decode_checkpoint(data),
            phase=phase,
            outcome=None if outcome is None else json.loads(outcome),
            owned=owner is not None,
            lease_until=until,
            revision=revision,
            created_at=created,
            updated_at=updated,
        )

    def claim(
        self, invocation_id: str, owner: Pid, token: str, now: float, lease: float
    ) -> InvocationRecord:
        def claim(cursor: sqlite3.Cursor) -> None:
            row = cursor.execute(
                "SELECT phase, owner, lease_until FROM invocations WHERE id = ?",
                (invocation_id,),
            ).fetchone()
            if row is None:
                raise AdkError("not_found", "no invocation with this id")
            phase, held, until = row
            if phase == "completed":
                raise AdkError("invocation_completed", "a completed invocation is immutable")
            if held is not None and now < until:
                raise AdkError("invocation_owned", "another owner holds the lease")
            cursor.execute(
                "UPDATE invocations SET phase = 'running', outcome = NULL, owner = ?, "
                "lease_until = ?, revision = revision + 1, updated_at = ? WHERE id = ?",
                (token_digest(token), now + lease, now, invocation_id),
            )

        self._tx(claim)
        return self.get(invocation_id)

    def _fenced(
        self, invocation_id: str, token: str, now: float, assignments: str, values: tuple
    ) -> None:
        """One fenced UPDATE; a refusal is diagnosed in the same transaction."""

        def update(cursor: sqlite3.Cursor) -> None:
            digest = token_digest(token)
            cursor.execute(
                f"UPDATE invocations SET {assignments}, revision = revision + 1 {_FENCE}",
                (*values, invocation_id, digest, now),
            )
            if cursor.rowcount == 1:
                return
            row = cursor.execute(
                "SELECT phase, owner FROM invocations WHERE id = ?", (invocation_id,)
            ).fetchone()
            if row is None:
                raise AdkError("not_found", "no invocation with this id")
            if row != ("running", digest):
                raise AdkError("stale_owner", "this token no longer owns the invocation")
            raise AdkError("lease_expired", "the owner's lease has expired")

        self._tx(update)

    def renew(self, invocation_id: str, token: str, now: float, lease: float) -> None:
        self._fenced(
            invocation_id, token, now, "lease_until = ?, updated_at = ?", (now + lease, now)
        )

    def checkpoint(
        self, invocation_id: str, token: str, checkpoint: Checkpoint, now: float, lease: float
    ) -> None:
        data = encode_checkpoint(checkpoint)
        self._fenced(
            invocation_id,
            token,
            now,
            "checkpoint = ?, lease_until = ?, updated_at = ?",
            (data, now + lease, now),
        )

    def finish(
        self,
        invocation_id: str,
        token: str,
        phase: str,
        outcome: Any,
        checkpoint: Checkpoint,
        now: float,
    ) -> None:
        if phase not in ("completed", "paused", "failed", "timed_out", "cancelled"):
            raise AdkError("invalid_terminal_phase", "not a terminal phase")
        stored = (
            None if outcome is None else json.dumps(outcome, sort_keys=True)
        )  # shaped by the caller
        self._fenced(
            invocation_id,
            token,
            now,
            "phase = ?, outcome = ?, checkpoint = ?, owner = NULL, lease_until = 0.0, "
            "updated_at = ?",
            (phase, stored, encode_checkpoint(checkpoint), now),
        )

    def delete(self, invocation_id: str) -> None:
        now = time.time()

        def delete(cursor: sqlite3.Cursor) -> None:
            cursor.execute(
                "DELETE FROM invocations WHERE id = ? AND (owner IS NULL OR lease_until <= ?)",
                (invocation_id, now),
            )
            if cursor.rowcount == 0:
                exists = cursor.execute(
                    "SELECT 1 FROM invocations WHERE id = ?", (invocation_id,)
                ).fetchone()
                if exists is None:
                    raise AdkError("not_found", "no invocation with this id")
                raise AdkError("invocation_owned", "a live owner holds this invocation")

        self._tx(delete)

    def raw_rows(self) -> list[tuple]:
        """Every stored row, for tests that look at what is on disk."""
        with self._lock:
            return self._db.execute(f"SELECT {_COLUMNS} FROM invocations").fetchall()
