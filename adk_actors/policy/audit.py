"""Audit records, audit events and the model-visible denial for policy decisions.

A `Decision` becomes a `PolicyDecision` record (a fresh decision id plus a sha256
digest of everything else, so the same verdict always digests the same) and, for
storage and streaming, an immutable ``system`` event whose only action is that
record: the spec's ``runtime_policy_decision`` event. None of these carry argument
values, content, secrets or process handles.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import msgspec

from adk_actors.events import Event, EventActions, PolicyDecision
from adk_actors.policy.decision import TOOL_CALL, TOOL_RESULT, Decision
from adk_actors.policy.measure import canonical_json
from providers.errors import AdkError

AUDIT_EVENT_KIND = "runtime_policy_decision"
AUDIT_AUTHOR = "system"
DENIAL_KIND = "runtime_policy_denied"

_UNDIGESTED = frozenset({"decision_id", "digest"})


def audit_record(decision: Decision) -> PolicyDecision:
    """The JSON-safe audit record of `decision`, with a fresh id and its digest."""
    record = PolicyDecision(
        decision_id=uuid.uuid4().hex,
        policy_id=decision.policy_id,
        operation=decision.operation,
        subject=decision.subject,
        outcome=decision.outcome,
        reason=decision.reason,
        measured_bytes=decision.measured_bytes,
        policy_fingerprint=decision.policy_fingerprint,
        limit_bytes=decision.limit_bytes,
    )
    return msgspec.structs.replace(record, digest=record_digest(record))


def record_digest(record: PolicyDecision) -> str:
    """sha256 hex of the canonical JSON of every set field except the id and the digest."""
    fields = {
        name: value
        for name, value in msgspec.structs.asdict(record).items()
        if name not in _UNDIGESTED and value is not None
    }
    return hashlib.sha256(canonical_json(fields)).hexdigest()


def verify_record(record: PolicyDecision) -> bool:
    """Whether `record` still matches its digest (a corruption check, not a signature)."""
    return record.digest is not None and record.digest == record_digest(record)


def audit_event(invocation_id: str, decision: Decision | PolicyDecision) -> Event:
    """The immutable ``runtime_policy_decision`` event: author ``system``, no content,
    and `actions.policy_decisions` holding exactly the decision's audit record."""
    if not isinstance(invocation_id, str) or not invocation_id:
        raise AdkError("invalid_invocation_id", "an invocation id is a non-empty string")
    record = decision if isinstance(decision, PolicyDecision) else audit_record(decision)
    return Event.new(
        AUDIT_AUTHOR,
        invocation_id,
        None,
        actions=EventActions(policy_decisions=(record,)),
    )


def is_audit_event(event: Event) -> bool:
    """Whether `event` is a ``runtime_policy_decision`` audit event (as `audit_event` builds)."""
    return (
        event.author == AUDIT_AUTHOR
        and event.content is None
        and len(event.actions.policy_decisions) == 1
    )


def tool_denial_response(decision: Decision) -> dict[str, Any]:
    """The structural tool error the model sees instead of a denied call or result.

    Accepts a denied ``tool_call`` or ``tool_result`` decision; names the tool and the
    reason, never the arguments or the result.
    """
    if decision.allowed or decision.operation not in (TOOL_CALL, TOOL_RESULT):
        raise AdkError(
            "invalid_policy_decision", "only a denied tool_call or tool_result has a tool error"
        )
    return {
        "success": False,
        "error": {"kind": DENIAL_KIND, "reason": decision.reason, "tool": decision.subject},
    }


def denial_error(decision: Decision) -> AdkError:
    """The `AdkError("runtime_policy_denied")` a run fails with for a denied decision."""
    if decision.allowed:
        raise AdkError("invalid_policy_decision", "an allowed decision is not an error")
    return AdkError(DENIAL_KIND, f"{decision.operation} {decision.subject!r}: {decision.reason}")
