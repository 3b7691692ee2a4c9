"""The terminal result of a planning run: built, bounded and checked here.

A result is a JSON object with exactly the reference's keys::

    result_schema_version, status, plan, steps_executed, replans,
    duration_ms, observations, result, error, metadata

``status`` is ``completed`` (``error`` null), ``failed`` or ``cancelled`` (``result``
null, ``error`` ``{"kind": ..., "reason"?: ...}``). The runtime hands it back as a
`PlanningResult`: that dict, plus ``.plans``, every plan the run accepted (the
initial one and each revision), in order. `decode_result` checks a result read back
from JSON.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from adk_actors.planning.plan import json_copy, validate_plan
from providers.errors import AdkError, redact
from supervision import Crash

RESULT_SCHEMA_VERSION: Final = 1
RESULT_KEYS: Final = (
    "result_schema_version",
    "status",
    "plan",
    "steps_executed",
    "replans",
    "duration_ms",
    "observations",
    "result",
    "error",
    "metadata",
)
STATUSES: Final = ("completed", "failed", "cancelled")
OPAQUE_REASON: Final = "planning_failed"
"""What a failure reason that is not JSON becomes (the reference's fallback tag)."""
TOO_LARGE: Final = "output_size_limit_exceeded"
_STABLE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_CLASS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_INVALID = "invalid_planning_result"


class PlanningResult(dict[str, Any]):
    """A planning run's result (a plain JSON dict with the reference's keys) that also
    carries `plans`: every accepted plan, the initial one first, then each revision."""

    plans: tuple[dict[str, Any], ...] = ()


def failure(kind: str, *reason: Any) -> dict[str, Any]:
    """``{"kind": kind}``, with ``"reason"`` when one is given (already safe)."""
    return {"kind": kind, "reason": reason[0]} if reason else {"kind": kind}


def safe_reason(reason: Any, max_bytes: int = 64 << 10) -> Any:
    """A failure reason fit for the result: credentials redacted, secret-named keys
    dropped, plain JSON; an `AdkError` gives its reason; anything else that is not JSON
    becomes ``"planning_failed"``, anything bigger than `max_bytes` ``"output_size_limit_exceeded"``."""
    if isinstance(reason, AdkError):
        reason = reason.reason
    try:
        safe = json_copy(redact(reason))
    except (AdkError, RecursionError):
        return OPAQUE_REASON
    if len(msgspec.json.encode(safe)) > max_bytes:
        return TOO_LARGE
    return safe


def exception_reason(error: BaseException) -> str:
    """The stable reason a raised exception stands for: an `AdkError`'s own reason when
    it is a ``snake_case`` word, else ``"callback_exception"`` (never the message)."""
    if (
        isinstance(error, AdkError)
        and isinstance(error.reason, str)
        and _STABLE.fullmatch(error.reason)
    ):
        return error.reason
    if isinstance(error, AdkError) and isinstance(error.reason, tuple) and error.reason:
        head = error.reason[0]
        if isinstance(head, str) and _STABLE.fullmatch(head):
            return head
    return "callback_exception"


def start_failure_reason(reason: Any) -> Any:
    """A supervisor's refusal to start a run, made public by its structure only: a
    ``("shutdown", r)`` wrapper gives `r`; a ``snake_case`` tag stays; a tuple keeps its
    tag head; a crashed `init` gives ``("crash", class name)``; anything else
    ``"failed"``. Never an exception's or a reason's text."""
    shutdown = isinstance(reason, tuple) and len(reason) == 2 and reason[0] == "shutdown"
    if shutdown and not isinstance(reason, Crash):
        reason = reason[1]
    if isinstance(reason, Crash):
        kind = reason.kind
        named = isinstance(kind, str) and _CLASS_NAME.fullmatch(kind)
        return ("crash", kind if named else "exception")
    if isinstance(reason, str) and _STABLE.fullmatch(reason):
        return reason
    if isinstance(reason, tuple) and reason:
        head = reason[0]
        if isinstance(head, str) and _STABLE.fullmatch(head):
            return head
    return "failed"


def build_result(
    *,
    status: str,
    plan: dict[str, Any] | None,
    plans: tuple[dict[str, Any], ...],
    steps_executed: int,
    replans: int,
    duration_ms: int,
    observations: list[dict[str, Any]],
    value: Any,
    error: dict[str, Any] | None,
    metadata: dict[str, Any],
) -> PlanningResult:
    """The result of a run (its parts are already JSON-safe and bounded)."""
    result = PlanningResult(
        result_schema_version=RESULT_SCHEMA_VERSION,
        status=status,
        plan=plan,
        steps_executed=steps_executed,
        replans=replans,
        duration_ms=max(0, duration_ms),
        observations=list(observations),
        result=value if status == "completed" else None,
        error=None if status == "completed" else error,
        metadata=metadata,
    )
    result.plans = plans
    return result


def decode_result(value: Any) -> dict[str, Any]:
    """A result read back (from JSON, say), checked: an int ``result_schema_version``
    other than 1 is ``("unsupported_planning_result_version", v)``; a missing or extra
    key, a wrong type, an invalid plan or a status that does not fit ``result`` and
    ``error`` is ``invalid_planning_result``."""
    if not isinstance(value, Mapping):
        raise AdkError(_INVALID, "a planning result is a JSON object")
    version = value.get("result_schema_version")
    if (
        isinstance(version, int)
        and not isinstance(version, bool)
        and version != RESULT_SCHEMA_VERSION
    ):
        raise AdkError(("unsupported_planning_result_version", version), "results are version 1")
    if set(value) != set(RESULT_KEYS) or version != RESULT_SCHEMA_VERSION:
        raise AdkError(_INVALID, f"a planning result has exactly the keys {', '.join(RESULT_KEYS)}")
    if not (
        value["status"] in STATUSES
        and _count(value["steps_executed"])
        and _count(value["replans"])
        and _count(value["duration_ms"])
        and isinstance(value["observations"], list)
        and isinstance(value["metadata"], Mapping)
        and _fits_status(value["status"], value["result"], value["error"])
        and _valid_plan(value["plan"])
    ):
        raise AdkError(_INVALID, "a field has the wrong type or does not fit the status")
    try:
        checked: dict[str, Any] = json_copy(value, _INVALID)
    except RecursionError:
        raise AdkError(_INVALID, "the result nests too deep") from None
    return checked


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _fits_status(status: str, result: Any, error: Any) -> bool:
    if status == "completed":
        return error is None
    return (
        result is None
        and isinstance(error, Mapping)
        and isinstance(error.get("kind"), str)
        and bool(error["kind"])
    )


def _valid_plan(plan: Any) -> bool:
    if plan is None:
        return True
    try:
        return bool(validate_plan(plan) == plan)
    except AdkError:
        return False
