"""Durable workflow invocations: `start_durable`, `resume_durable`, `durable_status`,
`delete_durable`, and `DurablePersistence`, the coordinator's hooks into a `Ledger`.

A durable run has a stable invocation id (``inv-<uuid4>`` unless the caller picks
one) and a ledger record that outlives its coordinator, its application and its OS
process. Its coordinator creates and claims that record (a fresh random token, a
lease), commits every checkpoint to it before the engine may start the next action,
renews the lease every third of it while the run is active, and records the terminal
phase and outcome. After a crash, anyone who rebuilds the same workflow (same id,
version and kind) resumes it by id from the last committed checkpoint: a committed
step never runs again; a step whose effect happened but whose checkpoint was not
committed runs again (at least once): make such effects idempotent, keyed by
``context["invocation_id"]`` and ``context["step_id"]``.

Ownership is the ledger's fenced lease: one owner at a time; a crashed owner's
invocation is claimable as soon as its process is known dead (in this process, its
coordinator's `Pid`; in another, its OS process), else when its lease expires.

Only the `Ledger` protocol is used, so any store implementing it will do. What this
layer hands a ledger is already bounded and secret-free (`storable_outcome`), and what
a ledger raises reaches callers re-shaped the same way (`_ledger_call`).
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from adk_actors.workflows.checkpoint import (
    Checkpoint,
    GraphCursor,
    SequentialCursor,
    prepare_resume,
    validate_checkpoint,
)
from adk_actors.workflows.coordinator import Begun, start_supervised
from adk_actors.workflows.errors import exception_reason, failure_reason
from adk_actors.workflows.launch import NOT_GIVEN, check_compiled, fresh_launch, resumed_launch
from adk_actors.workflows.ledger import (
    InvocationRecord,
    Ledger,
    check_invocation_id,
    check_lease,
    storable_outcome,
)
from adk_actors.workflows.outcomes import Cancelled, Failed, Outcome, Paused
from adk_actors.workflows.spec import DEFAULT_LEASE, CompiledWorkflow
from providers.errors import AdkError
from supervision import Pid, get_logger

_log = get_logger("adk.workflows.durable")
_T = TypeVar("_T")
LEDGER_COMPONENT = "adk_workflow_ledger"


class DurablePersistence:
    """The `coordinator.Persistence` of one durable run: its ledger, invocation id and
    lease, and the owner token, which lives only here (never in a status, a log or the
    ledger, which keeps its digest). `mode` is ``"create"`` (a new invocation) or
    ``"resume"`` (claim an existing one)."""

    def __init__(
        self,
        ledger: Ledger,
        invocation_id: str,
        *,
        mode: Literal["create", "resume"],
        lease: float,
        resume_input: Any = NOT_GIVEN,
    ) -> None:
        self._ledger = ledger
        self._invocation_id = invocation_id
        self._mode = mode
        self._lease = lease
        self._resume_input = resume_input
        self._token = secrets.token_hex(32)

    def __repr__(self) -> str:
        return f"DurablePersistence({self._invocation_id!r}, mode={self._mode!r})"

    @property
    def invocation_id(self) -> str:
        """The invocation this run persists."""
        return self._invocation_id

    def begin(self, workflow: CompiledWorkflow, checkpoint: Checkpoint, owner: Pid) -> Begun:
        """Create (start) and claim the record, then adopt the *stored* checkpoint: a
        previous owner may have committed a newer one (even a pause) since the caller
        read it, so it is validated and given the resume input again here."""
        if self._mode == "create":
            self._ledger.create(self._invocation_id, _metadata(workflow), checkpoint)
        record = self._ledger.claim(
            self._invocation_id, owner, self._token, time.time(), self._lease
        )
        try:
            stored = _adoptable(workflow, record.checkpoint)
        except AdkError as error:
            self._give_back("failed", error.reason, record.checkpoint)
            raise
        try:
            ready = prepare_resume(
                workflow, stored, self._resume_input, self._resume_input is not NOT_GIVEN
            )
        except AdkError:
            self._give_back("paused", _pause_details(stored), stored)
            raise
        return Begun(ready, self._invocation_id)

    def _give_back(self, phase: str, outcome: Any, stored: Checkpoint) -> None:
        """Close a claimed record we cannot run (a pause without its input stays a
        pause; a checkpoint that does not fit fails), so no one waits on our lease."""
        try:
            self._ledger.finish(
                self._invocation_id,
                self._token,
                phase,
                storable_outcome(phase, outcome),
                stored,
                time.time(),
            )
        except AdkError as failure:  # our coordinator stops next: its claim is free anyway
            _log.warning("adk.workflows.durable.give_back_failed", reason=str(failure.reason)[:64])

    def commit(self, checkpoint: Checkpoint) -> None:
        """Commit `checkpoint` (and renew the lease) before the engine may go on."""
        self._ledger.checkpoint(
            self._invocation_id, self._token, checkpoint, time.time(), self._lease
        )

    @property
    def renew_interval(self) -> float | None:
        """A third of the lease: two renewals may fail or be late before it expires."""
        return self._lease / 3

    def renew(self) -> None:
        """Extend the lease while the run is active."""
        self._ledger.renew(self._invocation_id, self._token, time.time(), self._lease)

    def finish(self, phase: str, outcome: Outcome, checkpoint: Checkpoint) -> None:
        """Record the terminal phase, its bounded outcome and checkpoint; release."""
        self._ledger.finish(
            self._invocation_id,
            self._token,
            phase,
            stored_outcome(phase, outcome),
            checkpoint,
            time.time(),
        )


def stored_outcome(phase: str, outcome: Outcome) -> Any:
    """What a ledger keeps of an outcome (`storable_outcome`: JSON values, bounded,
    secret-free): the checkpoint is stored beside it, so a completion keeps nothing
    more, a pause its details, a failure or cancel its reason."""
    match outcome:
        case Paused(details=details):
            return storable_outcome(phase, details)
        case Failed(reason=reason) | Cancelled(reason=reason):
            return storable_outcome(phase, reason)
    return None


def _metadata(workflow: CompiledWorkflow) -> dict[str, Any]:
    return {"workflow_id": workflow.id, "workflow_version": workflow.version, "kind": workflow.kind}


def _adoptable(workflow: CompiledWorkflow, stored: Checkpoint) -> Checkpoint:
    """`stored` if `workflow` can resume from it: ``invocation_completed`` for a finished
    one, ``("invalid_durable_checkpoint", reason)`` for one that does not fit."""
    try:
        validate_checkpoint(workflow, stored)
    except AdkError as error:
        if error.reason == "checkpoint_complete":
            raise AdkError("invocation_completed", "the invocation already completed") from None
        raise AdkError(
            ("invalid_durable_checkpoint", error.reason), "the stored checkpoint does not fit"
        ) from None
    return stored


def _pause_details(stored: Checkpoint) -> Any:
    cursor = stored.cursor
    if isinstance(cursor, SequentialCursor | GraphCursor) and isinstance(cursor.pause, dict):
        return cursor.pause
    return None


def _ledger_call(operation: str, call: Callable[[], _T]) -> _T:
    """A ledger call of the public API. Its refusal keeps its reason, re-shaped
    (`errors.failure_reason`: bounded, structural, secret-free, idempotent); any other
    exception, from any store, becomes ``("invocation_ledger_failed", failure dict)``
    naming only the operation and the exception's class."""
    try:
        return call()
    except AdkError as error:
        raise AdkError(failure_reason(error.reason), f"the ledger refused {operation}") from None
    except Exception as error:
        why = exception_reason(LEDGER_COMPONENT, operation, error)
        raise AdkError(
            ("invocation_ledger_failed", why), f"the ledger failed {operation}"
        ) from None


