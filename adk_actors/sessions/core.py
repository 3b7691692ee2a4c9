"""Session semantics, written once over a small storage interface.

Both services run these operations inside one atomic step of their store (under
the tables' mutex for memory; one LMDB transaction for LMDB, read-only for the pure
reads `get` and `list_all`), so the rules live here only:

* state keys by prefix: plain keys belong to the session; ``user:`` keys to every
  session of that user (future ones too); ``app:`` keys to every user of the app
  (they outlive session deletion); ``temp:`` keys to the current invocation (they
  survive `add_event`, `clear_temp_state` removes them);
* `create` is idempotent and never overwrites; `update_state`, `add_event`,
  `clear_temp_state` on a missing session raise ``not_found`` and change nothing;
* `add_event_if_state` writes only if the expected values still hold (``conflict``);
* the runtime's own keys (``_adk:``) are deleted by a None value, so finished
  invocations leave nothing behind in the state; they are never part of a `Session`'s
  state shown to callers (`view`), only of the runtime's (``internal=True``);
* `take_state` reads and removes one key in the same step (``not_found`` if absent);
* an event is checked and encoded once before it is stored (`check_event`, which the
  services run before the step: `events.checked`, so a lone surrogate anywhere is
  ``invalid_utf8`` and provider metadata must be strict JSON), and LMDB stores those
  very bytes;
* continuations (``_adk:paused:`` keys, up to megabytes each) live apart from the
  record, one entry per key, written only when that key changes: a step re-encodes the
  record, so its cost must not grow with unclaimed continuations. Reads merge them back
  into the state, `add_event_if_state` reads only the ones it expects, deleting a
  session deletes them, and a rewind never copies them (no ``_`` key is replayed).

The pieces live beside it: `records` (what is stored and shown, the `Storage`
interface, the runtime's key prefixes, `view`), `checks` (ids, state deltas and whole
appends, checked before a step) and `branching` (compaction and rewind). Every
operation and every name other areas use is reachable here (`core.rewind`,
`core.check_id`, `core.SessionRecord`, ...).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from adk_actors.events import Event, EventError
from adk_actors.sessions.branching import compact_events as compact_events
from adk_actors.sessions.branching import rewind as rewind
from adk_actors.sessions.checks import MAX_ID_BYTES as MAX_ID_BYTES
from adk_actors.sessions.checks import MAX_STATE_BYTES as MAX_STATE_BYTES
from adk_actors.sessions.checks import Checked as Checked
from adk_actors.sessions.checks import Split, check_utf8, split_delta
from adk_actors.sessions.checks import check_event as check_event
from adk_actors.sessions.checks import check_id as check_id
from adk_actors.sessions.records import ABANDONED as ABANDONED
from adk_actors.sessions.records import CONTINUATION_PREFIX as CONTINUATION_PREFIX
from adk_actors.sessions.records import INTERNAL_PREFIX as INTERNAL_PREFIX
from adk_actors.sessions.records import OPEN_PREFIX as OPEN_PREFIX
from adk_actors.sessions.records import RUNTIME_AUTHOR as RUNTIME_AUTHOR
from adk_actors.sessions.records import Session as Session
from adk_actors.sessions.records import SessionRecord as SessionRecord
from adk_actors.sessions.records import Storage as Storage
from adk_actors.sessions.records import replayable, revision_base, shared_state
from adk_actors.sessions.records import require as require
from adk_actors.sessions.records import view as view
from adk_actors.sessions.records import without_secrets as without_secrets
from providers.errors import AdkError

DEFAULT_LIST_LIMIT = 50
MAX_LIST_LIMIT = 500


def _is_continuation(key: str) -> bool:
    return key.startswith(CONTINUATION_PREFIX)


def _current(storage: Storage, record: SessionRecord, key: str) -> Any:
    """One session key's value (None: absent), reading a continuation only if asked."""
    if key in record.state:
        return record.state[key]
    return storage.get_continuation(record, key) if _is_continuation(key) else None


def _apply(storage: Storage, record: SessionRecord, delta: Split) -> None:
    session, user, app = delta
    for key, value in session.items():
        if _is_continuation(key):
            record.state.pop(key, None)  # an older record's copy: moved out on first change
            storage.put_continuation(record, key, value)
        elif value is None and key.startswith(INTERNAL_PREFIX):
            record.state.pop(key, None)
        else:
            record.state[key] = value
    for scope, changes in (
        (("user", record.app_name, record.user_id), user),
        (("app", record.app_name), app),
    ):
        if changes:
            storage.put_scope_state(scope, {**storage.get_scope_state(scope), **changes})


