"""The agent process: queues invocations in lanes; runs its own turns in a `Task`.

The agent's own mailbox only does bookkeeping; provider and tool work runs in a
task, so the agent answers inspection and new requests while a turn is running.

* `prompt` turns share one lane and the agent's conversation history (FIFO).
* `invoke` turns start from a fresh history; their lane is (app, user, session), or
  one shared "unscoped" lane. Runner invocations enter the same lanes (`EnterLane`):
  the invocation process holds the slot until it leaves or exits, so a Runner call
  and an `invoke` on one session keep submission order. One lane runs one
  invocation at a time; different lanes overlap up to `max_concurrent_invocations`.
  When a slot frees, the lane that has been *ready* longest starts next (a lane that
  just finished queues behind lanes that were already waiting).
* The caller of a queued or running turn (the holder of a slot) is monitored: if it
  dies, its turn is dropped or its task killed (its slot freed). A turn past
  `turn_timeout` is killed and its caller gets ``turn_timeout``.

Restarts: the agent is a `transient` child of the agent DynamicSupervisor, started by
its `AgentLifeline`, which also holds the agent's own restart intensity (by default
more than 3 restarts within 5 s is too many). The supervisor restarts a crashed agent
by calling the lifeline again; the lifeline counts the restart and, past the agent's
intensity, records the agent as failed (`names.AgentFailure`) and returns None, which
drops the child. So a crash loop ends that one agent: no other agent, run or
supervisor restarts, and the name is free for a new `spawn_agent`.
"""

from __future__ import annotations

import contextvars
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from adk_actors.agents.messages import (
    Delegate,
    EnterLane,
    GetSpec,
    Info,
    Invoke,
    Lane,
    LeaveLane,
    Prompt,
)
from adk_actors.agents.names import AgentFailure, record_failure, registered_name
from adk_actors.agents.scope import Scope, TurnOptions
from adk_actors.agents.spec import MAX_HISTORY_CONTENTS, AgentSpec
from adk_actors.agents.turn import run_turn
from adk_actors.agents.turn_context import agent_thread_stats
from adk_actors.agents.turn_outcome import TurnCompleted
from providers.content import Content
from supervision import (
    DEADLINE_REASON,
    AlreadyStarted,
    Crash,
    Down,
    From,
    GenServer,
    NoReply,
    Pid,
    Reply,
    StartError,
    Task,
    TaskResult,
    demonitor,
    get_logger,
    monitor,
    reply,
    self_pid,
    trap_exit,
    whereis,
)

COMPAT_LANE: Lane = ("compat",)
_NO_OPTIONS = TurnOptions()
"""A request's options when its caller gave none (immutable: one serves them all)."""
DEFAULT_RESTART_INTENSITY = 3
DEFAULT_RESTART_PERIOD = 5.0
MAX_RESTART_INTENSITY = 1000

_log = get_logger("adk.agents")


