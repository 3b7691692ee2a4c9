"""The invocation server's protocol: one small typed class per message.

Callers (`Runner`, `adk.runs`) send `Cancel`, `Wait`, `Status` (`RunStatus`),
`OpenStream` and the resume links; the turn task sends `TurnStep` and `AuditStep`; timers send `GraceOver` and
`DeadlineReached`. Calls answer ``("ok", value)`` or ``("error", reason)``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from adk_actors.events import Event
from providers.errors import AdkError
from supervision import Ref

MAX_CANCEL_REASON_BYTES = 1024
"""A cancel's reason is stored in the session and shown by status: JSON, this small."""


class Cancel(NamedTuple):
    """End the invocation with `reason` (the first reason wins). An open invocation's
    turn has `grace` seconds to end on its own (its outcome then stands), then it is
    killed and the session records the cancel."""

    reason: Any
    grace: float


def check_cancel_reason(reason: Any) -> Any:
    """A `Cancel` reason: JSON-safe and at most 1 KiB encoded, else
    ``invalid_cancel_reason`` (never echoing the value)."""
    try:
        size = len(msgspec.json.encode(reason))
    except (TypeError, msgspec.EncodeError):
        size = MAX_CANCEL_REASON_BYTES + 1
    if size > MAX_CANCEL_REASON_BYTES:
        raise AdkError("invalid_cancel_reason", "a reason is JSON-safe, at most 1 KiB")
    return reason


class Wait(NamedTuple):
    """Answered with the outcome once there is one; `token` names this waiter."""

    token: Ref


class Unwait(NamedTuple):
    """Cast: the waiter `token` gave up."""

    token: Ref


class Status(NamedTuple):
    """A JSON-safe view of the invocation (and of its run, for a stable run)."""


class RunStatus(NamedTuple):
    """A stable run's `Status` view with its stream: ``("ok", (view, stream, window))``,
    `stream` the run's credit stream if it has been started (ask it for the window),
    else None and `window` the one the stream would show (``latest_sequence``,
    ``oldest_available_sequence``, ``subscribers``: 0), answered by the server itself."""


class OpenStream(NamedTuple):
    """A stable run's credit stream, started now if nobody needed it before (the first
    subscriber): ``("ok", stream)``. ``("error", "not_a_run")`` for a plain invocation."""


class BeginResume(NamedTuple):
    """A paused run is being resumed as `new_run_id`: ``run_not_paused``,
    ``already_resumed`` or ``resume_in_progress`` if it may not be."""

    new_run_id: str


class ForgetResume(NamedTuple):
    """The resume `run_id` ended without claiming the pause: resumable again."""

    run_id: str


class EndResume(NamedTuple):
    """The resume `new_run_id` started (`committed`) or was not started."""

    new_run_id: str
    committed: bool


class TurnStep(NamedTuple):
    """From the turn task: ``("model", Content, metadata)``, ``("tool", Content,
    None)`` or ``("delta", text or Content, None)``."""

    kind: str
    value: Any
    metadata: Any


class AuditStep(NamedTuple):
    """From the turn task: a runtime-policy audit event to store."""

    event: Event


class GraceOver(NamedTuple):
    """Timer: a cancelled turn had its chance to end on its own."""


class DeadlineReached(NamedTuple):
    """Timer: the invocation's `run_timeout` is over."""


class StreamOpened(NamedTuple):
    """To a subscriber, from `init`, before anything is published: the stream it will
    read (and monitor: the stream ends after the terminal, or dies with the server)."""

    stream: Any


class Track(NamedTuple):
    """Cast to the run registry by a run's server from its `init`: monitor the run
    `run_id` served by `server` until its terminal (closing: how to end a lost run's
    session: runner, user, session, invocation id, token). Sent by the server itself,
    so the registry always hears it before the same server's `Terminal`."""

    run_id: str
    server: Any
    retention: float
    closing: tuple[Any, ...] | None


class Terminal(NamedTuple):
    """Cast to the run registry: the run `run_id` (served by `server`) ended with
    `outcome`; retain it for `retention` seconds."""

    run_id: str
    server: Any
    retention: float
    outcome: Any


class Begin(NamedTuple):
    """To itself, right after `init`: start admission (so `init` returns at once).
    Not sent when there is no runtime policy or admission to pass and the agent is
    registered: `init` then asks for the lane itself, which is only a request (an
    agent not registered gets a `Begin` all the same, which refuses ``noproc``)."""