# -- operations (each runs inside one atomic step) ---------------------------------------------


def create(
    storage: Storage, app: str, user: str, session_id: str | None, state: Mapping[str, Any] | None
) -> Session:
    check_id(app, "app_name")
    check_id(user, "user_id")
    session_id = check_id(session_id, "session_id") if session_id is not None else uuid.uuid4().hex
    existing = storage.get_session(app, user, session_id)
    if existing is not None:
        return view(storage, existing)  # idempotent: never overwrites
    return view(storage, _new_record(storage, app, user, session_id, state))


def get_or_create(
    storage: Storage, app: str, user: str, session_id: str, internal: bool = False
) -> Session:
    """The session (as `get` shows it, `internal` too), created empty first if missing:
    the create and the view in this one step, so nothing (a delete through another
    service or process) can come between them (review of b26e68e, 4)."""
    record = storage.get_session(app, user, session_id)
    if record is None:
        record = _new_record(storage, app, user, session_id, {})
    return view(storage, record, internal=internal)


def _new_record(
    storage: Storage, app: str, user: str, session_id: str, state: Mapping[str, Any] | None
) -> SessionRecord:
    """Store a new session `session_id` (none exists) with `state` applied."""
    now = time.time()
    record = SessionRecord(
        id=session_id,
        app_name=app,
        user_id=user,
        state={},
        created=now,
        last_update=now,
        revision=revision_base(),
    )
    _apply(storage, record, split_delta(state or {}))
    record.initial_state = {key: value for key, value in record.state.items() if replayable(key)}
    storage.put_session(record)
    return record


def get(storage: Storage, app: str, user: str, session_id: str, internal: bool = False) -> Session:
    return view(storage, require(storage, app, user, session_id), internal=internal)


def find(
    storage: Storage, app: str, user: str, session_id: str, internal: bool = False
) -> Session | None:
    """`get`, but None for a missing session (no error built: a miss is expected)."""
    record = storage.get_session(app, user, session_id)
    return None if record is None else view(storage, record, internal=internal)


def list_all(
    storage: Storage, app: str, user: str, limit: int = DEFAULT_LIST_LIMIT, internal: bool = False
) -> list[Session]:
    """Newest first (ties by id), without events."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise AdkError("invalid_limit", f"limit is 1..{MAX_LIST_LIMIT}")
    records = sorted(storage.list_sessions(app, user), key=lambda r: (-r.last_update, r.id))
    return [
        view(storage, record, with_events=False, internal=internal) for record in records[:limit]
    ]


def delete(storage: Storage, app: str, user: str, session_id: str) -> None:
    require(storage, app, user, session_id)
    storage.delete_session(app, user, session_id)


def update_state(
    storage: Storage, app: str, user: str, session_id: str, delta: Mapping[str, Any]
) -> Session:
    record = require(storage, app, user, session_id)
    _apply(storage, record, split_delta(delta))
    record.last_update = time.time()
    storage.put_session(record)
    return view(storage, record, with_events=False)


MISSING: Any = object()
"""`take_state`'s default default: a missing key is ``not_found``."""


def take_state(
    storage: Storage, app: str, user: str, session_id: str, key: str, default: Any = MISSING
) -> Any:
    """Read and remove one state key in one step, whatever its scope (``user:`` and
    ``app:`` keys from theirs): of racing takes exactly one gets the value. A missing
    session is ``not_found``; so is a missing key, unless a `default` is given."""
    if not isinstance(key, str) or not key:
        raise AdkError("invalid_state_key", "a state key is a non-empty string")
    if key.startswith(INTERNAL_PREFIX):
        raise AdkError(
            "invalid_state_key", f"keys starting with {INTERNAL_PREFIX!r} are the runtime's"
        )
    check_utf8(key, "a state key")
    record = require(storage, app, user, session_id)
    found = True
    if key.startswith(("user:", "app:")):
        scope = ("user", app, user) if key.startswith("user:") else ("app", app)
        values = storage.get_scope_state(scope)
        found = key in values
        value = values.pop(key, None)
        if found:
            storage.put_scope_state(scope, values)
    elif key in record.state:
        value = record.state.pop(key)
    elif _is_continuation(key):
        value = storage.get_continuation(record, key)
        found = value is not None
        if found:
            storage.put_continuation(record, key, None)
    else:
        found = False
    if not found:
        if default is MISSING:
            raise AdkError("not_found", "no such state key")
        return default
    record.last_update = time.time()
    storage.put_session(record)
    return value


