"""How an invocation ends: each kind of end's session write, then its one terminal.

Called by the invocation server (`server.py`) and its store queue (`storing.py`).
`terminal` ends the invocation's ``invoke_agent`` span, announces the plugins' run-end
notification, publishes the outcome (`publish_terminal`) and only then sends the
notification, so no waiter, subscriber or stop ever waits for a plugin.
"""

from __future__ import annotations

from typing import Any

import msgspec

from adk_actors.events import Event
from adk_actors.outcomes import Cancelled, Completed, Failed, Outcome, Paused
from adk_actors.runner import continuations, plugin_events, session_writes, steps
from adk_actors.runner.phase import Phase
from adk_actors.runner.publish import publish_terminal
from adk_actors.runner.release import kill_tasks
from adk_actors.runner.state import InvocationState
from providers.errors import AdkError

ENDED_ELSEWHERE = "invocation_ended_elsewhere"
"""The session no longer holds the invocation open (an abandonment from outside, a
deleted session): its own outcome is not reported as stored."""
WORKER_EXIT = "invocation_worker_exit"


def terminal(state: InvocationState, phase: Phase, outcome: Outcome, event: Event | None) -> None:
    """The one terminal: the span ends, then the outcome is published (the run's
    registry first, permit and lane given back, then subscribers and waiters); an open
    invocation's plugins hear of the end after that (never while the server stops)."""
    notification = None
    if state.phase is Phase.OPEN and not state.stopping and state.runner.plugins:
        ctx = plugin_events.context(state)
        notification = plugin_events.run_end(state.runner.plugins, ctx, outcome, state.span)
    try:
        try:
            state.span.end(span_error(outcome))  # before anyone hears of the end
        finally:
            publish_terminal(state, phase, outcome, event)  # even if the span's end raised
    finally:
        if notification is not None:
            # even if the span's end or the publish raised: an announced ticket never
            # sent stays open, and `wait_notifications(None)` would wait for good
            notification.send()


def span_error(outcome: Outcome) -> str | None:
    """The span's `error.type`: a failure's reason code (a crashed worker's exception
    class), ``cancelled``; None for a completed or paused invocation."""
    match outcome:
        case Failed(reason=(str() as code, str() as kind)) if code == WORKER_EXIT:
            return kind
        case Failed(reason=reason):
            head = reason[0] if isinstance(reason, tuple) and reason else reason
            return head if isinstance(head, str) else type(head).__name__
        case Cancelled():
            return "cancelled"
    return None


def end_failed(state: InvocationState, reason: Any) -> None:
    """Store the error event (if still open) and publish ``Failed(reason)``."""
    if state.phase.terminal:  # a failed step already ended it
        return
    event = steps.error_event(state, reason, "the invocation failed")
    stored = session_writes.write_end(state, event)
    terminal(state, Phase.FAILED, Failed(reason), event if stored else None)


def fail_open(state: InvocationState, reason: Any) -> None:
    """An open invocation fails while its turn may run: stop it first."""
    kill_tasks(state)
    end_failed(state, reason)


def end_cancelled(state: InvocationState) -> None:
    """Kill the turn and record the cancel (or the caller's leaving) as the end."""
    kill_tasks(state)
    reason = state.cancel_reason
    if state.phase is not Phase.OPEN:  # nothing of it is in the session
        terminal(state, Phase.CANCELLED, Cancelled(reason), None)
        return
    event = steps.error_event(state, reason, "the invocation was cancelled")
    stored = session_writes.write_end(state, event)
    terminal(state, Phase.CANCELLED, Cancelled(reason), event if stored else None)


def refuse(state: InvocationState, reason: Any) -> None:
    """End before opening: nothing (but a policy's audit event) is in the session."""
    if state.phase.terminal:
        return
    terminal(state, Phase.FAILED, Failed(reason), None)


def end_paused(state: InvocationState, continuation: Any, call: Any, message: str) -> None:
    """Store the pause (its continuation in session state) and publish ``Paused``."""
    run = state.request.run
    continuation = msgspec.structs.replace(
        continuation, token=state.request.token, run_id=run.run_id if run else None
    )
    inv = state.invocation_id
    event = continuations.pause_event(steps.RUNNER_AUTHOR, inv, continuation, call, message)
    delta = continuations.paused_delta(inv, continuation.dump())
    try:  # temp: state stays until the resumed invocation ends
        stored = session_writes.write(state, event, delta, clear_temp=False)
    except AdkError as error:  # e.g. a continuation over the state limit
        end_failed(state, ("pause_not_stored", error.reason))
        return
    if not stored:  # nothing to resume: say so rather than report a pause
        terminal(state, Phase.FAILED, Failed(ENDED_ELSEWHERE), None)
        return
    terminal(state, Phase.PAUSED, Paused(event), event)


def end_completed(state: InvocationState, event: Event, output: Any) -> None:
    """Store the final event (the invocation closed, ``temp:`` cleared) and publish
    ``Completed(output)``."""
    try:
        delta = continuations.closed_delta(state.invocation_id)
        stored = session_writes.write(state, event, delta, clear_temp=True)
    except AdkError as error:  # e.g. an output_key value over the state limit
        end_failed(state, ("final_not_stored", error.reason))
        return
    if not stored:
        terminal(state, Phase.FAILED, Failed(ENDED_ELSEWHERE), None)
        return
    terminal(state, Phase.COMPLETED, Completed(output), event)
