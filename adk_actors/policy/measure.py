"""Canonical byte measurement: what the runtime policy's budgets count.

Tool arguments and structured values are measured as canonical JSON (keys sorted,
compact separators, UTF-8), so equal values measure equally whatever their key
order. Text is measured as its UTF-8 payload and a `Content` as its canonical JSON.
Values that are not strictly JSON-safe are refused, never stringified.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import msgspec

from providers import content as _content
from providers.content import Content
from providers.errors import AdkError

MAX_JSON_DEPTH = 64


def canonical_json(value: object) -> bytes:
    """The canonical JSON bytes of a strictly JSON-safe value; refuses anything else.

    Strict means dicts with string keys, lists, tuples, strings, integers, finite
    floats, booleans and None, nested at most `MAX_JSON_DEPTH` deep. Raises
    `AdkError("invalid_json_value")` (naming no value) otherwise.
    """
    _check_json_safe(value, 0)
    try:
        return msgspec.json.encode(value, order="sorted")
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        raise AdkError("invalid_json_value", "the value has no canonical JSON form") from None


def measure_arguments(args: object) -> int:
    """Canonical JSON byte size of tool arguments (a mapping); `invalid_arguments` otherwise."""
    if not isinstance(args, Mapping):
        raise AdkError("invalid_arguments", "tool arguments must be a JSON object")
    try:
        return len(canonical_json(dict(args)))
    except AdkError:
        raise AdkError("invalid_arguments", "tool arguments must be JSON-safe") from None


def measure_content(value: object) -> int:
    """Byte size of a content value; `invalid_content` if it has no canonical form.

    A `str` (or UTF-8 `bytes`) counts its UTF-8 payload bytes; a `Content` is validated
    and counts its canonical JSON; any other JSON-safe value counts its canonical JSON.
    """
    if isinstance(value, str):
        try:
            return len(value.encode("utf-8"))
        except UnicodeEncodeError:
            raise AdkError("invalid_content", "text must be valid UTF-8") from None
    if isinstance(value, bytes | bytearray):
        try:
            bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise AdkError("invalid_content", "binary content must be valid UTF-8") from None
        return len(value)
    if isinstance(value, Content):
        try:
            checked = _content.validate(value)
            return len(msgspec.json.encode(checked, order="sorted"))
        except (AdkError, TypeError, ValueError, OverflowError, msgspec.EncodeError):
            raise AdkError("invalid_content", "content must be valid canonical content") from None
    try:
        return len(canonical_json(value))
    except AdkError:
        raise AdkError("invalid_content", "structured content must be JSON-safe") from None


def _check_json_safe(value: object, depth: int) -> None:
    """Walk `value`; raise `invalid_json_value` at the first non-JSON-safe node."""
    if depth > MAX_JSON_DEPTH:
        raise AdkError("invalid_json_value", f"JSON values nest at most {MAX_JSON_DEPTH} deep")
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise AdkError("invalid_json_value", "JSON numbers must be finite")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise AdkError("invalid_json_value", "JSON object keys must be strings")
            _check_json_safe(item, depth + 1)
        return
    if isinstance(value, list | tuple):
        for item in value:
            _check_json_safe(item, depth + 1)
        return
    raise AdkError("invalid_json_value", f"{type(value).__name__} is not a JSON value")