def add_event(
    storage: Storage,
    app: str,
    user: str,
    session_id: str,
    event: Event,
    runtime_delta: Mapping[str, Any] | None = None,
    precondition: Callable[[], bool] | None = None,
    checked: Checked | None = None,
) -> Event:
    """Append `event` and apply its state delta; `runtime_delta` (``_adk:`` keys only)
    is the runtime's own bookkeeping, applied in the same step but not part of the
    event, so it is never replayed. `precondition` runs inside the step; False makes
    it a ``conflict`` (the runtime's "is this worker still alive", checked atomically).
    `checked` is `check_event`'s result when the caller ran it before the step."""
    checked = checked or check_event(event, runtime_delta)
    record = require(storage, app, user, session_id)
    return _append(storage, record, event, checked, precondition)


def _append(
    storage: Storage,
    record: SessionRecord,
    event: Event,
    checked: Checked,
    precondition: Callable[[], bool] | None,
    clear_temp: bool = False,
) -> Event:
    """The rest of `add_event`, on a record already read in this step (read once);
    `clear_temp`: then remove ``temp:`` keys, as `clear_temp_state` does."""
    if precondition is not None and not precondition():
        raise AdkError("conflict", "the writer may no longer write")
    _apply(storage, record, checked.delta)
    if checked.runtime is not None:
        _apply(storage, record, checked.runtime)
    if clear_temp:
        record.state = _without_temp(record.state)
    record.event_count += 1
    record.revision += 1
    record.last_update = max(time.time(), record.last_update)
    storage.append_event(record, record.event_count, event, checked.encoded)
    storage.put_session(record)
    return event


def add_event_if_state(
    storage: Storage,
    app: str,
    user: str,
    session_id: str,
    event: Event,
    expected: Mapping[str, Any],
    runtime_delta: Mapping[str, Any] | None = None,
    precondition: Callable[[], bool] | None = None,
    checked: Checked | None = None,
    clear_temp: bool = False,
) -> Event:
    """`add_event` only if every `expected` value holds (None: the key is absent).
    Only the expected keys are read: shared scopes if one is ``user:``/``app:``, a
    continuation only if it is expected itself. `clear_temp`: the same step then
    clears ``temp:`` state (an invocation's end and its cleanup, in one write)."""
    record = require(storage, app, user, session_id)
    shared: dict[str, Any] | None = None  # read at the first user:/app: key, if any
    for key, value in expected.items():
        if key.startswith(("user:", "app:")):
            if shared is None:
                shared = shared_state(storage, record)
            current = shared.get(key)
        else:
            current = _current(storage, record, key)
        if current != value:
            raise AdkError("conflict", "the session state changed since it was read")
    checked = checked or check_event(event, runtime_delta)
    return _append(storage, record, event, checked, precondition, clear_temp)


def close_abandoned(
    storage: Storage, app: str, user: str, session_id: str, markers: Mapping[str, Any]
) -> list[Event]:
    """Close the open invocations `markers` names (invocation id -> the marker read
    under its ``_adk:open:`` key) whose key still holds exactly that marker: one error
    event (``abandoned``, by the runtime) each, its key deleted with it, all in this
    one step; so of racing recoveries exactly one stores it, and an invocation that
    moved on meanwhile is left alone. ``temp:`` state is cleared too once nothing in
    the session is open or paused any more (a pause keeps it for its resume). A
    missing session closes nothing."""
    record = storage.get_session(app, user, session_id)
    if record is None:
        return []
    closed: list[Event] = []
    for invocation_id, value in markers.items():
        key = OPEN_PREFIX + invocation_id
        if record.state.get(key) != value:
            continue
        event = Event.new(
            RUNTIME_AUTHOR,
            invocation_id,
            error=EventError(
                reason=ABANDONED, message="the process that ran the invocation is gone"
            ),
        )
        _append(storage, record, event, check_event(event, {key: None}), None)
        closed.append(event)
    if closed and not any(key.startswith(OPEN_PREFIX) for key in record.state):
        paused = any(_is_continuation(key) for key in record.state) or storage.continuations(record)
        if not paused:
            record.state = _without_temp(record.state)
            storage.put_session(record)
    return closed


def clear_temp_state(storage: Storage, app: str, user: str, session_id: str) -> None:
    record = require(storage, app, user, session_id)
    record.state = _without_temp(record.state)
    storage.put_session(record)


def _without_temp(state: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in state.items() if not key.startswith("temp:")}
