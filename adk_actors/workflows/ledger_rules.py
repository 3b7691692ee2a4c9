"""The durable ledger's records and rules: pure functions, shared by every store.

A rule takes the stored record (or None) and returns the new one, or raises
`AdkError` and changes nothing; a store (`ledger.RuleLedger`: `MemoryLedger`,
`LmdbLedger`) runs each in one atomic step. The fence is the kernel's
(`supervision.leases`): `lease_expired` decides expiry (``now >= lease_until``) and
`check_fence` the write fence; the record keeps the owner token's digest
(`token_digest`), never the token.

Also here: the argument checks, the owner-liveness test (a dead owner releases its
claim early, never later), the outcome shaping that keeps failures bounded,
structural and secret-free on disk, and the record size bound.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec

from adk_actors.sessions import owner as os_owner
from adk_actors.workflows.checkpoint import (
    MAX_CHECKPOINT_BYTES,
    Checkpoint,
    decode_checkpoint,
    encode_checkpoint,
)
from adk_actors.workflows.errors import failure_reason
from adk_actors.workflows.spec import MAX_ID_CHARS, MAX_SECONDS, Kind
from providers.errors import AdkError
from supervision import LeaseError, Pid, check_fence, lease_expired, redact_value, token_digest

Phase = Literal["ready", "running", "completed", "failed", "timed_out", "cancelled", "paused"]
TERMINAL_PHASES: frozenset[str] = frozenset(
    {"completed", "failed", "timed_out", "cancelled", "paused"}
)
RECORD_FORMAT = 1
MAX_INVOCATION_ID_BYTES = 256
MAX_TOKEN_CHARS = 256
MAX_OUTCOME_BYTES = 64 << 10
"""A stored outcome (a failure reason or pause details) as canonical JSON."""
_RECORD_OVERHEAD = 2 << 10
"""What a record holds besides its checkpoint and outcome (ids, digest, times), at most."""
MAX_RECORD_BYTES = MAX_CHECKPOINT_BYTES + MAX_OUTCOME_BYTES + _RECORD_OVERHEAD
"""The default and the ceiling of a ledger's `max_record_bytes`."""
MIN_RECORD_BYTES = 8 << 10


class InvocationMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """Which workflow an invocation runs: a resume must rebuild exactly this one."""

    workflow_id: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_CHARS)]
    workflow_version: Annotated[int, msgspec.Meta(ge=0, le=2**53)]
    kind: Kind


class StoredInvocation(msgspec.Struct, frozen=True, kw_only=True):
    """One invocation as a ledger stores it (MessagePack in LMDB). The checkpoint and
    the outcome are canonical JSON bytes; `owner_token_sha256` is the owner token's
    digest, `owner_process` the owning OS process (`sessions.owner.identity()`) and
    `owner_pid` its `Pid` number inside that process."""

    format: int = RECORD_FORMAT
    invocation_id: str
    workflow_id: str
    workflow_version: int
    kind: str
    checkpoint: bytes
    phase: Phase = "ready"
    outcome: bytes | None = None
    owner_token_sha256: str | None = None
    owner_process: str | None = None
    owner_pid: int | None = None
    lease_until: float = 0.0
    revision: int = 0
    created_at: float
    updated_at: float


class InvocationRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What `get` (and `durable_status`) shows of an invocation: never the token.
    `owned` is True while an owner holds (or last held, until a takeover or its
    `finish`) the lease; `lease_until` is 0.0 when no one owns it. `outcome` is
    None, a pause's details, or a failure or cancel reason, as JSON values."""

    invocation_id: str
    workflow_id: str
    workflow_version: int
    kind: str
    checkpoint: Checkpoint
    phase: Phase
    outcome: Any
    owned: bool
    lease_until: float
    revision: int
    created_at: float
    updated_at: float


# -- argument checks -------------------------------------------------------------------------


