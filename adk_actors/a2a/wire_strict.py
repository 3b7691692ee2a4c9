"""Strict JSON -> protobuf for the A2A 1.0 wire types (used by `adk_actors.a2a.wire`).

`strict_parse` walks the JSON along the message's descriptor before protobuf's
``ParseDict`` sees it, and refuses what the spec's JSON forbids and protobuf would take:
snake_case names, unknown and pre-1.0 members (``kind``), nulls outside free JSON, enums
as numbers or unknown names, none or two members of a union (a part's
``text``/``raw``/``url``/``data``, a stream response's payload, a security scheme's
kind), strings, lists and nesting past the bounds below, NaN, more than `MAX_JSON_NODES`
free-JSON values. Every failure, protobuf's included, is a `ShapeError` whose text says
where and why. `loads` reads the body before that (UTF-8 only, no duplicate member, whole-
document bounds) and answers with the JSON-RPC codes (`RpcError`).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message as ProtoMessage

from adk_actors.a2a.errors import RpcError, invalid_request, parse_error

MAX_PARTS = 64
"""Parts per message (the content model's own ceiling)."""
MAX_TEXT_CHARS = 4 << 20
"""A text part. A request's text is bounded again by the server's max_message_bytes and
the content model (1 MiB of UTF-8 per text part); a peer's response by the client's
max_response_bytes."""
MAX_RAW_CHARS = 14_000_000
"""A raw part's base64 (about 10 MiB of bytes, the content model's inline ceiling)."""
MAX_STRING_CHARS = 4096
"""Any other string member (ids, names, URLs, media types, filenames, tokens...)."""
MAX_LONG_STRING_CHARS = 65_536
"""Descriptions (of cards, skills, artifacts) and a card's iconUrl (may be a data: URL)."""
MAX_LIST_ITEMS = 1024
"""Any repeated member or map (history, artifacts and tasks are bounded again by the store)."""
MAX_JSON_DEPTH = 32
"""Nesting of free JSON (``data``, ``metadata``) and of the whole document."""
MAX_JSON_NODES = 10_000
"""JSON values (objects, arrays and scalars, the root included) in one document, and
free-JSON values in one parsed message: protobuf's pure-Python parse costs ~1.5 µs a
value, so this keeps any one document's strict parse within tens of milliseconds."""
MAX_DOCUMENT_DEPTH = 2 * MAX_JSON_DEPTH
"""Nesting of a whole body (`loads`): the envelope and arrays count here, not in `strict_parse`."""

_FREE_JSON = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
)

M = TypeVar("M", bound=ProtoMessage)


class ShapeError(ValueError):
    """JSON that is not the A2A 1.0 shape of a message; the text says where and why."""


def loads(body: bytes | str, *, max_bytes: int, max_nodes: int = MAX_JSON_NODES) -> Any:
    """The value of a JSON body from a peer, strictly: UTF-8 without a byte order mark, no
    member name twice in one object, no NaN/Infinity or overflowing number (``1e999``).
    `RpcError` -32700 (`errors.parse_error`) for a body that is not such JSON; -32600
    (`errors.invalid_request`) past a whole-document bound: more than `max_bytes` bytes,
    more than `max_nodes` values, nested deeper than `MAX_DOCUMENT_DEPTH`. The value count
    is read from the bytes at C speed before parsing, so a refusal is fast."""
    try:
        raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        text = body if isinstance(body, str) else raw.decode("utf-8")
    except UnicodeError:
        raise parse_error("the body is not UTF-8") from None
    if len(raw) > max_bytes:
        raise invalid_request(f"the body is larger than {max_bytes} bytes")
    if text.startswith("\ufeff"):
        raise parse_error("the body starts with a byte order mark")
    if _value_count(raw, max_nodes) > max_nodes:
        raise invalid_request(f"a JSON body holds at most {max_nodes} values")
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique_members,
            parse_constant=_no_constant,
            parse_float=_finite_float,
        )
    except _DuplicateMember:
        raise parse_error("a member name appears twice in one object") from None
    except _NotFinite:
        raise parse_error("numbers are finite (no NaN, Infinity or 1e999)") from None
    except RecursionError:
        raise _too_deep() from None
    except ValueError:
        raise parse_error("the body is not JSON") from None
    brackets = raw.count(b"[") + raw.count(b"{")
    if brackets > MAX_DOCUMENT_DEPTH and _nests_deeper_than(value, MAX_DOCUMENT_DEPTH):
        raise _too_deep()
    return value


_STRING = re.compile(rb'"[^"]*"')
_WHITESPACE = b" \t\r\n"


