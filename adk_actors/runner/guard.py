"""Where a Runner applies its runtime policy, and what a denial leaves behind.

Each check is fail-closed. A denial is stored (and streamed) as one immutable
``system`` audit event that holds no values; the denied value itself is never
stored: a denied agent or input stores no user event, a denied tool call or tool
result becomes a structural error the model sees, a denied final output fails the
run with nothing stored. Without a policy every check passes and nothing is stored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adk_actors.events import Event
from adk_actors.policy import (
    FINAL_OUTPUT,
    INPUT,
    TOOL_RESULT,
    RuntimePolicy,
    audit_event,
    denial_error,
    tool_denial_response,
)
from adk_actors.policy.decision import Decision
from providers.content import Content, FunctionCallPart, TextPart
from providers.errors import AdkError


class Guard:
    """One invocation's policy checks; `store` records the audit events."""

    def __init__(
        self,
        policy: RuntimePolicy | None,
        invocation_id: str,
        store: Callable[[Event], None],
    ) -> None:
        self.policy = policy
        self.invocation_id = invocation_id
        self.store = store

    def admit(self, agent: str, message: Content) -> None:
        """The agent may run, and the user's input fits; raises `runtime_policy_denied`."""
        if self.policy is None:
            return
        for decision in (
            self.policy.check_agent(agent),
            self.policy.check_content(INPUT, _measurable(message), subject=agent),
        ):
            self._refuse_if_denied(decision)

    def tool_call(self, call: FunctionCallPart) -> dict[str, Any] | None:
        """None when the call may run, else the structural error the model sees."""
        if self.policy is None:
            return None
        decision = self.policy.check_tool(call.name, dict(call.args))
        return None if decision.allowed else self._denied_tool(decision)

    def tool_result(self, call: FunctionCallPart, payload: dict[str, Any]) -> dict[str, Any]:
        """The payload, or a policy error in its place (the result is never stored)."""
        if self.policy is None:
            return payload
        decision = self.policy.check_content(TOOL_RESULT, payload, subject=call.name)
        return payload if decision.allowed else self._denied_tool(decision)

    def final(self, agent: str, output: str | Content) -> None:
        """The final output fits; raises `runtime_policy_denied` (nothing is stored)."""
        if self.policy is None:
            return
        value = _measurable(output) if isinstance(output, Content) else output
        self._refuse_if_denied(self.policy.check_content(FINAL_OUTPUT, value, subject=agent))

    def _denied_tool(self, decision: Decision) -> dict[str, Any]:
        self.store(audit_event(self.invocation_id, decision))
        return tool_denial_response(decision)

    def _refuse_if_denied(self, decision: Decision) -> None:
        if decision.allowed:
            return
        self.store(audit_event(self.invocation_id, decision))
        details = {
            "operation": decision.operation,
            "subject": decision.subject,
            "reason": decision.reason,
        }
        raise AdkError(("runtime_policy_denied", details), denial_error(decision).detail)


def _measurable(message: Content) -> str | Content:
    """Text-only content is measured as its UTF-8 text; anything else canonically."""
    if all(isinstance(part, TextPart) for part in message.parts):
        return message.text_value()
    return message