def _get(ledger: Ledger, invocation_id: str) -> InvocationRecord:
    record = _ledger_call("get", lambda: ledger.get(check_invocation_id(invocation_id)))
    if not isinstance(record, InvocationRecord):
        why = exception_reason(LEDGER_COMPONENT, "get", TypeError())
        raise AdkError(("invocation_ledger_failed", why), "the ledger returned no record")
    return record


def _check_ledger(ledger: Any) -> Ledger:
    if ledger is None:
        raise AdkError("durable_invocation_ledger_required", "pass ledger=LmdbLedger(path)")
    if not isinstance(ledger, Ledger):
        raise AdkError("invalid_invocation_ledger", "the ledger does not implement Ledger")
    return ledger


# -- the public API --------------------------------------------------------------------------


def start_durable(
    wf: CompiledWorkflow,
    state: dict[str, Any] | None = None,
    *,
    ledger: Ledger,
    lease: float = DEFAULT_LEASE,
    invocation_id: str | None = None,
    **options: Any,
) -> tuple[str, str]:
    """Start `wf` from `state` as a durable invocation; returns ``(invocation_id,
    workflow_id)`` (the id to resume by, and the run's reference for `wait`, `status`,
    `cancel`). `options` are `start`'s (``timeout``, ``deadline``, ``max_steps``, ...).
    Refusals raise `AdkError`: ``durable_invocation_ledger_required``,
    ``invalid_lease``, ``invalid_invocation_id``, `start`'s own, and
    ``("workflow_start_failed", reason)`` for the ledger's (``already_exists``, ...)."""
    ledger = _check_ledger(ledger)
    lease = check_lease(lease)
    iid = check_invocation_id(f"inv-{uuid.uuid4()}" if invocation_id is None else invocation_id)
    persistence = DurablePersistence(ledger, iid, mode="create", lease=lease)
    launch = fresh_launch(wf, state, persistence=persistence, **options)
    start_supervised(launch)
    return iid, launch.ref


