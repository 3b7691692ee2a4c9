"""Eval sets: the checked, versioned, JSON round-trippable cases an evaluation runs.

`load_eval_set` accepts a schema-2 set, a schema-1 set, or a bare JSON list of
``{"input", "expected", "metadata"}`` rows (one single-turn case per row, ids
``case-1``, ...). It is strict: unknown keys, duplicate case or turn ids, empty ids
and out-of-bound sizes are refused with a stable `AdkError` reason, and secret-named
keys (`supervision.is_secret_key`) are removed from every metadata, state and
argument mapping. `encode_eval_set` is its inverse: ``load(encode(s)) == s``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from adk_actors.evaluation.limits import (
    MAX_CASES,
    MAX_ID_CHARS,
    MAX_TEXT_CHARS,
    MAX_TRAJECTORY_STEPS,
    MAX_TURNS_PER_CASE,
    check_data,
)
from providers.errors import AdkError, key_name, prune

SCHEMA_VERSION = 2
LEGACY_SCHEMA_VERSION = 1
BARE_LIST_ID = "eval"
BARE_LIST_VERSION = "1"

_SET_KEYS = frozenset(
    {"schema_version", "id", "version", "name", "description", "metadata", "cases"}
)
_CASE_KEYS_V2 = frozenset(
    {
        "id",
        "metadata",
        "session_state",
        "expected_final_response",
        "expected_trajectory",
        "turns",
        "input",
        "expected",
    }
)
_CASE_KEYS_V1 = frozenset({"id", "metadata", "turns", "input", "expected"})
_TURN_KEYS_V2 = frozenset({"id", "input", "expected_response", "expected_trajectory", "metadata"})
_TURN_KEYS_V1 = frozenset({"id", "input", "expected", "metadata"})
_ROW_KEYS = frozenset({"input", "expected", "metadata"})
_STEP_KEYS = frozenset({"name", "args"})


class ExpectedToolCall(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One expected tool call: its name and, when given, its arguments (None: any)."""

    name: str
    args: dict[str, Any] | None = None


