"""`Event`: one entry of a session's history, as frozen, versioned, JSON-safe data.

Every user message, model turn, tool response, pause and error becomes an `Event`.
`encode` writes canonical JSON with ``schema_version``; `decode` refuses any other
version with ``unsupported_event_schema_version`` instead of guessing. `checked` is
what a session store calls before it stores one: the encoding, plus the stricter
rules for provider metadata. A lone surrogate in any string is ``invalid_utf8``.

`decode` validates an event's content exactly as `providers.content.validate` does
(one path, the same reasons: ``invalid_role``, ``empty_content``,
``unsupported_uri_scheme``, ``json_too_deep``, ...). Nothing but `AdkError` leaves
`encode`, `decode`, `to_dict` or `from_dict`: JSON nested past Python's recursion
limit is ``json_too_deep``, input that is neither bytes nor str ``invalid_event``.
"""

from __future__ import annotations

import os
import time
from typing import Any

import msgspec

from providers import content as content_model
from providers.content import Content, FunctionCallPart, FunctionResponsePart
from providers.errors import AdkError, is_secret_key, prune, redact
from providers.frozen import (
    EMPTY_DICT,
    FrozenDict,
    check_shared_empties,
    register_shared_form,
)

EVENT_SCHEMA_VERSION = 1
MAX_EVENT_BYTES = 64 << 20
MAX_PROVIDER_METADATA_BYTES = (256 << 10) + 1024
"""256 KiB of candidate metadata (the spec's cap) plus its envelope."""
MAX_SUMMARY_CHARS = 200
"""`Event.text` of a tool-call or tool-response event is at most this long."""


