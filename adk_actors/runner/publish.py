"""What an invocation server tells others: its stream, each stored event, its terminal.

A run's items go to its credit stream (replay, many subscribers); a plain
invocation's straight to its one caller as the same stream messages (the server is
its stream: no second process). The server is the only publisher, so it numbers the
items itself. Everything is sent without waiting.

A run's stream is started only when it is needed (`open_stream`): for the first
subscriber (``OpenStream``, which `adk.runs` sends when no stream is registered
under the run's name), for a subscriber given at the start, once the run has
published one event more than its stream may buffer, or when the server stops with
the run still in flight (`open_for_shutdown`: a subscriber arriving while it ends
finds the stream by name and reads the shutdown terminal). Until then the server
keeps the events itself (`InvocationState.backlog`, at most ``max_buffered_events``,
so none is ever evicted there) and answers the window (`state.window_view`); the
stream it starts is handed the backlog, then the terminal if the run has ended,
before its name is registered, so every subscriber (the first, or a later one that
finds the name) sees exactly what a stream started with the run would show. Most runs
are only waited for: they never start a second process, nor send it a message per
event.

A run id is refused while its stream name is still held (`start_stream`), as it was
when the stream started with the server: a subscriber that finds a stream under the
run's name always finds this run's.

The terminal is heard by the run registry first, so no subscriber or waiter can know
the end before `adk.runs.status` does (even should the server die right after); the
permit and the lane slot are given back before anyone else hears of it, since a
caller may reuse both at once.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable

from adk_actors.events import Event
from adk_actors.observability import default_metrics
from adk_actors.outcomes import Outcome
from adk_actors.runner.messages import StreamOpened, Terminal, Track
from adk_actors.runner.phase import Phase, advance
from adk_actors.runner.release import release
from adk_actors.runner.request import InvocationRequest, run_name, stream_name
from adk_actors.runner.state import InvocationState
from supervision import (
    CreditStream,
    KernelError,
    NameTaken,
    Pid,
    StreamError,
    StreamItem,
    StreamTerminal,
    cast,
    register,
    reply,
    self_pid,
    send,
    unlink,
    unregister,
    whereis,
)
from supervision.logs import get_logger

PUSH_BOUND = 65_536
"""A caller's unread events before its subscription is detached (``slow_subscriber``)."""
_log = get_logger("adk_actors.runner")


def start_stream(request: InvocationRequest) -> Pid | None:
    """Register a run's name and start the stream `init` needs: a run's only when it
    has a subscriber from the start (else it starts lazily: `open_stream`), none for a
    plain invocation with a caller, an unnamed one for a plain invocation without.
    Raises `NameTaken` or `AlreadyStarted` when the run exists: the name is the first
    step, so nothing was started. A run id whose stream name is still held (the stream
    of an earlier run with this id, whose server has exited but whose linked stream is
    not gone yet) is refused the same way, as when the stream started with the server:
    no later stream can take that name (only this server registers it), so whoever
    finds a stream under the run's name finds this run's (review of 3142f62, 3)."""
    run = request.run
    if run is not None:
        register(run_name(run.run_id), self_pid())
        earlier = whereis(stream_name(run.run_id))
        if earlier is not None:
            raise NameTaken(("already_registered", earlier), "an earlier run's stream")
        if request.subscriber is None:
            return None  # started for its first subscriber, if it ever has one
        return _start_run_stream(run.run_id, run.max_buffered_events, (), None)
    if request.subscriber is None:
        return CreditStream.start_link(
            max_buffered=request.max_buffered_events, push_bound=PUSH_BOUND
        )
    return None


def new_backlog(request: InvocationRequest, stream: Pid | None) -> list[Event] | None:
    """What the server keeps in place of a run's stream not started yet (see
    `InvocationState.backlog`)."""
    return [] if request.run is not None and stream is None else None