def check_invocation_id(invocation_id: Any) -> str:
    """A non-empty str of at most `MAX_INVOCATION_ID_BYTES` UTF-8 bytes without control
    characters; else ``invalid_invocation_id``."""
    if isinstance(invocation_id, str) and invocation_id:
        try:
            size = len(invocation_id.encode("utf-8"))
        except UnicodeEncodeError:
            size = 0
        if 0 < size <= MAX_INVOCATION_ID_BYTES and invocation_id.isprintable():
            return invocation_id
    raise AdkError(
        "invalid_invocation_id",
        f"an invocation id is a printable string of 1..{MAX_INVOCATION_ID_BYTES} UTF-8 bytes",
    )


def check_token(token: Any) -> str:
    """A non-empty ASCII str of at most `MAX_TOKEN_CHARS`; else ``invalid_owner_token``."""
    if isinstance(token, str) and 0 < len(token) <= MAX_TOKEN_CHARS and token.isascii():
        return token
    raise AdkError("invalid_owner_token", "an owner token is a non-empty ASCII string")


def check_now(now: Any) -> float:
    """A finite number of wall-clock seconds; else ``invalid_time``."""
    if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
        raise AdkError("invalid_time", "now is a finite number of wall-clock seconds")
    return float(now)


def check_seconds(value: Any, reason: str, what: str) -> float:
    """More than 0 and at most `MAX_SECONDS` seconds; else `reason`."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= MAX_SECONDS
    ):
        raise AdkError(reason, f"{what} is > 0 and <= {MAX_SECONDS} seconds")
    return float(value)


def check_lease(lease: Any) -> float:
    """A lease of more than 0 and at most `MAX_SECONDS` seconds; else ``invalid_lease``."""
    return check_seconds(lease, "invalid_lease", "a lease")


def check_record_bytes(value: Any) -> int:
    """A ledger's `max_record_bytes`: `MIN_RECORD_BYTES`..`MAX_RECORD_BYTES`."""
    if type(value) is int and MIN_RECORD_BYTES <= value <= MAX_RECORD_BYTES:
        return value
    raise AdkError(
        "invalid_max_record_bytes",
        f"max_record_bytes is an int of {MIN_RECORD_BYTES}..{MAX_RECORD_BYTES}",
    )


def check_metadata(metadata: Any) -> InvocationMetadata:
    """`metadata` (a mapping or an object with the fields) as `InvocationMetadata`."""
    try:
        return msgspec.convert(metadata, InvocationMetadata, from_attributes=True)
    except msgspec.ValidationError:
        raise AdkError(
            "invalid_metadata",
            f"metadata has workflow_id (a str of 1..{MAX_ID_CHARS} chars), "
            "workflow_version (an int >= 0) and kind (a workflow kind)",
        ) from None


def checkpoint_bytes(checkpoint: Any) -> bytes:
    """A `Checkpoint` as the canonical JSON a record stores; else ``invalid_checkpoint``."""
    if not isinstance(checkpoint, Checkpoint):
        raise AdkError("invalid_checkpoint", "a ledger stores a Checkpoint")
    return encode_checkpoint(checkpoint)


def check_size(limit: int, checkpoint: bytes, outcome: bytes | None = None) -> None:
    """Refuse a record whose checkpoint and outcome would pass `limit` bytes with
    ``record_too_large`` (before any change)."""
    size = len(checkpoint) + (0 if outcome is None else len(outcome)) + _RECORD_OVERHEAD
    if size > limit:
        raise AdkError("record_too_large", f"a ledger record holds at most {limit} bytes")


# -- who owns what, in this OS process --------------------------------------------------------

_local_owners: dict[str, Pid] = {}
"""Token digest -> owner `Pid`, for the claims made in this OS process (another process
cannot look a Pid up, so its owners are judged by their OS process instead)."""
_local_lock = threading.Lock()
_MAX_LOCAL_OWNERS = 4096


def remember_owner(digest: str, owner: Pid) -> None:
    """Note the `Pid` behind a claim made in this OS process (for `owner_is_dead`)."""
    with _local_lock:
        if len(_local_owners) >= _MAX_LOCAL_OWNERS:  # forget the dead (liveness only)
            for key in [key for key, pid in _local_owners.items() if not pid.is_alive()]:
                del _local_owners[key]
        _local_owners[digest] = owner


def forget_owner(digest: str | None) -> None:
    """Forget a claim that ended (finished, taken over or deleted)."""
    if digest is not None:
        with _local_lock:
            _local_owners.pop(digest, None)


