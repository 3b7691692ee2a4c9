"""`AdkError`, the error every public API raises, and recursive secret redaction.

Two ways to keep credentials out of what leaves a boundary, one rule for which keys
hold them (`is_secret_key`, the kernel's `supervision.redaction` rule): `redact` keeps
the key and replaces its value, and redacts credentials in every string (logs,
errors: the shape stays visible); `prune` drops the key (model requests, session query
results: nothing of it is left).

`AdkError.reason` is a stable, bounded value (the spec's atom, e.g.
``missing_api_key``). Messages never carry secrets, raw provider bodies, argument
values or tracebacks; as a last line of defence both the reason and the message are
redacted when the error is built (`redact_value`, `redact_text`), so whatever is made
from an `AdkError` (error events, run status, logs) is too. It lives here because
`providers` and `adk_actors` both raise it; `adk_actors` re-exports it.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import msgspec

from supervision import REDACTED, is_secret_key, redact_text, redact_value

MAX_DETAIL_CHARS = 512
MAX_KEYS_NAMED = 16
"""At most this many unknown option keys are named in an error."""

redact = redact_value
"""A copy of a value with every secret-named key's value replaced by ``[redacted]`` and
credentials in every string redacted (`supervision.redact_value`)."""

__all__ = [
    "MAX_DETAIL_CHARS",
    "MAX_KEYS_NAMED",
    "REDACTED",
    "AdkError",
    "check_options",
    "decode_options",
    "is_secret_key",
    "key_name",
    "prune",
    "redact",
]


class AdkError(Exception):
    """A refused operation. `reason` says why (stable, secret-free); `detail` is for people."""

    def __init__(self, reason: Any, detail: str | None = None) -> None:
        self.reason = redact_value(reason)
        self.detail = (
            redact_text(detail, limit=8 * MAX_DETAIL_CHARS)[:MAX_DETAIL_CHARS] if detail else ""
        )
        shown = _show(self.reason)
        super().__init__(f"{shown}: {self.detail}" if self.detail else shown)


def _show(reason: Any) -> str:
    if isinstance(reason, str):
        return reason
    try:
        return redact_text(repr(reason))
    except Exception:  # a reason with a broken __repr__ still makes an error
        return f"<{type(reason).__name__}>"


def prune(value: Any, *, depth: int = 0) -> Any:
    """`value` without any secret-named key, at any depth (through mappings, lists and
    tuples; past a depth of 64 a value becomes None). Returns `value` itself when
    nothing was dropped, so a clean value is never copied."""
    if depth > 64:
        return None
    if isinstance(value, Mapping):
        kept: dict[Any, Any] = {}
        changed = False
        for key, item in value.items():
            if is_secret_key(key):
                changed = True
                continue
            cleaned = kept[key] = prune(item, depth=depth + 1)
            changed = changed or cleaned is not item
        return kept if changed else value
    if isinstance(value, list | tuple):
        items = [prune(item, depth=depth + 1) for item in value]
        changed = any(new is not old for new, old in zip(items, value, strict=True))
        return (items if isinstance(value, list) else tuple(items)) if changed else value
    return value


def check_options(value: Any, allowed: Iterable[str], reason: str, what: str) -> Mapping[str, Any]:
    """`value` as a mapping of known option keys; unknown keys are named in the error,
    as ``(reason, ("unknown_keys", [...]))`` (values are never echoed).

    Kept for option parsers not yet moved to `decode_options`, which reports unknown
    keys in the same shape.
    """
    if not isinstance(value, Mapping):
        raise AdkError(reason, f"{what} is a mapping")
    unknown = sorted((key for key in value if key not in set(allowed)), key=str)
    if unknown:
        raise AdkError((reason, ("unknown_keys", unknown)), f"unknown {what} keys: {unknown}")
    return value


# -- decoding options into msgspec structs ------------------------------------------------

OptionsT = TypeVar("OptionsT", bound=msgspec.Struct)

_AT = re.compile(r"^(?P<body>.*?)(?: - at (?P<in_key>`key` in )?`\$(?P<path>[^`]*)`)?$", re.S)
_FIELD = re.compile(r"^Object (?P<kind>contains unknown|missing required) field `(?P<name>[^`]*)`$")
_SEGMENT = re.compile(r"\.([^.\[]+)|\[([^\]]*)\]")


def decode_options(
    struct_type: type[OptionsT],
    options: Mapping[str, Any] | OptionsT | None,
    reason: str,
    *,
    keyed: bool = True,
    what: str = "options",
    field_reasons: Mapping[str, Any] | None = None,
) -> OptionsT:
    """Decode an options mapping into `struct_type`, or raise `AdkError` naming the key.

    `struct_type` is a msgspec `Struct` (``forbid_unknown_fields``, ``kw_only``, frozen)
    whose constraints (``Annotated[int, msgspec.Meta(ge=1)]``, `Literal` choices) are
    the rules; decoding is strict, so a bool is never a number and a string never a
    list. None means every default; an instance of `struct_type` is checked again.

    With `keyed` (the default) a bad value fails as ``AdkError((reason, key), ...)``,
    `key` being the top-level option, and unknown keys as
    ``AdkError((reason, ("unknown_keys", [names...])), ...)`` naming all of them
    (sorted, at most `MAX_KEYS_NAMED`). Without it, every failure is
    ``AdkError(reason, ...)`` and only the message names the key path. A key listed in
    `field_reasons` fails with its own reason instead (``{"run_timeout":
    "invalid_run_timeout"}``). Something that is not a mapping fails as
    ``AdkError(reason)``. Messages name keys and the rule broken, never the value.
    """
    if options is None:
        options = {}
    elif isinstance(options, struct_type):
        options = _struct_mapping(options)
    if not isinstance(options, Mapping):
        raise AdkError(reason, f"{what} must be a mapping")
    fields = set(struct_type.__struct_encode_fields__)  # cheap: no annotation evaluation
    unknown = sorted({key_name(key) for key in options if key not in fields})
    if unknown:
        named = unknown[:MAX_KEYS_NAMED]
        more = f" (+{len(unknown) - len(named)} more)" if len(unknown) > len(named) else ""
        shown = ", ".join(repr(name) for name in named)
        raise AdkError(
            (reason, ("unknown_keys", named)) if keyed else reason,
            f"unknown {what} keys: {shown}{more}; known: {', '.join(sorted(fields))}",
        )
    try:
        return msgspec.convert(options, struct_type, strict=True)
    except msgspec.ValidationError as error:
        key, detail = _explain(struct_type, str(error))
        if key is not None and field_reasons is not None and key in field_reasons:
            failure = field_reasons[key]
        else:
            failure = (reason, key) if keyed and key else reason
        raise AdkError(failure, f"{what} {detail}") from None


def _struct_mapping(value: msgspec.Struct) -> dict[str, Any]:
    """A struct's fields as a mapping, nested structs too, so `convert` checks them again."""
    return {
        encoded: (
            _struct_mapping(item)
            if isinstance(item := getattr(value, name), msgspec.Struct)
            else item
        )
        for name, encoded in zip(
            value.__struct_fields__, value.__struct_encode_fields__, strict=True
        )
    }


