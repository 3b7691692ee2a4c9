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
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Literal, NoReturn
from urllib.parse import urlsplit

import msgspec

from providers.errors import MAX_KEYS_NAMED, AdkError, key_name, prune
from providers.frozen import FrozenDict, freeze

CONTENT_SCHEMA_VERSION = 1

Role = Literal["user", "model", "system", "tool"]
ROLES = ("user", "model", "system", "tool")

_MIME = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
"""Matched with `fullmatch` (``$`` would accept a trailing newline)."""

MAX_JSON_DEPTH = 64
"""Objects and arrays nest at most this deep in a function payload (and in what else is
checked with `canonical_json`): the payload object is level 1. The same bound as
`providers.errors.prune` and the runtime policy's JSON values: whatever is accepted,
`prune` keeps whole."""

CONTENT_REASONS = frozenset(
    {
        "invalid_content",
        "invalid_content_part",
        "invalid_role",
        "empty_content",
        "too_many_parts",
        "text_part_too_large",
        "inline_data_too_large",
        "inline_data_total_too_large",
        "invalid_mime_type",
        "invalid_base64",
        "uri_too_long",
        "invalid_uri",
        "unsupported_uri_scheme",
        "uri_credentials_not_allowed",
        "uri_fragment_not_allowed",
        "invalid_function_name",
        "invalid_function_payload",
        "not_canonical_json",
        "function_payload_too_large",
        "json_too_deep",
        "invalid_utf8",
        "invalid_content_limits",
        "content_limit_above_ceiling",
    }
)
"""Every `AdkError.reason` (its first element, for a tuple) that content construction,
`validate` and `decode` raise: the documented set the fuzz suite checks against."""


class TextPart(
    msgspec.Struct,
    frozen=True,
    tag="text",
    tag_field="type",
    omit_defaults=True,
    forbid_unknown_fields=True,
):
    text: str
    thought: bool = False
    thought_signature: str | None = None


class InlineDataPart(
    msgspec.Struct, frozen=True, tag="inline_data", tag_field="type", forbid_unknown_fields=True
):
    mime_type: str
    data: str  # canonical base64 (standard alphabet, padded)


class FileDataPart(
    msgspec.Struct, frozen=True, tag="file_data", tag_field="type", forbid_unknown_fields=True
):
    file_uri: str
    mime_type: str


class FunctionCallPart(
    msgspec.Struct,
    frozen=True,
    tag="function_call",
    tag_field="type",
    omit_defaults=True,
    forbid_unknown_fields=True,
):
    name: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)
    id: str | None = None
    thought_signature: str | None = None


class FunctionResponsePart(
    msgspec.Struct,
    frozen=True,
    tag="function_response",
    tag_field="type",
    omit_defaults=True,
    forbid_unknown_fields=True,
):
    name: str
    response: dict[str, Any] = msgspec.field(default_factory=dict)
    id: str | None = None


Part = TextPart | InlineDataPart | FileDataPart | FunctionCallPart | FunctionResponsePart


class Content(msgspec.Struct, frozen=True, forbid_unknown_fields=True, weakref=True):
    """A message: who said it (`role`) and what (`parts`). Weakly referable, so
    `canonical` can remember its answer for a stored (frozen) content without keeping
    it alive."""

    role: str
    parts: tuple[Part, ...]

    def text_value(self, include_thoughts: bool = False) -> str:
        """The visible text, concatenated (thought parts left out unless asked for)."""
        return "".join(
            part.text
            for part in self.parts
            if isinstance(part, TextPart) and (include_thoughts or not part.thought)
        )

    def function_calls(self) -> list[FunctionCallPart]:
        return [part for part in self.parts if isinstance(part, FunctionCallPart)]

    def is_text_only(self) -> bool:
        return all(isinstance(part, TextPart) for part in self.parts)


_CEILING_VALUES = {
    "max_parts": 64,
    "max_text_bytes": 1 << 20,
    "max_inline_bytes": 10 << 20,
    "max_inline_total_bytes": 15 << 20,
    "max_uri_bytes": 4096,
    "max_function_payload_bytes": 1 << 20,
}


class ContentLimits(msgspec.Struct, frozen=True):
    """Validation limits. Each may be lowered; none may exceed `CEILINGS`, and the inline
    limit may not exceed the total inline limit. Checked when constructed (``AdkError``:
    ``invalid_content_limits``, ``content_limit_above_ceiling`` or
    ``("invalid_content_limits", "max_inline_exceeds_total")``)."""

    max_parts: int = _CEILING_VALUES["max_parts"]
    max_text_bytes: int = _CEILING_VALUES["max_text_bytes"]
    max_inline_bytes: int = _CEILING_VALUES["max_inline_bytes"]
    max_inline_total_bytes: int = _CEILING_VALUES["max_inline_total_bytes"]
    max_uri_bytes: int = _CEILING_VALUES["max_uri_bytes"]
    max_function_payload_bytes: int = _CEILING_VALUES["max_function_payload_bytes"]

    def __post_init__(self) -> None:
        for field in self.__struct_fields__:
            value, ceiling = getattr(self, field), _CEILING_VALUES[field]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AdkError("invalid_content_limits", f"{field} must be a positive int")
            if value > ceiling:
                raise AdkError("content_limit_above_ceiling", f"{field} may not exceed {ceiling}")
        if self.max_inline_bytes > self.max_inline_total_bytes:
            raise AdkError(
                ("invalid_content_limits", "max_inline_exceeds_total"),
                "max_inline_bytes may not exceed max_inline_total_bytes",
            )

    def checked(self) -> ContentLimits:
        """The limits (already checked when they were constructed)."""
        return self