class EvalTurn(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One user turn of a case, with what it should answer and call."""

    id: str
    input: str
    expected_response: str | None = None
    expected_trajectory: tuple[ExpectedToolCall, ...] | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class EvalCase(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One conversation: ordered turns, the session state it starts with, and the
    whole-case expectations (final response, trajectory across every turn)."""

    id: str
    turns: tuple[EvalTurn, ...]
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    session_state: dict[str, Any] = msgspec.field(default_factory=dict)
    expected_final_response: str | None = None
    expected_trajectory: tuple[ExpectedToolCall, ...] | None = None


class EvalSet(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A versioned set of cases; `version` is the dataset revision results record."""

    schema_version: int
    id: str
    version: str
    cases: tuple[EvalCase, ...]
    name: str | None = None
    description: str | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


def load_eval_set(data: object) -> EvalSet:
    """The checked `EvalSet` for JSON-shaped `data` (see the module docstring)."""
    check_data(data, "invalid_eval_set")
    if isinstance(data, list):
        return _bare_list(data)
    if not isinstance(data, Mapping):
        raise AdkError("invalid_eval_set", "an eval set is a JSON object or a list of rows")
    version = data.get("schema_version", SCHEMA_VERSION)
    if isinstance(version, bool) or version not in (SCHEMA_VERSION, LEGACY_SCHEMA_VERSION):
        raise AdkError(
            ("unsupported_eval_set_schema_version", _shown(version)),
            "schema_version is 1 or 2",
        )
    _known(data, _SET_KEYS, ("invalid_eval_set",))
    set_id = _ident(data.get("id"), "invalid_eval_set_id", "the set's id")
    revision = _ident(data.get("version"), "invalid_eval_set_version", "the set's version")
    cases = data.get("cases")
    if not isinstance(cases, list):
        raise AdkError("invalid_eval_cases", "cases is a list")
    if len(cases) > MAX_CASES:
        raise AdkError("eval_set_case_limit_exceeded", f"at most {MAX_CASES} cases")
    checked: list[EvalCase] = []
    seen: set[str] = set()
    for index, case in enumerate(cases):
        loaded = _case(case, index, version)
        if loaded.id in seen:
            raise AdkError(("duplicate_eval_case_id", loaded.id), "case ids are unique")
        seen.add(loaded.id)
        checked.append(loaded)
    return EvalSet(
        schema_version=version,
        id=set_id,
        version=revision,
        cases=tuple(checked),
        name=_optional_text(data, "name", ("invalid_eval_set_field", "name")),
        description=_optional_text(data, "description", ("invalid_eval_set_field", "description")),
        metadata=_metadata(data.get("metadata", {}), ("invalid_eval_set_field", "metadata")),
    )


def encode_eval_set(eval_set: EvalSet) -> dict[str, Any]:
    """`eval_set` as JSON-safe data that `load_eval_set` turns back into an equal set."""
    if not isinstance(eval_set, EvalSet):
        raise AdkError("invalid_eval_set", "encode an EvalSet")
    encoded: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(eval_set))
    if eval_set.schema_version == LEGACY_SCHEMA_VERSION:
        for case in encoded["cases"]:
            for turn in case["turns"]:
                if "expected_response" in turn:
                    turn["expected"] = turn.pop("expected_response")
    return encoded


def _bare_list(rows: list[Any]) -> EvalSet:
    """The spec's v1 ``examples/eval.json``: one single-turn case per row."""
    if len(rows) > MAX_CASES:
        raise AdkError("eval_set_case_limit_exceeded", f"at most {MAX_CASES} cases")
    cases = []
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise AdkError(("invalid_eval_case", index), "each row is a JSON object")
        _known(row, _ROW_KEYS, ("invalid_eval_case", index))
        case_id = f"case-{index + 1}"
        turn = _turn(
            {"id": "turn-1", **{k: v for k, v in row.items() if k != "metadata"}},
            case_id,
            0,
            LEGACY_SCHEMA_VERSION,
        )
        metadata = _metadata(row.get("metadata", {}), ("invalid_eval_case_metadata", case_id))
        cases.append(EvalCase(id=case_id, turns=(turn,), metadata=metadata))
    return EvalSet(
        schema_version=LEGACY_SCHEMA_VERSION,
        id=BARE_LIST_ID,
        version=BARE_LIST_VERSION,
        cases=tuple(cases),
    )


def _case(case: Any, index: int, schema: int) -> EvalCase:
    if not isinstance(case, Mapping):
        raise AdkError(("invalid_eval_case", index), "a case is a JSON object")
    allowed = _CASE_KEYS_V2 if schema == SCHEMA_VERSION else _CASE_KEYS_V1
    _known(case, allowed, ("invalid_eval_case", index))
    case_id = _ident(case.get("id"), ("invalid_eval_case_id", index), "a case id")
    metadata = _metadata(case.get("metadata", {}), ("invalid_eval_case_metadata", case_id))
    if "turns" in case:
        if "input" in case or "expected" in case:
            raise AdkError(
                ("invalid_eval_case_turns", case_id), "give turns, or input and expected, not both"
            )
        raw_turns = case["turns"]
    elif "input" in case:
        raw_turns = [
            {"id": "turn-1", "input": case["input"]}
            | ({"expected": case["expected"]} if "expected" in case else {})
        ]
    else:
        raise AdkError(("invalid_eval_case_turns", case_id), "a case has turns")
    if not isinstance(raw_turns, list):
        raise AdkError(("invalid_eval_case_turns", case_id), "turns is a list")
    if not raw_turns:
        raise AdkError(("eval_case_has_no_turns", case_id), "a case has at least one turn")
    if len(raw_turns) > MAX_TURNS_PER_CASE:
        raise AdkError(
            ("eval_case_turn_limit_exceeded", case_id), f"at most {MAX_TURNS_PER_CASE} turns"
        )
    schema_for_turns = LEGACY_SCHEMA_VERSION if "input" in case else schema
    turns: list[EvalTurn] = []
    seen: set[str] = set()
    for turn_index, raw in enumerate(raw_turns):
        turn = _turn(raw, case_id, turn_index, schema_for_turns)
        if turn.id in seen:
            raise AdkError(("duplicate_eval_turn_id", case_id, turn.id), "turn ids are unique")
        seen.add(turn.id)
        turns.append(turn)
    state = case.get("session_state", {})
    if not isinstance(state, Mapping):
        raise AdkError(("invalid_eval_field", case_id, "session_state"), "a JSON object")
    return EvalCase(
        id=case_id,
        turns=tuple(turns),
        metadata=metadata,
        session_state=prune(dict(state)),
        expected_final_response=_optional_text(
            case,
            "expected_final_response",
            ("invalid_eval_field", case_id, "expected_final_response"),
        ),
        expected_trajectory=_trajectory(
            case, ("invalid_eval_field", case_id, "expected_trajectory")
        ),
    )


def _turn(turn: Any, case_id: str, index: int, schema: int) -> EvalTurn:
    if not isinstance(turn, Mapping):
        raise AdkError(("invalid_eval_turn", case_id, index), "a turn is a JSON object")
    allowed = _TURN_KEYS_V2 if schema == SCHEMA_VERSION else _TURN_KEYS_V1
    _known(turn, allowed, ("invalid_eval_turn", case_id, index))
    turn_id = _ident(
        turn.get("id", f"turn-{index + 1}"), ("invalid_eval_turn_id", case_id, index), "a turn id"
    )
    if "input" not in turn:
        raise AdkError(("missing_eval_turn_input", case_id, turn_id), "a turn has an input")
    text = turn["input"]
    if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS:
        raise AdkError(("invalid_eval_turn", case_id, turn_id), "a turn's input is a string")
    field = "expected" if schema == LEGACY_SCHEMA_VERSION else "expected_response"
    return EvalTurn(
        id=turn_id,
        input=text,
        expected_response=_optional_text(turn, field, ("invalid_eval_turn", case_id, turn_id)),
        expected_trajectory=_trajectory(turn, ("invalid_eval_turn", case_id, turn_id)),
        metadata=_metadata(turn.get("metadata", {}), ("invalid_eval_turn", case_id, turn_id)),
    )


def _trajectory(source: Mapping[str, Any], reason: Any) -> tuple[ExpectedToolCall, ...] | None:
    """An expected trajectory: a list of tool names or ``{"name", "args"?}`` objects."""
    value = source.get("expected_trajectory")
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_TRAJECTORY_STEPS:
        raise AdkError(reason, f"expected_trajectory is a list of at most {MAX_TRAJECTORY_STEPS}")
    steps = []
    for step in value:
        if isinstance(step, str):
            steps.append(ExpectedToolCall(name=_ident(step, reason, "a tool name")))
            continue
        if not isinstance(step, Mapping):
            raise AdkError(reason, "a trajectory step is a tool name or an object")
        _known(step, _STEP_KEYS, (reason,) if not isinstance(reason, tuple) else reason)
        args = step.get("args")
        if args is not None and not isinstance(args, Mapping):
            raise AdkError(reason, "a step's args is a JSON object")
        steps.append(
            ExpectedToolCall(
                name=_ident(step.get("name"), reason, "a tool name"),
                args=None if args is None else prune(dict(args)),
            )
        )
    return tuple(steps)


def _known(value: Mapping[str, Any], allowed: frozenset[str], reason: tuple[Any, ...]) -> None:
    unknown = sorted({key_name(key) for key in value if key not in allowed})
    if unknown:
        raise AdkError(
            (*reason, ("unknown_keys", unknown[:16])), f"unknown keys: {', '.join(unknown[:16])}"
        )


def _ident(value: Any, reason: Any, what: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_ID_CHARS:
        raise AdkError(reason, f"{what} is a string of 1..{MAX_ID_CHARS} characters")
    return value


def _optional_text(source: Mapping[str, Any], key: str, reason: Any) -> str | None:
    value = source.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_TEXT_CHARS:
        raise AdkError(reason, f"{key} is a string")
    return value


def _metadata(value: Any, reason: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise AdkError(reason, "metadata is a JSON object")
    return prune(dict(value))  # type: ignore[no-any-return]


def _shown(value: Any) -> Any:
    if isinstance(value, int | str) and not isinstance(value, bool) and len(str(value)) <= 32:
        return value
    return type(value).__name__
