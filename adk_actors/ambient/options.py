"""Trigger options and events: checked strictly before anything is admitted.

`trigger_options(...)` decodes the options of `register_trigger` into a frozen
`TriggerOptions` (times in seconds); a bad value fails as
``("invalid_trigger_options", key)``, an unknown key as
``("invalid_trigger_options", ("unknown_keys", [...]))``. `normalize_event` checks
one delivery against a trigger's options and returns its canonical form, or fails
with ``invalid_ambient_event`` (the detail says which rule, never the value).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec

from providers import Content
from providers.content import validate as validate_content
from providers.errors import AdkError, decode_options
from supervision import is_secret_key

DEFAULT_MAX_CONCURRENCY = 8
MAX_CONCURRENCY = 1024
DEFAULT_MAX_QUEUE = 256
MAX_QUEUE = 10_000
DEFAULT_EVENT_TIMEOUT = 120.0
MAX_TIMEOUT = 86_400.0
DEFAULT_RETENTION = 300.0
DEFAULT_MAX_RETAINED = 1000
MAX_RETAINED = 10_000
DEFAULT_MAX_WAITERS = 64
MAX_WAITERS = 1024
DEFAULT_MAX_EVENT_BYTES = 1_048_576
MIN_EVENT_BYTES = 1024
MAX_EVENT_BYTES = 16_777_216
MAX_ID_BYTES = 256
MAX_KEY_BYTES = 512
MAX_PREFIX_BYTES = 128
MAX_TRIGGERS = 64
"""Triggers registered at once; past it ``trigger_limit_reached``."""

_Id = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_BYTES)]
_Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_TIMEOUT)]


class PerEvent(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag="per_event",
    tag_field="mode",
):
    """A session of its own per idempotency key: ``prefix`` + sha256 of the key."""

    user_id: _Id
    prefix: Annotated[str, msgspec.Meta(max_length=MAX_PREFIX_BYTES)] = "ambient-"


class Explicit(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag="explicit",
    tag_field="mode",
):
    """Every event names its session: ``{"user_id": ..., "session_id": ...}``."""


class Shared(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag="shared",
    tag_field="mode",
):
    """One configured session for every event (interleaved history, on purpose)."""

    user_id: _Id
    session_id: _Id


SessionPolicy = PerEvent | Explicit | Shared


class RetryOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Attempts of one event: each a fresh run, at most `attempt_timeout` seconds, with
    exponential backoff from `initial_delay` to `max_delay` between them (``full``
    jitter: a uniform delay up to it)."""

    max_attempts: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 3
    initial_delay: Annotated[float, msgspec.Meta(ge=0, le=MAX_TIMEOUT)] = 0.25
    max_delay: Annotated[float, msgspec.Meta(ge=0, le=MAX_TIMEOUT)] = 5.0
    backoff_factor: Annotated[float, msgspec.Meta(ge=1.0, le=100.0)] = 2.0
    attempt_timeout: _Seconds = 30.0
    jitter: Literal["full", "none"] = "full"

    def __post_init__(self) -> None:
        if self.max_delay < self.initial_delay:
            raise ValueError("max_delay must be at least initial_delay")

    def delay(self, attempt: int, draw: float) -> float:
        """The backoff after failed attempt `attempt` (1-based); `draw` in [0, 1)."""
        exponent = min(attempt - 1, 1000)
        base = min(self.max_delay, self.initial_delay * math.pow(self.backoff_factor, exponent))
        return base * draw if self.jitter == "full" else base


class TriggerOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A trigger's bounds. `session_policy` is required: ``{"mode": "per_event",
    "user_id": ...}``, ``{"mode": "explicit"}`` or ``{"mode": "shared", "user_id": ...,
    "session_id": ...}``."""

    session_policy: SessionPolicy
    max_concurrency: Annotated[int, msgspec.Meta(ge=1, le=MAX_CONCURRENCY)] = (
        DEFAULT_MAX_CONCURRENCY
    )
    max_queue: Annotated[int, msgspec.Meta(ge=0, le=MAX_QUEUE)] = DEFAULT_MAX_QUEUE
    event_timeout: _Seconds = DEFAULT_EVENT_TIMEOUT
    retention: Annotated[float, msgspec.Meta(ge=1.0, le=MAX_TIMEOUT)] = DEFAULT_RETENTION
    max_retained: Annotated[int, msgspec.Meta(ge=1, le=MAX_RETAINED)] = DEFAULT_MAX_RETAINED
    max_waiters: Annotated[int, msgspec.Meta(ge=1, le=MAX_WAITERS)] = DEFAULT_MAX_WAITERS
    max_event_bytes: Annotated[int, msgspec.Meta(ge=MIN_EVENT_BYTES, le=MAX_EVENT_BYTES)] = (
        DEFAULT_MAX_EVENT_BYTES
    )
    retry: RetryOptions = msgspec.field(default_factory=RetryOptions)
    run_retention: Annotated[float, msgspec.Meta(gt=0, le=MAX_TIMEOUT)] = 60.0
    """How long each attempt's run stays queryable through `adk.runs` after it ends."""