CEILINGS = ContentLimits()
DEFAULT_LIMITS = ContentLimits()

_json_encoder = msgspec.json.Encoder()
_json_decoder = msgspec.json.Decoder()
_content_decoder = msgspec.json.Decoder(Content)
_PART_TYPES: dict[Any, type[msgspec.Struct]] = {
    part.__struct_config__.tag: part
    for part in (TextPart, InlineDataPart, FileDataPart, FunctionCallPart, FunctionResponsePart)
}


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


CANONICAL_CACHE_SIZE = 1 << 16
"""How many frozen contents `canonical` remembers its answer for (oldest dropped first)."""
_canonical_cache: dict[int, tuple[weakref.ref[Content], Content | None, bool]] = {}
"""id(content) -> (the content, weakly; its answer, None if the content itself; whether
a hit must check again that its empty payloads are still empty)."""
_canonical_insert = threading.Lock()
_MUTABLE, _FROZEN, _EMPTY_PAYLOADS = 0, 1, 2


def canonical(content: Content) -> Content:
    """What crosses the model boundary: adjacent plain text parts merged, and every
    credential-named key (``api_key``, ``access_token``, ...) removed, at any depth,
    from function-call arguments and function responses. Signatures are kept.

    A content nobody can change (`providers.frozen`: a stored history entry) is made
    canonical once: the answer is remembered, keyed by the content's identity and
    held only while the content lives, for at most `CANONICAL_CACHE_SIZE` contents;
    a changed answer is frozen too, so callers can share it."""
    key = id(content)
    hit = _canonical_cache.get(key)
    if hit is not None and hit[0]() is content and (not hit[2] or _frozenness(content)):
        return content if hit[1] is None else hit[1]
    frozenness = _frozenness(content)
    result = without_secrets(_merged_text(content))
    if frozenness == _MUTABLE:
        return result
    answer = None if result is content else freeze(result)
    _remember(key, content, answer, frozenness == _EMPTY_PAYLOADS)
    return content if answer is None else answer


def _frozenness(content: Content) -> int:
    """`_FROZEN` if nothing in `content` can change (every payload read-only, every
    other field immutable); `_EMPTY_PAYLOADS` if only empty (plain) payloads could,
    which a cached answer must check again; `_MUTABLE` otherwise."""
    frozenness = _FROZEN
    for part in content.parts:
        if isinstance(part, FunctionCallPart):
            payload: dict[str, Any] = part.args
        elif isinstance(part, FunctionResponsePart):
            payload = part.response
        else:
            continue
        if type(payload) is not FrozenDict:
            if payload:
                return _MUTABLE
            frozenness = _EMPTY_PAYLOADS
    return frozenness


def _remember(key: int, content: Content, answer: Content | None, recheck: bool) -> None:
    """Keep `canonical`'s answer for `content` until it dies (or is evicted)."""

    def forget(ref: weakref.ref[Content]) -> None:  # runs when the content dies
        entry = _canonical_cache.get(key)
        if entry is not None and entry[0] is ref:
            _canonical_cache.pop(key, None)

    with _canonical_insert:
        while len(_canonical_cache) >= CANONICAL_CACHE_SIZE:
            try:
                del _canonical_cache[next(iter(_canonical_cache))]
            except (StopIteration, RuntimeError, KeyError):  # a `forget` ran meanwhile
                break
        _canonical_cache[key] = (weakref.ref(content, forget), answer, recheck)


def without_secrets(content: Content) -> Content:
    """`content` with every credential-named key removed, at any depth, from function-call
    arguments and function responses (`providers.errors.prune`); `content` itself when
    there is none. What session queries show of stored content."""
    parts: list[Part] = []
    changed = False
    for part in content.parts:
        if isinstance(part, FunctionCallPart):
            args = prune(part.args)
            if args is not part.args:
                part = msgspec.structs.replace(part, args=args)
                changed = True
        elif isinstance(part, FunctionResponsePart):
            response = prune(part.response)
            if response is not part.response:
                part = msgspec.structs.replace(part, response=response)
                changed = True
        parts.append(part)
    return Content(content.role, tuple(parts)) if changed else content


def _merged_text(content: Content) -> Content:
    parts: list[Part] = []
    changed = False
    for part in content.parts:
        if isinstance(part, TextPart) and parts and _plain(part) and _plain(parts[-1]):
            part, changed = TextPart(parts.pop().text + part.text), True  # type: ignore[union-attr]
        parts.append(part)
    return Content(content.role, tuple(parts)) if changed else content


def _plain(part: Any) -> bool:
    return isinstance(part, TextPart) and not part.thought and part.thought_signature is None


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


def _structural(message: str) -> str:
    # msgspec names the path and the expected type, never the offending value
    return _printable(message[:200])


_UNKNOWN_FIELD = re.compile(
    r"^Object contains unknown field `(?P<name>[^`]*)`(?: - at `\$(?P<path>[^`]*)`)?$"
)
_PART_PATH = re.compile(r"^\.parts\[(?P<index>\d+)\]$")
_PAYLOAD_KEY = re.compile(r" - at `key` in `\$\.parts\[\d+\]\.(?:args|response)`$")


def _refusal(message: str, obj: Any) -> AdkError:
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
    return AdkError("invalid_content", _structural(message))


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


def _checked(content: Content, limits: ContentLimits) -> Content:
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
        inline_total += _check_part(part, limits)
        if inline_total > limits.max_inline_total_bytes:
            raise AdkError(
                "inline_data_total_too_large",
                f"at most {limits.max_inline_total_bytes} bytes inline",
            )
    return content


def _check_part(part: Part, limits: ContentLimits) -> int:
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
