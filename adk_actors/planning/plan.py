"""The versioned plan: what a planner proposes, checked and made canonical here.

A plan is data only. Its step actions are opaque JSON objects that the trusted
executor interprets; nothing here evaluates a string, resolves a module or calls
anything named by a plan. Canonical plans hold plain JSON (dicts with `str` keys,
lists, strings, finite numbers, booleans, None) with every secret-named key pruned:

    plan = {"schema_version": 1, "id", "revision", "goal", "steps", "metadata"}
    step = {"id", "description", "action", "metadata"}

`validate_plan` accepts the same shape with `schema_version` and `metadata` left out
and raises `AdkError` with the reference's reasons (``("unknown_plan_fields", keys)``,
``("missing_plan_field", key)``, ``("duplicate_plan_step_id", id)``, ...). Text from a
model goes through `decode_plan_json`, which also refuses an object that repeats a
key (``("duplicate_plan_field", key)``) instead of silently keeping the last value.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import msgspec

from providers.errors import AdkError, is_secret_key, key_name

SCHEMA_VERSION = 1
MAX_JSON_DEPTH = 64
MAX_ID_CHARS = 256
MAX_KEYS_NAMED = 16
PLAN_FIELDS = ("schema_version", "id", "revision", "goal", "steps", "metadata")
STEP_FIELDS = ("id", "description", "action", "metadata")


class _Decoded(dict[str, Any]):
    """A JSON object decoded from text; `duplicate` names a key it repeated (or None)."""

    duplicate: str | None = None


def json_copy(value: Any, reason: Any = "invalid_plan_json") -> Any:
    """A plain JSON copy of `value` without secret-named keys (tuples become lists).

    Raises `AdkError(reason)` for anything that is not strictly JSON: non-`str` keys,
    non-finite floats, other types, nesting past 64 levels, or an object decoded from
    text that repeated a key.
    """
    return _copy(value, 0, reason)


def _copy(value: Any, depth: int, reason: Any) -> Any:
    if depth > MAX_JSON_DEPTH:
        raise AdkError(reason, f"JSON values nest at most {MAX_JSON_DEPTH} deep")
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, str):
        return _check_text(value, reason)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise AdkError(reason, "JSON numbers are finite")
        return value
    if isinstance(value, Mapping):
        if getattr(value, "duplicate", None) is not None:
            raise AdkError(reason, "a JSON object repeats a key")
        copied: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise AdkError(reason, "JSON object keys are strings")
            if not is_secret_key(key):
                copied[_check_text(key, reason)] = _copy(item, depth + 1, reason)
        return copied
    if isinstance(value, list | tuple):
        return [_copy(item, depth + 1, reason) for item in value]
    raise AdkError(reason, f"{type(value).__name__} is not a JSON value")


def _check_text(text: str, reason: Any) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise AdkError(reason, "text must be valid UTF-8") from None
    return text


def decode_plan_json(text: str | bytes) -> Any:
    """Parse JSON text (a model's answer) keeping track of repeated keys, which
    `validate_plan` then refuses. Raises ``AdkError("invalid_plan_json")`` for text
    that is not JSON."""
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant)
    except (ValueError, RecursionError, TypeError):
        raise AdkError("invalid_plan_json", "the text is not a JSON document") from None


def _pairs(pairs: list[tuple[str, Any]]) -> _Decoded:
    decoded = _Decoded()
    for key, value in pairs:
        if key in decoded and decoded.duplicate is None:
            decoded.duplicate = key
        decoded[key] = value
    return decoded


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def plan_step(
    id: str, description: str, action: Mapping[str, Any], metadata: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A canonical step (see `validate_plan` for the rules)."""
    fields = {"id": id, "description": description, "action": action, "metadata": metadata or {}}
    return _step(fields, 0)


def new_plan(
    id: str,
    revision: int,
    goal: Any,
    steps: list[Mapping[str, Any]],
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A canonical plan (see `validate_plan` for the rules)."""
    fields = {
        "id": id,
        "revision": revision,
        "goal": goal,
        "steps": steps,
        "metadata": metadata or {},
    }
    return validate_plan(fields)


def validate_plan(value: Any) -> dict[str, Any]:
    """The canonical form of a plan, or `AdkError` with the reason it is refused.

    Rules: only the plan fields (``("unknown_plan_fields", keys)``), ``id``,
    ``revision``, ``goal`` and ``steps`` present (``("missing_plan_field", key)``),
    ``schema_version`` 1 if given (``("unsupported_plan_schema_version", v)``), a
    non-empty ``id`` (``invalid_plan_id``), ``revision`` an int >= 0, ``steps`` a
    non-empty list and ``metadata`` an object (``invalid_plan_fields``), a JSON
    ``goal`` (``invalid_plan_json``); each step has only the step fields
    (``("unknown_plan_step_fields", index, keys)``), a non-empty ``id`` and
    ``description``, an object ``action`` and ``metadata``
    (``("invalid_plan_step", index)``), and step ids are unique
    (``("duplicate_plan_step_id", id)``). Indices are 0-based.
    """
    if not isinstance(value, Mapping):
        raise AdkError("invalid_plan", "a plan is a JSON object")
    _refuse_unknown(value, PLAN_FIELDS, "unknown_plan_fields")
    _refuse_duplicate(value)
    version = value.get("schema_version", SCHEMA_VERSION)
    for field in ("id", "revision", "goal", "steps"):
        if field not in value:
            raise AdkError(("missing_plan_field", field), f"a plan needs {field!r}")
    plan_id, revision, steps = value["id"], value["revision"], value["steps"]
    metadata = value.get("metadata", {})
    if isinstance(version, bool) or version != SCHEMA_VERSION:
        shown = version if isinstance(version, int) and not isinstance(version, bool) else "invalid"
        raise AdkError(("unsupported_plan_schema_version", shown), "plans are schema version 1")
    if not (
        isinstance(plan_id, str)
        and isinstance(revision, int)
        and not isinstance(revision, bool)
        and revision >= 0
        and isinstance(steps, list)
        and steps
        and isinstance(metadata, Mapping)
    ):
        raise AdkError("invalid_plan_fields", "id, revision, steps or metadata has a wrong type")
    _check_id(plan_id, "invalid_plan_id")
    goal = json_copy(value["goal"])
    canonical_steps: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, step in enumerate(steps):
        checked = _step(step, index)
        if checked["id"] in seen:
            raise AdkError(("duplicate_plan_step_id", checked["id"]), "step ids are unique")
        seen.add(checked["id"])
        canonical_steps.append(checked)
    return {
        "schema_version": SCHEMA_VERSION,
        "id": plan_id,
        "revision": revision,
        "goal": goal,
        "steps": canonical_steps,
        "metadata": json_copy(metadata),
    }


def _step(value: Any, index: int) -> dict[str, Any]:
    invalid = AdkError(("invalid_plan_step", index), f"step {index} is not a valid step")
    if not isinstance(value, Mapping):
        raise invalid
    _refuse_unknown(value, STEP_FIELDS, "unknown_plan_step_fields", index)
    _refuse_duplicate(value)
    step_id = value.get("id")
    description = value.get("description")
    action = value.get("action")
    metadata = value.get("metadata", {})
    if not (
        isinstance(step_id, str)
        and isinstance(description, str)
        and description
        and isinstance(action, Mapping)
        and isinstance(metadata, Mapping)
    ):
        raise invalid
    try:
        _check_id(step_id, "invalid_step_id")
        return {
            "id": step_id,
            "description": _check_text(description, "invalid_text"),
            "action": json_copy(action),
            "metadata": json_copy(metadata),
        }
    except AdkError:
        raise invalid from None


def _refuse_unknown(
    value: Mapping[Any, Any], allowed: tuple[str, ...], reason: str, *at: int
) -> None:
    unknown = sorted({key_name(key) for key in value if key not in allowed})
    if unknown:
        named = tuple(unknown[:MAX_KEYS_NAMED])
        raise AdkError((reason, *at, named), f"known fields: {', '.join(allowed)}")


def _refuse_duplicate(value: Mapping[Any, Any]) -> None:
    duplicate = getattr(value, "duplicate", None)
    if duplicate is not None:
        raise AdkError(("duplicate_plan_field", key_name(duplicate)), "a field is given twice")


def _check_id(value: str, reason: str) -> None:
    if not value or len(value) > MAX_ID_CHARS:
        raise AdkError(reason, f"ids are 1..{MAX_ID_CHARS} characters")
    _check_text(value, reason)


def plan_size(plan: Mapping[str, Any]) -> int:
    """Bytes of the plan's canonical JSON (sorted keys, compact)."""
    return len(canonical_bytes(plan))


def canonical_bytes(value: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, compact, UTF-8) of a JSON copy."""
    return msgspec.json.encode(value, order="sorted")
