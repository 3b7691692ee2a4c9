"""The durable invocation ledger: its protocol (`Ledger`), `RuleLedger`, `MemoryLedger`.

A ledger keeps one record per invocation id: the workflow's identity, its last
committed checkpoint, its phase (``ready`` -> ``running`` -> ``completed`` |
``failed`` | ``timed_out`` | ``cancelled`` | ``paused``), the terminal outcome, and
who owns it. Ownership is the kernel's fenced lease (`supervision.leases`) kept in
the record: `claim` hands a random token to one owner with ``lease_until = now +
lease``; `renew`, `checkpoint` and `finish` need that token *and* ``now <
lease_until``, checked in the same atomic step as the write (at exactly
``lease_until`` the lease has expired, and the record is left unchanged). Once
expired, exactly one `claim` takes it over, even from a live owner; the old token is
then ``stale_owner``. Times are explicit wall-clock seconds (`time.time()`), so the
rules are testable and shared by every process that opens the store.

A dead owner need not wait for its lease: an owner in this OS process is dead when its
`Pid` is; an owner in another OS process is dead when that process is gone (its boot
id, pid namespace, pid and start time no longer match a running process; see
`adk_actors.sessions.owner`). Liveness only ever releases early: a live owner never
extends an expired lease.

The token itself is never stored (only its SHA-256) and never shown: `get` returns an
`InvocationRecord` with ``owned`` instead. Records are bounded (`max_record_bytes`,
``record_too_large``), and a ledger given a `retention` removes completed records
once it has passed, a bounded number at a time (`RuleLedger.purge`).

`RuleLedger` runs the rules of `ledger_rules.py` over one atomic primitive;
`MemoryLedger` (here) and `LmdbLedger` (ledger_lmdb.py) supply it, so they cannot
disagree. Another store (a SQL database) may implement `Ledger` directly: the
durable layer (durable.py) uses nothing else.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from adk_actors.workflows.checkpoint import Checkpoint
from adk_actors.workflows.ledger_rules import (
    MAX_RECORD_BYTES,
    InvocationMetadata,
    InvocationRecord,
    Phase,
    StoredInvocation,
    check_invocation_id,
    check_lease,
    check_metadata,
    check_now,
    check_record_bytes,
    check_seconds,
    check_size,
    check_token,
    checkpoint_bytes,
    checkpointed,
    claim_rule,
    create_rule,
    delete_rule,
    expire_rule,
    finished,
    forget_owner,
    found,
    outcome_bytes,
    owned_rule,
    public_record,
    remember_owner,
    renewed,
    retained,
    storable_outcome,
    terminal_phase,
)
from providers.errors import AdkError
from supervision import Pid, get_logger, is_fenced_thread, token_digest

__all__ = [
    "InvocationMetadata",
    "InvocationRecord",
    "Ledger",
    "MemoryLedger",
    "RuleLedger",
    "check_invocation_id",
    "check_lease",
    "storable_outcome",
]

MAX_LIST = 10_000
"""`invocation_ids` returns at most this many ids per call; `purge` removes at most
this many records per call."""
SWEEP_SCAN = 64
"""How many records an automatic retention sweep looks at (after `create` and after
a completing `finish`), continuing where the last one stopped."""
_PAGE = 256
_log = get_logger("adk.workflows.ledger")


@runtime_checkable
class Ledger(Protocol):
    """The durable ledger protocol: all the durable layer uses.

    Every method is one atomic step: its checks and its write happen together or not
    at all, for every thread and process sharing the store. Refusals raise `AdkError`
    with a stable reason and change nothing. Times are explicit wall-clock seconds; a
    lease is valid while ``now < lease_until`` (the kernel's
    `supervision.leases.lease_expired`). A store keeps the owner token's digest
    (`supervision.leases.token_digest`) at most, and shows ``owned`` instead.
    `ledger_rules.py` has the checks and rules an implementation may reuse.
    """

    def create(self, invocation_id: str, metadata: Any, checkpoint: Checkpoint) -> None:
        """Store a new record: phase ``ready``, no owner, revision 0. `metadata` has
        ``workflow_id``, ``workflow_version`` and ``kind``. ``already_exists`` if the
        id is taken."""
        ...

    def get(self, invocation_id: str) -> InvocationRecord:
        """The record as stored (no token); ``not_found``."""
        ...

    def claim(
        self, invocation_id: str, owner: Pid, token: str, now: float, lease: float
    ) -> InvocationRecord:
        """Make `owner`, presenting `token`, the one owner until ``now + lease``: phase
        ``running``, outcome cleared, revision + 1; returns the new record. Allowed
        when nobody owns the record, when the owner's lease has expired
        (``now >= lease_until``, even if it still lives) or when the owner is known
        dead; else ``invocation_owned``. ``invocation_completed`` once completed."""
        ...

    def renew(self, invocation_id: str, token: str, now: float, lease: float) -> None:
        """Extend the lease to ``now + lease`` (revision + 1). Fenced: the record is
        ``running`` and owned by `token` (else ``stale_owner``) and ``now <
        lease_until`` (else ``lease_expired``)."""
        ...

    def checkpoint(
        self, invocation_id: str, token: str, checkpoint: Checkpoint, now: float, lease: float
    ) -> None:
        """Commit `checkpoint` and extend the lease to ``now + lease`` (revision + 1);
        fenced as `renew`. Once it returns, the checkpoint survives any crash."""
        ...

    def finish(
        self,
        invocation_id: str,
        token: str,
        phase: str,
        outcome: Any,
        checkpoint: Checkpoint,
        now: float,
    ) -> None:
        """Store the terminal `phase` (``completed``, ``paused``, ``failed``,
        ``timed_out`` or ``cancelled``), `outcome` (JSON values, already bounded and
        secret-free: `ledger_rules.storable_outcome`) and `checkpoint`, and release
        the ownership (revision + 1); fenced as `renew`. A completed record is
        immutable: no later claim."""
        ...

    def delete(self, invocation_id: str) -> None:
        """Remove a record nobody holds (no owner, or an expired or dead one); else
        ``invocation_owned``; ``not_found``."""
        ...


class RuleLedger:
    """The ledger protocol over one primitive, `_step(invocation_id, fn)`: read the
    record, let `fn` return the new record (None: delete it; the record itself:
    write nothing; raise: change nothing), write it, all atomically; plus `_load`
    (one record) and `_page` (a page of summaries in id order). `MemoryLedger` and
    `LmdbLedger` supply them.

    `retention` (seconds, None: keep) is how long a completed record stays;
    `max_record_bytes` bounds every record (``record_too_large``)."""

    def __init__(
        self, *, retention: float | None = None, max_record_bytes: int = MAX_RECORD_BYTES
    ) -> None:
        self._retention = (
            None
            if retention is None
            else check_seconds(retention, "invalid_retention", "retention")
        )
        self._max_record_bytes = check_record_bytes(max_record_bytes)
        self._sweep_after: str | None = None

    def _step(
        self,
        invocation_id: str,
        fn: Callable[[StoredInvocation | None], StoredInvocation | None],
    ) -> StoredInvocation | None:
        raise NotImplementedError

    def _load(self, invocation_id: str) -> StoredInvocation | None:
        raise NotImplementedError

    def _page(self, after: str | None, count: int) -> Sequence[tuple[str, Phase, float]]:
        """(id, phase, updated_at) of at most `count` records in id order, after `after`."""
        raise NotImplementedError

    @property
    def retention(self) -> float | None:
        """Seconds a completed record stays (None: until `delete`)."""
        return self._retention

    def create(self, invocation_id: str, metadata: Any, checkpoint: Checkpoint) -> None:
        """Store a new ``ready`` record (revision 0); ``already_exists`` if the id is taken."""
        invocation_id = check_invocation_id(invocation_id)
        meta = check_metadata(metadata)
        encoded = checkpoint_bytes(checkpoint)
        check_size(self._max_record_bytes, encoded)
        now = time.time()
        self._step(
            invocation_id, lambda current: create_rule(current, invocation_id, meta, encoded, now)
        )
        self._sweep()

    def get(self, invocation_id: str) -> InvocationRecord:
        """The public record (no token); ``not_found``."""
        return public_record(found(self._load(check_invocation_id(invocation_id))))

    def claim(
        self, invocation_id: str, owner: Pid, token: str, now: float, lease: float
    ) -> InvocationRecord:
        """Make `owner` (presenting `token`) the owner until ``now + lease``; the record
        becomes ``running`` and its outcome is cleared. ``invocation_owned`` while a live
        owner's lease runs, ``invocation_completed`` once completed."""
        invocation_id = check_invocation_id(invocation_id)
        if not isinstance(owner, Pid):
            raise AdkError("invalid_owner", "the owner is a Pid")
        token, now, lease = check_token(token), check_now(now), check_lease(lease)
        _refuse_fenced()
        previous: list[str | None] = []

        def claim(current: StoredInvocation | None) -> StoredInvocation:
            previous.append(current.owner_token_sha256 if current else None)
            return claim_rule(current, owner, token, now, lease)

        stored = self._step(invocation_id, claim)
        assert stored is not None
        forget_owner(previous[-1] if previous else None)
        remember_owner(token_digest(token), owner)
        return public_record(stored)

    def renew(self, invocation_id: str, token: str, now: float, lease: float) -> None:
        """Extend the lease to ``now + lease`` (revision + 1)."""
        invocation_id = check_invocation_id(invocation_id)
        token, now, lease = check_token(token), check_now(now), check_lease(lease)
        _refuse_fenced()
        self._step(
            invocation_id,
            lambda current: owned_rule(current, token, now, lambda s: renewed(s, now, lease)),
        )

    def checkpoint(
        self, invocation_id: str, token: str, checkpoint: Checkpoint, now: float, lease: float
    ) -> None:
        """Commit `checkpoint` and extend the lease (revision + 1)."""
        invocation_id = check_invocation_id(invocation_id)
        token, now, lease = check_token(token), check_now(now), check_lease(lease)
        encoded = checkpoint_bytes(checkpoint)
        check_size(self._max_record_bytes, encoded)
        _refuse_fenced()
        self._step(
            invocation_id,
            lambda current: owned_rule(
                current, token, now, lambda s: checkpointed(s, encoded, now, lease)
            ),
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
        """Store the terminal `phase`, `outcome` and `checkpoint` and release the
        ownership (revision + 1); ``("invalid_terminal_phase", phase)`` for a phase that
        is not terminal. The outcome is stored bounded and secret-free
        (`ledger_rules.outcome_bytes`) whoever passes it."""
        invocation_id = check_invocation_id(invocation_id)
        token, now = check_token(token), check_now(now)
        final = terminal_phase(phase)
        stored_outcome = outcome_bytes(final, outcome)
        encoded = checkpoint_bytes(checkpoint)
        check_size(self._max_record_bytes, encoded, stored_outcome)
        _refuse_fenced()
        self._step(
            invocation_id,
            lambda current: owned_rule(
                current, token, now, lambda s: finished(s, final, stored_outcome, encoded, now)
            ),
        )
        forget_owner(token_digest(token))
        if final == "completed":
            self._sweep()

    def delete(self, invocation_id: str) -> None:
        """Remove a record no live owner holds; ``invocation_owned`` otherwise."""
        invocation_id = check_invocation_id(invocation_id)
        now = time.time()
        removed: list[StoredInvocation] = []

        def delete(current: StoredInvocation | None) -> None:
            removed.append(delete_rule(current, now))
            return None

        self._step(invocation_id, delete)
        forget_owner(removed[-1].owner_token_sha256 if removed else None)

    # -- beyond the protocol: listing and retention ---------------------------------------------

    def invocation_ids(
        self,
        phases: Iterable[str] | None = None,
        *,
        after: str | None = None,
        limit: int = 1000,
    ) -> list[str]:
        """Ids of the records in one of `phases` (all if None), in id order, after
        `after`, at most `limit` (<= `MAX_LIST`): how an application finds what to
        resume after a restart. Reads a page at a time (bounded memory)."""
        limit = _check_limit(limit)
        if after is not None:
            after = check_invocation_id(after)
        wanted = None if phases is None else frozenset(phases)
        ids: list[str] = []
        for invocation_id, phase, _ in self._summaries(after):
            if wanted is None or phase in wanted:
                ids.append(invocation_id)
                if len(ids) >= limit:
                    break
        return ids

    def purge(self, *, now: float | None = None, limit: int = 1000) -> int:
        """Remove up to `limit` (<= `MAX_LIST`) completed records whose retention is
        over at `now` (default: the wall clock); returns how many. Each removal is
        its own atomic step that checks again. Without a `retention`, nothing.
        Automatic sweeps do the same for `SWEEP_SCAN` records at a time."""
        limit = _check_limit(limit)
        at = time.time() if now is None else check_now(now)
        if self._retention is None:
            return 0
        removed = 0
        for invocation_id, phase, updated_at in self._summaries(None):
            if not retained(phase, updated_at, at, self._retention):
                removed += self._expire(invocation_id, at)
                if removed >= limit:
                    break
        return removed

    def _summaries(self, after: str | None) -> Iterable[tuple[str, Phase, float]]:
        while True:
            page = self._page(after, _PAGE)
            yield from page
            if len(page) < _PAGE:
                return
            after = page[-1][0]

    def _expire(self, invocation_id: str, now: float) -> int:
        """1 if this step removed the record (its retention is over), else 0."""
        had: list[bool] = []

        def expire(current: StoredInvocation | None) -> StoredInvocation | None:
            had.append(current is not None)
            return expire_rule(current, now, self._retention)

        return int(self._step(invocation_id, expire) is None and had[-1])

    def _sweep(self) -> None:
        """One bounded retention sweep: look at the next `SWEEP_SCAN` records (from
        where the last sweep stopped, wrapping around) and remove the expired ones. A
        failure is logged, never raised: the operation that swept has succeeded."""
        if self._retention is None or is_fenced_thread():
            return
        try:
            page = self._page(self._sweep_after, SWEEP_SCAN)
            self._sweep_after = page[-1][0] if len(page) == SWEEP_SCAN else None
            now = time.time()
            for invocation_id, phase, updated_at in page:
                if not retained(phase, updated_at, now, self._retention):
                    self._expire(invocation_id, now)
        except AdkError as error:
            _log.warning("adk.workflows.ledger.sweep_failed", reason=str(error.reason)[:64])


def _check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_LIST:
        raise AdkError("invalid_limit", f"limit is 1..{MAX_LIST}")
    return limit


def _refuse_fenced() -> None:
    if is_fenced_thread():
        raise AdkError("fenced", "a killed task's writes are discarded")


class MemoryLedger(RuleLedger):
    """A ledger in a dict of this process (a lock makes each step atomic): for tests and
    for runs that need ownership and fencing but not durability. `retention` and
    `max_record_bytes` as `RuleLedger`."""

    def __init__(
        self, *, retention: float | None = None, max_record_bytes: int = MAX_RECORD_BYTES
    ) -> None:
        super().__init__(retention=retention, max_record_bytes=max_record_bytes)
        self._records: dict[str, StoredInvocation] = {}
        self._lock = threading.Lock()

    def _step(
        self,
        invocation_id: str,
        fn: Callable[[StoredInvocation | None], StoredInvocation | None],
    ) -> StoredInvocation | None:
        with self._lock:
            current = self._records.get(invocation_id)
            new = fn(current)
            if new is None:
                self._records.pop(invocation_id, None)
            elif new is not current:
                self._records[invocation_id] = new
            return new

    def _load(self, invocation_id: str) -> StoredInvocation | None:
        with self._lock:
            return self._records.get(invocation_id)

    def _page(self, after: str | None, count: int) -> Sequence[tuple[str, Phase, float]]:
        with self._lock:
            keys = sorted(self._records)
            start = 0 if after is None else bisect.bisect_right(keys, after)
            return [
                (key, self._records[key].phase, self._records[key].updated_at)
                for key in keys[start : start + count]
            ]
