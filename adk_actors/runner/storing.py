"""The invocation server's store queue: each step's event through the ``on_event``
plugins, then its write, in order, without blocking the server.

`store` and `store_final` queue an event (`fail_after` a failure, after what is
queued before it); `pump` takes the head: with no ``on_event``
plugin it is written at once (as it always was), else its hooks run one by one, each
in a task the server owns (`plugin_events.amend`, a `PhaseSteps`), and `hook_done`
applies each hook's result as it arrives as a message, then writes what they left.
Meanwhile the server answers status, cancel and wait as usual, and the turn's next
messages wait, in order, in `state.deferred` (the server drains them once the queue is
idle). A cancel, the deadline or any other end meanwhile kills the hook's task and
drops the queue (`release`), so a late amendment never lands.
"""

from __future__ import annotations

from adk_actors.events import Event
from adk_actors.outcomes import Failed
from adk_actors.runner import ends, plugin_events, session_writes
from adk_actors.runner.phase import Phase
from adk_actors.runner.publish import publish
from adk_actors.runner.release import kill_tasks
from adk_actors.runner.state import FailAfter, InvocationState, Queued
from providers.errors import AdkError
from supervision import TaskResult


def busy(state: InvocationState) -> bool:
    """Are earlier steps still on their way to the session (the turn's next message
    then waits in `state.deferred`)?"""
    return state.hook is not None or bool(state.queued) or bool(state.deferred)


def store(state: InvocationState, event: Event) -> None:
    """Store and publish one step of the open invocation, after those queued before
    it (nothing after its end)."""
    if state.phase is Phase.OPEN:
        state.queued.append(Queued(event))
        pump(state)


def store_final(state: InvocationState, event: Event, output: object) -> None:
    """The final event, after every queued step: its write completes the invocation."""
    if state.phase is Phase.OPEN:
        state.queued.append(Queued(event, final=True, output=output))
        pump(state)


def fail_after(state: InvocationState, reason: object) -> None:
    """Fail the open invocation with `reason` once every event queued before this call
    is stored (e.g. a final-output denial after its audit event)."""
    if state.phase is Phase.OPEN:
        state.queued.append(FailAfter(reason))
        pump(state)


def pump(state: InvocationState) -> None:
    """Write queued events until the queue is empty or a hook task runs for its head."""
    plugins = state.runner.plugins
    while state.hook is None and state.queued and state.phase is Phase.OPEN:
        head = state.queued[0]
        if isinstance(head, FailAfter):
            state.queued.popleft()
            ends.end_failed(state, head.reason)
            continue
        if not plugin_events.has_on_event(plugins):
            state.queued.popleft()
            _write(state, head, None)
            continue
        if state.hook_phase is None:
            ctx = plugin_events.context(state)
            state.hook_phase = plugin_events.amend(plugins, head.event, ctx)
        _next_hook(state)


def hook_done(state: InvocationState, result: TaskResult) -> None:
    """A hook of the head ended: settle it, start the next, or write what they left."""
    state.hook = None
    assert state.hook_phase is not None
    state.hook_phase.settle(result)
    _next_hook(state)
    pump(state)


def _next_hook(state: InvocationState) -> None:
    """Start the head's next hook; once its phase has ended, write (or fail) the head."""
    phase = state.hook_phase
    assert phase is not None
    with state.span.activate():  # the hook's spans are the invocation's
        state.hook = phase.next()
    if state.hook is not None:
        return
    state.hook_phase = None
    item = state.queued.popleft()
    assert isinstance(item, Queued)
    tag, value = plugin_events.amended(item.event, phase)
    if tag == "ok":
        _write(state, item, value)
    else:  # a plugin halted, or failed closed
        ends.fail_open(state, value)


def _write(state: InvocationState, item: Queued, amended: Event | None) -> None:
    event = item.event if amended is None else amended
    if item.final:
        ends.end_completed(state, event, item.output)
        return
    try:
        stored = session_writes.write(state, event)
    except AdkError as error:  # e.g. a state delta over the limit
        ends.fail_open(state, ("step_not_stored", error.reason))
        return
    if stored:
        publish(state, event)
    else:  # closed from outside (an abandonment, a deleted session): stop here
        kill_tasks(state)
        ends.terminal(state, Phase.FAILED, Failed(ends.ENDED_ELSEWHERE), None)