class AgentLifeline:
    """One spawned agent's start function (its `ChildSpec` start) and its own restart
    budget: more than `intensity` restarts within `period` seconds and it gives up.

    The agent supervisor calls `start` in its own process: once at spawn, then at every
    restart. A restart is counted first; past the budget the agent is recorded as failed
    and `start` returns None, so the supervisor drops the child (OTP: a restart that
    returns ``ignore``). A restart that finds the name taken (a newer `spawn_agent` won
    the free name) ends this incarnation quietly the same way. Plain data, a few slots:
    spawning stays as cheap as starting the agent process.
    """

    __slots__ = ("_started", "_times", "intensity", "last_exit", "period", "restarts", "spec")

    def __init__(
        self,
        spec: AgentSpec,
        intensity: int = DEFAULT_RESTART_INTENSITY,
        period: float = DEFAULT_RESTART_PERIOD,
    ) -> None:
        self.spec = spec
        self.intensity = intensity
        self.period = period
        self.restarts = 0
        self.last_exit: Any = None  # set by the agent's terminate, or a failed restart
        self._started = False
        self._times: list[float] | None = None  # restart times within the period

    def __call__(self) -> Pid | None:
        """`start`: the lifeline itself is its `ChildSpec`'s start function (no bound
        method object kept per agent)."""
        return self.start()

    def start(self) -> Pid | None:
        restarting = self._started
        self._started = True
        if restarting and not self._count_restart():
            self._give_up()
            return None
        self.last_exit = None
        try:
            return AgentServer.start_link(self, name=registered_name(self.spec.name))
        except AlreadyStarted:
            if restarting:
                return None  # a newer spawn holds the name: this incarnation is over
            raise
        except StartError as error:
            self.last_exit = error.reason  # the supervisor retries: that counts too
            raise

    def _count_restart(self) -> bool:
        now = time.monotonic()
        times = self._times if self._times is not None else []
        self._times = [at for at in times if at >= now - self.period]
        self._times.append(now)
        if len(self._times) > self.intensity:
            return False
        self.restarts += 1
        return True

    def _give_up(self) -> None:
        if whereis(registered_name(self.spec.name)) is not None:
            return  # a newer spawn holds the name: this incarnation is over, not failed
        # only an untrappable kill skips `terminate`, which records every other reason
        reason = self.last_exit if self.last_exit is not None else "killed"
        failure = AgentFailure(
            name=self.spec.name,
            reason=reason,
            restarts=self.restarts,
            intensity=self.intensity,
            period=self.period,
            failed_at=time.time(),
            supervisor=self_pid(),
        )
        record_failure(failure)
        _log.warning(
            "adk.agents.agent_failed",
            agent=self.spec.name,
            reason=failure.kind,
            intensity=self.intensity,
            period=self.period,
        )


class _Request:
    """One queued or running entry of a lane: a turn the agent runs itself, or a slot
    held by an outside invocation process (`holder`, which needs no invocation id or
    options of its own here). Plain slots: one is made per request."""

    __slots__ = (
        "caller_ref",
        "context",
        "holder",
        "invocation_id",
        "lane",
        "message",
        "options",
        "respond",
        "scope",
        "task",
    )

    def __init__(
        self,
        lane: Lane,
        message: Content | None,
        scope: Scope,
        respond: Any,
        *,
        holder: Pid | None = None,
        options: TurnOptions = _NO_OPTIONS,
        context: contextvars.Context | None = None,
    ) -> None:
        self.lane = lane
        self.message = message
        self.scope = scope
        self.respond = respond  # a From (call) or a callable(result) (delegate)
        self.caller_ref: Any = None
        self.task: Task | None = None
        self.holder = holder
        self.options = options
        self.invocation_id = "" if holder is not None else f"inv-{uuid.uuid4().hex}"
        self.context = context
        """The caller's context: the turn's task starts in it, so the turn's spans are
        children of the caller's current span (an AgentTool's `execute_tool`, say)."""


@dataclass(slots=True)
class _State:
    spec: AgentSpec
    lifeline: AgentLifeline
    history: list[Content] | None = None  # made on the first `prompt` that keeps one
    lanes: dict[Lane, deque[_Request]] = field(default_factory=dict)
    ready: dict[Lane, None] = field(default_factory=dict)
    """The lanes with a request queued and none running, the one ready longest first
    (a dict as an ordered set: `_dispatch` takes the first in O(1))."""
    active: dict[Pid, _Request] = field(default_factory=dict)  # task or holder pid -> entry
    active_lanes: dict[Lane, None] = field(default_factory=dict)
    """The lanes with a turn running (a dict used as a set: an empty dict is not tracked
    by the garbage collector, an empty set is, and idle agents are most agents)."""
    by_caller_ref: dict[Any, _Request] = field(default_factory=dict)
    completed: int = 0


