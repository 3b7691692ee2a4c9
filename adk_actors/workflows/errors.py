"""Workflow errors: `WorkflowSpecError` (a spec refused at a path) and the shaping
of every failure that leaves a workflow (outcomes, status, checkpoints, ledger).

What user code hands back (an `Error(reason)`, an exception, a cancel reason) is
untrusted: a stable ``snake_case`` tag passes as it is; anything else becomes a
bounded public failure dict ``{"component", "operation", "reason"[, "class"]
[, "status"]}`` (the shape of `adk_actors.tools.catalog`'s tool failures) naming no
value, message or traceback. Identifiers that are not short strings or ints become
``"redacted_identifier"``. Pause reasons and details are user data, not failures:
`bounded_value` keeps them JSON and small.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from providers.errors import AdkError, is_secret_key
from supervision import redact_text

STABLE_REASON = re.compile(r"[a-z][a-z0-9_]{0,63}")
"""A reason tag that may pass through as it is."""
MAX_SAFE_IDS = 16
"""At most this many ids are named in a failure (e.g. the branches of a state conflict)."""
MAX_ID_CHARS = 256
REDACTED_IDENTIFIER = "redacted_identifier"
ACTION_CHOSEN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
"""What a name an action chose (not the spec) may look like to be named in a failure."""

PAUSE_MAX_DEPTH = 6
PAUSE_MAX_BYTES = 4096
PAUSE_MAX_ITEMS = 32
TRUNCATED = "truncated"
REDACTED = "redacted"

ACTION_COMPONENT = "adk_workflow_action"
"""The `component` of failures that come out of user actions."""
WORKFLOW_COMPONENT = "adk_workflow"

Path = tuple[str | int, ...]


class WorkflowSpecError(AdkError):
    """A spec refused by `compile_workflow`. `path` names the bad part: keys, and
    0-based positions in lists, e.g. ``("steps", 1, "id")`` or ``("nodes", 0,
    "targets")`` (graph nodes by position too, their topology included); a dict keyed
    by name is named by its key (``("members", "triage")``, ``("edges", "a")``).
    `what` says why (a stable tag, or a tag with one structural detail such as
    ``("duplicate_id", "same")``).
    ``reason == ("invalid_workflow", path, what)``."""

    def __init__(self, path: Path, what: Any, detail: str | None = None) -> None:
        self.path: Path = tuple(path)
        self.what: Any = what
        shown = "/".join(str(step) for step in self.path) or "<spec>"
        super().__init__(("invalid_workflow", self.path, what), detail or f"at {shown}")


def is_stable(reason: Any) -> TypeGuard[str]:
    """Is `reason` a stable tag (a short ``snake_case`` string)?"""
    return isinstance(reason, str) and STABLE_REASON.fullmatch(reason) is not None


def safe_id(value: Any) -> str | int:
    """An identifier fit to name in a failure: a str of at most `MAX_ID_CHARS`
    characters or an int; anything else is ``"redacted_identifier"``."""
    if isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS and not is_secret_key(value):
        return value
    if type(value) is int:
        return value
    return REDACTED_IDENTIFIER


def action_chosen_id(value: Any) -> str:
    """A name an action returned (an unknown transfer target, say), fit to name in a
    failure: a short identifier (`ACTION_CHOSEN_ID`, at most 64 characters) that is
    neither secret-named nor shaped like a credential; anything else is
    ``"redacted_identifier"``. Stricter than `safe_id`: the text is action-chosen."""
    if (
        isinstance(value, str)
        and ACTION_CHOSEN_ID.fullmatch(value) is not None
        and not is_secret_key(value)
        and redact_text(value) == value
    ):
        return value
    return REDACTED_IDENTIFIER


def safe_ids(values: Sequence[Any]) -> list[str | int]:
    """At most `MAX_SAFE_IDS` identifiers, each through `safe_id`."""
    return [safe_id(value) for value in list(values)[:MAX_SAFE_IDS]]


def public_failure(
    component: str,
    operation: Any,
    reason: str,
    *,
    error_class: str | None = None,
    status: int | None = None,
) -> dict[str, Any]:
    """The bounded failure dict; `operation` goes through `safe_id`."""
    failure: dict[str, Any] = {
        "component": component,
        "operation": safe_id(operation),
        "reason": reason if is_stable(reason) else "failed",
    }
    if error_class is not None:
        failure["class"] = error_class[:64]
    if status is not None:
        failure["status"] = status
    return failure


def external_reason(component: str, operation: Any, reason: Any) -> Any:
    """A reason from user code made public: a stable tag as it is; a tuple/list whose
    head is a stable tag -> the failure dict with that tag (and an HTTP-like status
    when the next item is an int in 100..599); an `AdkError` -> its reason shaped the
    same way; anything else -> the failure dict with reason ``"failed"``."""
    if isinstance(reason, AdkError):
        return external_reason(component, operation, reason.reason)
    if is_stable(reason):
        return reason
    if isinstance(reason, tuple | list) and reason and is_stable(reason[0]):
        status = reason[1] if len(reason) > 1 else None
        code = status if type(status) is int and 100 <= status <= 599 else None
        return public_failure(component, operation, reason[0], status=code)
    return public_failure(component, operation, "failed")


def exception_reason(component: str, operation: Any, error: BaseException) -> dict[str, Any]:
    """An exception made public: its class name and, for an `AdkError`, its reason's
    tag (else ``"exception"``); never its message or traceback."""
    tag = "exception"
    if isinstance(error, AdkError):
        shaped = external_reason(component, operation, error.reason)
        tag = shaped if isinstance(shaped, str) else shaped["reason"]
    return public_failure(component, operation, tag, error_class=type(error).__name__)


def tagged(tag: str, ident: Any, detail: Any) -> tuple[str, str | int, Any]:
    """A topology failure such as ``("step_failed", "fetch", detail)``; `detail` must
    already be shaped (a stable tag, a failure dict or one of our structural tuples)."""
    return (tag, safe_id(ident), detail)


def state_conflict(owners: Sequence[Any]) -> tuple[str, dict[str, Any], list[str | int]]:
    """Unequal writes of two branches to one key: names the branches, not the key or values."""
    failure = public_failure(WORKFLOW_COMPONENT, "state_conflict", "state_conflict")
    return ("state_conflict", failure, safe_ids(owners))


def cancel_reason(reason: Any) -> Any:
    """A cancel reason made public: a stable tag as it is, else the failure dict."""
    if is_stable(reason):
        return reason
    return public_failure(WORKFLOW_COMPONENT, "cancel", "cancelled")


def bounded_value(value: Any, *, depth: int = 0) -> Any:
    """A JSON copy of user data (pause reasons and details) cut to size: at most
    `PAUSE_MAX_DEPTH` deep, strings at most `PAUSE_MAX_BYTES` UTF-8 bytes, lists and
    dicts at most `PAUSE_MAX_ITEMS` items (a cut list ends with ``"truncated"``),
    secret-named keys dropped, non-JSON values replaced by ``"redacted"``."""
    if value is None or isinstance(value, bool):
        return value
    if type(value) is int:
        return value if -(1 << 63) <= value < (1 << 63) else REDACTED
    if type(value) is float:
        return value if math.isfinite(value) else REDACTED
    if isinstance(value, str):
        return _cut_text(value)
    if depth >= PAUSE_MAX_DEPTH:
        return TRUNCATED
    if isinstance(value, Mapping):
        kept: dict[str, Any] = {}
        for key, item in value.items():
            if len(kept) >= PAUSE_MAX_ITEMS:
                break
            if not isinstance(key, str) or is_secret_key(key):
                continue
            kept[_cut_text(key)] = bounded_value(item, depth=depth + 1)
        return kept
    if isinstance(value, list | tuple):
        items = [bounded_value(item, depth=depth + 1) for item in list(value)[:PAUSE_MAX_ITEMS]]
        if len(value) > PAUSE_MAX_ITEMS:
            items.append(TRUNCATED)
        return items
    return REDACTED


def failure_reason(reason: Any, *, depth: int = 0) -> Any:
    """A failure reason re-shaped for storage and status (idempotent): stable tags,
    ints, finite floats and short ids stay; our structural tuples keep their shape with
    every item re-shaped; a failure dict keeps only its bounded keys; a list becomes at
    most `MAX_SAFE_IDS` ids; anything else becomes the failure dict. Use it on every
    reason before it reaches an outcome, a status or a ledger record."""
    if reason is None or isinstance(reason, bool):
        return reason
    if isinstance(reason, str):
        return reason if is_stable(reason) else safe_id(reason)
    if type(reason) is int:
        return reason
    if type(reason) is float:
        return reason if math.isfinite(reason) else REDACTED
    if depth >= PAUSE_MAX_DEPTH:
        return TRUNCATED
    if isinstance(reason, Mapping):
        return _public_dict(reason)
    if isinstance(reason, tuple) and reason and is_stable(reason[0]) and len(reason) <= 4:
        return (reason[0], *(failure_reason(item, depth=depth + 1) for item in reason[1:]))
    if isinstance(reason, list):
        return safe_ids(reason)
    return public_failure(WORKFLOW_COMPONENT, "execute", "failed")


def _public_dict(failure: Mapping[Any, Any]) -> dict[str, Any]:
    component = failure.get("component")
    reason = failure.get("reason")
    status = failure.get("status")
    error_class = failure.get("class")
    return public_failure(
        component if is_stable(component) else WORKFLOW_COMPONENT,
        failure.get("operation"),
        reason if is_stable(reason) else "failed",
        error_class=error_class if isinstance(error_class, str) else None,
        status=status if type(status) is int and 100 <= status <= 599 else None,
    )


def _cut_text(text: str) -> str:
    encoded = text.encode("utf-8", "replace")
    if len(encoded) <= PAUSE_MAX_BYTES and encoded.decode("utf-8") == text:
        return text
    return encoded[:PAUSE_MAX_BYTES].decode("utf-8", "ignore")
