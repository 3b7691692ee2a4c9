"""`RuntimePolicy`: a compiled, immutable, fail-closed allow/deny and byte-budget policy.

Compile once (`RuntimePolicy.compile(config)`), then share it freely between
threads: checks are pure functions of the policy and their inputs. Every check
returns a `Decision`; none raises for a bad subject or value (those are denials),
only for a programming error such as an unknown content operation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from adk_actors.policy import decision as _d
from adk_actors.policy.config import POLICY_SCHEMA_VERSION, Rules, normalize_subject, parse
from adk_actors.policy.decision import Decision
from adk_actors.policy.measure import measure_arguments, measure_content
from providers.errors import AdkError


@dataclass(frozen=True, slots=True)
class RuntimePolicy:
    """A compiled runtime policy; build it with `RuntimePolicy.compile`, not directly."""

    id: str
    fingerprint: str
    agents: Rules
    tools: Rules
    max_argument_bytes: int
    max_content_bytes: int

    @classmethod
    def compile(cls, config: Mapping[str, Any] | RuntimePolicy) -> RuntimePolicy:
        """Validate `config` strictly and compile it once; a compiled policy passes through."""
        if isinstance(config, RuntimePolicy):
            return config
        parsed = parse(config)
        return cls(
            id=parsed.id,
            fingerprint=parsed.fingerprint,
            agents=parsed.agents,
            tools=parsed.tools,
            max_argument_bytes=parsed.max_argument_bytes,
            max_content_bytes=parsed.max_content_bytes,
        )

    def to_config(self) -> dict[str, Any]:
        """The normalized config (JSON-safe; `compile` accepts it back unchanged)."""
        return {
            "id": self.id,
            "agents": self.agents.to_config(),
            "tools": self.tools.to_config(),
            "max_argument_bytes": self.max_argument_bytes,
            "max_content_bytes": self.max_content_bytes,
        }

    def describe(self) -> dict[str, Any]:
        """JSON-safe metadata for status pages: the normalized config plus its fingerprint."""
        return {
            "schema_version": POLICY_SCHEMA_VERSION,
            "fingerprint": self.fingerprint,
            **self.to_config(),
        }

    def check_agent(self, name: object) -> Decision:
        """May agent `name` be invoked? (Input content is checked by `check_content`.)"""
        return self._check(_d.AGENT_INVOCATION, name, self.agents, None, None)

    def check_tool(self, name: object, args: object) -> Decision:
        """May the resolved tool `name` run with `args`? Arguments are measured only if
        the name is allowed, as canonical JSON against `max_argument_bytes`."""
        return self._check(
            _d.TOOL_CALL,
            name,
            self.tools,
            (measure_arguments, self.max_argument_bytes, _d.ARGUMENT_BUDGET_EXCEEDED),
            args,
        )

    def check_content(
        self, operation: str, value: object, *, subject: str | None = None
    ) -> Decision:
        """Does `value` fit `max_content_bytes`? `operation` is one of `CONTENT_OPERATIONS`;
        `subject` names whose content it is (an agent or tool), defaulting to `operation`."""
        if operation not in _d.CONTENT_OPERATIONS:
            raise AdkError(
                "invalid_policy_operation",
                f"content operations are {', '.join(_d.CONTENT_OPERATIONS)}",
            )
        return self._check(
            operation,
            operation if subject is None else subject,
            None,
            (measure_content, self.max_content_bytes, _d.CONTENT_BUDGET_EXCEEDED),
            value,
        )

    def _check(
        self,
        operation: str,
        subject: object,
        rules: Rules | None,
        budget: tuple[Callable[[object], int], int, str] | None,
        value: object,
    ) -> Decision:
        """Subject, then allow/deny, then budget; any unexpected failure denies."""
        name = normalize_subject(subject)
        if name is None:
            return self._decide(operation, _d.INVALID_SUBJECT_NAME, _d.INVALID_SUBJECT, budget)
        try:
            refusal = rules.refusal(name) if rules is not None else None
            if refusal is not None:
                return self._decide(operation, name, refusal, budget)
            if budget is None:
                return self._decide(operation, name, _d.ALLOWED, None)
            measure, limit, exceeded = budget
            try:
                size = measure(value)
            except AdkError as error:
                return self._decide(operation, name, str(error.reason), budget)
            reason = _d.ALLOWED if size <= limit else exceeded
            return self._decide(operation, name, reason, budget, size)
        except Exception:  # fail closed: a policy bug must never allow
            return self._decide(operation, name, _d.POLICY_EVALUATION_FAILED, budget)

    def _decide(
        self,
        operation: str,
        subject: str,
        reason: str,
        budget: tuple[Callable[[object], int], int, str] | None,
        measured: int | None = None,
    ) -> Decision:
        """Build the decision; allowed exactly when the reason is ``allowed``."""
        return Decision(
            allowed=reason == _d.ALLOWED,
            reason=reason,
            operation=operation,
            subject=subject,
            policy_id=self.id,
            policy_fingerprint=self.fingerprint,
            measured_bytes=measured,
            limit_bytes=budget[1] if budget is not None else None,
        )
