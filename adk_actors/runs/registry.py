"""The run registry: run ids to run servers, and how long ended runs are kept.

Names are the kernel registry's: a run's invocation server registers ``("adk.run",
run_id)`` in its own `init` (so a duplicate id is refused before anything starts,
and a name never outlives its process), and its stream ``("adk.run_stream",
run_id)`` once it has one (started for its first subscriber). Every `adk.runs` call
resolves them at call time, without a message round trip (but a run's first
subscribe, which asks its server to start the stream).

This GenServer owns what names cannot do: retention, and the outcome of a run whose
server died. It monitors every run server from its start (`Track`, which the server
casts from its own `init`: the registry hears it before that server's `Terminal`,
however late the starter is; a `Track` sent by the starter after the start could come
after the terminal and the end of the retention, and revive an ended run as tracked,
to be reported ``run_actor_exit`` once its server had gone); a server that
dies before its terminal outcome (a kill, a crash) gets one here,
``Failed(("run_actor_exit", reason))``, retained like any other, so `wait` and
`status` still answer exactly once, and its session is closed for it. When a run
reaches its terminal outcome (`Terminal`) it is retained for its `retention`
seconds, so late subscribers, `wait` and `status` still find it; at most
`MAX_RETAINED_TERMINAL_RUNS` ended runs that are not paused are retained, oldest
evicted first (paused runs wait for a human and do not count). Expiry or eviction
shuts the run server down (its stream is linked to it), which frees both names: the
run is `not_found` from then on. It sits before the invocation supervisor in the
application's `rest_for_one` tree, so if it dies every run goes with it and none
outlives its retention bookkeeping.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, NamedTuple

from adk_actors.outcomes import Failed, Paused
from adk_actors.runner.messages import Terminal, Track
from adk_actors.runner.request import run_name, stream_name
from adk_actors.runs.values import MAX_RETAINED_TERMINAL_RUNS
from supervision import (
    Down,
    From,
    GenServer,
    Pid,
    Ref,
    Reply,
    Task,
    TimerRef,
    cancel_timer,
    demonitor,
    exit,
    monitor,
    self_pid,
    send_after,
)
from supervision.logs import get_logger

RUN_REGISTRY = "adk.run_registry"
_log = get_logger("adk_actors.runs")


__all__ = [
    "RUN_REGISTRY",
    "Known",
    "Lost",
    "RunRegistry",
    "Stats",
    "Track",
    "run_name",
    "stream_name",
]


class Lost(NamedTuple):
    """Call: the outcome recorded for a run whose server died, or None."""

    run_id: str


class Stats(NamedTuple):
    """Call: ``{"retained": n}``."""


class Known(NamedTuple):
    """Call: every run the registry knows, oldest first: ``(run_id, server or None,
    outcome recorded for a lost run or None)``."""


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
        self.ended = 0  # how many of `retained` are not paused (the ones the cap counts)
        self.tracked: dict[str, _Tracked] = {}  # running: monitored, no outcome yet
        self.by_ref: dict[Ref, str] = {}

    def keep(self, entry: _Retained) -> None:
        self.retained[entry.run_id] = entry
        if not isinstance(entry.outcome, Paused):
            self.ended += 1

    def forget(self, entry: _Retained) -> None:
        del self.retained[entry.run_id]
        if not isinstance(entry.outcome, Paused):
            self.ended -= 1


class RunRegistry(GenServer):
    """Retains ended runs for their retention, at most `max_retained` of them."""

    def init(self, max_retained: int | None) -> _State:
        return _State(MAX_RETAINED_TERMINAL_RUNS if max_retained is None else max_retained)

    def handle_call(self, request: Any, from_: From, state: _State) -> Any:
        match request:
            case Stats():
                return Reply({"retained": len(state.retained)}, state)
            case Known():
                known: list[tuple[str, Pid | None, Any]] = [
                    (run_id, t.actor, None) for run_id, t in state.tracked.items()
                ]
                known += [
                    (e.run_id, e.actor, e.outcome if e.actor is None else None)
                    for e in state.retained.values()
                ]
                return Reply(known, state)
            case Lost(run_id):  # the outcome of a run whose server died, if any
                tracked = state.tracked.get(run_id)
                if tracked is not None and not tracked.actor.is_alive():
                    self._lose(state, run_id, "killed")  # its Down is still on the way
                entry = state.retained.get(run_id)
                if entry is not None and entry.actor is not None and not entry.actor.is_alive():
                    entry.actor = None  # its Down is on the way: its outcome answers for it
                return Reply(
                    entry.outcome if entry is not None and entry.actor is None else None, state
                )
        return Reply(None, state)

    def handle_cast(self, msg: Any, state: _State) -> _State:
        match msg:
            case Track(run_id, Pid() as server, retention, closing):
                self._drop_stale(state, run_id, server)
                if run_id not in state.tracked and run_id not in state.retained:
                    ref = monitor(server)
                    state.tracked[run_id] = _Tracked(server, ref, retention, closing)
                    state.by_ref[ref] = run_id
            case Terminal(run_id, Pid() as server, retention, outcome):
                tracked = state.tracked.pop(run_id, None)
                watching = None
                if tracked is not None and tracked.actor == server:
                    watching = tracked.ref  # its start's monitor watches its retention too
                elif tracked is not None:
                    state.by_ref.pop(tracked.ref, None)
                    demonitor(tracked.ref, flush=True)
                self._retain(state, run_id, server, retention, outcome, watching)
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

    def _drop_stale(self, state: _State, run_id: str, server: Pid) -> None:
        """A `Track` comes from the live server that holds the run's name, so an entry
        of the same id served by a dead server (a lost run retained, or one whose `Down`
        is still on the way) is an earlier run's: that run is let go (its session
        closed as a lost run's, if need be) and the new one is tracked."""
        tracked = state.tracked.get(run_id)
        if tracked is not None and tracked.actor != server and not tracked.actor.is_alive():
            self._lose(state, run_id, "killed")  # its Down is still on the way
        entry = state.retained.get(run_id)
        if entry is not None and (entry.actor is None or not entry.actor.is_alive()):
            self._release(state, entry, "replaced")

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
        state.keep(_Retained(run_id, None, ref, timer, outcome))
        _log.warning("adk.runs.actor_lost", run_id=run_id)
        self._evict(state)

    def _retain(
        self,
        state: _State,
        run_id: str,
        actor: Pid,
        retention: float,
        outcome: Any,
        watching: Ref | None = None,
    ) -> None:
        """Keep the ended run for `retention` seconds, monitored (`watching`: the monitor
        it was tracked with, still on it)."""
        if run_id in state.retained:  # cannot be while tracked: only for a late duplicate
            return
        ref = watching if watching is not None else monitor(actor)
        timer = send_after(self_pid(), _Expire(run_id, ref), retention)
        state.keep(_Retained(run_id, actor, ref, timer, outcome))
        state.by_ref[ref] = run_id
        self._evict(state)

    def _evict(self, state: _State) -> None:
        """Past the cap, release the oldest ended runs; paused ones wait for a human.
        Only as far as the oldest ones to evict: not a pass over every retained run."""
        excess = state.ended - state.max_retained
        if excess <= 0:
            return
        oldest: list[_Retained] = []
        for entry in state.retained.values():
            if not isinstance(entry.outcome, Paused):
                oldest.append(entry)
                if len(oldest) == excess:
                    break
        for entry in oldest:
            self._release(state, entry, "evicted")

    @staticmethod
    def _release(state: _State, entry: _Retained, why: str) -> None:
        """Forget a retained run and shut its actor down (its stream is linked to it)."""
        state.forget(entry)
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
