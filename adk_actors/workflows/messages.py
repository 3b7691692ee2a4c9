"""The workflow coordinator's protocol: one small typed class per message.

A durable run's engine sends `Commit` (a call: the answer is the ack; a run without
persistence commits into its coordinator's `CommitCell` instead) and every engine
`Emit`; callers (`api`,
a nested workflow's parent) send `Wait`, `Unwait`, `Status`, `GetCheckpoint` and
`Cancel`; a run's event receiver gets `WorkflowEvent`s.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from adk_actors.events import Event
from adk_actors.workflows.checkpoint import Checkpoint
from supervision import Pid, Ref


class Commit(NamedTuple):
    """From the engine: persist `checkpoint`, then answer ``"ok"`` (``("error", why)``
    once the run ended or the store refused)."""

    engine: Pid
    checkpoint: Checkpoint


class Emit(NamedTuple):
    """Cast from the engine: an event for the run's receiver (a transfer)."""

    engine: Pid
    event: Event


class Wait(NamedTuple):
    """Answered with the outcome once there is one (``("error", "too_many_waiters")``
    at once when the run's `max_waiters` are waiting already). With `release` the
    coordinator stops once it has answered (the caller was the only one to ask)."""

    token: Ref
    release: bool = False


class Unwait(NamedTuple):
    """Cast: waiter `token` gave up (timed out, cancelled, interrupted)."""

    token: Ref


class Status(NamedTuple):
    """A view of the run (see `status_view`)."""


class GetCheckpoint(NamedTuple):
    """The last committed checkpoint."""


class Cancel(NamedTuple):
    """End the run `Cancelled(reason)`: ``("ok", None)``, or ``("error",
    "already_terminal")`` once it has ended."""

    reason: Any


class WorkflowEvent(NamedTuple):
    """Sent to a run's `event_receiver`: an event of run `ref`."""

    ref: str
    event: Event
