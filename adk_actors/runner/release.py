"""What an invocation holds and gives back when it ends: its admission permit (or the
request for one), its lane slot, its timers, its tasks and the steps still waiting to be stored.

Everything here is sent without waiting, so an ending invocation server never blocks
on the admission controller or the agent; idempotent, so `terminate` may call it again.
"""

from __future__ import annotations

from typing import Any

from adk_actors import admission as admission_api
from adk_actors.agents.messages import LeaveLane
from adk_actors.runner.state import InvocationState
from supervision import cancel_request, cancel_timer, cast, self_pid, send_request


def release(state: InvocationState) -> None:
    """Give back the permit and the lane slot, withdraw pending requests; idempotent.
    A permit still being asked for is cancelled at the controller; should it be
    granted anyway, its `Response` still comes here and is given back at once."""
    if state.admission_request is not None and state.admission_request_id is not None:
        # whatever became of it (queued, or granted on the way here): the controller
        # drops or releases it; its answer is not awaited
        cancel_request(state.admission_request)
        withdraw = admission_api.Withdraw(state.admission_request_id, self_pid())
        send_request(admission_server(state), withdraw)
        state.admission_request = state.admission_request_id = None
    if state.permit is not None:
        permit, state.permit = state.permit, None
        give_back(permit)
    if state.lane_request is not None:
        cancel_request(state.lane_request)
        state.lane_request = None
    if state.lane_agent is not None:
        cast(state.lane_agent, LeaveLane(self_pid()))
        state.lane_agent = None
    if state.deadline_timer is not None:
        cancel_timer(state.deadline_timer)
        state.deadline_timer = None
    if state.grace is not None:
        cancel_timer(state.grace)
        state.grace = None
    kill_tasks(state)
    state.queued.clear()  # an ended invocation stores nothing more
    state.deferred.clear()


def kill_tasks(state: InvocationState) -> None:
    """Stop the turn, the history task and a running ``on_event`` hook task, if any
    (a sync one is fenced); a result they send afterwards is dropped."""
    for task in (state.turn, state.preparing, state.hook):
        if task is not None:
            task.kill()
    state.turn = state.preparing = state.hook = state.hook_phase = None


def admission_server(state: InvocationState) -> Any:
    return state.runner.admission_control.controller


def give_back(permit: admission_api.Permit) -> None:
    """Release a permit without waiting: its `Response` comes back and is dropped (a
    controller that is gone took its permits with it)."""
    send_request(permit.server, admission_api.Release(permit.id))
