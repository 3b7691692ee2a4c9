"""The planning loop: plan, execute each step, review, replan within the budgets.

It runs as a coroutine task owned by the run's server (`server.py`) and tells the
server every accepted plan (`PlanAccepted`) and every observation (`Observed`) as it
happens, so a cancel or a deadline can end the run from what was recorded; its
return value is how the run ended (`Ending`). Each planner and executor call is a
task of its own (`callbacks.call`); plans, steps, observations and the context are
handed to them as fresh copies, so a callback cannot change what was recorded.

Executor failures are observations the planner reviews; planner failures, invalid
decisions, budget exhaustion and the deadline end the run (``failed``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, NamedTuple

import msgspec

from adk_actors.planning.adapters import CONTINUE, Adapters, Complete, Fail, Replan
from adk_actors.planning.callbacks import CallbackFailed, DeadlinePassed, Outcome, Returned, call
from adk_actors.planning.options import PlanningOptions
from adk_actors.planning.plan import json_copy, plan_size, validate_plan
from adk_actors.planning.result import TOO_LARGE, failure, safe_reason
from providers.errors import AdkError
from supervision import Pid, send


class PlanAccepted(NamedTuple):
    """Engine -> server: `plan` is now the current plan (after `replans` replans)."""

    plan: dict[str, Any]
    replans: int


class Observed(NamedTuple):
    """Engine -> server: a step ran; `steps_executed` counts it."""

    observation: dict[str, Any]
    steps_executed: int


class Ending(NamedTuple):
    """How the run ended: ``completed`` with `value`, or ``failed`` with `error`."""

    status: str
    value: Any = None
    error: dict[str, Any] | None = None


class RunInputs(NamedTuple):
    """What the engine needs, checked by the starter."""

    adapters: Adapters
    goal: Any
    context: dict[str, Any]
    options: PlanningOptions
    deadline: float


def _failed(kind: str, *reason: Any) -> Ending:
    return Ending("failed", None, failure(kind, *reason))


class _Engine:
    """The loop's state; only the engine task touches it."""

    def __init__(self, server: Pid, inputs: RunInputs) -> None:
        self.server = server
        self.inputs = inputs
        self.options = inputs.options
        self.plan: dict[str, Any] | None = None
        self.pending: list[dict[str, Any]] = []
        self.steps_executed = 0
        self.replans = 0
        self.last: dict[str, Any] | None = None

    async def _call(self, fn: Any, *args: Any) -> Outcome:
        return await call(
            fn,
            args,
            deadline=self.inputs.deadline,
            callback_timeout=self.options.callback_timeout,
        )

    def _context(self) -> dict[str, Any]:
        return json_copy(self.inputs.context)  # type: ignore[no-any-return]

    async def run(self) -> Ending:
        goal = self.inputs.goal
        match await self._call(self.inputs.adapters.plan, json_copy(goal), self._context()):
            case DeadlinePassed():
                return _failed("deadline_exceeded")
            case CallbackFailed() as failed:
                return self._callback_failed("planner_callback_failed", failed)
            case Returned(Complete(value)):
                return self._complete(value)
            case Returned(Fail(reason)):
                return _failed("planner_failed", safe_reason(reason, self.options.max_output_bytes))
            case Returned(Mapping() as proposed):
                try:
                    self._accept(self._checked(proposed, initial=True))
                except AdkError as error:
                    return _failed("invalid_initial_plan", safe_reason(error))
                return await self._execute()
        return _failed("invalid_planner_output")

    def _checked(self, proposed: Mapping[str, Any], *, initial: bool) -> dict[str, Any]:
        """The plan, if it is valid, has the right identity and fits the byte budget."""
        plan = validate_plan(proposed)
        if initial:
            identity = plan["revision"] == 0 and plan["goal"] == self.inputs.goal
        else:
            assert self.plan is not None
            identity = (
                plan["id"] == self.plan["id"]
                and plan["revision"] == self.plan["revision"] + 1
                and plan["goal"] == self.inputs.goal
            )
        if not identity:
            raise AdkError("invalid_plan_identity", "the plan's id, revision or goal is wrong")
        if plan_size(plan) > self.options.max_plan_bytes:
            raise AdkError("plan_size_limit_exceeded", "the plan is larger than max_plan_bytes")
        return plan

    def _accept(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.pending = list(plan["steps"])
        send(self.server, PlanAccepted(plan, self.replans))

    async def _execute(self) -> Ending:
        while True:
            if time.monotonic() >= self.inputs.deadline:
                return _failed("deadline_exceeded")
            if not self.pending:
                return self._finish(self.last)
            step = self.pending.pop(0)
            if self.steps_executed >= self.options.max_steps:
                return _failed("max_steps_exceeded", {"limit": self.options.max_steps})
            outcome = await self._call(
                self.inputs.adapters.execute, json_copy(step), self._context()
            )
            if isinstance(outcome, DeadlinePassed):
                return _failed("deadline_exceeded")
            observation = self._observe(step, outcome)
            ending = await self._review(step, observation)
            if ending is not None:
                return ending

    def _observe(self, step: dict[str, Any], outcome: Outcome) -> dict[str, Any]:
        assert self.plan is not None
        observation: dict[str, Any] = {
            "plan_id": self.plan["id"],
            "revision": self.plan["revision"],
            "step_id": step["id"],
            "attempt": self.steps_executed + 1,
        }
        observation.update(self._step_result(outcome))
        self.steps_executed += 1
        self.last = observation
        send(self.server, Observed(observation, self.steps_executed))
        return observation

    def _step_result(self, outcome: Outcome) -> dict[str, Any]:
        match outcome:
            case CallbackFailed() as failed:
                return _error(self._callback_failure("executor_callback_failed", failed))
            case Returned(Fail(reason)):
                return _error(
                    failure("executor_failed", safe_reason(reason, self.options.max_output_bytes))
                )
            case Returned(Complete() | Replan()):
                return _error(failure("invalid_executor_result"))
            case Returned(value):
                try:
                    output = json_copy(value)
                except (AdkError, RecursionError):
                    return _error(failure("invalid_executor_output"))
                if len(msgspec.json.encode(output)) > self.options.max_output_bytes:
                    return _error(failure("executor_callback_failed", TOO_LARGE))
                return {"status": "ok", "output": output}
        return _error(failure("invalid_executor_result"))

    async def _review(self, step: dict[str, Any], observation: dict[str, Any]) -> Ending | None:
        assert self.plan is not None
        outcome = await self._call(
            self.inputs.adapters.review,
            json_copy(self.plan),
            json_copy(step),
            json_copy(observation),
            self._context(),
        )
        match outcome:
            case DeadlinePassed():
                return _failed("deadline_exceeded")
            case CallbackFailed() as failed:
                return self._callback_failed("planner_callback_failed", failed)
            case Returned(Complete(value)):
                return self._complete(value)
            case Returned(Fail(reason)):
                return _failed("planner_failed", safe_reason(reason, self.options.max_output_bytes))
            case Returned(Replan(proposed)):
                return self._replan(proposed)
            case Returned(str() as decision) if decision == CONTINUE:
                return None if self.pending else self._finish(observation)
        return _failed("invalid_planner_decision")

    def _replan(self, proposed: Any) -> Ending | None:
        if self.replans >= self.options.max_replans:
            return _failed("max_replans_exceeded", {"limit": self.options.max_replans})
        try:
            if not isinstance(proposed, Mapping):
                raise AdkError("invalid_plan", "a plan is a JSON object")
            plan = self._checked(proposed, initial=False)
        except AdkError as error:
            return _failed("invalid_replan", safe_reason(error))
        self.replans += 1
        self._accept(plan)
        return None

    def _finish(self, observation: dict[str, Any] | None) -> Ending:
        if observation is None:
            return _failed("empty_plan_execution")
        if observation["status"] == "ok":
            return Ending("completed", observation["output"])
        return _failed("step_failed", observation["error"])

    def _complete(self, value: Any) -> Ending:
        try:
            safe = json_copy(value)
        except (AdkError, RecursionError):
            return _failed("invalid_planner_result")
        if len(msgspec.json.encode(safe)) > self.options.max_output_bytes:
            return _failed("invalid_planner_result", TOO_LARGE)
        return Ending("completed", safe)

    def _callback_failed(self, kind: str, failed: CallbackFailed) -> Ending:
        return Ending("failed", None, self._callback_failure(kind, failed))

    @staticmethod
    def _callback_failure(kind: str, failed: CallbackFailed) -> dict[str, Any]:
        error = failure(kind, failed.reason)
        if failed.error_class is not None:
            error["class"] = failed.error_class[:128]
        return error


def _error(error: dict[str, Any]) -> dict[str, Any]:
    return {"status": "error", "error": error}


async def run_engine(server: Pid, inputs: RunInputs) -> Ending:
    """The whole loop (the engine task's body)."""
    return await _Engine(server, inputs).run()
