"""The run registry: run ids to run actors, and how long ended runs are kept.

Names are the kernel registry's: a run actor registers ``("adk.run", run_id)`` in
its own `init` (so a duplicate id is refused before anything starts, and a name
never outlives its process), and its stream ``("adk.run_stream", run_id)``. Every
`adk.runs` call resolves them at call time, without a message round trip.

This GenServer owns what names cannot do: retention, and the outcome of a run whose
actor died. It monitors every run actor from its start; an actor that dies before
reporting its terminal outcome (a kill, a crash) gets one here,
``Failed(("run_actor_exit", reason))``, retained like any other, so `wait` and
`status` still answer exactly once. When a run reaches its
terminal outcome it is retained for its `retention` seconds, so late subscribers,
`wait` and `status` still find it; at most `MAX_RETAINED_TERMINAL_RUNS` are
retained, oldest evicted first. Expiry or eviction shuts the run actor down (its
stream is linked to it), which frees both names: the run is `not_found` from then
on. It sits before the run supervisor in the application's `rest_for_one` tree, so
if it dies every run goes with it and none outlives its retention bookkeeping.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, NamedTuple

import structlog

from adk_actors.outcomes import Failed
from adk_actors.runs.values import MAX_RETAINED_TERMINAL_RUNS
from supervision import (
    Down,
    From,
    GenServer,
    Pid,
    Ref,
    Reply,
    TimerRef,
    cancel_timer,
    demonitor,
    exit,
    monitor,
    self_pid,
    send_after,
)
from supervision.tasks import Task

RUN_REGISTRY = "adk.run_registry"
_log = structlog.get_logger("adk_actors.runs")


def run_name(run_id: str) -> tuple[str, str]:
    """The registered name of a run's actor."""
    return ("adk.run", run_id)


def stream_name(run_id: str) -> tuple[str, str]:
    """The registered name of a run's credit stream."""
    return ("adk.run_stream", run_id)


class _Retained:
    __slots__ = ("actor", "outcome", "ref", "run_id", "timer")

    def __init__(
        self, run_id: str, actor: Pid | None, ref: Ref, timer: TimerRef, outcome: Any
    ) -> None:
        self.run_id = run_id
        self.actor = actor  # None once the actor died: then `outcome` answers for it
        self.ref = ref
        self.timer = timer
        self.outcome = outcome


class _Tracked(NamedTuple):
    actor: Pid
    ref: Ref
    retention: float
    closing: tuple[Any, ...] | None
    """(runner, user_id, session_id, invocation_id, token): how to close a lost run's
    session (only what that run opened)."""


class _Expire(NamedTuple):
    """Timer message: a retained run's retention is over."""

    run_id: str
    ref: Ref


class _State:
    def __init__(self, max_retained: int) -> None:
        self.max_retained = max_retained
        self.retained: OrderedDict[str, _Retained] = OrderedDict()  # oldest first
        self.tracked: dict[str, _Tracked] = {}  # running: monitored, no outcome yet
        self.by_ref: dict[Ref, str] = {}


