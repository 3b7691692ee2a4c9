"""`Decision`: the immutable result of one runtime-policy check.

A decision names what was checked (operation and subject), whether it is allowed
and why, and the byte counts involved. It carries no argument values, content,
secrets or process handles, so it can be logged, audited or returned as is.
"""

from __future__ import annotations

import msgspec

AGENT_INVOCATION = "agent_invocation"
TOOL_CALL = "tool_call"
INPUT = "input"
TOOL_RESULT = "tool_result"
FINAL_OUTPUT = "final_output"
CONTENT_OPERATIONS = (INPUT, TOOL_RESULT, FINAL_OUTPUT)
OPERATIONS = (AGENT_INVOCATION, TOOL_CALL, *CONTENT_OPERATIONS)

ALLOWED = "allowed"
NOT_ALLOWED = "not_allowed"
EXPLICITLY_DENIED = "explicitly_denied"
ARGUMENT_BUDGET_EXCEEDED = "argument_budget_exceeded"
CONTENT_BUDGET_EXCEEDED = "content_budget_exceeded"
INVALID_SUBJECT = "invalid_subject"
INVALID_ARGUMENTS = "invalid_arguments"
INVALID_CONTENT = "invalid_content"
POLICY_EVALUATION_FAILED = "policy_evaluation_failed"
REASONS = (
    ALLOWED,
    NOT_ALLOWED,
    EXPLICITLY_DENIED,
    ARGUMENT_BUDGET_EXCEEDED,
    CONTENT_BUDGET_EXCEEDED,
    INVALID_SUBJECT,
    INVALID_ARGUMENTS,
    INVALID_CONTENT,
    POLICY_EVALUATION_FAILED,
)

INVALID_SUBJECT_NAME = "<invalid>"


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """One policy verdict. `measured_bytes` is None when nothing was measured (a denied
    or malformed subject, a value with no canonical form, or an agent check)."""

    allowed: bool
    reason: str
    operation: str
    subject: str
    policy_id: str
    policy_fingerprint: str
    measured_bytes: int | None = None
    limit_bytes: int | None = None

    @property
    def outcome(self) -> str:
        """``"allow"`` or ``"deny"``, the audit record's spelling of `allowed`."""
        return "allow" if self.allowed else "deny"
