"""What an invocation server tells others: its stream, each stored event, its terminal.

A run's items go to its credit stream (replay, many subscribers), started with the
server under the run's names; a plain invocation's straight to its one caller as the
same stream messages (the server is its stream: no second process). The server is
the only publisher, so it numbers the items itself. Everything is sent without
waiting.

The terminal is heard by the run registry first, so no subscriber or waiter can know
the end before `adk.runs.status` does (even should the server die right after); the
permit and the lane slot are given back before anyone else hears of it, since a
caller may reuse both at once.
"""

from __future__ import annotations

import time

from adk_actors.events import Event
from adk_actors.observability import default_metrics
from adk_actors.outcomes import Outcome
from adk_actors.runner.messages import StreamOpened, Terminal
from adk_actors.runner.phase import Phase, advance
from adk_actors.runner.release import release
from adk_actors.runner.request import InvocationRequest, run_name, stream_name
from adk_actors.runner.state import InvocationState
from supervision import (
    CreditStream,
    Pid,
    StreamError,
    StreamItem,
    StreamTerminal,
    cast,
    register,
    reply,
    self_pid,
    send,
)
from supervision.logs import get_logger

PUSH_BOUND = 65_536
"""A caller's unread events before its subscription is detached (``slow_subscriber``)."""
_log = get_logger("adk_actors.runner")


def start_stream(request: InvocationRequest) -> Pid | None:
    """Register a run's name and start its credit stream (None for a plain invocation
    with a caller). Raises `NameTaken` or `AlreadyStarted` when the run exists: the
    name is the first step, so nothing was started."""
    run = request.run
    stream: Pid | None = None
    if run is not None or request.subscriber is None:
        if run is not None:
            register(run_name(run.run_id), self_pid())
        stream = CreditStream.start_link(
            max_buffered=run.max_buffered_events if run else request.max_buffered_events,
            push_bound=PUSH_BOUND,
            name=stream_name(run.run_id) if run else None,
        )
    return stream


def announce_stream(request: InvocationRequest, stream: Pid | None) -> None:
    """Tell the caller, if any, where its items come from, and subscribe it to a run's
    stream from the start."""
    if request.subscriber is not None and not request.outcome_only:
        # a plain invocation's one caller is sent its items directly (the server is
        # its stream: same messages, no second process); a run's subscribe to it
        send(request.subscriber, StreamOpened(stream or self_pid()))
        if stream is not None:
            try:
                CreditStream.subscribe(stream, after=0, subscriber=request.subscriber)
            except StreamError:
                pass  # the caller is gone already: its owner monitor says so next


def publish(state: InvocationState, event: Event) -> None:
    """Append to the stream without waiting (this server is its only publisher, so
    it numbers the items itself). A caller that wants only the outcome is not sent
    the item: it is numbered all the same, so the terminal's sequence never changes."""
    state.published += 1
    if state.stream is not None:
        CreditStream.publish_async(state.stream, event)
    elif state.request.subscriber is not None and not state.request.outcome_only:
        send(state.request.subscriber, StreamItem(self_pid(), state.published, event))


def publish_terminal(
    state: InvocationState, phase: Phase, outcome: Outcome, event: Event | None
) -> None:
    """Move to the terminal `phase` and publish `outcome` (after `event`, if stored):
    to the run registry, the metrics, the stream or caller, every waiter; give back
    permit and lane on the way."""
    state.phase = advance(state.phase, phase)
    state.outcome = outcome
    state.ended_at = time.time()
    default_metrics().invocation(
        state.runner.agent_name,
        type(outcome).__name__.lower(),
        state.ended_at - state.started_at,
    )
    run = state.request.run
    if run is not None:
        cast(run.registry, Terminal(run.run_id, self_pid(), run.retention, outcome))
        default_metrics().run(state.runner.agent_name, type(outcome).__name__.lower())
    if event is not None:
        publish(state, event)
    release(state)  # before anyone hears of the end: a caller may reuse both at once
    state.published += 1
    state.terminal_sequence = state.published
    if state.stream is not None:
        CreditStream.finish_async(state.stream, outcome)
    elif state.request.subscriber is not None:
        send(state.request.subscriber, StreamTerminal(self_pid(), state.published, outcome))
    waiters, state.waiters = state.waiters, {}
    for from_ in waiters.values():
        reply(from_, outcome)
    _log.debug("adk.invocation.ended", invocation_id=state.invocation_id, phase=phase.value)