class Pause(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Why and where an invocation paused (human approval, a long-running tool)."""

    reason: str
    continuation_id: str
    tool_name: str | None = None
    call_id: str | None = None
    thought_signature: str | None = None
    hint: str | None = None
    details: dict[str, Any] | None = None
    """Kind-specific, value-free facts: ``{"type": "tool_confirmation", "action_id"}``,
    ``{"type": "long_running", "operation_id"}`` or ``{"type": "human_in_the_loop"}``."""


class PolicyDecision(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An audit record of a runtime-policy decision: structure, never argument values."""

    decision_id: str
    policy_id: str
    operation: str
    subject: str
    outcome: str
    reason: str
    measured_bytes: int | None = None
    digest: str | None = None
    policy_fingerprint: str | None = None
    limit_bytes: int | None = None


class EventActions(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What an event changes besides the conversation.

    An event you build (`Event.new`, ``EventActions()``, a decode, a deep copy or
    pickle of any event) has plain empty dicts of its own, which you may fill
    (``event.actions.state_delta[key] = value``). A store keeps the shared form
    instead (`providers.frozen.freeze` makes it: `_SharedEventActions`), whose empty
    deltas are the one read-only `providers.frozen.EMPTY_DICT`, so a stored event
    without changes is handed to every reader as it is. Both encode the same.
    """

    state_delta: dict[str, Any] = msgspec.field(default_factory=dict)
    artifact_delta: dict[str, int] = msgspec.field(default_factory=dict)
    transfer_to_agent: str | None = None
    transfer_index: int | None = None
    escalate: bool = False
    skip_summarization: bool = False
    pause: Pause | None = None
    long_running_operation: dict[str, Any] | None = None
    requested_tool_confirmations: dict[str, Any] = msgspec.field(default_factory=dict)
    policy_decisions: tuple[PolicyDecision, ...] = ()
    resume: dict[str, Any] | None = None
    """On the event that claims a paused continuation: which one, and how it resumed."""

    def __post_init__(self) -> None:
        # An empty delta taken from a stored event (the read-only EMPTY_DICT, or any
        # empty FrozenDict) becomes a plain one: msgspec leaves out only an exact
        # empty dict under a `default_factory`, and the user's event stays editable.
        if type(self.state_delta) is FrozenDict and not self.state_delta:
            _force_setattr(self, "state_delta", {})
        if type(self.artifact_delta) is FrozenDict and not self.artifact_delta:
            _force_setattr(self, "artifact_delta", {})
        if (
            type(self.requested_tool_confirmations) is FrozenDict
            and not self.requested_tool_confirmations
        ):
            _force_setattr(self, "requested_tool_confirmations", {})


_force_setattr = msgspec.structs.force_setattr
_ACTION_FIELDS: tuple[str, ...] = EventActions.__struct_fields__


class _SharedEventActions(EventActions, frozen=True, kw_only=True, omit_defaults=True):
    """The stored form of `EventActions` (review of 4173fce, finding 2): its empty
    deltas are the shared read-only `EMPTY_DICT`, which is also their default, so
    msgspec leaves them out exactly as it leaves out a plain empty dict under the
    plain class's ``default_factory``. It equals, prints, copies and encodes as the
    plain class; a deep copy or pickle gives a plain `EventActions` with empty dicts
    of its own (each its own object: finding 1). ``isinstance(x, EventActions)`` holds;
    ``type(x) is EventActions`` does not, on a stored event."""

    state_delta: dict[str, Any] = EMPTY_DICT
    artifact_delta: dict[str, int] = EMPTY_DICT
    requested_tool_confirmations: dict[str, Any] = EMPTY_DICT

    def __post_init__(self) -> None:
        # `structs.replace` of a stored event's actions with an empty delta keeps the
        # encoding: an empty dict here is left out only when it is EMPTY_DICT.
        if not self.state_delta and self.state_delta is not EMPTY_DICT:
            _force_setattr(self, "state_delta", EMPTY_DICT)
        if not self.artifact_delta and self.artifact_delta is not EMPTY_DICT:
            _force_setattr(self, "artifact_delta", EMPTY_DICT)
        value = self.requested_tool_confirmations
        if not value and value is not EMPTY_DICT:
            _force_setattr(self, "requested_tool_confirmations", EMPTY_DICT)

    def __eq__(self, other: object) -> bool:
        if type(other) is EventActions or type(other) is _SharedEventActions:
            return bool(msgspec.structs.astuple(self) == msgspec.structs.astuple(other))
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = EventActions.__hash__

    def __reduce__(self) -> tuple[Any, ...]:
        # Copies and pickles are the user's: plain class, fresh empty dicts (the
        # shared EMPTY_DICT left out, else one deep copy would alias them all).
        values = msgspec.structs.astuple(self)
        given = {
            name: value
            for name, value in zip(_ACTION_FIELDS, values, strict=True)
            if value is not EMPTY_DICT
        }
        return (_plain_actions, (given,))


_SharedEventActions.__name__ = _SharedEventActions.__qualname__ = "EventActions"  # same repr


def _plain_actions(fields: dict[str, Any]) -> EventActions:
    """A plain `EventActions` (how a shared one is copied and unpickled)."""
    return EventActions(**fields)


def _shared_actions(actions: EventActions) -> EventActions:
    """What `providers.frozen.freeze` makes of a (frozen) `EventActions`."""
    check_shared_empties()
    if not actions.state_delta and not actions.requested_tool_confirmations:
        try:  # nothing changed (most events): all defaults, the cheapest to build. Not
            # one shared instance: a deep copy of history would make it one plain object.
            if _encode_actions(actions) == b"{}":
                return _SharedEventActions()
        except (TypeError, msgspec.EncodeError):
            pass  # not encodable: `checked` refuses it, the twin keeps it as it is
    return _SharedEventActions(
        **dict(zip(_ACTION_FIELDS, msgspec.structs.astuple(actions), strict=True))
    )


_encode_actions = msgspec.json.Encoder().encode
register_shared_form(EventActions, _shared_actions)


class EventError(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A failure recorded in the history: a stable reason and a short, secret-free message."""

    reason: Any
    message: str = ""


class Event(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One history entry. `partial` marks a streaming delta; `is_final` the answer.

    `schema_version` has no default so that it is always written (`Event.new` sets it).
    """

    schema_version: int
    id: str
    invocation_id: str
    author: str
    timestamp: float
    content: Content | None = None
    actions: EventActions = msgspec.field(default_factory=EventActions)
    partial: bool = False
    is_final: bool = False
    branch: str | None = None
    provider_metadata: dict[str, Any] | None = None
    error: EventError | None = None

    @classmethod
    def new(
        cls,
        author: str,
        invocation_id: str,
        content: Content | None = None,
        **fields: Any,
    ) -> Event:
        """An event with a fresh id and the current wall-clock timestamp.

        Function-call arguments and function responses are redacted (`providers.redact`:
        credential-named keys and secret-shaped text) before anything can store or
        stream them; the tool itself got the model's arguments as they were."""
        return cls(
            schema_version=EVENT_SCHEMA_VERSION,
            id=new_event_id(),
            invocation_id=invocation_id,
            author=author,
            timestamp=time.time(),
            content=None if content is None else _redacted(content),
            **fields,
        )

    def text(self) -> str:
        """The visible text of the event's content. Without any, a tool-call or
        tool-response event says what it holds, in at most `MAX_SUMMARY_CHARS`
        characters (``call get_weather(city='Tokyo')``, ``get_weather -> {'temp': 21}``;
        credential-named keys left out); '' otherwise."""
        if self.content is None:
            return ""
        return self.content.text_value() or _summary(self.content)


def new_event_id() -> str:
    """A fresh event id: what ``uuid.uuid4().hex`` gives (32 hex digits, version 4,
    RFC 4122 variant, 122 random bits from `os.urandom`), at a third of its cost,
    without a `UUID` object (several events a run)."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # RFC 4122 variant
    return raw.hex()


_TOOL_PARTS = (FunctionCallPart, FunctionResponsePart)


def _redacted(content: Content) -> Content:
    for part in content.parts:  # a loop and a tuple: most contents hold no tool part
        if isinstance(part, _TOOL_PARTS):
            break
    else:
        return content
    parts = tuple(
        msgspec.structs.replace(part, args=redact(part.args, limit=None))
        if isinstance(part, FunctionCallPart)
        else msgspec.structs.replace(part, response=redact(part.response, limit=None))
        if isinstance(part, FunctionResponsePart)
        else part
        for part in content.parts
    )
    return msgspec.structs.replace(content, parts=parts)


def _summary(content: Content) -> str:
    pieces = []
    for part in content.parts:
        if isinstance(part, FunctionCallPart):
            args = ", ".join(
                "..." if value is Ellipsis else f"{key}={_short(value)}"
                for key, value in _items(part.args, 8)
            )
            pieces.append(f"call {part.name}({args})")
        elif isinstance(part, FunctionResponsePart):
            pieces.append(f"{part.name} -> {_short(part.response)}")
    summary = "; ".join(pieces)
    return (
        summary if len(summary) <= MAX_SUMMARY_CHARS else summary[: MAX_SUMMARY_CHARS - 3] + "..."
    )


def _items(mapping: dict[str, Any], limit: int) -> list[tuple[str, Any]]:
    """At most `limit` items of `mapping`, credential-named keys left out."""
    items: list[tuple[str, Any]] = []
    for key, value in mapping.items():
        if len(items) == limit:
            items.append(("...", Ellipsis))
            break
        if not is_secret_key(key):
            items.append((key, value))
    return items


def _short(value: Any, depth: int = 0) -> str:
    """A bounded repr: strings cut, at most a few items per level, three levels deep."""
    if value is Ellipsis:
        return "..."
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:40] + "...")
    if isinstance(value, dict | list | tuple) and depth >= 3:
        return "{...}" if isinstance(value, dict) else "[...]"
    if isinstance(value, dict):
        shown = ", ".join(f"{key!r}: {_short(item, depth + 1)}" for key, item in _items(value, 8))
        return "{" + shown + "}"
    if isinstance(value, list | tuple):
        shown = ", ".join(_short(item, depth + 1) for item in value[:8])
        return "[" + shown + (", ..." if len(value) > 8 else "") + "]"
    return repr(value)[:40]


class _Version(msgspec.Struct):
    schema_version: int


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Event)
_json_decoder = msgspec.json.Decoder()
_version_decoder = msgspec.json.Decoder(_Version)


def encode(event: Event) -> bytes:
    """Canonical JSON bytes; `AdkError("invalid_event")` if something is not JSON-safe,
    ``invalid_utf8`` if a string holds a lone surrogate."""
    data = _json_bytes(event, "event fields must be JSON-safe")
    if len(data) > MAX_EVENT_BYTES:
        raise AdkError("event_too_large", f"an event is at most {MAX_EVENT_BYTES} bytes")
    return data


def decode(data: bytes | str) -> Event:
    """Parse an encoded event; refuses unknown schema versions and malformed data, and
    validates its content as `providers.content.validate` does."""
    if not isinstance(data, bytes | bytearray | memoryview | str):
        raise AdkError("invalid_event", "an encoded event is bytes or str")
    if len(data) > MAX_EVENT_BYTES:
        raise AdkError("event_too_large", f"an event is at most {MAX_EVENT_BYTES} bytes")
    try:  # the common case first: this build's version, decoded in one pass
        event = _decoder.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        _check_version(data)  # another version fails as such, whatever else it holds
        message = str(exc)
        if isinstance(exc, msgspec.ValidationError) and "`$.content" in message:
            _refuse_content(data)  # the content's own reason, as `validate` gives it
        raise AdkError("invalid_event", _printable(message[:200])) from None
    except RecursionError:
        raise AdkError("json_too_deep", "an event nests too deep to decode") from None
    except UnicodeEncodeError:
        raise AdkError("invalid_event", "not an encoded event") from None
    if event.schema_version != EVENT_SCHEMA_VERSION:
        _check_version(data)
    if event.content is not None:
        content_model.validate(event.content)
    return event


def _check_version(data: bytes | bytearray | memoryview | str) -> None:
    """Refuse an event of another schema version (``unsupported_event_schema_version``)."""
    try:
        version = _version_decoder.decode(data).schema_version
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeEncodeError):
        raise AdkError("invalid_event", "not an encoded event") from None
    except RecursionError:
        raise AdkError("json_too_deep", "an event nests too deep to decode") from None
    if version != EVENT_SCHEMA_VERSION:
        raise AdkError(
            ("unsupported_event_schema_version", version),
            f"this build reads version {EVENT_SCHEMA_VERSION}",
        )


def _refuse_content(data: bytes | bytearray | memoryview | str) -> None:
    """Raise what `content.validate` says of the content of `data` (if it says anything)."""
    try:
        obj = _json_decoder.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return
    if isinstance(obj, dict) and obj.get("content") is not None:
        content_model.validate(obj["content"])


def _printable(text: str) -> str:
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def checked(event: Event) -> bytes:
    """What a store calls before it stores `event`: its encoding (`encode`), after
    checking its provider metadata, which must be JSON as it stands, not merely
    encodable: a mapping (``metadata_must_be_map``) of string keys and JSON values
    (``metadata_must_be_json`` for a non-string key, NaN, a set, ...;
    ``invalid_metadata_json`` for a value with no JSON form; ``json_too_deep`` past
    `providers.content.MAX_JSON_DEPTH` levels), at most
    `MAX_PROVIDER_METADATA_BYTES` (``("metadata_too_large", size, limit)``)."""
    metadata = event.provider_metadata
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise AdkError("metadata_must_be_map", "provider metadata is a JSON object")
        size = len(
            content_model.canonical_json(
                metadata, not_json="invalid_metadata_json", not_canonical="metadata_must_be_json"
            )
        )
        if size > MAX_PROVIDER_METADATA_BYTES:
            raise AdkError(
                ("metadata_too_large", size, MAX_PROVIDER_METADATA_BYTES),
                f"provider metadata is at most {MAX_PROVIDER_METADATA_BYTES} bytes",
            )
    return encode(event)


def without_secrets(event: Event) -> Event:
    """`event` as a query shows it: every credential-named key removed, at any depth,
    from its function-call arguments and responses, its actions and its provider
    metadata (`providers.errors.prune`); `event` itself when there is none."""
    content = event.content
    if content is not None:
        content = content_model.without_secrets(content)
    actions = event.actions
    fields = {
        name: prune(getattr(actions, name))
        for name in (
            "state_delta",
            "long_running_operation",
            "requested_tool_confirmations",
            "resume",
        )
    }
    pause = actions.pause
    if pause is not None and pause.details is not None:
        details = prune(pause.details)
        if details is not pause.details:
            fields["pause"] = msgspec.structs.replace(pause, details=details)
    changed = {k: v for k, v in fields.items() if v is not getattr(actions, k)}
    metadata = prune(event.provider_metadata)
    if content is event.content and not changed and metadata is event.provider_metadata:
        return event
    return msgspec.structs.replace(
        event,
        content=content,
        actions=msgspec.structs.replace(actions, **changed) if changed else actions,
        provider_metadata=metadata,
    )


def to_dict(event: Event) -> dict[str, Any]:
    return msgspec.json.decode(encode(event))  # type: ignore[no-any-return]


def from_dict(value: Any) -> Event:
    """The event of a dict form (`to_dict`), decoded and validated as `decode` does."""
    return decode(_json_bytes(value, "an event's dict form is JSON"))


def _json_bytes(value: Any, refusal: str) -> bytes:
    """`value` as JSON: ``invalid_utf8`` for a lone surrogate, else ``invalid_event``."""
    try:
        return _encoder.encode(value)
    except UnicodeEncodeError:
        raise AdkError("invalid_utf8", "event strings must be valid UTF-8") from None
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError):
        raise AdkError("invalid_event", refusal) from None
