"""What a session store keeps and what callers see: records, sessions, the storage
interface, the runtime's own keys, and the views built from them (`core` runs the
operations over these).

A `SessionRecord` is what a store keeps per session (events live apart, numbered from
1); a `Session` is what callers get: its merged state (session, ``user:``, ``app:``)
and its events, without the runtime's ``_adk:`` keys unless the runtime asks
(`view`). `Storage` is one atomic step's view of a store, the only thing a backend
implements.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import msgspec

from adk_actors import events as event_codec
from adk_actors.events import Event
from providers.errors import AdkError, is_secret_key, prune


class SessionRecord(msgspec.Struct, kw_only=True):
    """What a store keeps per session (events live apart, numbered from 1)."""

    id: str
    app_name: str
    user_id: str
    state: dict[str, Any]
    """Plain, ``temp:`` and ``_adk:`` keys; continuations live apart (see `Storage`)."""
    created: float
    last_update: float
    event_count: int = 0
    initial_state: dict[str, Any] = msgspec.field(default_factory=dict)
    """The session's own (plain) keys at creation: where a rewind replays from."""
    compactions: int = 0
    """How many times events were compacted: part of every event cursor's snapshot."""
    revision: int = 0
    """Starts at the creation time in microseconds; bumped by every appended event and
    every compaction, so it never repeats, even across a delete and re-create."""


class Session(msgspec.Struct, frozen=True, kw_only=True):
    """A session as callers see it: its merged state (session, user, app) and events."""

    id: str
    app_name: str
    user_id: str
    state: dict[str, Any]
    events: tuple[Event, ...] = ()
    last_update_time: float = 0.0
    revision: int = 0
    """Changes with every event and compaction; what a rewind plan can be bound to."""


class Storage(Protocol):
    """One atomic step's view of a store.

    Continuations (``_adk:paused:`` keys) are kept per session outside the record:
    `get_continuation` reads one (None: absent), `put_continuation` writes one (None
    deletes it), `continuations` reads them all; `delete_session` deletes them too.
    `append_event` may be given the event's checked encoding (`events.checked`), for a
    store that keeps bytes to keep instead of encoding it again."""

    def get_session(self, app: str, user: str, session_id: str) -> SessionRecord | None: ...
    def put_session(self, record: SessionRecord) -> None: ...
    def delete_session(self, app: str, user: str, session_id: str) -> None: ...
    def list_sessions(self, app: str, user: str) -> list[SessionRecord]: ...
    def get_scope_state(self, scope: tuple[str, ...]) -> dict[str, Any]: ...
    def put_scope_state(self, scope: tuple[str, ...], state: dict[str, Any]) -> None: ...
    def append_event(
        self, record: SessionRecord, seq: int, event: Event, encoded: bytes | None = None
    ) -> None: ...
    def events(self, record: SessionRecord) -> list[Event]: ...
    def replace_events(self, record: SessionRecord, events: list[Event]) -> None: ...
    def get_continuation(self, record: SessionRecord, key: str) -> Any: ...
    def put_continuation(self, record: SessionRecord, key: str, value: Any) -> None: ...
    def continuations(self, record: SessionRecord) -> dict[str, Any]: ...


INTERNAL_PREFIX = "_adk:"
"""The runtime's own session keys (open and paused invocations); None deletes one."""

CONTINUATION_PREFIX = INTERNAL_PREFIX + "paused:"
"""A paused invocation's continuation: stored apart from the record (`Storage`)."""

OPEN_PREFIX = INTERNAL_PREFIX + "open:"
"""An open invocation's marker (`owner.marker`: its opener's token and process)."""

RUNTIME_AUTHOR = "runner"
"""The author of what the runtime records by itself (the Runner's ``RUNNER_AUTHOR``)."""

ABANDONED = "abandoned"
"""The reason of the terminal a store writes for an invocation whose process is gone."""


def shared_state(storage: Storage, record: SessionRecord) -> dict[str, Any]:
    """The ``app:`` and ``user:`` state a session sees."""
    return {
        **storage.get_scope_state(("app", record.app_name)),
        **storage.get_scope_state(("user", record.app_name, record.user_id)),
    }


def merged_state(storage: Storage, record: SessionRecord, internal: bool) -> dict[str, Any]:
    """The state a session sees; the runtime's own keys only if `internal` (and only
    then are the continuations read at all)."""
    if internal:  # a record written before continuations moved out may hold some too
        return {**shared_state(storage, record), **record.state, **storage.continuations(record)}
    own = {k: v for k, v in record.state.items() if not k.startswith(INTERNAL_PREFIX)}
    return {**shared_state(storage, record), **own}


def require(storage: Storage, app: str, user: str, session_id: str) -> SessionRecord:
    """The session's record as this step reads it (``not_found`` if there is none)."""
    record = storage.get_session(app, user, session_id)
    if record is None:
        raise AdkError("not_found", "no such session")
    return record


def view(
    storage: Storage, record: SessionRecord, with_events: bool = True, internal: bool = False
) -> Session:
    """The session as callers see it: without the runtime's ``_adk:`` keys unless
    `internal` (the runtime's own reads)."""
    return Session(
        id=record.id,
        app_name=record.app_name,
        user_id=record.user_id,
        state=merged_state(storage, record, internal),
        events=tuple(storage.events(record)) if with_events else (),
        last_update_time=record.last_update,
        revision=record.revision,
    )


def replayable(key: str) -> bool:
    """Keys a branch may start with: no temp:, internal (``_``-prefixed) or secret keys."""
    if key.startswith(("temp:", "_", "user:", "app:")):
        return False
    return not is_secret_key(key)


def revision_base() -> int:
    """A new session's first revision: microseconds since the epoch, so a session
    deleted and created again never repeats an old revision."""
    return time.time_ns() // 1_000


def without_secrets(session: Session) -> Session:
    """`session` as a query shows it: its state and events without credential-named keys,
    at any depth (`providers.errors.prune`, `events.without_secrets`). Stored data is
    never changed."""
    state = prune(session.state)
    shown = tuple(event_codec.without_secrets(event) for event in session.events)
    if state is session.state and all(a is b for a, b in zip(shown, session.events, strict=True)):
        return session
    return msgspec.structs.replace(session, state=state, events=shown)
