"""An invocation's life in its session's state: open, paused, resumed, ended.

Two runtime keys carry it, each written in the same atomic step as an event:

* ``_adk:open:<invocation id>`` holds the token of whoever opened the invocation (the
  user's message, or the claim of a resume) and the identity of its process
  (`sessions.owner.marker`: ``token@owner``), so a durable store reopened after that
  process died can close it (``abandoned``); the one terminal event (final, error,
  pause, shutdown or abandonment) deletes it. Every step is stored only while that token is
  there, and only by a live worker (checked inside the same atomic step), so nothing
  lands after the end, whoever wrote it; an abandonment closes only its own opening.
* ``_adk:paused:<invocation id>`` holds a pause's `Continuation` (a versioned
  msgspec struct, stored as JSON-normalised builtins and validated when read back),
  stored by the pause event, so a durable session keeps it across a restart. A resume claims it with
  `add_event_if_state` (expecting the exact continuation, deleting it, reopening the
  invocation): of racing resumes exactly one wins, the others see
  ``no_paused_invocation``. Progress updates use the same condition.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import msgspec

from adk_actors.agents.turn_outcome import Answer, Continuation
from adk_actors.events import Event, EventActions, Pause
from adk_actors.sessions import owner
from adk_actors.sessions.core import OPEN_PREFIX as OPEN_PREFIX
from providers import content as content_model
from providers.content import FunctionCallPart
from providers.errors import AdkError

PAUSED_PREFIX = "_adk:paused:"
LONG_RUNNING_PROGRESS = ("pending", "running")
LONG_RUNNING_TERMINAL = ("completed", "failed", "cancelled")
MAX_PROGRESS_MESSAGE_CHARS = 1024
MAX_RESPONSE_BYTES = 1 << 20
_PAUSE_REASONS = {
    "tool_confirmation": "tool_confirmation",
    "long_running": "long_running",
    "human_in_the_loop": "human_in_the_loop",
}


def key_of(invocation_id: str) -> str:
    """The state key of an invocation's continuation while it is paused."""
    return PAUSED_PREFIX + invocation_id


def open_key(invocation_id: str) -> str:
    """The state key present while an invocation is open (between opening and end)."""
    return OPEN_PREFIX + invocation_id


def new_token() -> str:
    """What an opening writes: only its holder may write steps and end it."""
    return uuid.uuid4().hex


def is_open(invocation_id: str, token: str) -> dict[str, Any]:
    """The `add_event_if_state` condition for writing a step of an invocation this
    process opened with `token`."""
    return {open_key(invocation_id): owner.marker(token)}


def opened_delta(invocation_id: str, token: str) -> dict[str, Any]:
    """Runtime delta of an opening event: the invocation is open, for `token`, in
    this process."""
    return {open_key(invocation_id): owner.marker(token)}


def token_of(marker: Any) -> Any:
    """The token in what an ``_adk:open:`` key holds (whichever process wrote it)."""
    return owner.token_of(marker)


def closed_delta(invocation_id: str) -> dict[str, Any]:
    """Runtime delta of a terminal event: the invocation is over."""
    return {open_key(invocation_id): None}


def paused_delta(invocation_id: str, continuation: dict[str, Any]) -> dict[str, Any]:
    """Runtime delta of a pause: closed, with its continuation stored."""
    return {open_key(invocation_id): None, key_of(invocation_id): continuation}


def claimed_delta(invocation_id: str, token: str) -> dict[str, Any]:
    """Runtime delta of a resume's claim: the continuation consumed, open for `token`
    in this process."""
    return {key_of(invocation_id): None, open_key(invocation_id): owner.marker(token)}


def dropped_delta(invocation_id: str) -> dict[str, Any]:
    """Runtime delta of abandoning a paused invocation: its continuation is gone."""
    return {key_of(invocation_id): None}