def _value_count(raw: bytes, limit: int) -> int:
    """The number of values in the JSON text `raw` (exact for valid JSON), or some number
    above `limit` as soon as that is certain. Every value but the root follows a ``[``, a
    ``{`` or a ``,`` outside strings; every string is a value or a member name."""
    upper = raw.count(b",") + raw.count(b"[") + raw.count(b"{") + 1
    if upper <= limit:
        return upper
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    if unescaped.count(b'"') // 4 > limit:  # a name comes with a value: values >= strings / 2
        return limit + 1
    bare = _STRING.sub(b"0", unescaped).translate(None, _WHITESPACE)  # a string is one token
    nested = bare.count(b",") + bare.count(b"[") + bare.count(b"{") + 1
    return nested - bare.count(b"[]") - bare.count(b"{}")


def _nests_deeper_than(value: Any, limit: int) -> bool:
    """Whether `value`'s objects and arrays nest more than `limit` levels (root = 1)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return False


def _too_deep() -> RpcError:
    return invalid_request(f"JSON nests at most {MAX_DOCUMENT_DEPTH} levels deep")


class _DuplicateMember(ValueError):
    """A member name twice in one JSON object."""


class _NotFinite(ValueError):
    """NaN, Infinity or a number that overflows to it."""


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        raise _DuplicateMember
    return members


def _no_constant(name: str) -> Any:
    raise _NotFinite(name)


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _NotFinite(text[:16])
    return number


def strict_parse(cls: type[M], data: Any) -> M:
    """`data` as a `cls`, refusing anything the spec's JSON does not allow (`ShapeError`)."""
    if not isinstance(data, dict):
        raise ShapeError(f"{cls.DESCRIPTOR.name} must be a JSON object")
    descriptor: Descriptor = cls.DESCRIPTOR  # type: ignore[assignment]  # upb's twin type
    _check_shape(data, descriptor, descriptor.name, 1, _FreeJsonBudget(MAX_JSON_NODES))
    try:
        return json_format.ParseDict(data, cls(), ignore_unknown_fields=False)
    except (json_format.ParseError, TypeError, ValueError, RecursionError, AttributeError) as exc:
        raise ShapeError(_parse_error_text(exc, descriptor.name)) from None


_FAILED_FIELD = re.compile(r"Failed to parse (\w+) field")
_AT_PATH = re.compile(r" at ([A-Za-z]\w*(?:\.\w+|\[\d+\])+)\.*$")
_PARSE_PROBLEMS = (
    ("out of range", "a number out of range"),
    ("expected string", "expected a string"),
    ("true or false", "expected true or false"),
    ("must be in a dict", "expected an object"),
    ("time data", "expected an RFC 3339 timestamp"),
    ("Timestamp", "expected an RFC 3339 timestamp"),
    ("int()", "expected an integer"),
    ("integer", "expected an integer"),
    ("multiple", "more than one member of a union"),
    ("surrogate", "invalid UTF-8 (a lone surrogate)"),
)


def _parse_error_text(exc: BaseException, root: str) -> str:
    """Where protobuf's parse failed and what kind of problem, without echoing the value
    (protobuf's own messages quote it, and a value may be a credential)."""
    if isinstance(exc, RecursionError):
        return f"{root}: nested deeper than {MAX_JSON_DEPTH} levels"
    text = str(exc)
    at = _AT_PATH.search(text)
    path = at.group(1) if at else ".".join([root, *_FAILED_FIELD.findall(text)])
    problem = next((say for clue, say in _PARSE_PROBLEMS if clue in text), "wrong type or value")
    return f"{path}: {problem}"


