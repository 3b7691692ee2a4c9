"""What the ambient runtime hands out: outcomes, submission receipts, errors and the
messages its processes exchange (typed, dispatched with ``match``)."""

from __future__ import annotations

import contextvars
import enum
from typing import Any, NamedTuple

import msgspec

from adk_actors.ambient.options import Event
from adk_actors.outcomes import Cancelled, Completed, Failed, Paused
from providers.errors import AdkError
from supervision import Pid, Ref

TRIGGER_NAME = "adk.ambient.trigger"
"""A trigger server registers ``(TRIGGER_NAME, name)``."""


class TimedOut(msgspec.Struct, frozen=True, tag="timed_out"):
    """The event's one absolute deadline passed (queue wait, backoff and runs)."""

    reason: str = "deadline_exceeded"


AmbientOutcome = Completed | Paused | Failed | Cancelled | TimedOut


class Submitted(NamedTuple):
    """`submit`'s answer: the event's stable reference; `duplicate` when an event with
    the same idempotency key was accepted before (and is still retained)."""

    ref: str
    duplicate: bool = False


class AmbientError(AdkError):
    """A refused ambient operation; `reason` is stable (``ambient_queue_full``,
    ``trigger_busy``, ``not_found``, ...)."""


class AmbientTimeout(AmbientError, TimeoutError):
    """``timeout``: the event did not end within the wait."""

    def __init__(self, detail: str) -> None:
        super().__init__("timeout", detail)


class Phase(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    SETTLING = "settling"
    """Its job ended or was stopped; its current run is being cancelled and awaited
    before the terminal is published."""
    TERMINAL = "terminal"


class Refusal(NamedTuple):
    """A call's refusal, raised as `AmbientError` by the caller."""

    reason: Any
    detail: str


# calls to a trigger server


class Submit(NamedTuple):
    event: Any
    context: contextvars.Context | None = None  # the submitter's; the job runs in it


class Status(NamedTuple):
    ref: str


class Wait(NamedTuple):
    ref: str
    token: Ref
    waiter: Pid | None


class Cancel(NamedTuple):
    ref: str
    reason: Any


class TriggerStatus(NamedTuple):
    pass


class Unregister(NamedTuple):
    pass


# casts to a trigger server


class Unwait(NamedTuple):
    ref: str
    token: Ref


class Attempt(NamedTuple):
    """From an event's job: attempt `attempt` runs `run_id` (`started` once the run
    exists)."""

    ref: str
    job: Pid
    attempt: int
    run_id: str
    started: bool


# calls to the registry


class Register(NamedTuple):
    name: str
    runner: Any
    options: Any


class Triggers(NamedTuple):
    pass


class JobSpec(NamedTuple):
    """What an event's job needs: everything is immutable."""

    trigger: Pid
    ref: str
    runner: Any
    event: Event
    deadline: float
    retry: Any
    run_retention: float
    run_base: str  # attempt n runs ``{run_base}.{n}``
    gate: Any  # the job's `RunGate`: every run it starts goes through it