def open_stream(state: InvocationState) -> Pid:
    """The run's credit stream, started now if it was not: handed the events kept so far
    and the terminal, if any, then registered under the run's stream name."""
    if state.stream is None:
        run = state.request.run
        assert run is not None and state.backlog is not None, "only a run starts a stream late"
        ended = state.outcome if state.terminal_sequence is not None else None
        state.stream = _start_run_stream(run.run_id, run.max_buffered_events, state.backlog, ended)
        state.backlog = None
    return state.stream


def _start_run_stream(
    run_id: str, max_buffered: int, backlog: Iterable[Event], ended: Outcome | None
) -> Pid:
    """Start a run's stream (linked to its server), hand it `backlog` (items 1, 2, ...)
    and the terminal `ended`, and only then register its name: a subscriber that finds
    the name is queued behind all of them, so its window is the whole run so far. The
    name is free: `start_stream` refused the run if an earlier stream held it, and only
    this server registers it (so `NameTaken` here would be a bug, and crashes it)."""
    stream = CreditStream.start_link(max_buffered=max_buffered, push_bound=PUSH_BOUND)
    for event in backlog:
        CreditStream.publish_async(stream, event)
    if ended is not None:
        CreditStream.finish_async(stream, ended)
    register(stream_name(run_id), stream)
    return stream


def open_for_shutdown(state: InvocationState) -> None:
    """The server stops (`terminate`) with its run still in flight: start the run's
    stream now if it has none, so a subscriber that arrives while the end is being
    recorded (a session write) finds it by name and reads the shutdown terminal, as it
    did when every run had its stream from the start. (One whose `OpenStream` is queued
    behind the exit signal is never answered: ``not_found``, as a subscriber that came
    after the stream's `Close` always was.) A run that has ended starts none. Best
    effort: a stream that cannot start is logged, and the end is recorded all the same."""
    if state.backlog is not None and not state.phase.terminal:
        try:
            open_stream(state)
        except Exception as error:
            _log.warning(
                "adk.invocation.stream_not_opened",
                invocation_id=state.invocation_id,
                kind=type(error).__name__,
            )


def close_stream(state: InvocationState) -> None:
    """The server stops: its run's stream, if any, stops once it has handled what was
    sent before (the terminal included). Its name goes first, so no new subscriber
    finds a stream that is closing (nor a later run with this id an earlier stream:
    `start_stream`), and it is unlinked, so the server's own exit signal cannot kill it
    before it has handed its subscribers that terminal. (A killed server runs no
    `terminate`: its stream then dies with it through the link, and its name with it.)"""
    stream = state.stream
    if stream is None:
        return
    run = state.request.run
    if run is not None and whereis(stream_name(run.run_id)) == stream:
        with contextlib.suppress(KernelError):  # it died meanwhile: its name went with it
            unregister(stream_name(run.run_id))
    unlink(stream)
    CreditStream.close_async(stream)  # after the items it still has to send


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
    elif state.backlog is not None:  # a run nobody subscribed to yet
        state.backlog.append(event)
        run = state.request.run
        if run is not None and len(state.backlog) > run.max_buffered_events:
            open_stream(state)  # past its window: its stream evicts from now on
    elif state.request.subscriber is not None and not state.request.outcome_only:
        send(state.request.subscriber, StreamItem(self_pid(), state.published, event))


def track_run(request: InvocationRequest) -> None:
    """From a run's `init`: its registry monitors it from now on (closing: how to end
    the session of a run whose server dies before its terminal). Sent by the server,
    so the registry hears it before this server's `Terminal`, however late the caller
    that started the run gets its answer. Nothing for a plain invocation."""
    run = request.run
    if run is not None:
        closing = (
            request.runner,
            request.user_id,
            request.session_id,
            request.invocation_id,
            request.token,
        )
        cast(run.registry, Track(run.run_id, self_pid(), run.retention, closing))


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
    elif state.backlog is not None:
        pass  # handed to the stream with the backlog, should a subscriber come
    elif state.request.subscriber is not None:
        send(state.request.subscriber, StreamTerminal(self_pid(), state.published, outcome))
    waiters, state.waiters = state.waiters, {}
    for from_ in waiters.values():
        reply(from_, outcome)
    _log.debug("adk.invocation.ended", invocation_id=state.invocation_id, phase=phase.value)