class _FreeJsonBudget:
    """The free-JSON values one `strict_parse` may still take (protobuf parses them in pure
    Python, ~1.5 µs each; review W1)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    def spend(self, where: str) -> None:
        self.left -= 1
        if self.left < 0:
            raise ShapeError(f"{where}: free JSON holds at most {self.limit} values in all")


def _check_shape(
    data: dict[str, Any], descriptor: Descriptor, path: str, depth: int, budget: _FreeJsonBudget
) -> None:
    """Walk `data` along `descriptor`: JSON names only, no ``kind``, bounded, enums by name."""
    if depth > MAX_JSON_DEPTH:
        raise ShapeError(f"{path}: nested deeper than {MAX_JSON_DEPTH} levels")
    if len(data) > MAX_LIST_ITEMS:
        raise ShapeError(f"{path}: more than {MAX_LIST_ITEMS} members")
    by_json = {field.json_name: field for field in descriptor.fields}
    for key, value in data.items():
        field = by_json.get(key) if isinstance(key, str) else None
        if field is None:
            raise ShapeError(_unknown_member_text(key, descriptor, path))
        where = f"{path}.{key}"
        if value is None:
            if field.message_type is not None and field.message_type.full_name in _FREE_JSON:
                continue
            raise ShapeError(f"{where}: null is not allowed (omit the member)")
        if _is_map(field):
            _check_map(value, field, where, depth, budget)
        elif field.is_repeated:
            if not isinstance(value, list):
                raise ShapeError(f"{where}: must be an array")
            limit = MAX_PARTS if key == "parts" and descriptor.name == "Message" else MAX_LIST_ITEMS
            if len(value) > limit:
                raise ShapeError(f"{where}: at most {limit} items")
            for index, item in enumerate(value):
                _check_value(item, field, f"{where}[{index}]", depth, budget)
        else:
            _check_value(value, field, where, depth, budget)
    for oneof in descriptor.oneofs:
        if oneof.name.startswith("_"):
            continue  # proto3 `optional`, not a union
        members = [field.json_name for field in oneof.fields]
        present = sum(1 for member in members if member in data)
        if present != 1:
            raise ShapeError(f"{path}: exactly one of {', '.join(members)} (found {present})")


def _unknown_member_text(key: Any, descriptor: Descriptor, path: str) -> str:
    if key == "kind":
        return f"{path}: 'kind' is pre-1.0 A2A; 1.0 parts and events are told apart by member"
    # every field and enum name is ASCII; a descriptor map (upb, C) handed a lone surrogate
    # leaves a UnicodeEncodeError pending and the next C call fails with SystemError (W15)
    if isinstance(key, str) and key.isascii() and key in descriptor.fields_by_name:
        field = descriptor.fields_by_name[key]
        return f"{path}: use the JSON name {field.json_name!r}, not {key!r}"
    shown = key[:64] if isinstance(key, str) else type(key).__name__
    return f"{path}: unknown member {shown!r}"


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _check_map(
    value: Any, field: FieldDescriptor, where: str, depth: int, budget: _FreeJsonBudget
) -> None:
    if not isinstance(value, dict):
        raise ShapeError(f"{where}: must be an object")
    if len(value) > MAX_LIST_ITEMS:
        raise ShapeError(f"{where}: at most {MAX_LIST_ITEMS} entries")
    entry = field.message_type
    assert entry is not None  # a map field is a message of map entries
    value_field = entry.fields_by_name["value"]
    for key, item in value.items():
        if not isinstance(key, str) or len(key) > MAX_STRING_CHARS:
            raise ShapeError(f"{where}: keys are strings of at most {MAX_STRING_CHARS} chars")
        _check_value(item, value_field, f"{where}.{_printable(key[:64])}", depth, budget)


def _printable(key: str) -> str:
    """`key` safe to put in an error text: a lone surrogate as its escape (review W15)."""
    return key if key.isascii() else key.encode("utf-8", "backslashreplace").decode("utf-8")


def _check_value(
    value: Any, field: FieldDescriptor, where: str, depth: int, budget: _FreeJsonBudget
) -> None:
    message_type = field.message_type
    if message_type is not None:
        if message_type.full_name in _FREE_JSON:
            if _json_depth(value, depth + 1, budget, where) > MAX_JSON_DEPTH:
                raise ShapeError(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels")
            return
        if message_type.full_name == "google.protobuf.Timestamp":
            if not isinstance(value, str) or len(value) > 64:
                raise ShapeError(f"{where}: an RFC 3339 timestamp string")
            return
        if not isinstance(value, dict):
            raise ShapeError(f"{where}: must be an object")
        _check_shape(value, message_type, where, depth + 1, budget)
        return
    if field.enum_type is not None:
        if not isinstance(value, str):
            raise ShapeError(f"{where}: an enum is given by name")
        if not value.isascii() or value not in field.enum_type.values_by_name:
            names = ", ".join(field.enum_type.values_by_name)
            raise ShapeError(f"{where}: not one of {names}")  # the value is not echoed
        return
    if isinstance(value, str):
        limit = _string_limit(field.json_name)
        if len(value) > limit:
            raise ShapeError(f"{where}: at most {limit} chars")


def _string_limit(json_name: str) -> int:
    match json_name:
        case "text":
            return MAX_TEXT_CHARS
        case "raw":
            return MAX_RAW_CHARS
        case "description" | "iconUrl":
            return MAX_LONG_STRING_CHARS
        case _:
            return MAX_STRING_CHARS


def _json_depth(value: Any, depth: int, budget: _FreeJsonBudget, where: str) -> int:
    """The deepest nesting level in `value` (stops counting past `MAX_JSON_DEPTH`); each
    value spends one of `budget`."""
    budget.spend(where)
    if depth > MAX_JSON_DEPTH:
        return depth
    if isinstance(value, dict):
        if len(value) > MAX_LIST_ITEMS:
            raise ShapeError(f"free JSON objects have at most {MAX_LIST_ITEMS} members")
        items: Any = value.values()
    elif isinstance(value, list):
        if len(value) > MAX_LIST_ITEMS:
            raise ShapeError(f"free JSON arrays have at most {MAX_LIST_ITEMS} items")
        items = value
    else:
        if isinstance(value, float) and not math.isfinite(value):
            raise ShapeError("free JSON numbers are finite (no NaN or Infinity)")
        return depth
    return max((_json_depth(item, depth + 1, budget, where) for item in items), default=depth)
