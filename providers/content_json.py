"""JSON as it stands: `canonical_json` (the bytes of a value that is JSON without any
change) and `json_too_deep_bytes` (nesting read from the bytes), the rules function
payloads and other JSON-safe values are held to (`providers.content`)."""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec

from providers.errors import AdkError

MAX_JSON_DEPTH = 64
"""Objects and arrays nest at most this deep in a function payload (and in what else is
checked with `canonical_json`): the payload object is level 1. The same bound as
`providers.errors.prune` and the runtime policy's JSON values: whatever is accepted,
`prune` keeps whole."""

_json_encoder = msgspec.json.Encoder()
_json_decoder = msgspec.json.Decoder()


def canonical_json(
    value: Any, *, not_json: Any, not_canonical: Any, too_deep: Any = "json_too_deep"
) -> bytes:
    """The JSON bytes of `value`, if `value` is JSON as it stands: mappings with string
    keys, lists (or tuples), strings, finite numbers, booleans and None, objects and
    arrays nested at most `MAX_JSON_DEPTH` deep. Otherwise an `AdkError`:
    ``invalid_utf8`` for a lone surrogate; `too_deep` for deeper nesting; `not_canonical`
    for what becomes JSON only by changing (a non-string key of any type, NaN or
    infinity, a set, bytes, an object the encoder converts); `not_json` for what has no
    JSON form at all.

    One encode, then one decode compared with `value` (both in C); only a value that
    differs is walked, to tell a tuple (accepted) from a real change. The depth is read
    from the encoded bytes (`json_too_deep_bytes`), never by walking `value`."""
    try:
        data = _json_encoder.encode(value)
    except UnicodeEncodeError:
        raise AdkError("invalid_utf8", "strings must be valid UTF-8 (no lone surrogates)") from None
    except RecursionError:
        raise AdkError(too_deep, f"JSON nests at most {MAX_JSON_DEPTH} deep") from None
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        found = _json_change(value) or "a value with no JSON form"
        key = found.startswith(_KEY_CHANGE)  # any non-string key: not canonical, as above
        raise AdkError(not_canonical if key else not_json, f"not JSON: {found}") from None
    if json_too_deep_bytes(data):
        raise AdkError(too_deep, f"JSON nests at most {MAX_JSON_DEPTH} deep")
    if _json_decoder.decode(data) != value:
        change = _json_change(value)
        if change is not None:
            raise AdkError(not_canonical, f"not JSON as it stands: {change}")
    return data


_KEY_CHANGE = "a key of type"
_NOT_STRUCTURE = bytes(range(256)).translate(None, b'"[]{}')
_INNERMOST = re.compile(rb"\[\]|\{\}")


def json_too_deep_bytes(data: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True if the JSON text `data` nests objects and arrays more than `limit` deep.

    Read from the bytes, in C-speed passes, never by walking a value: fewer than
    `limit` brackets cannot be too deep; otherwise escapes and strings are removed,
    leaving only the brackets, and each pass strips the innermost pairs."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    # every backslash starts an escape: drop escaped backslashes, then escaped quotes
    shape = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    shape = shape.replace(b'""', b"")  # most strings hold no bracket
    if b'"' in shape:  # quotes now alternate: even pieces are outside strings
        shape = b"".join(shape.split(b'"')[::2])
    quick, passes = shape, 0
    while quick and passes < limit // 2:  # a pass strips one or two levels
        quick = quick.replace(b"[]", b"").replace(b"{}", b"")
        passes += 1
    if not quick:
        return False
    for _ in range(limit):  # exactly one level per pass
        shape = _INNERMOST.sub(b"", shape)
        if not shape:
            return False
    return True


def _json_change(value: Any) -> str | None:
    """What JSON encoding would change in `value` (None: only tuples, which stay arrays).
    Each container is walked once, so a value that contains itself ends the walk."""
    stack = [value]
    walked: set[int] = set()
    while stack:
        item = stack.pop()
        if item is None or isinstance(item, str | bool | int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return "a NaN or infinite number"
            continue
        if isinstance(item, dict | list | tuple):
            if id(item) in walked:
                continue
            walked.add(id(item))
        if isinstance(item, dict):
            for key, nested in item.items():
                if not isinstance(key, str):
                    return f"{_KEY_CHANGE} {type(key).__name__}"
                stack.append(nested)
        elif isinstance(item, list | tuple):
            stack.extend(item)
        else:
            return f"a value of type {type(item).__name__}"
    return None