def owner_is_dead(stored: StoredInvocation) -> bool:
    """Is the record's owner certainly gone? Only ever True when it is (doubt: False)."""
    if stored.owner_process is None or stored.owner_token_sha256 is None:
        return False
    if stored.owner_process == os_owner.identity():
        with _local_lock:
            pid = _local_owners.get(stored.owner_token_sha256)
        return pid is not None and not pid.is_alive()
    return os_owner.owner_gone(stored.owner_process)


# -- the rules (pure: a record in, a record out, or a refusal) ----------------------------------


def claimable(stored: StoredInvocation, now: float) -> bool:
    """No owner (never claimed, or finished), or a running one whose lease has expired
    (``now >= lease_until``) or who is dead."""
    if stored.owner_token_sha256 is None:
        return True
    return stored.phase == "running" and (
        lease_expired(stored.lease_until, now) or owner_is_dead(stored)
    )


def create_rule(
    current: StoredInvocation | None,
    invocation_id: str,
    metadata: InvocationMetadata,
    checkpoint: bytes,
    now: float,
) -> StoredInvocation:
    """A new ``ready`` record (revision 0); ``already_exists`` if there is one."""
    if current is not None:
        raise AdkError("already_exists", "an invocation with this id exists")
    return StoredInvocation(
        invocation_id=invocation_id,
        workflow_id=metadata.workflow_id,
        workflow_version=metadata.workflow_version,
        kind=metadata.kind,
        checkpoint=checkpoint,
        created_at=now,
        updated_at=now,
    )


def claim_rule(
    current: StoredInvocation | None,
    owner: Pid,
    token: str,
    now: float,
    lease: float,
) -> StoredInvocation:
    """`owner` (presenting `token`) owns the record until ``now + lease``: phase
    ``running``, outcome cleared. ``invocation_completed``, ``invocation_owned``."""
    stored = found(current)
    if stored.phase == "completed":
        raise AdkError("invocation_completed", "a completed invocation is immutable")
    if not claimable(stored, now):
        raise AdkError("invocation_owned", "another owner holds this invocation's lease")
    return msgspec.structs.replace(
        stored,
        phase="running",
        outcome=None,
        owner_token_sha256=token_digest(token),
        owner_process=os_owner.identity(),
        owner_pid=owner.number,
        lease_until=now + lease,
        revision=stored.revision + 1,
        updated_at=now,
    )


def owned_rule(
    current: StoredInvocation | None,
    token: str,
    now: float,
    change: Callable[[StoredInvocation], StoredInvocation],
) -> StoredInvocation:
    """The write fence of `renew`, `checkpoint` and `finish`: running, this token, and
    ``now < lease_until`` (the kernel's `check_fence`); a matching token at or past
    expiry is ``lease_expired`` (it cannot revive itself), anything else
    ``stale_owner``."""
    stored = found(current)
    held = stored.owner_token_sha256 if stored.phase == "running" else None
    try:
        check_fence(held, token_digest(token), stored.lease_until, now)
    except LeaseError as refused:
        raise AdkError(refused.reason, "the owner token does not hold a valid lease") from None
    return change(stored)


def renewed(stored: StoredInvocation, now: float, lease: float) -> StoredInvocation:
    """The lease extended to ``now + lease``."""
    return msgspec.structs.replace(
        stored, lease_until=now + lease, revision=stored.revision + 1, updated_at=now
    )


def checkpointed(
    stored: StoredInvocation, checkpoint: bytes, now: float, lease: float
) -> StoredInvocation:
    """`checkpoint` committed, the lease extended to ``now + lease``."""
    return msgspec.structs.replace(
        stored,
        checkpoint=checkpoint,
        lease_until=now + lease,
        revision=stored.revision + 1,
        updated_at=now,
    )


def finished(
    stored: StoredInvocation, phase: Phase, outcome: bytes | None, checkpoint: bytes, now: float
) -> StoredInvocation:
    """The terminal `phase`, `outcome` and `checkpoint`; no owner any more."""
    return msgspec.structs.replace(
        stored,
        checkpoint=checkpoint,
        phase=phase,
        outcome=outcome,
        owner_token_sha256=None,
        owner_process=None,
        owner_pid=None,
        lease_until=0.0,
        revision=stored.revision + 1,
        updated_at=now,
    )