def key_name(key: object) -> str:
    """A key as it may appear in an error: strings (shortened), or the type of anything else."""
    if isinstance(key, str):  # a lone surrogate would make the reason unencodable
        return key[:64].encode("utf-8", "replace").decode("utf-8")
    return f"<{type(key).__name__}>"


def _explain(struct_type: type[msgspec.Struct], message: str) -> tuple[str | None, str]:
    """The top-level key and a value-free description of one msgspec validation error.

    msgspec says ``<problem> - at `$.key[0].inner``` (or ``- at `key` in `$.key```);
    only ``Invalid enum value '<value>'`` quotes the value, so it is rewritten.
    """
    found = _AT.match(message)
    body = found["body"] if found else message
    segments = _SEGMENT.findall(found["path"] or "") if found else []
    field = _FIELD.match(body)
    if field:
        segments.append((field["name"], ""))
    names = [name for name, _ in segments if name]
    shown = "".join(f".{name}" if name else f"[{index}]" for name, index in segments).lstrip(".")
    if field:
        problem = "is required" if field["kind"].startswith("missing") else "is not a known key"
    elif body.startswith("Invalid enum value"):
        choices = ", ".join(repr(choice) for choice in _choices(struct_type, names))
        problem = f"is not an allowed value{f' (allowed: {choices})' if choices else ''}"
    else:
        problem = body.replace("`", "")
        if problem.startswith("Expected "):
            problem = "must be " + problem[len("Expected ") :]
    key = names[0] if names else None
    if not shown:
        return None, problem
    if found and found["in_key"]:
        return key, f"'{shown}' has a key that {problem}"
    return key, f"'{shown}' {problem}"


def _choices(struct_type: type[msgspec.Struct], names: list[str]) -> tuple[Any, ...]:
    """The `Literal` values allowed at a field path of `struct_type` (empty if unknown)."""
    hint: Any = struct_type
    for name in names:
        struct = _struct_in(hint)
        if struct is None:
            return ()
        by_name = {field.encode_name: field.type for field in msgspec.structs.fields(struct)}
        if name not in by_name:
            return ()
        hint = by_name[name]
    return tuple(dict.fromkeys(_literals(hint)))


def _struct_in(hint: Any) -> type[msgspec.Struct] | None:
    """The struct type inside a type hint (through `Annotated`, `Optional`, unions)."""
    if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
        return hint
    if get_origin(hint) in (Annotated, Union, types.UnionType):
        for arg in get_args(hint):
            struct = _struct_in(arg)
            if struct is not None:
                return struct
    return None


def _literals(hint: Any) -> list[Any]:
    """Every `Literal` value in a type hint, through containers and unions."""
    if get_origin(hint) is Literal:
        return list(get_args(hint))
    if isinstance(hint, type):
        return []
    return [value for arg in get_args(hint) for value in _literals(arg)]
