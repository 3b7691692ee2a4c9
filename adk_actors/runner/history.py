"""What the model sees of a session: canonical, secret-pruned history.

Only conversation events count: partial deltas, pauses, progress updates, claims,
errors and system audit events never reach the model. The turn passes everything it
sends through `providers.content.canonical` (credential-named keys pruned, adjacent
text merged), this invocation's own steps included. `read_history` is what a fresh
invocation reads before its turn: a pure read, creating the session only if missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adk_actors.agents.turn_outcome import TurnFailed
from adk_actors.events import Event
from adk_actors.runner.request import Fresh, InvocationRequest
from adk_actors.sessions.core import INTERNAL_PREFIX, Session
from adk_actors.sessions.service import SessionService
from providers.content import Content
from providers.errors import AdkError

_NOT_CONVERSATION = ("runner", "system")


def in_conversation(event: Event, include_partial: bool = False) -> bool:
    """Does this event's content belong in a model request?"""
    return (
        event.content is not None
        and (include_partial or not event.partial)
        and event.error is None
        and event.actions.pause is None
        and event.author not in _NOT_CONVERSATION
    )


def split_events(
    events: Sequence[Event], invocation_id: str | None, include_partial: bool = False
) -> tuple[list[Event], list[Event]]:
    """(conversation events before `invocation_id`, that invocation's own events)."""
    if invocation_id is None:  # a fresh invocation's read: one pass, `in_conversation` inline
        return [
            event
            for event in events
            if event.content is not None
            and (include_partial or not event.partial)
            and event.error is None
            and event.actions.pause is None
            and event.author not in _NOT_CONVERSATION
        ], []
    past: list[Event] = []
    current: list[Event] = []
    for event in events:
        if invocation_id is not None and event.invocation_id == invocation_id:
            if in_conversation(event):
                current.append(event)
        elif not current and in_conversation(event, include_partial):
            past.append(event)
    return past, current


def model_history(events: Sequence[Event]) -> list[Content]:
    """The contents of conversation events, as stored: the turn makes every request
    canonical and secret-pruned at the model boundary, once."""
    return [event.content for event in events if event.content is not None]


def visible_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """Session state as templates and tools see it: without the runtime's own keys."""
    return {k: v for k, v in state.items() if not k.startswith(INTERNAL_PREFIX)}


def read_history(request: InvocationRequest, opening: Event, agent: str) -> Any:
    """For a fresh invocation (in its preparing task, or inline when the context policy
    runs no user code): create or read the session, and choose the history the model
    sees; (history, visible state), or `TurnFailed` (a context budget refused)."""
    runner = request.runner
    assert isinstance(request.work, Fresh)
    try:
        session = _session(runner.sessions, runner.app_name, request.user_id, request.session_id)
        past, _ = split_events(session.events, None, runner.context_policy.include_partial)
        chosen = runner.context_policy.select(past, opening, agent)
    except AdkError as error:
        return TurnFailed(error.reason)
    return model_history(chosen[:-1]), visible_state(session.state)


def _session(sessions: SessionService, app: str, user: str, session_id: str) -> Session:
    """The session, read as a pure read (LMDB: a read-only transaction, which never
    waits for a writer); created if it does not exist yet. One call, its lock taken
    once, and no ``not_found`` error built for a new session."""
    return sessions.get_or_create_session(app, user, session_id)