def trigger_options(options: Mapping[str, Any]) -> TriggerOptions:
    """The checked options (see `TriggerOptions`); raises ``invalid_trigger_options``."""
    return decode_options(TriggerOptions, options, "invalid_trigger_options", what="trigger option")


def check_name(name: Any, what: str = "trigger") -> str:
    if not isinstance(name, str) or not name or len(name.encode()) > MAX_ID_BYTES:
        raise AdkError(f"invalid_{what}_name", f"a {what} name is 1..{MAX_ID_BYTES} bytes of text")
    return name


class Event(msgspec.Struct, frozen=True, kw_only=True):
    """One delivery, canonical: what a trigger keeps and runs."""

    payload: str | Content
    idempotency_key: str
    user_id: str
    session_id: str
    metadata: dict[str, Any]
    timeout: float


_EVENT_KEYS = frozenset({"payload", "idempotency_key", "session", "timeout", "metadata"})


def _bad(detail: str) -> AdkError:
    return AdkError("invalid_ambient_event", detail)


def normalize_event(event: Any, options: TriggerOptions) -> Event:
    """The canonical event, or ``invalid_ambient_event``: a mapping with a non-empty
    `payload` (text or `Content`) and `idempotency_key`, optional `metadata` (a JSON
    object with string keys, returned canonicalised), `timeout` (seconds, at most the
    trigger's `event_timeout`) and `session` (required by, and only allowed with, the
    ``explicit`` policy). No secret-bearing key anywhere; at most `max_event_bytes`."""
    if not isinstance(event, Mapping):
        raise _bad("an event is a mapping")
    unknown = sorted(str(key) for key in event if key not in _EVENT_KEYS)
    if unknown:
        raise _bad(f"unknown event keys: {', '.join(unknown[:8])}")
    key = event.get("idempotency_key")
    if not isinstance(key, str) or not key or len(key.encode()) > MAX_KEY_BYTES:
        raise _bad(f"idempotency_key is 1..{MAX_KEY_BYTES} bytes of text")
    payload = _payload(event.get("payload"))
    metadata = _json_object(event.get("metadata", {}), "metadata")
    timeout = event.get("timeout", options.event_timeout)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout <= options.event_timeout
    ):
        raise _bad("timeout is seconds in (0, the trigger's event_timeout]")
    user_id, session_id = _session(options.session_policy, event.get("session"), key)
    size = len(
        msgspec.json.encode(
            {"payload": payload, "key": key, "metadata": metadata, "session": session_id}
        )
    )
    if size > options.max_event_bytes:
        raise _bad(f"the event is over the trigger's max_event_bytes ({options.max_event_bytes})")
    return Event(
        payload=payload,
        idempotency_key=key,
        user_id=user_id,
        session_id=session_id,
        metadata=metadata,
        timeout=float(timeout),
    )


def _payload(payload: Any) -> str | Content:
    if isinstance(payload, str):
        if not payload:
            raise _bad("payload is non-empty text or Content")
        return payload
    if isinstance(payload, Content):
        try:
            return validate_content(payload)
        except AdkError as error:
            raise _bad(f"payload is not valid Content ({error.reason})") from None
    raise _bad("payload is non-empty text or Content")


def _json_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(f"{what} is a JSON object")
    _check_secrets(value, what)
    try:
        canonical = msgspec.json.decode(msgspec.json.encode(value))
    except (TypeError, ValueError, msgspec.MsgspecError):
        raise _bad(f"{what} is not JSON-safe") from None
    if not isinstance(canonical, dict) or any(not isinstance(k, str) for k in value):
        raise _bad(f"{what} is a JSON object with text keys")
    return canonical


def _check_secrets(value: Any, what: str, depth: int = 0) -> None:
    if depth > 32:
        raise _bad(f"{what} is nested too deeply")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and is_secret_key(key):
                raise _bad(f"{what} carries a secret-bearing key")
            _check_secrets(item, what, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_secrets(item, what, depth + 1)


def _session(policy: SessionPolicy, session: Any, key: str) -> tuple[str, str]:
    match policy:
        case PerEvent(user_id=user_id, prefix=prefix):
            if session is not None:
                raise _bad("the per_event session policy derives the session; drop 'session'")
            return user_id, prefix + hashlib.sha256(key.encode()).hexdigest()
        case Shared(user_id=user_id, session_id=session_id):
            if session is not None:
                raise _bad("the shared session policy names the session; drop 'session'")
            return user_id, session_id
        case Explicit():
            if (
                not isinstance(session, Mapping)
                or set(session) != {"user_id", "session_id"}
                or not all(
                    isinstance(session[k], str) and 0 < len(session[k].encode()) <= MAX_ID_BYTES
                    for k in ("user_id", "session_id")
                )
            ):
                raise _bad("the explicit session policy needs session {user_id, session_id}")
            return session["user_id"], session["session_id"]
    raise _bad("unknown session policy")  # pragma: no cover - the union is closed


def public_policy(policy: SessionPolicy) -> dict[str, Any]:
    view: dict[str, Any] = msgspec.to_builtins(policy)
    return view
