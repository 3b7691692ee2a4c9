"""An invocation server's state, and the answers it gives about itself.

`InvocationState` is what the server (`server.py`) threads through its callbacks;
`status_view`, `begin_resume` and `still_paused` answer `Status` and the resume links
of a stable run from it.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from adk_actors import admission as admission_api
from adk_actors.events import Event
from adk_actors.observability.tracing import OpenSpan
from adk_actors.outcomes import Outcome, Paused
from adk_actors.plugins import PhaseSteps
from adk_actors.runner import steps
from adk_actors.runner.phase import Phase
from adk_actors.runner.request import InvocationRequest
from supervision import From, Pid, Ref, Task, TimerRef


class Queued(NamedTuple):
    """An event waiting for its ``on_event`` hooks, then its write; `final` when it is
    the completed invocation's final event (its `output` the outcome's)."""

    event: Event
    final: bool = False
    output: Any = None


class FailAfter(NamedTuple):
    """A failure waiting in the store queue: the invocation fails with `reason` once
    the events queued before it are stored (`storing.fail_after`)."""

    reason: Any


@dataclass
class InvocationState:
    """The server's state. Invariants: `turn` is set only while OPEN; `permit` is held
    from its grant to the terminal; `outcome` is set exactly when the phase is
    terminal, and never changes after; nothing is written to the session before OPEN
    except a policy refusal's audit event. `hook` (an ``on_event`` hook of the head of
    `queued`) runs only while OPEN; while it does, the turn's messages wait in
    `deferred`, in order."""

    request: InvocationRequest
    stream: Pid | None
    """The credit stream of a run (replay, many subscribers) once started; None for a
    plain invocation, whose one subscriber gets the same messages from this server,
    and for a run nobody has subscribed to yet (see `backlog`)."""
    deadline_at: float
    phase: Phase = Phase.ADMITTING
    spec: Any = None
    permit: admission_api.Permit | None = None
    admission_request: Ref | None = None
    admission_request_id: str | None = None
    lane_request: Ref | None = None
    lane_agent: Pid | None = None
    lane_attempts: int = 0
    turn: Task | None = None
    preparing: Task | None = None
    opening: Event | None = None
    owner_ref: Ref | None = None
    deadline_timer: TimerRef | None = None
    partials: steps.Partials = field(default_factory=steps.Partials)
    final: steps.FinalAnswer = field(default_factory=steps.FinalAnswer)
    cancel_reason: Any = None
    grace: TimerRef | None = None
    outcome: Outcome | None = None
    terminal_sequence: int | None = None
    published: int = 0
    backlog: list[Event] | None = None
    """A run whose stream is not started yet: every event published so far (items 1,
    2, ...), at most the run's ``max_buffered_events`` (one more starts the stream,
    which evicts from then on: `publish.open_stream`); None once it has a stream, and
    for a plain invocation."""
    waiters: dict[Ref, From] = field(default_factory=dict)
    resumed_to: str | None = None
    resume_pending: str | None = None
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    span: OpenSpan = field(default_factory=lambda: OpenSpan(None))
    """The invocation's ``invoke_agent`` span, from `init` to the terminal."""
    hook: Task | None = None
    """The running ``on_event`` hook of the head of `queued` (its phase: `hook_phase`)."""
    hook_phase: PhaseSteps | None = None
    queued: deque[Queued | FailAfter] = field(default_factory=deque)
    deferred: deque[Any] = field(default_factory=deque)
    stopping: bool = False
    """The server is stopping (`terminate`): no plugin hears of the end."""

    @property
    def runner(self) -> Any:
        return self.request.runner

    @property
    def invocation_id(self) -> str:
        return self.request.invocation_id


def begin_resume(state: InvocationState, new_run_id: str) -> tuple[str, Any]:
    """A paused run is being resumed as `new_run_id`: what the resume needs, or why not."""
    if not isinstance(state.outcome, Paused):
        return ("error", "run_not_paused")
    if state.resumed_to is not None:
        return ("error", ("already_resumed", state.resumed_to))
    if state.resume_pending is not None:
        return ("error", "resume_in_progress")
    state.resume_pending = new_run_id
    request = state.request
    run = request.run
    return (
        "ok",
        {
            "runner": request.runner,
            "user_id": request.user_id,
            "session_id": request.session_id,
            "event": state.outcome.event,
            "retention": run.retention if run else None,
            "max_buffered_events": run.max_buffered_events if run else None,
        },
    )


def still_paused(state: InvocationState) -> bool:
    """Is this run's continuation still unclaimed in its session (a short read)?"""
    if not isinstance(state.outcome, Paused) or state.resume_pending is not None:
        return False
    request = state.request
    try:
        paused = request.runner.paused_invocations(request.user_id, request.session_id)
    except Exception:
        return False
    return state.outcome.event.invocation_id in paused


def window_view(state: InvocationState) -> dict[str, int]:
    """The window a run's stream would show now, for a run whose stream is not started
    (its items are `backlog`, numbered from 1, none evicted yet): what `RunStatus`
    answers in its place."""
    latest = len(state.backlog or ())
    return {"subscribers": 0, "latest_sequence": latest, "oldest_available_sequence": 1}


def status_view(state: InvocationState) -> dict[str, Any]:
    """A JSON-safe view of the invocation (and of its run): what `Status` answers."""
    request = state.request
    run = request.run
    return {
        "run_id": run.run_id if run else None,
        "state": "running" if state.outcome is None else state.phase.value,
        "phase": state.phase.value,
        "parent_run_id": run.parent_run_id if run else None,
        "resumed_to": state.resumed_to,
        "invocation_id": state.invocation_id,
        "agent": request.runner.agent_name,
        "app_name": request.runner.app_name,
        "user_id": request.user_id,
        "session_id": request.session_id,
        "started_at": state.started_at,
        "ended_at": state.ended_at,
        "terminal_sequence": state.terminal_sequence,
        "outcome": steps.outcome_builtins(state.outcome),
        "retention": run.retention if run else None,
        "max_buffered_events": run.max_buffered_events if run else None,
    }
