"""`Event`: one entry of a session's history, as frozen, versioned, JSON-safe data.

Every user message, model turn, tool response, pause and error becomes an `Event`.
`encode` writes canonical JSON with ``schema_version``; `decode` refuses any other
version with ``unsupported_event_schema_version`` instead of guessing.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import msgspec

from providers.content import Content
from providers.errors import AdkError

EVENT_SCHEMA_VERSION = 1
MAX_EVENT_BYTES = 64 << 20


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
    """What an event changes besides the conversation."""

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
        """An event with a fresh id and the current wall-clock timestamp."""
        return cls(
            schema_version=EVENT_SCHEMA_VERSION,
            id=uuid.uuid4().hex,
            invocation_id=invocation_id,
            author=author,
            timestamp=time.time(),
            content=content,
            **fields,
        )

    def text(self) -> str:
        """The visible text of the event's content ('' if none)."""
        return self.content.text_value() if self.content is not None else ""


class _Version(msgspec.Struct):
    schema_version: int


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Event)
_version_decoder = msgspec.json.Decoder(_Version)


def encode(event: Event) -> bytes:
    """Canonical JSON bytes; `AdkError("invalid_event")` if something is not JSON-safe."""
    try:
        data = _encoder.encode(event)
    except (TypeError, msgspec.EncodeError):
        raise AdkError("invalid_event", "event fields must be JSON-safe") from None
    if len(data) > MAX_EVENT_BYTES:
        raise AdkError("event_too_large", f"an event is at most {MAX_EVENT_BYTES} bytes")
    return data


def decode(data: bytes | str) -> Event:
    """Parse an encoded event; refuses unknown schema versions and malformed data."""
    if len(data) > MAX_EVENT_BYTES:
        raise AdkError("event_too_large", f"an event is at most {MAX_EVENT_BYTES} bytes")
    try:
        version = _version_decoder.decode(data).schema_version
    except (msgspec.ValidationError, msgspec.DecodeError):
        raise AdkError("invalid_event", "not an encoded event") from None
    if version != EVENT_SCHEMA_VERSION:
        raise AdkError(
            ("unsupported_event_schema_version", version),
            f"this build reads version {EVENT_SCHEMA_VERSION}",
        )
    try:
        return _decoder.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise AdkError("invalid_event", str(exc)[:200]) from None


def to_dict(event: Event) -> dict[str, Any]:
    return msgspec.json.decode(encode(event))  # type: ignore[no-any-return]


def from_dict(value: Any) -> Event:
    return decode(msgspec.json.encode(value))
