"""Operations that rewrite or branch a session's history: `compact_events` (a run of
events replaced by one summary, in place) and `rewind` (a new session holding the
first events of another, its state replayed from them; the source never changes).

Like every `core` operation, each runs inside one atomic step of its store. Both
bump what an event cursor or a branch plan is bound to: a compaction bumps the
record's ``compactions`` and ``revision``, a branch starts a revision of its own.
"""

from __future__ import annotations

import copy
import time

from adk_actors import events as event_codec
from adk_actors.events import Event
from adk_actors.sessions.checks import check_id
from adk_actors.sessions.records import (
    Session,
    SessionRecord,
    Storage,
    replayable,
    require,
    revision_base,
    view,
)
from providers.errors import AdkError


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
    record = require(storage, app, user, session_id)
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
    source = require(storage, app, user, source_id)
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
        state=copy.deepcopy({k: v for k, v in state.items() if replayable(k)}),
        created=now,
        last_update=now,
        initial_state=dict(source.initial_state),
    )
    for seq, event in enumerate(kept, start=1):
        storage.append_event(record, seq, event)
    record.event_count = len(kept)
    # the branch starts where a new session does (≤ now in µs), not `len(kept)` above
    # it: a branch deleted and created again soon after would otherwise start below
    # the old one and repeat its revisions (review of b26e68e, 8)
    record.revision = revision_base()
    storage.put_session(record)
    return view(storage, record)
