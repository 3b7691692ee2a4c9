"""Strict JSON: the one parser for JSON that comes from outside (files, request bodies).

`strict_json_loads` accepts UTF-8 JSON text and nothing more lenient: no ``NaN``,
``Infinity`` or ``-Infinity``, no number that overflows to infinity (``1e999``), no
key twice in one object, and at most `max_depth` nested objects and arrays (the
outermost is level 1, as `providers.content.MAX_JSON_DEPTH` counts). The depth is
read from the text before parsing, so deep input is refused, never a
`RecursionError`. The agent config loader and the daemon's request bodies both use
it, so both refuse the same documents.
"""

from __future__ import annotations

import json
import math
from typing import Any

from providers.content import MAX_JSON_DEPTH, json_too_deep_bytes
from providers.errors import AdkError, key_name

DEFAULT_MAX_DEPTH = MAX_JSON_DEPTH


class StrictJsonError(AdkError):
    """Refused JSON. `reason`: ``"invalid_json"`` (not UTF-8 JSON, or a non-finite
    number), ``"json_too_deep"``, or ``("duplicate_json_key", key)`` (the key made
    printable and bounded by `providers.errors.key_name`)."""


def strict_json_loads(data: bytes | bytearray | str, *, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """The value of the JSON text `data`, or `StrictJsonError` (see the module doc)."""
    try:
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        text = data if isinstance(data, str) else raw.decode("utf-8")
    except UnicodeError:
        raise StrictJsonError("invalid_json", "the text is not valid UTF-8") from None
    if json_too_deep_bytes(raw, max_depth):
        raise _too_deep(max_depth)
    try:
        return json.loads(
            text,
            object_pairs_hook=_unique_keys,
            parse_constant=_no_constant,
            parse_float=_finite_float,
        )
    except _DuplicateKey as error:
        raise StrictJsonError(
            ("duplicate_json_key", error.key), "a key appears twice in one object"
        ) from None
    except RecursionError:
        raise _too_deep(max_depth) from None
    except ValueError:
        raise StrictJsonError("invalid_json", "the text is not valid JSON") from None


def _too_deep(max_depth: int) -> StrictJsonError:
    return StrictJsonError("json_too_deep", f"objects and arrays nest at most {max_depth} deep")


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__("duplicate key")
        self.key = key_name(key)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or an exponent, refused if it is not finite."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("a number out of range")
    return value
