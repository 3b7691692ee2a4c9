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
from typing import Annotated, Any, TypeVar

import msgspec

from adk_actors.evaluation.limits import (
    MAX_CASES,
    MAX_ID_CHARS,
    MAX_TEXT_CHARS,
    MAX_TRAJECTORY_STEPS,
    MAX_TURNS_PER_CASE,
    check_data,
)
from providers.errors import AdkError, decode_options, prune

SCHEMA_VERSION = 2
LEGACY_SCHEMA_VERSION = 1
BARE_LIST_ID = "eval"
BARE_LIST_VERSION = "1"

_T = TypeVar("_T", bound=msgspec.Struct)
_Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT_CHARS)]


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


# -- the shapes as written (decoded strictly; each level's refusal names where it is) --------


class _Strict(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A shape as written: unknown keys refused, types strict."""


class _RawSet(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    schema_version: Any = SCHEMA_VERSION
    id: Any = None
    version: Any = None
    name: _Text | None = None
    description: _Text | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    cases: list[Any] | None = None


class _RawCaseV1(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: Any = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    turns: list[Any] | None = None
    input: Any = msgspec.UNSET
    expected: Any = msgspec.UNSET


class _RawCaseV2(_RawCaseV1, frozen=True, kw_only=True, forbid_unknown_fields=True):
    session_state: dict[str, Any] = msgspec.field(default_factory=dict)
    expected_final_response: _Text | None = None
    expected_trajectory: (
        Annotated[list[Any], msgspec.Meta(max_length=MAX_TRAJECTORY_STEPS)] | None
    ) = None


class _RawTurnV1(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: Any = msgspec.UNSET
    input: Any = msgspec.UNSET
    expected: _Text | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class _RawTurnV2(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: Any = msgspec.UNSET
    input: Any = msgspec.UNSET
    expected_response: _Text | None = None
    expected_trajectory: (
        Annotated[list[Any], msgspec.Meta(max_length=MAX_TRAJECTORY_STEPS)] | None
    ) = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class _RawRow(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    input: Any = msgspec.UNSET
    expected: Any = msgspec.UNSET
    metadata: Any = msgspec.field(default_factory=dict)


class _RawStep(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Any = None
    args: dict[str, Any] | None = None


def _decoded(
    struct_type: type[_T], data: object, where: tuple[Any, ...], fields: Mapping[str, Any]
) -> _T:
    """`data` decoded into `struct_type`: unknown keys as ``(*where, ("unknown_keys",
    names))``, a bad field as its reason in `fields`, anything else as `where`."""
    reason = where[0] if len(where) == 1 else where
    if not isinstance(data, Mapping):
        raise AdkError(reason, "a JSON object")
    try:
        return decode_options(struct_type, data, _DECODE, field_reasons=fields)
    except AdkError as error:
        failure = error.reason
        if isinstance(failure, tuple) and failure[:1] == (_DECODE,):
            detail = failure[1] if len(failure) > 1 else None
            if isinstance(detail, tuple) and detail[:1] == ("unknown_keys",):
                raise AdkError((*where, detail), error.detail) from None
            raise AdkError(reason, error.detail) from None
        raise


_DECODE = "eval_set_shape"
"""The internal reason `decode_options` raises with, rewritten by `_decoded`."""


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
    raw = _decoded(
        _RawSet,
        data,
        ("invalid_eval_set",),
        {
            "name": ("invalid_eval_set_field", "name"),
            "description": ("invalid_eval_set_field", "description"),
            "metadata": ("invalid_eval_set_field", "metadata"),
            "cases": "invalid_eval_cases",
        },
    )
    set_id = _ident(raw.id, "invalid_eval_set_id", "the set's id")
    revision = _ident(raw.version, "invalid_eval_set_version", "the set's version")
    if raw.cases is None:
        raise AdkError("invalid_eval_cases", "cases is a list")
    if len(raw.cases) > MAX_CASES:
        raise AdkError("eval_set_case_limit_exceeded", f"at most {MAX_CASES} cases")
    checked: list[EvalCase] = []
    seen: set[str] = set()
    for index, case in enumerate(raw.cases):
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
        name=raw.name,
        description=raw.description,
        metadata=prune(raw.metadata),
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
        raw = _decoded(_RawRow, row, ("invalid_eval_case", index), {})
        case_id = f"case-{index + 1}"
        turn = _turn(
            {"id": "turn-1", **_given(input=raw.input, expected=raw.expected)},
            case_id,
            0,
            LEGACY_SCHEMA_VERSION,
        )
        if not isinstance(raw.metadata, Mapping):
            raise AdkError(("invalid_eval_case_metadata", case_id), "metadata is a JSON object")
        cases.append(EvalCase(id=case_id, turns=(turn,), metadata=prune(dict(raw.metadata))))
    return EvalSet(
        schema_version=LEGACY_SCHEMA_VERSION,
        id=BARE_LIST_ID,
        version=BARE_LIST_VERSION,
        cases=tuple(cases),
    )


def _given(**values: Any) -> dict[str, Any]:
    """The keyword values that were given (not `msgspec.UNSET`)."""
    return {key: value for key, value in values.items() if value is not msgspec.UNSET}


def _case(case: Any, index: int, schema: int) -> EvalCase:
    written = case.get("id") if isinstance(case, Mapping) else None
    case_id = written if isinstance(written, str) else ""
    field = ("invalid_eval_field", case_id)
    raw = _decoded(
        _RawCaseV2 if schema == SCHEMA_VERSION else _RawCaseV1,
        case,
        ("invalid_eval_case", index),
        {
            "metadata": ("invalid_eval_case_metadata", case_id),
            "turns": ("invalid_eval_case_turns", case_id),
            "session_state": (*field, "session_state"),
            "expected_final_response": (*field, "expected_final_response"),
            "expected_trajectory": (*field, "expected_trajectory"),
        },
    )
    case_id = _ident(raw.id, ("invalid_eval_case_id", index), "a case id")
    inline = _given(input=raw.input, expected=raw.expected)
    if raw.turns is not None:
        if inline:
            raise AdkError(
                ("invalid_eval_case_turns", case_id), "give turns, or input and expected, not both"
            )
        raw_turns = raw.turns
    elif "input" in inline:
        raw_turns = [{"id": "turn-1", **inline}]
    else:
        raise AdkError(("invalid_eval_case_turns", case_id), "a case has turns")
    if not raw_turns:
        raise AdkError(("eval_case_has_no_turns", case_id), "a case has at least one turn")
    if len(raw_turns) > MAX_TURNS_PER_CASE:
        raise AdkError(
            ("eval_case_turn_limit_exceeded", case_id), f"at most {MAX_TURNS_PER_CASE} turns"
        )
    schema_for_turns = LEGACY_SCHEMA_VERSION if inline else schema
    turns: list[EvalTurn] = []
    seen: set[str] = set()
    for turn_index, written_turn in enumerate(raw_turns):
        turn = _turn(written_turn, case_id, turn_index, schema_for_turns)
        if turn.id in seen:
            raise AdkError(("duplicate_eval_turn_id", case_id, turn.id), "turn ids are unique")
        seen.add(turn.id)
        turns.append(turn)
    v2 = raw if isinstance(raw, _RawCaseV2) else None
    return EvalCase(
        id=case_id,
        turns=tuple(turns),
        metadata=prune(raw.metadata),
        session_state=prune(v2.session_state) if v2 else {},
        expected_final_response=v2.expected_final_response if v2 else None,
        expected_trajectory=(
            _trajectory(v2.expected_trajectory, (*field, "expected_trajectory")) if v2 else None
        ),
    )


def _turn(turn: Any, case_id: str, index: int, schema: int) -> EvalTurn:
    written = turn.get("id", f"turn-{index + 1}") if isinstance(turn, Mapping) else None
    label = written if isinstance(written, str) else ""
    bad = ("invalid_eval_turn", case_id, label)
    fields = {"expected": bad, "expected_response": bad, "expected_trajectory": bad}
    where = ("invalid_eval_turn", case_id, index)
    given = {**fields, "metadata": bad}
    raw: _RawTurnV1 | _RawTurnV2 = (
        _decoded(_RawTurnV2, turn, where, given)
        if schema == SCHEMA_VERSION
        else _decoded(_RawTurnV1, turn, where, given)
    )
    turn_id = _ident(
        f"turn-{index + 1}" if raw.id is msgspec.UNSET else raw.id,
        ("invalid_eval_turn_id", case_id, index),
        "a turn id",
    )
    if raw.input is msgspec.UNSET:
        raise AdkError(("missing_eval_turn_input", case_id, turn_id), "a turn has an input")
    if not isinstance(raw.input, str) or len(raw.input) > MAX_TEXT_CHARS:
        raise AdkError(("invalid_eval_turn", case_id, turn_id), "a turn's input is a string")
    if isinstance(raw, _RawTurnV2):
        expected, steps = raw.expected_response, raw.expected_trajectory
    else:
        expected, steps = raw.expected, None
    return EvalTurn(
        id=turn_id,
        input=raw.input,
        expected_response=expected,
        expected_trajectory=_trajectory(steps, ("invalid_eval_turn", case_id, turn_id)),
        metadata=prune(raw.metadata),
    )


def _trajectory(
    value: list[Any] | None, reason: tuple[Any, ...]
) -> tuple[ExpectedToolCall, ...] | None:
    """An expected trajectory: a list of tool names or ``{"name", "args"?}`` objects."""
    if value is None:
        return None
    steps = []
    for step in value:
        if isinstance(step, str):
            steps.append(ExpectedToolCall(name=_ident(step, reason, "a tool name")))
            continue
        raw = _decoded(_RawStep, step, reason, {"args": reason, "name": reason})
        steps.append(
            ExpectedToolCall(
                name=_ident(raw.name, reason, "a tool name"),
                args=None if raw.args is None else prune(raw.args),
            )
        )
    return tuple(steps)


def _ident(value: Any, reason: Any, what: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_ID_CHARS:
        raise AdkError(reason, f"{what} is a string of 1..{MAX_ID_CHARS} characters")
    return value


def _shown(value: Any) -> Any:
    if isinstance(value, int | str) and not isinstance(value, bool) and len(str(value)) <= 32:
        return value
    return type(value).__name__
