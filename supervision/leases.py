"""Fenced leases: one owner per key at a time, proven by a token.

`acquire(key, owner, lease)` returns a `Lease` whose `token` the owner presents to
`renew`, `release`, `check` and `fenced_commit`. The lease is valid while
``now < lease_until``: at exactly `lease_until` it has expired. An expired lease can
be taken over by exactly one new owner (the acquire is one atomic step); the old
token is then stale and everything it presents is rejected. `revision` increases on
every acquire and renewal.

Two implementations share these rules: `MemoryLeases` (a dict under a lock) and
`LmdbLeases` (one LMDB environment, one write transaction per step, safe across OS
processes sharing the file).

Clocks: a lease records its expiry on the monotonic clock and on the wall clock, with
the boot it was taken in. Within the same boot the monotonic clock decides (immune to
wall-clock jumps); after a reboot, monotonic instants mean nothing, so the wall clock
decides. A wrong guess can only cost liveness, never safety: a stale token is refused.

The rules themselves are public for stores that keep a lease beside their own records
and take the time as an argument (the durable workflow ledger): `lease_expired` (the
one expiry rule), `check_fence` (the write fence: the holder's token, not expired) and
`token_digest` (what such a store keeps instead of the token).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import lmdb
import msgspec

from supervision.errors import KernelError
from supervision.process import is_fenced_thread
from supervision.wakeups import before_blocking

T = TypeVar("T")

MAX_KEY_BYTES = 256
MAX_OWNER_BYTES = 256
MAX_LEASE_SECONDS = 86_400.0


class LeaseError(KernelError):
    """A lease operation was refused: ``lease_held``, ``lease_expired``, ``stale_owner``,
    ``not_found``, ``invalid_lease`` or ``fenced``."""


class Lease(msgspec.Struct, frozen=True):
    """The current holder of a key."""

    key: str
    owner: str
    token: str
    revision: int
    lease_until_mono: float
    lease_until_wall: float
    boot_id: str


class Clock(Protocol):
    def __call__(self) -> tuple[float, float]:
        """(monotonic seconds, wall seconds)."""
        ...


def system_clock() -> tuple[float, float]:
    return time.monotonic(), time.time()


def _read_boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown-boot"


BOOT_ID = _read_boot_id()


def lease_expired(lease_until: float, now: float) -> bool:
    """The expiry rule: a lease is valid while ``now < lease_until``; at exactly
    `lease_until` it has expired (and a NaN on either side counts as expired)."""
    return not now < lease_until


def token_digest(token: str) -> str:
    """The SHA-256 (hex) of an owner token: what a store keeps when the token itself
    must never be written down; `check_fence` then compares digests."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def check_fence(
    held: str | None, presented: str, lease_until: float, now: float, key: str = ""
) -> None:
    """The write fence, with an explicit clock: `presented` must be the token `held`
    holds (compared in constant time; None: nobody holds it), else ``stale_owner``;
    and the lease must not have expired at `now` (`lease_expired`), else
    ``lease_expired``: a holder whose lease ran out cannot revive it, even before
    anyone takes over. Both refusals are `LeaseError`s."""
    if (
        held is None
        or not isinstance(presented, str)
        or not hmac.compare_digest(
            held.encode("utf-8", "surrogatepass"), presented.encode("utf-8", "surrogatepass")
        )
    ):
        raise LeaseError("stale_owner", f"the token no longer holds {key!r}")
    if lease_expired(lease_until, now):
        raise LeaseError("lease_expired", f"the lease on {key!r} has expired")


class _Rules:
    """The lease rules, independent of where records are stored."""

    def __init__(self, clock: Clock, boot_id: str) -> None:
        self.clock = clock
        self.boot_id = boot_id

    def _until_and_now(self, lease: Lease) -> tuple[float, float]:
        """The clock that decides for `lease`: monotonic in its boot, else the wall."""
        mono, wall = self.clock()
        if lease.boot_id == self.boot_id:
            return lease.lease_until_mono, mono
        return lease.lease_until_wall, wall

    def is_live(self, lease: Lease) -> bool:
        return not lease_expired(*self._until_and_now(lease))

    def new_lease(self, key: str, owner: str, seconds: float, revision: int) -> Lease:
        mono, wall = self.clock()
        return Lease(
            key,
            owner,
            secrets.token_hex(16),
            revision,
            mono + seconds,
            wall + seconds,
            self.boot_id,
        )

    def renewed(self, lease: Lease, seconds: float) -> Lease:
        mono, wall = self.clock()
        return msgspec.structs.replace(
            lease,
            revision=lease.revision + 1,
            lease_until_mono=mono + seconds,
            lease_until_wall=wall + seconds,
            boot_id=self.boot_id,
        )

    def acquire(self, current: Lease | None, key: str, owner: str, seconds: float) -> Lease:
        _check_args(key, owner, seconds)
        if current is not None and self.is_live(current):
            raise LeaseError(
                "lease_held", f"key {key!r} is leased until its holder releases it or it expires"
            )
        return self.new_lease(key, owner, seconds, 1 if current is None else current.revision + 1)

    def holder(self, current: Lease | None, key: str, token: str) -> Lease:
        """The lease `token` holds on `key`, if it is still valid."""
        if current is None:
            raise LeaseError("not_found", f"no lease on {key!r}")
        check_fence(current.token, token, *self._until_and_now(current), key=key)
        return current


def _check_args(key: str, owner: str, seconds: float) -> None:
    if not isinstance(key, str) or not key or len(key.encode()) > MAX_KEY_BYTES:
        raise LeaseError(
            "invalid_lease", f"key must be a non-empty string of at most {MAX_KEY_BYTES} bytes"
        )
    if not isinstance(owner, str) or not owner or len(owner.encode()) > MAX_OWNER_BYTES:
        raise LeaseError(
            "invalid_lease", f"owner must be a non-empty string of at most {MAX_OWNER_BYTES} bytes"
        )
    _check_seconds(seconds)


