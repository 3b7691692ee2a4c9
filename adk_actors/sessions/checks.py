"""What a session operation checks in what it is given: ids (`check_id`), state deltas
(`split_delta`) and whole appends (`check_event`).

All of it is pure (nothing stored is read), so a service runs it before the atomic
step, outside the session's lock and the store's transaction (`SessionService` checks
ids and appends there), and the step only applies what passed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

import msgspec

from adk_actors import events as event_codec
from adk_actors.events import Event
from adk_actors.sessions.records import INTERNAL_PREFIX
from providers.errors import AdkError

MAX_STATE_BYTES = 16 << 20
"""A state delta's longest JSON encoding (`split_delta`: ``state_too_large``)."""
MAX_ID_BYTES = 128
"""An app, user or session id's longest UTF-8 encoding (`check_id`)."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""What an id never holds: control characters (C0, DEL, C1; NUL among them, LMDB's
key separator)."""


def check_id(value: Any, what: str) -> str:
    """`value` if it is a valid app, user or session id: a non-empty `str` of at most
    `MAX_ID_BYTES` bytes in UTF-8 (so `MAX_ID_BYTES` ASCII characters), without control
    characters; ``invalid_id`` otherwise (a lone surrogate, which no UTF-8 holds:
    ``invalid_utf8``, as everywhere). One rule for every backend and every call, reads
    included (`SessionService` checks before any step); it keeps LMDB's keys (three
    ids, separators, a sequence or a state key) under LMDB's 511-byte limit. Cheap:
    ASCII is two C-level scans."""
    if isinstance(value, str) and 0 < len(value) <= MAX_ID_BYTES:
        if value.isascii():
            if value.isprintable():
                return value
        elif (
            len(check_utf8(value, what).encode("utf-8")) <= MAX_ID_BYTES
            and _CONTROL.search(value) is None
        ):
            return value
    raise AdkError(
        "invalid_id",
        f"{what} is a non-empty string of at most {MAX_ID_BYTES} UTF-8 bytes "
        "without control characters",
    )


def check_utf8(value: str, what: str) -> str:
    """`value`, if it encodes to UTF-8 (a lone surrogate: ``invalid_utf8``)."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise AdkError("invalid_utf8", f"{what} must be valid UTF-8") from None
    return value


Split = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]
"""A checked state delta: its session (incl. ``temp:`` and ``_adk:``), user: and app: keys."""


def split_delta(delta: Mapping[str, Any], *, runtime: bool = False) -> Split:
    """(session incl. temp:, user:, app:) parts of a state delta, checked: string keys,
    JSON-safe values (``invalid_state_delta``; ``invalid_utf8`` for a lone surrogate),
    at most `MAX_STATE_BYTES` encoded. Only the runtime's own delta (`runtime`) may
    touch ``_adk:`` keys: nobody else can forge or drop a pause or an open marker."""
    if type(delta) is not dict and not isinstance(delta, Mapping):  # dict: no ABC check
        raise AdkError("invalid_state_delta", "a state delta is a mapping")
    if not delta:  # most events change no state: nothing to check or encode
        return {}, {}, {}
    session: dict[str, Any] = {}
    user: dict[str, Any] = {}
    app: dict[str, Any] = {}
    for key, value in delta.items():
        if not isinstance(key, str) or not key:
            raise AdkError("invalid_state_delta", "state keys are non-empty strings")
        if not runtime and key.startswith(INTERNAL_PREFIX):
            raise AdkError(
                "invalid_state_key", f"keys starting with {INTERNAL_PREFIX!r} are the runtime's"
            )
        target = user if key.startswith("user:") else app if key.startswith("app:") else session
        target[key] = value
    try:
        size = len(msgspec.json.encode(delta))
    except UnicodeEncodeError:
        raise AdkError("invalid_utf8", "state keys and values must be valid UTF-8") from None
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        raise AdkError("invalid_state_delta", "state values must be JSON-safe") from None
    if size > MAX_STATE_BYTES:
        raise AdkError("state_too_large", f"a state delta is at most {MAX_STATE_BYTES} bytes")
    return session, user, app


class Checked(NamedTuple):
    """An event ready to store: its checked state deltas and its encoding."""

    delta: Split
    runtime: Split | None
    encoded: bytes


def check_event(event: Event, runtime_delta: Mapping[str, Any] | None) -> Checked:
    """Every check of an append: pure (it reads nothing stored), so a service runs it
    before the atomic step, keeping the encoding out of the step's lock or transaction."""
    if not isinstance(event, Event):
        raise AdkError("invalid_event", "add_event takes an Event")
    if runtime_delta and not all(
        isinstance(key, str) and key.startswith(INTERNAL_PREFIX) for key in runtime_delta
    ):
        raise AdkError("invalid_state_delta", f"runtime keys start with {INTERNAL_PREFIX!r}")
    delta = split_delta(event.actions.state_delta)
    runtime = split_delta(runtime_delta, runtime=True) if runtime_delta else None
    return Checked(delta, runtime, event_codec.checked(event))
