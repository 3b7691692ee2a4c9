"""The provider-neutral content model: `Content(role, parts)` and its `Part` variants.

Values are frozen msgspec structs, JSON-safe and versioned (`CONTENT_SCHEMA_VERSION`),
so a content value crosses processes, events, sessions and the wire unchanged.
Constructors validate before they return; raw inline bytes become canonical base64.

Limits (defaults, which `ContentLimits` may lower but never raise): 64 parts, 1 MiB
per text part, 10 MiB per inline part, 15 MiB of inline data in total, 4 KiB per
URI, 1 MiB per function-call or function-response payload (canonical JSON bytes); an
inline limit may not exceed the total inline limit (``max_inline_exceeds_total``).

What is refused, and how (`AdkError.reason`): a key the content or a part does not
have, ``("invalid_content_part", ("unknown_keys", [names...]))``; a function payload
that is JSON only after a change (a non-string key, NaN or infinity, a set, bytes),
``not_canonical_json``; a lone surrogate in any string, ``invalid_utf8``; a function
payload nested more than `MAX_JSON_DEPTH` (64) levels of objects and arrays (the payload
object itself is the first), ``json_too_deep``; a field of the wrong type (a number for
a text, a list for arguments), JSON that does not parse or is not a content,
``invalid_content``. Every constructor, `validate` and `decode` raise only `AdkError`.

This module is the public face: the constructors and `validate`/`encode`/`decode`
here, and the public names of the modules it is split into (the types,
`providers.content_types`; the limits of the checks, `providers.content_checks`; JSON
as it stands, `providers.content_json`; `canonical` and `without_secrets`,
`providers.content_canonical`), as `__all__` lists them. The checks' helpers
(`check_part`, `checked`, `refusal`, `structural`, `MAX_KEYS_NAMED`) stay in
`providers.content_checks`, and the canonical cache's bound, `CANONICAL_CACHE_SIZE`,
only in `providers.content_canonical`, where it is read (a copy here could be patched
to no effect).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from providers.content_canonical import canonical, without_secrets
from providers.content_checks import check_part as _check_part
from providers.content_checks import checked as _checked
from providers.content_checks import refusal as _refusal
from providers.content_checks import structural as _structural
from providers.content_json import MAX_JSON_DEPTH, canonical_json, json_too_deep_bytes
from providers.content_types import (
    CEILINGS,
    CONTENT_REASONS,
    CONTENT_SCHEMA_VERSION,
    DEFAULT_LIMITS,
    ROLES,
    Content,
    ContentLimits,
    FileDataPart,
    FunctionCallPart,
    FunctionResponsePart,
    InlineDataPart,
    Part,
    Role,
    TextPart,
)
from providers.errors import AdkError

_json_encoder = msgspec.json.Encoder()
_json_decoder = msgspec.json.Decoder()
_content_decoder = msgspec.json.Decoder(Content)


# -- constructors --------------------------------------------------------------------------


def text(value: str, *, thought: bool = False) -> TextPart:
    """A text part (``thought=True`` marks a thought summary, never visible output)."""
    part = TextPart(value, thought=thought)  # every field's type is checked by _check_part
    _check_part(part, DEFAULT_LIMITS)
    return part


def inline_data(mime_type: str, data: bytes | str) -> InlineDataPart:
    """Inline bytes; raw bytes are stored as canonical base64, a str must already be base64."""
    encoded = (
        base64.b64encode(data).decode("ascii") if isinstance(data, bytes | bytearray) else data
    )
    if not isinstance(encoded, str):
        raise AdkError("invalid_content", "inline data is bytes or a base64 string")
    part = InlineDataPart(mime_type, encoded)
    _check_part(part, DEFAULT_LIMITS)
    return part


def file_data(file_uri: str, mime_type: str) -> FileDataPart:
    """A reference to a remote file (``https://`` or ``gs://``); never fetched locally."""
    part = FileDataPart(file_uri, mime_type)
    _check_part(part, DEFAULT_LIMITS)
    return part


def function_call(
    name: str,
    args: Mapping[str, Any] | None = None,
    *,
    id: str | None = None,
    thought_signature: str | None = None,
) -> FunctionCallPart:
    part = FunctionCallPart(name, _payload(args, "args"), id, thought_signature)
    _check_part(part, DEFAULT_LIMITS)
    return part


def function_response(
    name: str, response: Mapping[str, Any], *, id: str | None = None
) -> FunctionResponsePart:
    part = FunctionResponsePart(name, _payload(response, "response"), id)
    _check_part(part, DEFAULT_LIMITS)
    return part


def new(
    parts: Iterable[Part | str], role: str = "user", *, limits: ContentLimits | None = None
) -> Content:
    """A validated `Content`; plain strings become text parts."""
    if not isinstance(parts, Iterable) or isinstance(parts, bytes | bytearray):
        raise AdkError("invalid_content", "parts is an iterable of parts or strings")
    built = tuple(TextPart(part) if isinstance(part, str) else part for part in parts)
    return _checked(Content(role, built), _limits(limits))


def from_text(value: str, role: str = "user") -> Content:
    if not isinstance(value, str):
        raise AdkError("invalid_content", "the text is a string")
    return new([value], role)


def _payload(value: Any, what: str) -> dict[str, Any]:
    """A function payload as the dict it is stored as (None: empty, for ``args``)."""
    if value is None and what == "args":
        return {}
    if not isinstance(value, Mapping):
        raise AdkError("invalid_function_payload", f"function {what} is a mapping")
    return dict(value)


def _limits(limits: Any) -> ContentLimits:
    if limits is None:
        return DEFAULT_LIMITS
    if not isinstance(limits, ContentLimits):
        raise AdkError("invalid_content_limits", "limits is a ContentLimits")
    return limits


# -- validation ----------------------------------------------------------------------------


def validate(obj: Any, *, limits: ContentLimits | None = None) -> Content:
    """Return `obj` as a valid `Content` (from a `Content` or its JSON-safe dict form),
    or raise `AdkError` with the first violation's reason."""
    limits = _limits(limits)
    if isinstance(obj, Content):
        return _checked(obj, limits)
    if not isinstance(obj, Mapping):
        raise AdkError(
            "invalid_content", f"expected Content or a mapping, got {type(obj).__name__}"
        )
    try:
        content = msgspec.convert(obj, Content)
    except msgspec.ValidationError as exc:
        raise _refusal(str(exc), obj) from None
    except (TypeError, ValueError, RecursionError):
        raise AdkError("invalid_content", "not the dict form of a content") from None
    return _checked(content, limits)


def to_dict(content: Content) -> dict[str, Any]:
    """The JSON-safe dict form of `content` (what `validate` accepts back)."""
    return msgspec.to_builtins(content)  # type: ignore[no-any-return]


def encode(content: Content) -> bytes:
    """Canonical JSON bytes."""
    return _json_encoder.encode(content)


def decode(data: bytes | str) -> Content:
    """Parse JSON produced by `encode` (or any equivalent JSON) and validate it.
    Only `AdkError` escapes: JSON nested past Python's recursion limit is
    ``json_too_deep``, a lone surrogate in a str ``invalid_utf8``, anything that is
    neither bytes nor str ``invalid_content``."""
    if not isinstance(data, bytes | bytearray | memoryview | str):
        raise AdkError("invalid_content", "content JSON is bytes or str")
    try:
        content = _content_decoder.decode(data)
    except msgspec.ValidationError as exc:
        try:  # the untyped form names every unknown key, if it parses
            obj = _json_decoder.decode(data)
        except msgspec.DecodeError as malformed:
            # the typed decoder can refuse a field before it reaches the syntax error
            # (``{"":``): malformed JSON is malformed, whatever it met first
            raise AdkError("invalid_content", _structural(str(malformed))) from None
        except RecursionError:
            obj = None
        raise _refusal(str(exc), obj) from None
    except msgspec.DecodeError as exc:
        raise AdkError("invalid_content", _structural(str(exc))) from None
    except RecursionError:
        raise AdkError(
            "json_too_deep", f"JSON nests at most {MAX_JSON_DEPTH} objects and arrays deep"
        ) from None
    except UnicodeEncodeError:
        raise AdkError("invalid_utf8", "content JSON must be valid UTF-8") from None
    return _checked(content, DEFAULT_LIMITS)


__all__ = [
    "CEILINGS",
    "CONTENT_REASONS",
    "CONTENT_SCHEMA_VERSION",
    "DEFAULT_LIMITS",
    "MAX_JSON_DEPTH",
    "ROLES",
    "Content",
    "ContentLimits",
    "FileDataPart",
    "FunctionCallPart",
    "FunctionResponsePart",
    "InlineDataPart",
    "Part",
    "Role",
    "TextPart",
    "canonical",
    "canonical_json",
    "decode",
    "encode",
    "file_data",
    "from_text",
    "function_call",
    "function_response",
    "inline_data",
    "json_too_deep_bytes",
    "new",
    "validate",
    "without_secrets",
]