def _check_seconds(seconds: float) -> None:
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not 0 < seconds <= MAX_LEASE_SECONDS
    ):
        raise LeaseError("invalid_lease", f"lease must be > 0 and <= {MAX_LEASE_SECONDS} seconds")


def _refuse_fenced() -> None:
    if is_fenced_thread():
        raise LeaseError("fenced", "this process was killed; its commits are discarded")


class LeaseStore(Protocol):
    def acquire(self, key: str, owner: str, lease: float) -> Lease: ...
    def renew(self, key: str, token: str, lease: float) -> Lease: ...
    def release(self, key: str, token: str) -> None: ...
    def check(self, key: str, token: str) -> Lease: ...
    def get(self, key: str) -> Lease | None: ...


class MemoryLeases:
    """Leases in a dict owned by this process (a lock makes each step atomic)."""

    def __init__(self, clock: Clock = system_clock, boot_id: str = BOOT_ID) -> None:
        self._rules = _Rules(clock, boot_id)
        self._leases: dict[str, Lease] = {}
        self._lock = threading.Lock()

    def acquire(self, key: str, owner: str, lease: float) -> Lease:
        with self._lock:
            new = self._rules.acquire(self._leases.get(key), key, owner, lease)
            self._leases[key] = new
            return new

    def renew(self, key: str, token: str, lease: float) -> Lease:
        _check_seconds(lease)
        with self._lock:
            current = self._rules.holder(self._leases.get(key), key, token)
            renewed = self._rules.renewed(current, lease)
            self._leases[key] = renewed
            return renewed

    def release(self, key: str, token: str) -> None:
        with self._lock:
            current = self._leases.get(key)
            if current is None or current.token != token:
                raise LeaseError("stale_owner", f"the token no longer holds {key!r}")
            del self._leases[key]

    def check(self, key: str, token: str) -> Lease:
        with self._lock:
            return self._rules.holder(self._leases.get(key), key, token)

    def get(self, key: str) -> Lease | None:
        with self._lock:
            return self._leases.get(key)

    def fenced_commit(self, key: str, token: str, apply: Callable[[], T]) -> T:
        """Run `apply` only while `token` holds `key`, with no lease step in between.

        Refused with ``fenced`` when called by a process that has been killed, before or
        while `apply` runs. In memory nothing can roll back what `apply` changed, so keep
        `apply` to a single assignment; `LmdbLeases` aborts the whole transaction.
        """
        _refuse_fenced()
        with self._lock:
            self._rules.holder(self._leases.get(key), key, token)
            result = apply()
            _refuse_fenced()  # killed while applying: the caller hears it was not committed
            return result


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Lease)


class LmdbLeases:
    """Leases in an LMDB environment: every step is one write transaction.

    Several threads and several OS processes may share one environment path; LMDB's
    writer lock serialises the steps, so an expired lease is taken over exactly once.
    """

    DB_NAME = b"supervision.leases"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock = system_clock,
        boot_id: str = BOOT_ID,
        map_size: int = 64 * 1024 * 1024,
    ) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        self._env = lmdb.open(str(path), map_size=map_size, max_dbs=16, subdir=True)
        self._db = self._env.open_db(self.DB_NAME)
        self._rules = _Rules(clock, boot_id)

    @property
    def env(self) -> Any:
        """The LMDB environment, for callers that commit their own data with `fenced_commit`."""
        return self._env

    def close(self) -> None:
        self._env.close()

    def _read(self, txn: Any, key: str) -> Lease | None:
        raw = txn.get(key.encode(), db=self._db)
        return None if raw is None else _decoder.decode(raw)

    def _write(self, txn: Any, lease: Lease) -> None:
        txn.put(lease.key.encode(), _encoder.encode(lease), db=self._db)

    def acquire(self, key: str, owner: str, lease: float) -> Lease:
        _check_args(key, owner, lease)
        before_blocking()  # every write step: LMDB's writer lock, then a commit with fsync
        with self._env.begin(write=True) as txn:
            new = self._rules.acquire(self._read(txn, key), key, owner, lease)
            self._write(txn, new)
            return new

    def renew(self, key: str, token: str, lease: float) -> Lease:
        _check_seconds(lease)
        before_blocking()
        with self._env.begin(write=True) as txn:
            current = self._rules.holder(self._read(txn, key), key, token)
            renewed = self._rules.renewed(current, lease)
            self._write(txn, renewed)
            return renewed

    def release(self, key: str, token: str) -> None:
        before_blocking()
        with self._env.begin(write=True) as txn:
            current = self._read(txn, key)
            if current is None or current.token != token:
                raise LeaseError("stale_owner", f"the token no longer holds {key!r}")
            txn.delete(key.encode(), db=self._db)

    def check(self, key: str, token: str) -> Lease:
        with self._env.begin() as txn:
            return self._rules.holder(self._read(txn, key), key, token)

    def get(self, key: str) -> Lease | None:
        with self._env.begin() as txn:
            return self._read(txn, key)

    def fenced_commit(self, key: str, token: str, apply: Callable[[Any], T]) -> T:
        """Run `apply(txn)` in the same write transaction that checks the lease.

        Whatever `apply` writes commits only if `token` still holds `key`; if `apply`
        raises, nothing commits. Refused with ``fenced`` when called by a killed process.
        """
        _refuse_fenced()
        before_blocking()
        with self._env.begin(write=True) as txn:
            self._rules.holder(self._read(txn, key), key, token)
            result = apply(txn)
            _refuse_fenced()  # killed while applying: raising here aborts the transaction
            return result