class AgentServer(GenServer):
    def init(self, lifeline: AgentLifeline) -> _State:
        trap_exit(True)  # so stop_agent runs terminate and fails waiting callers
        return _State(lifeline.spec, lifeline)

    def handle_call(self, request: Any, from_: From, state: _State) -> Any:
        match request:
            case Prompt(message, caller, options, context):
                turn = _Request(
                    COMPAT_LANE, message, Scope(), from_, options=options, context=context
                )
                self._enqueue(state, turn, caller)
                return NoReply(state)
            case Invoke(message, Scope() as scope, caller, options, context):
                turn = _Request(
                    scope.lane(), message, scope, from_, options=options, context=context
                )
                self._enqueue(state, turn, caller)
                return NoReply(state)
            case EnterLane(tuple() as lane, Pid() as holder) if holder not in state.active:
                entry = _Request(lane, None, Scope(), from_, holder=holder)
                self._enqueue(state, entry, holder)
                return NoReply(state)
            case Info():
                return Reply(("ok", self._info(state)), state)
            case GetSpec():
                return Reply(("ok", state.spec), state)
        return Reply(("error", ("invalid_request", type(request).__name__)), state)

    def handle_cast(self, msg: Any, state: _State) -> Any:
        match msg:
            case Delegate(message, respond, caller, context):
                request = _Request(COMPAT_LANE, message, Scope(), respond, context=context)
                self._enqueue(state, request, caller)
            case LeaveLane(holder):
                self._leave(state, holder)
        return state

    def handle_info(self, msg: Any, state: _State) -> Any:
        match msg:
            case TaskResult():
                self._finish(state, msg)
            case Down(ref=ref):
                self._caller_down(state, ref)
        return state

    def terminate(self, reason: Any, state: Any) -> None:
        if not isinstance(state, _State):
            return
        state.lifeline.last_exit = reason  # what a failure reports, if it is the last
        for request in list(state.active.values()):
            if request.task is not None:
                request.task.kill()
            if request.holder is None:
                _respond(request, ("error", "agent_stopped"))
        for lane in state.lanes.values():
            for request in lane:
                _respond(request, ("error", "agent_stopped"))

    # -- scheduling ----------------------------------------------------------------------

    def _enqueue(self, state: _State, request: _Request, caller: Pid | None) -> None:
        if caller is not None:
            request.caller_ref = monitor(caller)
            state.by_caller_ref[request.caller_ref] = request
        lane = state.lanes.get(request.lane)
        if lane is None:
            lane = state.lanes[request.lane] = deque()
            if request.lane not in state.active_lanes:
                state.ready[request.lane] = None  # ready from now: behind the others
        lane.append(request)
        self._dispatch(state)

    def _dispatch(self, state: _State) -> None:
        limit = state.spec.max_concurrent_invocations
        ready = state.ready
        while ready and len(state.active) < limit:
            lane_key = next(iter(ready))  # the lane ready longest
            del ready[lane_key]
            queue = state.lanes[lane_key]
            request = queue.popleft()
            if not queue:
                del state.lanes[lane_key]
            if request.holder is not None:  # an outside invocation: it runs its own work
                state.active[request.holder] = request
                state.active_lanes[request.lane] = None
                reply(request.respond, ("ok", state.spec))
            else:
                self._start(state, request)

    def _start(self, state: _State, request: _Request) -> None:
        keep = request.lane == COMPAT_LANE and state.spec.history_policy == "include"
        history = list(state.history or ()) if keep else []
        deadline = time.monotonic() + state.spec.turn_timeout
        begin = run_turn, state.spec, history, request.message, request.scope
        arguments = (*begin, request.invocation_id, request.options)
        if request.context is None:
            task = Task.start(*arguments, deadline=deadline, notify=True)
        else:  # in the caller's context (a copy made for this request, run once)
            task = request.context.run(Task.start, *arguments, deadline=deadline, notify=True)
        request.task = task
        state.active[task.pid] = request
        state.active_lanes[request.lane] = None

    def _finish(self, state: _State, result: TaskResult) -> None:
        request = self._free(state, result.pid)
        if request is None:
            return
        state.completed += 1
        if result.ok:
            outcome = result.value
            if isinstance(outcome, TurnCompleted):
                if request.lane == COMPAT_LANE:
                    kept = state.history if state.history is not None else []
                    kept.extend(outcome.contents)
                    del kept[:-MAX_HISTORY_CONTENTS]
                    state.history = kept
                _respond(request, ("ok", outcome.output))
            else:  # a turn outside a Runner cannot pause: it fails instead
                _respond(request, ("error", getattr(outcome, "reason", "invalid_turn_outcome")))
        elif result.value == DEADLINE_REASON:
            _respond(request, ("error", "turn_timeout"))
        else:
            _respond(request, ("error", ("turn_worker_exit", _reason_text(result.value))))
        self._dispatch(state)

    def _leave(self, state: _State, holder: Pid) -> None:
        """An outside invocation gives its slot back (or stops waiting for one)."""
        if self._free(state, holder) is not None:
            state.completed += 1
            self._dispatch(state)
            return
        for request in list(state.by_caller_ref.values()):
            if request.holder == holder and request.task is None:
                self._drop_queued(state, request)

    def _free(self, state: _State, key: Pid) -> _Request | None:
        """Free the slot of an active entry (by task or holder pid); None if not active."""
        request = state.active.pop(key, None)
        if request is None:
            return None
        state.active_lanes.pop(request.lane, None)
        if request.caller_ref is not None:
            state.by_caller_ref.pop(request.caller_ref, None)
            demonitor(request.caller_ref, flush=True)
        if request.lane in state.lanes:
            state.ready[request.lane] = None  # ready again: behind lanes already waiting
        return request

    def _caller_down(self, state: _State, ref: Any) -> None:
        request = state.by_caller_ref.get(ref)
        if request is None:
            return
        if request.holder is not None and request.holder in state.active:
            self._free(state, request.holder)
            state.completed += 1
            self._dispatch(state)
            return
        if request.task is not None:
            state.by_caller_ref.pop(ref, None)
            request.caller_ref = None
            request.task.kill()  # its TaskResult arrives next and frees the lane
            return
        self._drop_queued(state, request)

    @staticmethod
    def _drop_queued(state: _State, request: _Request) -> None:
        if request.caller_ref is not None:
            state.by_caller_ref.pop(request.caller_ref, None)
            demonitor(request.caller_ref, flush=True)
            request.caller_ref = None
        queue = state.lanes.get(request.lane)
        if queue is not None and request in queue:
            queue.remove(request)
            if not queue:
                del state.lanes[request.lane]
                state.ready.pop(request.lane, None)

    @staticmethod
    def _info(state: _State) -> dict[str, Any]:
        return {
            "name": state.spec.name,
            "status": "running",
            "restarts": state.lifeline.restarts,
            "active": len(state.active),
            "queued": sum(len(queue) for queue in state.lanes.values()),
            "history_length": len(state.history or ()),
            "completed": state.completed,
            "tools": state.spec.catalog.names(),
            "sub_agents": list(state.spec.sub_agents),
            "threads": agent_thread_stats(state.spec.name),
        }


def _respond(request: _Request, outcome: tuple[Any, ...]) -> None:
    if isinstance(request.respond, From):
        reply(request.respond, outcome)
    elif request.respond is not None:
        request.respond(outcome)


def _reason_text(reason: Any) -> Any:
    """A turn task's exit reason for the caller: a crash gives its class only (never its
    text); a plain reason is kept, bounded."""
    if isinstance(reason, Crash):
        return reason.kind
    if isinstance(reason, str):
        return reason[:200]
    if isinstance(reason, tuple) and reason and isinstance(reason[0], str):
        return reason[0]
    return type(reason).__name__
