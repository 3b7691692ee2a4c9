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
"""

from __future__ import annotations

import copy
import re
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

import msgspec

from adk_actors import events as event_codec
from adk_actors.events import Event, EventError
from providers.errors import AdkError, is_secret_key, prune

MAX_STATE_BYTES = 16 << 20
MAX_ID_BYTES = 128
"""An app, user or session id's longest UTF-8 encoding (`check_id`)."""
DEFAULT_LIST_LIMIT = 50
MAX_LIST_LIMIT = 500


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
            len(_utf8(value, what).encode("utf-8")) <= MAX_ID_BYTES
            and _CONTROL.search(value) is None
        ):
            return value
    raise AdkError(
        "invalid_id",
        f"{what} is a non-empty string of at most {MAX_ID_BYTES} UTF-8 bytes "
        "without control characters",
    )


def _utf8(value: str, what: str) -> str:
    """`value`, if it encodes to UTF-8 (a lone surrogate: ``invalid_utf8``)."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise AdkError("invalid_utf8", f"{what} must be valid UTF-8") from None
    return value


Split = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]
"""A checked state delta: its session (incl. ``temp:`` and ``_adk:``), user: and app: keys."""


def _split(delta: Mapping[str, Any], *, runtime: bool = False) -> Split:
    """(session incl. temp:, user:, app:) parts of a state delta, checked: string keys,
    JSON-safe values (``invalid_state_delta``; ``invalid_utf8`` for a lone surrogate),
    at most `MAX_STATE_BYTES` encoded. Only the runtime's own delta (`runtime`) may
    touch ``_adk:`` keys: nobody else can forge or drop a pause or an open marker."""
    if not isinstance(delta, Mapping):
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


def _shared(storage: Storage, record: SessionRecord) -> dict[str, Any]:
    """The ``app:`` and ``user:`` state a session sees."""
    return {
        **storage.get_scope_state(("app", record.app_name)),
        **storage.get_scope_state(("user", record.app_name, record.user_id)),
    }


def _merged(storage: Storage, record: SessionRecord, internal: bool) -> dict[str, Any]:
    """The state a session sees; the runtime's own keys only if `internal` (and only
    then are the continuations read at all)."""
    if internal:  # a record written before continuations moved out may hold some too
        return {**_shared(storage, record), **record.state, **storage.continuations(record)}
    own = {k: v for k, v in record.state.items() if not k.startswith(INTERNAL_PREFIX)}
    return {**_shared(storage, record), **own}


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


def _require(storage: Storage, app: str, user: str, session_id: str) -> SessionRecord:
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
        state=_merged(storage, record, internal),
        events=tuple(storage.events(record)) if with_events else (),
        last_update_time=record.last_update,
        revision=record.revision,
    )


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
    now = time.time()
    record = SessionRecord(
        id=session_id,
        app_name=app,
        user_id=user,
        state={},
        created=now,
        last_update=now,
        revision=_revision_base(),
    )
    _apply(storage, record, _split(state or {}))
    record.initial_state = {key: value for key, value in record.state.items() if _replayable(key)}
    storage.put_session(record)
    return view(storage, record)


def get(storage: Storage, app: str, user: str, session_id: str, internal: bool = False) -> Session:
    return view(storage, _require(storage, app, user, session_id), internal=internal)


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
    _require(storage, app, user, session_id)
    storage.delete_session(app, user, session_id)


def update_state(
    storage: Storage, app: str, user: str, session_id: str, delta: Mapping[str, Any]
) -> Session:
    record = _require(storage, app, user, session_id)
    _apply(storage, record, _split(delta))
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
    _utf8(key, "a state key")
    record = _require(storage, app, user, session_id)
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
    record = _require(storage, app, user, session_id)
    return _append(storage, record, event, checked, precondition)


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
    delta = _split(event.actions.state_delta)
    runtime = _split(runtime_delta, runtime=True) if runtime_delta else None
    return Checked(delta, runtime, event_codec.checked(event))


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
    record = _require(storage, app, user, session_id)
    shared_keys = any(key.startswith(("user:", "app:")) for key in expected)
    shared = _shared(storage, record) if shared_keys else {}
    for key, value in expected.items():
        if key.startswith(("user:", "app:")):
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


def compact_events(
    storage: Storage,
    app: str,
    user: str,
    session_id: str,
    event_ids: list[str],
    summary: Event,
) -> Session:
    """Replace a contiguous run of events, named in session order, by one summary event
    (atomic). Ids that are missing, repeated, out of order or not adjacent: ``conflict``.
    The summary may not carry a state delta: the compacted events' state stays applied."""
    if not isinstance(summary, Event):
        raise AdkError("invalid_event", "the summary is an Event")
    if summary.actions.state_delta:
        raise AdkError("invalid_compaction", "a summary event cannot change state")
    event_codec.checked(summary)
    if not event_ids or not all(isinstance(event_id, str) for event_id in event_ids):
        raise AdkError("invalid_compaction", "name at least one event id")
    record = _require(storage, app, user, session_id)
    events = storage.events(record)
    positions = {event.id: index for index, event in enumerate(events)}
    start = positions.get(event_ids[0])
    if start is None or [e.id for e in events[start : start + len(event_ids)]] != event_ids:
        raise AdkError("conflict", "those events are not a contiguous run in session order")
    compacted = [*events[:start], summary, *events[start + len(event_ids) :]]
    storage.replace_events(record, compacted)
    record.event_count = len(compacted)
    record.compactions += 1
    record.revision += 1
    record.last_update = max(time.time(), record.last_update)
    storage.put_session(record)
    return view(storage, record)


