"""The planning run's process: owns the engine task, the record, the one terminal.

A `temporary` child of the workflow supervisor, started by `api.start` through a
one-shot handoff (its child spec carries only an opaque reference). It monitors the
run's owner (the process that called `start`), runs the engine (`engine.py`) as a
coroutine task, records each accepted plan and observation the engine reports, and
ends the run exactly once: with the engine's ending, on `Cancel`, or at its deadline
(a safety net a little past the engine's own). Its phase only moves forward:

    RUNNING -> COMPLETED | FAILED | CANCELLED

The result waits for the owner's `Await`, for `retention` seconds after the terminal
(the run's option; a cancelled run too); the server stops once an awaiting caller has
it, when the retention is over, or when the owner exits (which also kills the engine
and its active callback). So a run nobody awaits, even one started from a thread that
never exits, does not live on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NamedTuple

from adk_actors.planning.engine import Ending, Observed, PlanAccepted, RunInputs, run_engine
from adk_actors.planning.launch import PlanningLaunch, handoffs
from adk_actors.planning.result import PlanningResult, build_result, failure
from providers.errors import AdkError
from supervision import (
    Down,
    From,
    GenServer,
    HandoffError,
    NoReply,
    Reply,
    Stop,
    Task,
    TaskResult,
    TimerRef,
    cancel_timer,
    get_logger,
    monitor,
    self_pid,
    send_after,
)

DEADLINE_GRACE = 1.0
"""Seconds past the run's deadline before the server ends a run its engine did not."""
_log = get_logger("adk_actors.planning")


class Phase(Enum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self is not Phase.RUNNING


def advance(current: Phase, new: Phase) -> Phase:
    """`new`, if the run may move there from `current` (only out of RUNNING)."""
    if current is not Phase.RUNNING or new is Phase.RUNNING:
        raise AdkError(
            ("invalid_phase_transition", current.value, new.value),
            "a planning run moved against its lifecycle",
        )
    return new


class Await(NamedTuple):
    """Owner -> server (call): the result, once there is one."""

    token: str


class Cancel(NamedTuple):
    """Owner -> server (call): end the run now; `reason` is already safe."""

    token: str
    reason: Any


class _DeadlineReached(NamedTuple):
    """Timer -> server: the run's deadline (plus grace) has passed."""


class _RetentionOver(NamedTuple):
    """Timer -> server: the run ended `retention` seconds ago and nobody took its result."""


@dataclass
class _Run:
    """The server's state: the record of the run and who waits for it."""

    token: str
    owner_ref: Any
    engine: Task
    timer: TimerRef | None
    """The deadline timer while the run runs, then its retention timer."""
    started: float
    metadata: dict[str, Any]
    retention: float
    phase: Phase = Phase.RUNNING
    plan: dict[str, Any] | None = None
    plans: list[dict[str, Any]] = field(default_factory=list)
    replans: int = 0
    steps_executed: int = 0
    observations: list[dict[str, Any]] = field(default_factory=list)
    result: PlanningResult | None = None
    waiters: list[From] = field(default_factory=list)


class PlanningServer(GenServer):
    """One planning run (see the module doc)."""

    def init(self, ref: str) -> Any:
        try:
            launch: PlanningLaunch = handoffs.take(ref)
        except HandoffError:  # taken already, or withdrawn: this area says handoff_taken
            return Stop(("shutdown", "handoff_taken"))
        owner_ref = monitor(launch.owner)
        options = launch.options
        started = time.monotonic()
        inputs = RunInputs(
            launch.adapters, launch.goal, launch.context, options, started + options.timeout
        )
        engine = Task.start(run_engine, self_pid(), inputs, notify=True)
        timer = send_after(self_pid(), _DeadlineReached(), options.timeout + DEADLINE_GRACE)
        return _Run(
            launch.token,
            owner_ref,
            engine,
            timer,
            started,
            options.result_metadata,
            options.retention,
        )

    def handle_call(self, request: Any, from_: From, state: _Run) -> Any:
        match request:
            case Await(token) if token == state.token:
                if state.result is None:
                    state.waiters.append(from_)
                    return NoReply(state)
                return self._deliver([from_], state)
            case Cancel(token, reason) if token == state.token:
                if state.phase.terminal:
                    return Reply(("error", "already_terminal"), state)
                state.engine.kill()
                self._end(
                    state, Phase.CANCELLED, Ending("cancelled", None, failure("cancelled", reason))
                )
                from_.settle(("ok", None), False)
                return self._deliver(self._take_waiters(state), state)
            case Await() | Cancel():
                return Reply(("error", "invalid_planning_ref"), state)
        return Reply(("error", "invalid_request"), state)

    def handle_info(self, msg: Any, state: _Run) -> Any:
        match msg:
            case PlanAccepted(plan, replans) if not state.phase.terminal:
                state.plan, state.replans = plan, replans
                state.plans.append(plan)
            case Observed(observation, steps_executed) if not state.phase.terminal:
                state.observations.append(observation)
                state.steps_executed = steps_executed
            case TaskResult(pid, ok, value) if pid == state.engine.pid:
                if not state.phase.terminal:
                    ending = (
                        value if ok else Ending("failed", None, failure("planning_engine_failed"))
                    )
                    if not ok:
                        _log.warning(
                            "adk.planning.engine_failed", reason_class=type(value).__name__
                        )
                    self._end(state, _phase(ending), ending)
                    return self._deliver(self._take_waiters(state), state)
            case _DeadlineReached() if not state.phase.terminal:
                state.engine.kill()
                self._end(state, Phase.FAILED, Ending("failed", None, failure("deadline_exceeded")))
                return self._deliver(self._take_waiters(state), state)
            case _RetentionOver() if state.phase.terminal:
                return Stop("normal", state)
            case Down(ref=ref) if ref == state.owner_ref:
                state.engine.kill()  # and with it the active callback
                return Stop("normal", state)
        return state

    def terminate(self, reason: Any, state: Any) -> None:
        if isinstance(state, _Run):
            state.engine.kill()

    @staticmethod
    def _take_waiters(state: _Run) -> list[From]:
        waiters, state.waiters = state.waiters, []
        return waiters

    @staticmethod
    def _end(state: _Run, phase: Phase, ending: Ending) -> None:
        """Record the one terminal, and swap the deadline timer for the retention one."""
        state.phase = advance(state.phase, phase)
        if state.timer is not None:
            cancel_timer(state.timer)
            state.timer = None
        if state.retention > 0:
            state.timer = send_after(self_pid(), _RetentionOver(), state.retention)
        state.result = build_result(
            status=ending.status,
            plan=state.plan,
            plans=tuple(state.plans),
            steps_executed=state.steps_executed,
            replans=state.replans,
            duration_ms=int((time.monotonic() - state.started) * 1000),
            observations=state.observations,
            value=ending.value,
            error=ending.error,
            metadata=state.metadata,
        )

    @staticmethod
    def _deliver(waiters: list[From], state: _Run) -> Any:
        """Answer `waiters` with the result; stop once one of them has it (or at once
        without a retention)."""
        delivered = False
        for waiter in waiters:
            delivered = waiter.settle(("ok", state.result), False) or delivered
        return Stop("normal", state) if delivered or state.retention <= 0 else NoReply(state)


def _phase(ending: Ending) -> Phase:
    return Phase.COMPLETED if ending.status == "completed" else Phase.FAILED