def delete_rule(current: StoredInvocation | None, now: float) -> StoredInvocation:
    """The record to remove if nobody holds it; else ``invocation_owned``."""
    stored = found(current)
    if not claimable(stored, now):
        raise AdkError("invocation_owned", "a live owner holds this invocation")
    return stored


def retained(phase: str, updated_at: float, now: float, retention: float | None) -> bool:
    """Does a record stay? Everything does, but a ``completed`` one whose retention
    ran out (``now >= updated_at + retention``: completed records never change, so
    `updated_at` is when it completed)."""
    return retention is None or phase != "completed" or now < updated_at + retention


def expire_rule(
    current: StoredInvocation | None, now: float, retention: float | None
) -> StoredInvocation | None:
    """None (remove it) for a record whose retention is over; else the record itself,
    unchanged (a store writes nothing then)."""
    if current is None or retained(current.phase, current.updated_at, now, retention):
        return current
    return None


def found(current: StoredInvocation | None) -> StoredInvocation:
    """`current`, or ``not_found``."""
    if current is None:
        raise AdkError("not_found", "no invocation with this id")
    return current


def terminal_phase(phase: Any) -> Phase:
    """`phase` if it ends a run; else ``("invalid_terminal_phase", phase)`` (bounded)."""
    if phase not in TERMINAL_PHASES:
        bounded = phase if isinstance(phase, str) and len(phase) <= 64 else "invalid"
        raise AdkError(("invalid_terminal_phase", bounded), "not a terminal phase")
    return phase  # type: ignore[no-any-return]


# -- outcomes and the public view --------------------------------------------------------------


def storable_outcome(phase: str, outcome: Any) -> Any:
    """The outcome as a ledger keeps it (JSON-encodable): secret-named keys redacted;
    failure and cancel reasons re-shaped (`errors.failure_reason`), so no caller can
    put an arbitrary payload on disk; too large (`MAX_OUTCOME_BYTES`) or not JSON: a
    bounded failure dict instead. Idempotent. The durable layer hands every store
    outcomes of this shape."""
    return _shaped(phase, outcome)[0]


def outcome_bytes(phase: str, outcome: Any) -> bytes | None:
    """`storable_outcome` as canonical JSON bytes (None for no outcome)."""
    return _shaped(phase, outcome)[1]


_INVALID_OUTCOME = {
    "component": "adk_workflow_ledger",
    "operation": "finish",
    "reason": "invalid_outcome",
}


def _shaped(phase: str, outcome: Any) -> tuple[Any, bytes | None]:
    if outcome is None:
        return None, None
    value = failure_reason(outcome) if phase in ("failed", "cancelled", "timed_out") else outcome
    try:
        value = redact_value(msgspec.to_builtins(value))
        encoded = msgspec.json.encode(value, order="sorted")
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError):
        encoded = b""
    if not encoded or len(encoded) > MAX_OUTCOME_BYTES:
        value = dict(_INVALID_OUTCOME)
        encoded = msgspec.json.encode(value, order="sorted")
    return value, encoded


def public_record(stored: StoredInvocation) -> InvocationRecord:
    """The public view of a stored record (decodes its checkpoint and outcome)."""
    try:
        checkpoint = decode_checkpoint(stored.checkpoint)
        outcome = None if stored.outcome is None else msgspec.json.decode(stored.outcome)
    except AdkError:
        raise AdkError("invalid_ledger_record", "the stored checkpoint does not decode") from None
    except msgspec.DecodeError:
        raise AdkError("invalid_ledger_record", "the stored outcome does not decode") from None
    return InvocationRecord(
        invocation_id=stored.invocation_id,
        workflow_id=stored.workflow_id,
        workflow_version=stored.workflow_version,
        kind=stored.kind,
        checkpoint=checkpoint,
        phase=stored.phase,
        outcome=outcome,
        owned=stored.owner_token_sha256 is not None,
        lease_until=stored.lease_until,
        revision=stored.revision,
        created_at=stored.created_at,
        updated_at=stored.updated_at,
    )