def clear_temp_state(storage: Storage, app: str, user: str, session_id: str) -> None:
    record = _require(storage, app, user, session_id)
    record.state = _without_temp(record.state)
    storage.put_session(record)


def _without_temp(state: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in state.items() if not key.startswith("temp:")}


def _replayable(key: str) -> bool:
    """Keys a branch may start with: no temp:, internal (``_``-prefixed) or secret keys."""
    if key.startswith(("temp:", "_", "user:", "app:")):
        return False
    return not is_secret_key(key)


def rewind(
    storage: Storage,
    app: str,
    user: str,
    source_id: str,
    keep_events: int,
    target_id: str,
    expected_event_count: int | None,
    destructive: bool,
    expected_revision: int | None = None,
) -> Session:
    """Branch: a new session holding the source's first `keep_events` events, its state
    replayed from them; the source is never changed."""
    if destructive:
        raise AdkError("destructive_rewind_unsupported", "rewind into a new session instead")
    check_id(target_id, "session_id")
    if target_id == source_id:
        raise AdkError("invalid_rewind_target", "the target must differ from the source")
    source = _require(storage, app, user, source_id)
    if expected_revision is not None and source.revision != expected_revision:
        raise AdkError("stale_branch_plan", "the source changed since the branch was planned")
    if expected_event_count is not None and (
        source.event_count != expected_event_count or source.compactions
    ):  # after a compaction a count can come back: only expected_revision is safe then
        raise AdkError("stale_branch_plan", "the source changed since the branch was planned")
    if (
        isinstance(keep_events, bool)
        or not isinstance(keep_events, int)
        or not 0 <= keep_events <= source.event_count
    ):
        raise AdkError("invalid_rewind_point", f"keep_events is 0..{source.event_count}")
    if storage.get_session(app, user, target_id) is not None:
        raise AdkError("already_exists", "the target session exists")
    kept = storage.events(source)[:keep_events]
    for event in kept:
        for key in event.actions.state_delta:
            if key.startswith(("user:", "app:")):
                raise AdkError(
                    "shared_state_replay_blocked", "a kept event changed user: or app: state"
                )
            if key.startswith("temp:"):
                raise AdkError("transient_state_replay_blocked", "a kept event changed temp: state")
    now = time.time()
    state = dict(source.initial_state)
    for event in kept:
        state.update(event.actions.state_delta)
    record = SessionRecord(
        id=target_id,
        app_name=app,
        user_id=user,
        # stored events are read-only (`providers.frozen`): the branch gets its own values
        state=copy.deepcopy({k: v for k, v in state.items() if _replayable(k)}),
        created=now,
        last_update=now,
        initial_state=dict(source.initial_state),
    )
    for seq, event in enumerate(kept, start=1):
        storage.append_event(record, seq, event)
    record.event_count = len(kept)
    record.revision = _revision_base() + len(kept)
    storage.put_session(record)
    return view(storage, record)


def _revision_base() -> int:
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
