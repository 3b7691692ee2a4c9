"""The session-service protocol: every implementation runs `core` operations atomically.

A backend supplies `_run` (one atomic step that may write) and may override `_read`
(one consistent snapshot for a pure read, e.g. an LMDB read-only transaction, which
costs no commit). The per-session locks are the same for both: every operation on a
session, reads included, waits for that session's `lock`.

Every call checks its app, user and session ids first, reads included, with one rule
for every backend (`core.check_id`: ``invalid_id``), so no id can reach a store's
key encoding unchecked.

A `Session`'s state never shows the runtime's own keys (``_adk:``: open invocations,
paused continuations); the runtime reads them with ``include_internal=True``."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from adk_actors.events import Event
from adk_actors.sessions import core, query
from adk_actors.sessions.core import Session
from supervision import acquire_or_hand_over


class _HeldLock:
    __slots__ = ("__weakref__", "lock")

    def __init__(self) -> None:
        self.lock = threading.RLock()


_RECENT_LOCKS = 1024
"""How many sessions' locks stay alive after their last use (most recent first)."""


class _SessionLocks:
    """One re-entrant lock per session, alive while someone uses it and while the
    session is among the `_RECENT_LOCKS` most recently used (so a session's every
    operation does not make and drop a lock of its own)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: weakref.WeakValueDictionary[tuple[str, str, str], _HeldLock] = (
            weakref.WeakValueDictionary()
        )
        self._recent: dict[tuple[str, str, str], _HeldLock] = {}

    def get(self, key: tuple[str, str, str]) -> _HeldLock:
        with self._guard:
            recent = self._recent
            held = recent.pop(key, None) or self._locks.get(key)
            if held is None:
                held = self._locks[key] = _HeldLock()
            recent[key] = held  # now the most recent
            if len(recent) > _RECENT_LOCKS:
                del recent[next(iter(recent))]
            return held


class SessionService:
    """Subclasses supply `_run(operation, *args)`: run it in one atomic step; they may
    override `_read(operation, *args)` for operations that only read.

    `cursor_key` seals query cursors; by default a random key per service, so a cursor
    is valid only for the service that issued it (pass a shared secret to share them).
    """

    cursor_key: bytes = b""

    def _key(self) -> bytes:
        if not self.cursor_key:
            self.cursor_key = os.urandom(32)
        return self.cursor_key

    def _run(self, operation: Callable[..., Any], *args: Any) -> Any:
        raise NotImplementedError

    def _read(self, operation: Callable[..., Any], *args: Any) -> Any:
        """Run an operation that never writes in one consistent snapshot of the store;
        by default the same atomic step as a write."""
        return self._run(operation, *args)

    @contextmanager
    def lock(self, app_name: str, user_id: str, session_id: str) -> Iterator[None]:
        """Hold one session's lock (re-entrant) across several operations, e.g. a read,
        a decision and a write. Every operation on that session waits for it; other
        sessions never do."""
        _check_ids(app_name, user_id, session_id)
        held = self._locks.get((app_name, user_id, session_id))
        lock = held.lock
        acquire_or_hand_over(lock)  # a pooled handler hands over what it readied first
        try:
            yield
        finally:
            lock.release()

    def _locked(
        self,
        operation: Callable[..., Any],
        app: str,
        user: str,
        session_id: Any,
        *args: Any,
        read_only: bool = False,
    ) -> Any:
        """Run a one-session operation under that session's lock (`read_only`: as a
        pure read, `_read`; otherwise as a step that may write, `_run`)."""
        step = self._read if read_only else self._run
        _check_ids(app, user, session_id, new=operation is core.create)
        if session_id is None:
            return step(operation, app, user, session_id, *args)
        held = self._locks.get((app, user, session_id))
        lock = held.lock
        acquire_or_hand_over(lock)  # a pooled handler hands over what it readied first
        try:
            return step(operation, app, user, session_id, *args)
        finally:
            lock.release()

    @property
    def _locks(self) -> _SessionLocks:
        locks: _SessionLocks | None = self.__dict__.get("_session_locks")
        if locks is None:
            locks = self.__dict__.setdefault("_session_locks", _SessionLocks())
        return locks

    def create_session(
        self,
        app_name: str,
        user_id: str,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> Session:
        """Create a session, or return the existing one unchanged (idempotent)."""
        return self._locked(core.create, app_name, user_id, session_id, dict(state or {}))  # type: ignore[no-any-return]

    def get_session(
        self, app_name: str, user_id: str, session_id: str, *, include_internal: bool = False
    ) -> Session:
        """The session with its merged state and events; ``not_found`` if missing.
        `include_internal` adds the runtime's own ``_adk:`` keys to the state: for the
        Runner's reads of its invocations, never for showing a session to anyone."""
        return self._locked(  # type: ignore[no-any-return]
            core.get, app_name, user_id, session_id, include_internal, read_only=True
        )

    def get_or_create_session(
        self, app_name: str, user_id: str, session_id: str, *, include_internal: bool = False
    ) -> Session:
        """The session (as `get_session` gives it), created empty first if it does not
        exist: what an invocation's first read wants, in one call (the ids checked and
        the session's lock taken once). An existing session costs a pure read (LMDB: a
        read-only transaction) and no ``not_found`` error; only a missing one costs a
        write step, which creates it and reads it back in that one step
        (`core.get_or_create`), so a delete by another service or process cannot make
        this call fail."""
        _check_ids(app_name, user_id, session_id)
        held = self._locks.get((app_name, user_id, session_id))
        with held.lock:
            found: Session | None = self._read(
                core.find, app_name, user_id, session_id, include_internal
            )
            if found is not None:
                return found
            return self._run(  # type: ignore[no-any-return]
                core.get_or_create, app_name, user_id, session_id, include_internal
            )

    def list_sessions(
        self,
        app_name: str,
        user_id: str,
        limit: int = core.DEFAULT_LIST_LIMIT,
        *,
        include_internal: bool = False,
    ) -> list[Session]:
        """A user's sessions, newest first (ties by id), without events
        (`include_internal`: as in `get_session`)."""
        _check_ids(app_name, user_id)
        return self._read(core.list_all, app_name, user_id, limit, include_internal)  # type: ignore[no-any-return]

    def delete_session(self, app_name: str, user_id: str, session_id: str) -> None:
        self._locked(core.delete, app_name, user_id, session_id)

    def update_state(
        self, app_name: str, user_id: str, session_id: str, delta: Mapping[str, Any]
    ) -> Session:
        """Apply a state delta by prefix (plain, ``user:``, ``app:``, ``temp:``)."""
        return self._locked(core.update_state, app_name, user_id, session_id, dict(delta))  # type: ignore[no-any-return]

    def take_state(
        self, app_name: str, user_id: str, session_id: str, key: str, default: Any = core.MISSING
    ) -> Any:
        """Read and remove one state key (any scope) in one atomic step: of racing takes
        exactly one gets the value. ``not_found`` for a missing session, and for a
        missing key unless `default` is given (then returned)."""
        return self._locked(core.take_state, app_name, user_id, session_id, key, default)

    def add_event(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        event: Event,
        *,
        runtime_delta: Mapping[str, Any] | None = None,
        precondition: Callable[[], bool] | None = None,
    ) -> Event:
        """Append an event and apply its state delta, in one step. `runtime_delta`
        (``_adk:`` keys; None deletes one) is the runtime's bookkeeping, applied in the
        same step without being part of the event; `precondition` runs inside the step
        (False: ``conflict``). The event is checked and encoded before the step."""
        runtime = _optional(runtime_delta)
        checked = core.check_event(event, runtime)
        return self._locked(  # type: ignore[no-any-return]
            core.add_event, app_name, user_id, session_id, event, runtime, precondition, checked
        )

    def add_event_if_state(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        event: Event,
        expected: Mapping[str, Any],
        *,
        runtime_delta: Mapping[str, Any] | None = None,
        precondition: Callable[[], bool] | None = None,
        clear_temp: bool = False,
    ) -> Event:
        """Append only if `expected` state values still hold (None: the key is absent);
        ``conflict`` otherwise. The event is checked first (an invalid one fails as
        such, whatever the state). `clear_temp`: the same step then removes ``temp:``
        keys, as `clear_temp_state` does (an invocation's end, in one write)."""
        runtime = _optional(runtime_delta)
        checked = core.check_event(event, runtime)
        return self._locked(  # type: ignore[no-any-return]
            core.add_event_if_state,
            app_name,
            user_id,
            session_id,
            event,
            dict(expected),
            runtime,
            precondition,
            checked,
            clear_temp,
        )

    def query_sessions(
        self,
        app_name: str,
        user_id: str,
        limit: int = query.DEFAULT_SESSION_PAGE,
        cursor: str | None = None,
    ) -> query.SessionPage:
        """One page of a user's sessions, newest first, with the cursor of the next."""
        _check_ids(app_name, user_id)
        return self._read(query.sessions_page, self._key(), app_name, user_id, limit, cursor)  # type: ignore[no-any-return]

    def query_events(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        limit: int = query.DEFAULT_EVENT_PAGE,
        cursor: str | None = None,
        author: str | None = None,
    ) -> query.EventPage:
        """One page of a session's events in order (optionally one author's)."""
        page: query.EventPage = self._locked(
            query.events_page,
            app_name,
            user_id,
            session_id,
            self._key(),
            limit,
            cursor,
            author,
            read_only=True,
        )
        return page

    def rewind(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        keep_events: int,
        target_session_id: str,
        *,
        expected_event_count: int | None = None,
        destructive: bool = False,
        expected_revision: int | None = None,
    ) -> Session:
        """Branch the first `keep_events` events into a new session (the source is never
        changed). `expected_revision` (a `Session.revision` you read) guards against a
        source that moved on; `expected_event_count` too, but it always fails on a
        compacted source, whose count can repeat."""
        return self._locked(  # type: ignore[no-any-return]
            core.rewind,
            app_name,
            user_id,
            session_id,
            keep_events,
            target_session_id,
            expected_event_count,
            destructive,
            expected_revision,
        )

    def compact_events(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        event_ids: Sequence[str],
        summary: Event,
    ) -> Session:
        """Atomically replace the contiguous events `event_ids` (in session order) with
        `summary`; ``conflict`` if they are not such a run any more."""
        return self._locked(  # type: ignore[no-any-return]
            core.compact_events, app_name, user_id, session_id, list(event_ids), summary
        )

    def clear_temp_state(self, app_name: str, user_id: str, session_id: str) -> None:
        """Remove ``temp:`` keys (at an invocation's final or error boundary)."""
        self._locked(core.clear_temp_state, app_name, user_id, session_id)


_NO_SESSION: Any = object()


def _check_ids(app: Any, user: Any, session_id: Any = _NO_SESSION, *, new: bool = False) -> None:
    """The one id rule (`core.check_id`, ``invalid_id``), before any step or lock; a
    session id of None only for a create (`new`: "choose one for me")."""
    core.check_id(app, "app_name")
    core.check_id(user, "user_id")
    if session_id is not _NO_SESSION and not (new and session_id is None):
        core.check_id(session_id, "session_id")


def _optional(delta: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if delta is None else dict(delta)
