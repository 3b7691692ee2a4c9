"""The checks behind every content constructor, `validate` and `decode`: each field's
type, the limits, MIME types, base64, URIs, function names and payloads, and the typed
refusal for what msgspec rejects (unknown keys named)."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any, NoReturn
from urllib.parse import urlsplit

import msgspec

from providers.content_json import canonical_json
from providers.content_types import (
    ROLES,
    Content,
    ContentLimits,
    FileDataPart,
    FunctionCallPart,
    FunctionResponsePart,
    InlineDataPart,
    Part,
    TextPart,
)
from providers.errors import MAX_KEYS_NAMED, AdkError, key_name

_MIME = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
"""Matched with `fullmatch` (``$`` would accept a trailing newline)."""

_PART_TYPES: dict[Any, type[msgspec.Struct]] = {
    part.__struct_config__.tag: part
    for part in (TextPart, InlineDataPart, FileDataPart, FunctionCallPart, FunctionResponsePart)
}


def structural(message: str) -> str:
    # msgspec names the path and the expected type, never the offending value
    return _printable(message[:200])


_UNKNOWN_FIELD = re.compile(
    r"^Object contains unknown field `(?P<name>[^`]*)`(?: - at `\$(?P<path>[^`]*)`)?$"
)
_PART_PATH = re.compile(r"^\.parts\[(?P<index>\d+)\]$")
_PAYLOAD_KEY = re.compile(r" - at `key` in `\$\.parts\[\d+\]\.(?:args|response)`$")


def refusal(message: str, obj: Any) -> AdkError:
    """The typed error for a msgspec validation failure of the dict form `obj`."""
    unknown = _UNKNOWN_FIELD.match(message)
    if unknown:
        where = _printable(unknown["path"] or "")
        names = _unknown_keys(obj, where) or [_printable(unknown["name"][:64])]
        shown = names[:MAX_KEYS_NAMED]
        return AdkError(
            ("invalid_content_part", ("unknown_keys", shown)),
            f"unknown keys at '${where}': {', '.join(map(repr, shown))}",
        )
    if _PAYLOAD_KEY.search(message):
        return AdkError("not_canonical_json", "function payload keys must be strings")
    return AdkError("invalid_content", structural(message))


def _printable(text: str) -> str:
    """`text` with any lone surrogate replaced, so an error carrying it stays JSON."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def _unknown_keys(obj: Any, where: str) -> list[str]:
    """Every key of the content (``where`` empty) or part (``.parts[i]``) that it does not have."""
    allowed: set[str] = {"role", "parts"}
    if where:
        found = _PART_PATH.match(where)
        parts = obj.get("parts") if isinstance(obj, Mapping) else None
        index = int(found["index"]) if found else -1
        obj = parts[index] if isinstance(parts, list) and 0 <= index < len(parts) else None
        kind = _PART_TYPES.get(obj.get("type")) if isinstance(obj, Mapping) else None
        allowed = {"type", *kind.__struct_encode_fields__} if kind else set()
    if not isinstance(obj, Mapping):
        return []
    return sorted({_printable(key_name(key)) for key in obj if key not in allowed})


def checked(content: Content, limits: ContentLimits) -> Content:
    if not isinstance(content.role, str) or content.role not in ROLES:
        raise AdkError("invalid_role", f"role must be one of {ROLES}")
    if not isinstance(content.parts, tuple | list):
        raise AdkError("invalid_content", "parts is a tuple of parts")
    if not content.parts:
        raise AdkError("empty_content", "content needs at least one part")
    if len(content.parts) > limits.max_parts:
        raise AdkError("too_many_parts", f"at most {limits.max_parts} parts")
    inline_total = 0
    for part in content.parts:
        inline_total += check_part(part, limits)
        if inline_total > limits.max_inline_total_bytes:
            raise AdkError(
                "inline_data_total_too_large",
                f"at most {limits.max_inline_total_bytes} bytes inline",
            )
    return content


