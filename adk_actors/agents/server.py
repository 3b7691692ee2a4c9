"""The agent process: queues turns in lanes and runs each in a `Task`.

The agent's own mailbox only does bookkeeping; provider and tool work runs in a
task, so the agent answers inspection and new requests while a turn is running.

* `prompt` turns share one lane and the agent's conversation history (FIFO).
* `invoke` turns start from a fresh history; their lane is (app, user, session), or
  one shared "unscoped" lane. One lane runs one turn at a time; different lanes
  overlap up to `max_concurrent_invocations`. When a slot frees, the lane that has
  been *ready* longest starts next (a lane that just finished a turn queues behind
  lanes that were already waiting).
* The caller of a queued or running turn is monitored: if it dies, its turn is
  dropped or its task killed. A turn past `turn_timeout` is killed and its caller
  gets ``turn_timeout``.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from adk_actors.agents.spec import MAX_HISTORY_CONTENTS, AgentSpec
from adk_actors.agents.turn import Scope, TurnOptions, run_turn
from providers.content import Content
from supervision import (
    Down,
    From,
    GenServer,
    NoReply,
    Pid,
    Reply,
    demonitor,
    monitor,
    reply,
    trap_exit,
)
from supervision.tasks import DEADLINE_REASON, Task, TaskResult

COMPAT_LANE = ("compat",)


@dataclass
class _Request:
    lane: tuple[str, ...]
    message: Content
    scope: Scope
    respond: Any  # a From (call) or a callable(result) (delegate)
    caller_ref: Any = None
    task: Task | None = None
    options: TurnOptions = field(default_factory=TurnOptions)
    invocation_id: str = field(default_factory=lambda: f"inv-{uuid.uuid4().hex}")


@dataclass
class _State:
    spec: AgentSpec
    history: list[Content] = field(default_factory=list)
    lanes: dict[tuple[str, ...], deque[_Request]] = field(default_factory=dict)
    ready_since: dict[tuple[str, ...], int] = field(default_factory=dict)
    active: dict[Pid, _Request] = field(default_factory=dict)  # task pid -> request
    active_lanes: set[tuple[str, ...]] = field(default_factory=set)
    by_caller_ref: dict[Any, _Request] = field(default_factory=dict)
    completed: int = 0


_order = itertools.count()


class AgentServer(GenServer):
    def init(self, spec: AgentSpec) -> _State:
        trap_exit(True)  # so stop_agent runs terminate and fails waiting callers
        return _State(spec)

    def handle_call(self, request: tuple[Any, ...], from_: From, state: _State) -> Any:
        op = request[0]
        if op in ("prompt", "invoke"):
            _, message, scope, caller, options = request
            lane = COMPAT_LANE if op == "prompt" else scope.lane()
            turn = _Request(lane, message, scope, from_, options=options)
            self._enqueue(state, turn, caller)
            return NoReply(state)
        if op == "info":
            return Reply(self._info(state), state)
        if op == "spec":
            return Reply(("ok", state.spec), state)
        return Reply(("error", ("unknown_request", op)), state)

    def handle_cast(self, msg: tuple[Any, ...], state: _State) -> Any:
        if msg[0] == "delegate":
            _, message, respond, caller = msg
            self._enqueue(state, _Request(COMPAT_LANE, message, Scope(), respond), caller)
        return state

    def handle_info(self, msg: Any, state: _State) -> Any:
        if type(msg) is TaskResult:
            self._finish(state, msg)
        elif type(msg) is Down:
            self._caller_down(state, msg.ref)
        return state

    def terminate(self, reason: Any, state: Any) -> None:
        if not isinstance(state, _State):
            return
        for request in list(state.active.values()):
            if request.task is not None:
                request.task.kill()
            _respond(request, ("error", "agent_stopped"))
        for lane in state.lanes.values():
            for request in lane:
                _respond(request, ("error", "agent_stopped"))

    # -- scheduling ----------------------------------------------------------------------

    def _enqueue(self, state: _State, request: _Request, caller: Pid | None) -> None:
        if caller is not None:
            request.caller_ref = monitor(caller)
            state.by_caller_ref[request.caller_ref] = request
        lane = state.lanes.setdefault(request.lane, deque())
        if not lane and request.lane not in state.active_lanes:
            state.ready_since[request.lane] = next(_order)
        lane.append(request)
        self._dispatch(state)

    def _dispatch(self, state: _State) -> None:
        limit = state.spec.max_concurrent_invocations
        while len(state.active) < limit:
            ready = [
                key for key, queue in state.lanes.items() if queue and key not in state.active_lanes
            ]
            if not ready:
                return
            lane_key = min(ready, key=lambda key: state.ready_since[key])
            request = state.lanes[lane_key].popleft()
            if not state.lanes[lane_key]:
                del state.lanes[lane_key]
            self._start(state, request)

    def _start(self, state: _State, request: _Request) -> None:
        keep = request.lane == COMPAT_LANE and state.spec.history_policy == "include"
        history = list(state.history) if keep else []
        deadline = time.monotonic() + state.spec.turn_timeout
        task = Task.start(
            run_turn,
            state.spec,
            history,
            request.message,
            request.scope,
            request.invocation_id,
            request.options,
            deadline=deadline,
            notify=True,
        )
        request.task = task
        state.active[task.pid] = request
        state.active_lanes.add(request.lane)

    def _finish(self, state: _State, result: TaskResult) -> None:
        request = state.active.pop(result.pid, None)
        if request is None:
            return
        state.active_lanes.discard(request.lane)
        state.completed += 1
        if request.caller_ref is not None:
            state.by_caller_ref.pop(request.caller_ref, None)
            demonitor(request.caller_ref, flush=True)
        if state.lanes.get(request.lane):
            state.ready_since[request.lane] = next(_order)  # behind lanes already waiting
        if result.ok:
            outcome = result.value
            if outcome[0] == "ok" and request.lane == COMPAT_LANE:
                state.history.extend(outcome[2])
                del state.history[:-MAX_HISTORY_CONTENTS]
            _respond(request, outcome[:2])
        elif result.value == DEADLINE_REASON:
            _respond(request, ("error", "turn_timeout"))
        else:
            _respond(request, ("error", ("turn_worker_exit", _reason_text(result.value))))
        self._dispatch(state)

    def _caller_down(self, state: _State, ref: Any) -> None:
        request = state.by_caller_ref.pop(ref, None)
        if request is None:
            return
        request.caller_ref = None
        if request.task is not None:
            request.task.kill()  # its TaskResult arrives next and frees the lane
            return
        queue = state.lanes.get(request.lane)
        if queue is not None and request in queue:
            queue.remove(request)
            if not queue:
                del state.lanes[request.lane]

    @staticmethod
    def _info(state: _State) -> dict[str, Any]:
        return {
            "name": state.spec.name,
            "active": len(state.active),
            "queued": sum(len(queue) for queue in state.lanes.values()),
            "history_length": len(state.history),
            "completed": state.completed,
            "tools": state.spec.catalog.names(),
            "sub_agents": list(state.spec.sub_agents),
        }


def _respond(request: _Request, outcome: tuple[Any, ...]) -> None:
    if isinstance(request.respond, From):
        reply(request.respond, outcome)
    elif request.respond is not None:
        request.respond(outcome)


def _reason_text(reason: Any) -> Any:
    return (
        reason
        if isinstance(reason, str | tuple)
        else getattr(reason, "kind", type(reason).__name__)
    )
