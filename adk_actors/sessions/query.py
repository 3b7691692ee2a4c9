"""Paged session and event queries with authenticated cursors.

A cursor is an opaque token: its payload names the query it belongs to (what, scope,
filter, page size), where the next page starts, and a snapshot of the data when it
was issued; an HMAC-SHA256 under the service's key seals it. Any tampering, or use
on another session, filter or page size, is ``invalid_cursor``; a cursor whose data
changed since it was issued (a new session or event) is ``stale_cursor``. The last
page's ``next_cursor`` is None. Pages are deterministic.

* sessions: newest first, ties by id; default 50 per page
* events: in the order they were added; default 100 per page
* at most 500 per page

Mistyped parameters are refused as `AdkError`, never a Python error: a cursor that is
not a str (bytes, a number, ...) or not one this service sealed is
``invalid_cursor``; a page size that is not an int in 1..500 ``invalid_limit``; an
author filter that is not a str ``invalid_author``.

What a page shows is safe to hand out: no runtime (``_adk:``) key in a state, and no
credential-named key (``api_key``, ``access_token``, ...) at any depth of a state, of
an event's function-call arguments and responses, actions or provider metadata
(`core.without_secrets`, one rule: `providers.errors.is_secret_key`). What is stored
never changes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import msgspec

from adk_actors import events as event_codec
from adk_actors.events import Event
from adk_actors.sessions import core
from adk_actors.sessions.core import Session, Storage
from providers.errors import AdkError

DEFAULT_SESSION_PAGE = 50
DEFAULT_EVENT_PAGE = 100
MAX_PAGE = 500


class SessionPage(msgspec.Struct, frozen=True):
    sessions: tuple[Session, ...]
    next_cursor: str | None


class EventPage(msgspec.Struct, frozen=True):
    events: tuple[Event, ...]
    next_cursor: str | None


class _Cursor(msgspec.Struct, frozen=True):
    kind: str
    scope: tuple[str, ...]
    filter: str
    limit: int
    position: int
    snapshot: str


_encode = msgspec.msgpack.Encoder().encode
_decode_cursor = msgspec.msgpack.Decoder(_Cursor).decode


def _seal(key: bytes, cursor: _Cursor) -> str:
    payload = _encode(cursor)
    tag = hmac.new(key, payload, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(payload).decode() + "." + base64.urlsafe_b64encode(tag).decode()


def _open(key: bytes, token: Any) -> _Cursor:
    if not isinstance(token, str) or not token.isascii():
        raise AdkError("invalid_cursor", "a cursor is the str a page returned")
    try:
        payload_text, tag_text = token.split(".")
        payload = base64.urlsafe_b64decode(payload_text.encode())
        tag = base64.urlsafe_b64decode(tag_text.encode())
    except ValueError:  # binascii.Error is one
        raise AdkError("invalid_cursor", "the cursor is malformed") from None
    if not hmac.compare_digest(tag, hmac.new(key, payload, hashlib.sha256).digest()):
        raise AdkError("invalid_cursor", "the cursor was not issued by this service")
    try:
        return _decode_cursor(payload)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        raise AdkError("invalid_cursor", "the cursor is malformed") from None


def _limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise AdkError("invalid_limit", f"a page holds 1..{MAX_PAGE} items")
    return limit


def _author(author: Any) -> str | None:
    if author is not None and not isinstance(author, str):
        raise AdkError("invalid_author", "an author filter is a str")
    return author


def _start(key: bytes, token: str | None, expected: _Cursor) -> int:
    """Where the page starts; checks the cursor belongs to this query and is fresh."""
    if token is None:
        return 0
    cursor = _open(key, token)
    same_query = (cursor.kind, cursor.scope, cursor.filter, cursor.limit) == (
        expected.kind,
        expected.scope,
        expected.filter,
        expected.limit,
    )
    if not same_query:
        raise AdkError("invalid_cursor", "the cursor belongs to another query")
    if cursor.snapshot != expected.snapshot:
        raise AdkError("stale_cursor", "the data changed since the cursor was issued; start again")
    return cursor.position


def _digest(*parts: Any) -> str:
    return hashlib.sha256(_encode(parts)).hexdigest()[:32]


def sessions_page(
    storage: Storage, key: bytes, app: str, user: str, limit: int, cursor: str | None
) -> SessionPage:
    limit = _limit(limit)
    records = sorted(storage.list_sessions(app, user), key=lambda r: (-r.last_update, r.id))
    snapshot = _digest([(r.id, r.last_update, r.event_count) for r in records])
    expected = _Cursor("sessions", (app, user), "", limit, 0, snapshot)
    start = _start(key, cursor, expected)
    page = records[start : start + limit]
    end = start + len(page)
    next_cursor = (
        _seal(key, msgspec.structs.replace(expected, position=end)) if end < len(records) else None
    )
    shown = (core.without_secrets(core.view(storage, r, with_events=False)) for r in page)
    return SessionPage(tuple(shown), next_cursor)


def events_page(
    storage: Storage,
    app: str,
    user: str,
    session_id: str,
    key: bytes,
    limit: int,
    cursor: str | None,
    author: str | None,
) -> EventPage:
    limit = _limit(limit)
    author = _author(author)
    record = storage.get_session(app, user, session_id)
    if record is None:
        raise AdkError("not_found", "no such session")
    events = [e for e in storage.events(record) if author is None or e.author == author]
    snapshot = _digest([record.event_count, record.compactions])
    expected = _Cursor("events", (app, user, session_id), author or "", limit, 0, snapshot)
    start = _start(key, cursor, expected)
    page = events[start : start + limit]
    end = start + len(page)
    next_cursor = (
        _seal(key, msgspec.structs.replace(expected, position=end)) if end < len(events) else None
    )
    return EventPage(tuple(event_codec.without_secrets(event) for event in page), next_cursor)