def check_part(part: Part, limits: ContentLimits) -> int:
    """Validate one part; returns its decoded inline byte count (0 for other kinds).
    Each field's type is checked first (a struct built directly is not)."""
    if isinstance(part, TextPart):
        if (
            part.thought_signature is not None and not isinstance(part.thought_signature, str)
        ) or not (isinstance(part.text, str) and isinstance(part.thought, bool)):
            _wrong_type(part)
        if _utf8_size(part.text) > limits.max_text_bytes:
            raise AdkError(
                "text_part_too_large", f"at most {limits.max_text_bytes} bytes per text part"
            )
        _check_utf8(part.thought_signature)
        return 0
    if isinstance(part, InlineDataPart):
        if not isinstance(part.data, str):
            _wrong_type(part)
        _check_mime(part.mime_type)
        size = _canonical_base64_size(part.data)
        if size > limits.max_inline_bytes:
            raise AdkError(
                "inline_data_too_large", f"at most {limits.max_inline_bytes} bytes per inline part"
            )
        return size
    if isinstance(part, FileDataPart):
        if not isinstance(part.file_uri, str):
            _wrong_type(part)
        _check_mime(part.mime_type)
        _check_uri(part.file_uri, limits)
        return 0
    if isinstance(part, FunctionCallPart | FunctionResponsePart):
        payload = part.args if isinstance(part, FunctionCallPart) else part.response
        if not (isinstance(part.name, str) and isinstance(payload, dict)) or not (
            part.id is None or isinstance(part.id, str)
        ):
            _wrong_type(part)
        if isinstance(part, FunctionCallPart) and not (
            part.thought_signature is None or isinstance(part.thought_signature, str)
        ):
            _wrong_type(part)
        if not part.name or len(part.name) > 128:
            raise AdkError("invalid_function_name", "function names are 1..128 characters")
        _check_utf8(part.name)
        _check_utf8(part.id)
        if isinstance(part, FunctionCallPart):
            _check_utf8(part.thought_signature)
        size = len(
            canonical_json(
                payload, not_json="invalid_function_payload", not_canonical="not_canonical_json"
            )
        )
        if size > limits.max_function_payload_bytes:
            raise AdkError(
                "function_payload_too_large",
                f"at most {limits.max_function_payload_bytes} bytes per payload",
            )
        return 0
    raise AdkError("invalid_content", f"unknown part type {type(part).__name__}")


def _wrong_type(part: Part) -> NoReturn:
    raise AdkError(
        "invalid_content", f"a field of a {part.__struct_config__.tag} part has the wrong type"
    )


def _utf8_size(value: str) -> int:
    """UTF-8 byte length of `value` (``invalid_utf8`` for a lone surrogate): no copy when
    it is ASCII, one strict encode otherwise."""
    if value.isascii():
        return len(value)
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise AdkError("invalid_utf8", "text must be valid UTF-8 (no lone surrogates)") from None


def _check_utf8(value: str | None) -> None:
    if value is not None and not value.isascii():
        _utf8_size(value)


def _check_mime(mime_type: str) -> None:
    if not isinstance(mime_type, str) or not _MIME.fullmatch(mime_type):
        raise AdkError(
            "invalid_mime_type", "MIME types are lowercase type/subtype without parameters"
        )


def _canonical_base64_size(data: str) -> int:
    try:
        raw = base64.b64decode(data.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise AdkError("invalid_base64", "inline data must be standard, padded base64") from None
    if base64.b64encode(raw).decode("ascii") != data:
        raise AdkError("invalid_base64", "inline data must be canonical base64")
    return len(raw)


def _check_uri(uri: str, limits: ContentLimits) -> None:
    if _utf8_size(uri) > limits.max_uri_bytes:
        raise AdkError("uri_too_long", f"at most {limits.max_uri_bytes} bytes per URI")
    try:
        parts = urlsplit(uri)
    except ValueError:
        raise AdkError("invalid_uri", "the URI does not parse") from None
    if parts.scheme not in ("https", "gs"):
        raise AdkError("unsupported_uri_scheme", "file URIs must be https:// or gs://")
    if not parts.netloc or not parts.hostname:
        raise AdkError("invalid_uri", "file URIs must be absolute with a host")
    if parts.username is not None or parts.password is not None:
        raise AdkError("uri_credentials_not_allowed", "file URIs may not carry credentials")
    if parts.fragment or "#" in uri:
        raise AdkError("uri_fragment_not_allowed", "file URIs may not carry a fragment")
    if any(ch.isspace() for ch in uri):
        raise AdkError("invalid_uri", "file URIs may not contain whitespace")