def resume_durable(
    invocation_id: str,
    wf: CompiledWorkflow,
    *,
    ledger: Ledger,
    resume_input: Any = NOT_GIVEN,
    lease: float = DEFAULT_LEASE,
    **options: Any,
) -> str:
    """Claim invocation `invocation_id` and resume it from its last committed checkpoint
    with `wf`, rebuilt with the same id, version and kind (in this process or another);
    returns the new run's reference. `resume_input` answers a pause (JSON; a paused
    invocation needs one). Refusals raise `AdkError`, before any coordinator starts:
    ``not_found``, ``invocation_workflow_mismatch``, ``invocation_completed``,
    ``("invalid_durable_checkpoint", reason)``, ``resume_input_required``,
    ``("invalid_resume_input", reason)``; and from the claim
    ``("workflow_start_failed", "invocation_owned")`` while another owner lives."""
    ledger = _check_ledger(ledger)
    lease = check_lease(lease)
    wf = check_compiled(wf)
    record = _get(ledger, invocation_id)
    differ = [
        name
        for name, stored, given in (
            ("workflow_id", record.workflow_id, wf.id),
            ("workflow_version", record.workflow_version, wf.version),
            ("kind", record.kind, wf.kind),
        )
        if stored != given
    ]
    if differ:
        raise AdkError(
            "invocation_workflow_mismatch",
            f"the invocation's workflow differs in {' and '.join(differ)}",
        )
    if record.phase == "completed":
        raise AdkError("invocation_completed", "the invocation already completed")
    checkpoint = _adoptable(wf, record.checkpoint)
    prepare_resume(wf, checkpoint, resume_input, resume_input is not NOT_GIVEN)  # fail early
    persistence = DurablePersistence(
        ledger, record.invocation_id, mode="resume", lease=lease, resume_input=resume_input
    )
    launch = resumed_launch(
        wf, checkpoint, resume_input=resume_input, persistence=persistence, **options
    )
    start_supervised(launch)
    return launch.ref


def durable_status(invocation_id: str, *, ledger: Ledger) -> InvocationRecord:
    """The invocation's ledger record (no coordinator needed): ``phase``,
    ``checkpoint``, ``outcome``, ``owned``, ``lease_until``, ``revision``, ...; never
    the owner token. ``not_found``."""
    return _get(_check_ledger(ledger), invocation_id)


def delete_durable(invocation_id: str, *, ledger: Ledger) -> None:
    """Remove an invocation no live owner holds (``invocation_owned``, ``not_found``)."""
    store = _check_ledger(ledger)
    iid = check_invocation_id(invocation_id)
    _ledger_call("delete", lambda: store.delete(iid))
