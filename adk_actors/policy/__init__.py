"""Runtime policy: fail-closed agent/tool allow-deny rules, byte budgets and audit records.

A pure, thread-safe library: `RuntimePolicy.compile(config)` once, then
`check_agent`, `check_tool` and `check_content` return immutable `Decision`s, and
`audit_event` turns one into the ``runtime_policy_decision`` event to store.
"""

from adk_actors.policy.audit import (
    AUDIT_AUTHOR,
    AUDIT_EVENT_KIND,
    DENIAL_KIND,
    audit_event,
    audit_record,
    denial_error,
    is_audit_event,
    record_digest,
    tool_denial_response,
    verify_record,
)
from adk_actors.policy.config import (
    ALL,
    DEFAULT_MAX_ARGUMENT_BYTES,
    DEFAULT_MAX_CONTENT_BYTES,
    MAX_BUDGET_BYTES,
    MAX_NAME_BYTES,
    MAX_POLICY_ID_BYTES,
    MAX_SELECTOR_NAMES,
    Rules,
    Selector,
)
from adk_actors.policy.decision import (
    AGENT_INVOCATION,
    CONTENT_OPERATIONS,
    FINAL_OUTPUT,
    INPUT,
    OPERATIONS,
    REASONS,
    TOOL_CALL,
    TOOL_RESULT,
    Decision,
)
from adk_actors.policy.measure import (
    MAX_JSON_DEPTH,
    canonical_json,
    measure_arguments,
    measure_content,
)
from adk_actors.policy.runtime_policy import RuntimePolicy

__all__ = [
    "AGENT_INVOCATION",
    "ALL",
    "AUDIT_AUTHOR",
    "AUDIT_EVENT_KIND",
    "CONTENT_OPERATIONS",
    "DEFAULT_MAX_ARGUMENT_BYTES",
    "DEFAULT_MAX_CONTENT_BYTES",
    "DENIAL_KIND",
    "FINAL_OUTPUT",
    "INPUT",
    "MAX_BUDGET_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_NAME_BYTES",
    "MAX_POLICY_ID_BYTES",
    "MAX_SELECTOR_NAMES",
    "OPERATIONS",
    "REASONS",
    "TOOL_CALL",
    "TOOL_RESULT",
    "Decision",
    "Rules",
    "RuntimePolicy",
    "Selector",
    "audit_event",
    "audit_record",
    "canonical_json",
    "denial_error",
    "is_audit_event",
    "measure_arguments",
    "measure_content",
    "record_digest",
    "tool_denial_response",
    "verify_record",
]