def paused(state: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Invocation id -> continuation, for every unclaimed pause in a session's state."""
    return {
        key[len(PAUSED_PREFIX) :]: value
        for key, value in state.items()
        if key.startswith(PAUSED_PREFIX) and isinstance(value, dict)
    }


def select(
    state: Mapping[str, Any], invocation_id: str | None, agent: str | None = None
) -> tuple[str, dict[str, Any], Continuation]:
    """The continuation to resume: the named one, or the only one, as stored (what a
    claim must find unchanged) and validated; with `agent`, it must be that agent's
    pause (``paused_by_another_agent``)."""
    chosen, stored = _select(state, invocation_id)
    continuation = Continuation.load(stored)
    if agent is not None and continuation.agent != agent:
        raise AdkError("paused_by_another_agent", "resume it with the Runner of its agent")
    return chosen, stored, continuation


def _select(state: Mapping[str, Any], invocation_id: str | None) -> tuple[str, dict[str, Any]]:
    pending = paused(state)
    if invocation_id is not None:
        if invocation_id not in pending:
            raise AdkError("no_paused_invocation", "that invocation is not paused")
        return invocation_id, pending[invocation_id]
    if not pending:
        raise AdkError("no_paused_invocation", "nothing in this session is paused")
    if len(pending) > 1:
        raise AdkError(
            ("ambiguous_paused_invocation", sorted(pending)),
            "several invocations are paused; pass invocation_id",
        )
    ((only, continuation),) = pending.items()
    return only, continuation


def pause_event(
    author: str,
    invocation_id: str,
    continuation: Continuation,
    call: FunctionCallPart,
    message: str,
) -> Event:
    """The event announcing a pause (stored with `paused_delta`: the continuation)."""
    kind = continuation.type
    pause = Pause(
        reason=_PAUSE_REASONS[kind],
        continuation_id=invocation_id,
        tool_name=call.name,
        call_id=call.id,
        thought_signature=call.thought_signature,
        hint=continuation.hint,
        details=continuation.details(),
    )
    return Event.new(
        author,
        invocation_id,
        content_model.from_text(message or f"Paused: {kind}", role="model"),
        actions=EventActions(pause=pause),
    )


def answer(continuation: Continuation, response: Any) -> Answer:
    """Check a resume response against its pause. Nothing is consumed when this raises."""
    kind = continuation.type
    if kind == "tool_confirmation":
        if (
            not isinstance(response, Mapping)
            or set(response) != {"confirmed"}
            or not isinstance(response["confirmed"], bool)
        ):
            raise AdkError(
                "invalid_tool_confirmation_response", 'resume with exactly {"confirmed": bool}'
            )
        if response["confirmed"]:
            return Answer("approved")
        error = {"kind": "tool_confirmation_rejected", "action_id": continuation.action_id}
        return Answer("rejected", {"success": False, "error": error})
    if kind == "long_running":
        return Answer("completed", _completion(continuation, response))
    if not isinstance(response, Mapping):
        raise AdkError("invalid_resume_response", "a human's answer is a JSON object")
    return Answer("completed", _json_object(dict(response), "invalid_resume_response"))


def _completion(continuation: Continuation, response: Any) -> dict[str, Any]:
    allowed = {"operation_id", "status", "result", "error", "metadata"}
    if (
        not isinstance(response, Mapping)
        or not {"operation_id", "status"} <= set(response) <= allowed
        or response["operation_id"] != continuation.operation_id
        or response["status"] not in LONG_RUNNING_TERMINAL
    ):
        raise AdkError(
            "invalid_long_running_completion",
            "a completion has operation_id (the paused one), status in "
            f"{LONG_RUNNING_TERMINAL} and optional result, error, metadata",
        )
    return _json_object(dict(response), "invalid_long_running_completion")


def claim_event(author: str, invocation_id: str, kind: str, how: str) -> Event:
    """The event that consumes a continuation (stored with `claimed_delta`): value-free,
    by the runtime (`author`), not the user: the human's answer reaches the model as
    the paused call's tool response, which the resumed turn stores next."""
    return Event.new(
        author,
        invocation_id,
        actions=EventActions(
            resume={"continuation_id": invocation_id, "type": kind, "outcome": how},
        ),
    )


def progress_event(
    author: str, invocation_id: str, continuation: Continuation, update: Any
) -> Event:
    """A non-terminal update of a long-running operation, checked field by field."""
    if continuation.type != "long_running":
        raise AdkError("long_running_operation_mismatch", "that pause is not long-running")
    allowed = {"operation_id", "status", "progress", "message", "metadata"}
    if (
        not isinstance(update, Mapping)
        or not {"operation_id", "status"} <= set(update) <= allowed
        or update["status"] not in LONG_RUNNING_PROGRESS
        or not _valid_progress(update.get("progress", 0))
        or not isinstance(update.get("message", ""), str)
        or len(update.get("message", "")) > MAX_PROGRESS_MESSAGE_CHARS
        or not isinstance(update.get("metadata", {}), Mapping)
    ):
        raise AdkError(
            "invalid_long_running_progress",
            f"an update has operation_id, status in {LONG_RUNNING_PROGRESS}, and optional "
            "progress (0..100), message, metadata",
        )
    if update["operation_id"] != continuation.operation_id:
        raise AdkError("long_running_operation_mismatch", "another operation is paused there")
    record = _json_object(dict(update), "invalid_long_running_progress")
    return Event.new(author, invocation_id, actions=EventActions(long_running_operation=record))


def _valid_progress(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and 0 <= value <= 100


def _json_object(value: dict[str, Any], reason: str) -> dict[str, Any]:
    try:
        size = len(msgspec.json.encode(value))
    except (TypeError, msgspec.EncodeError):
        raise AdkError(reason, "values must be JSON-safe") from None
    if size > MAX_RESPONSE_BYTES:
        raise AdkError(reason, f"at most {MAX_RESPONSE_BYTES} bytes")
    return msgspec.json.decode(msgspec.json.encode(value))  # type: ignore[no-any-return]