class RunRegistry(GenServer):
    """Retains ended runs for their retention, at most `max_retained` of them."""

    def init(self, max_retained: int | None) -> _State:
        return _State(MAX_RETAINED_TERMINAL_RUNS if max_retained is None else max_retained)

    def handle_call(self, request: tuple[Any, ...], from_: From, state: _State) -> Any:
        if request[0] == "stats":
            return Reply(("ok", {"retained": len(state.retained)}), state)
        if request[0] == "lost":  # the outcome of a run whose actor died, if any
            run_id = request[1]
            tracked = state.tracked.get(run_id)
            if tracked is not None and not tracked.actor.is_alive():
                self._lose(state, run_id, "killed")  # its Down is still on the way
            entry = state.retained.get(run_id)
            if entry is not None and entry.actor is None:
                return Reply(("ok", entry.outcome), state)
            return Reply(("error", "not_found"), state)
        return Reply(("error", ("unknown_request", request[0])), state)

    def handle_cast(self, msg: tuple[Any, ...], state: _State) -> _State:
        if msg[0] == "track":
            _, run_id, actor, retention, closing = msg
            if run_id not in state.tracked and run_id not in state.retained:
                ref = monitor(actor)
                state.tracked[run_id] = _Tracked(actor, ref, retention, closing)
                state.by_ref[ref] = run_id
        elif msg[0] == "terminal":
            tracked = state.tracked.pop(msg[1], None)
            if tracked is not None:
                state.by_ref.pop(tracked.ref, None)
                demonitor(tracked.ref, flush=True)
            self._retain(state, *msg[1:])
        return state

    def handle_info(self, msg: Any, state: _State) -> _State:
        if type(msg) is _Expire:
            entry = state.retained.get(msg.run_id)
            if entry is not None and entry.ref == msg.ref:
                self._release(state, entry, "retention_expired")
        elif type(msg) is Down:
            run_id = state.by_ref.pop(msg.ref, None)
            if run_id is None:
                return state
            tracked = state.tracked.get(run_id)
            if tracked is not None and tracked.ref == msg.ref:  # died before its outcome
                self._lose(state, run_id, msg.reason)
                return state
            entry = state.retained.get(run_id)  # a retained run's actor died: keep its
            if entry is not None and entry.ref == msg.ref:  # outcome for the retention
                entry.actor = None
        return state

    def _lose(self, state: _State, run_id: str, reason: Any) -> None:
        """A run actor died without an outcome: record its one terminal here."""
        tracked = state.tracked.pop(run_id)
        state.by_ref.pop(tracked.ref, None)
        demonitor(tracked.ref, flush=True)
        outcome = Failed(("run_actor_exit", str(getattr(reason, "kind", reason))[:200]))
        if tracked.closing is not None and tracked.closing[3] is not None:
            # the session gets its end too, off this process: a session write may wait
            Task.start(_close_lost, *tracked.closing, outcome.reason)
        ref = Ref()
        timer = send_after(self_pid(), _Expire(run_id, ref), tracked.retention)
        state.retained[run_id] = _Retained(run_id, None, ref, timer, outcome)
        _log.warning("adk.runs.actor_lost", run_id=run_id)
        self._evict(state)

    def _retain(
        self, state: _State, run_id: str, actor: Pid, retention: float, outcome: Any
    ) -> None:
        if run_id in state.retained:
            return
        ref = monitor(actor)
        timer = send_after(self_pid(), _Expire(run_id, ref), retention)
        state.retained[run_id] = _Retained(run_id, actor, ref, timer, outcome)
        state.by_ref[ref] = run_id
        self._evict(state)

    def _evict(self, state: _State) -> None:
        while len(state.retained) > state.max_retained:
            self._release(state, next(iter(state.retained.values())), "evicted")

    @staticmethod
    def _release(state: _State, entry: _Retained, why: str) -> None:
        """Forget a retained run and shut its actor down (its stream is linked to it)."""
        del state.retained[entry.run_id]
        state.by_ref.pop(entry.ref, None)
        demonitor(entry.ref, flush=True)
        cancel_timer(entry.timer)
        if entry.actor is not None:
            exit(entry.actor, ("shutdown", why))
        _log.debug("adk.runs.released", run_id=entry.run_id, why=why)


def _close_lost(
    runner: Any, user_id: str, session_id: str, invocation_id: str, token: Any, reason: Any
) -> None:
    try:
        runner.abandon(user_id, session_id, invocation_id, reason, token=token)
    except Exception as error:  # the session service may be gone too: the outcome stands
        _log.warning("adk.runs.lost_not_closed", error=type(error).__name__)


def start_registry(max_retained: int | None = None) -> Pid:
    """Start the run registry under its name (a child of the application tree)."""
    return RunRegistry.start_link(max_retained, name=RUN_REGISTRY)
