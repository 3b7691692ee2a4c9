"""The trusted planner and executor, and what their callbacks may answer.

A planner is an object the application built (never a name looked up at run time):

    planner.plan(goal, context) -> plan dict | Complete(value) | Fail(reason)
    planner.review(plan, step, observation, context)
        -> CONTINUE | Replan(plan) | Complete(value) | Fail(reason)

An executor is an object with ``execute(step, context)`` (or a plain callable
``fn(step, context)``) returning the step's JSON output, or `Fail(reason)` for a
failure the planner should review. Any callback may be a coroutine function; a sync
one runs on the bounded task pool, a coroutine on the reactor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal, NamedTuple, Protocol, runtime_checkable

import msgspec

from providers.errors import AdkError


class Complete(msgspec.Struct, frozen=True):
    """The goal is reached: `value` becomes the run's ``result``."""

    value: Any = None


class Replan(msgspec.Struct, frozen=True):
    """Replace the current plan: same ``id`` and ``goal``, ``revision`` one higher."""

    plan: Any


class Fail(msgspec.Struct, frozen=True):
    """A planner giving up (``planner_failed``), or an executor reporting a failed step
    (an ``executor_failed`` observation the planner reviews)."""

    reason: Any


CONTINUE: Final = "continue"
"""The review decision that runs the plan's next step (or ends the run after the last)."""

Decision = Literal["continue"] | Replan | Complete | Fail


@runtime_checkable
class Planner(Protocol):
    """What `run_planning` asks for plans and reviews."""

    def plan(self, goal: Any, context: dict[str, Any]) -> Any: ...

    def review(
        self,
        plan: dict[str, Any],
        step: dict[str, Any],
        observation: dict[str, Any],
        context: dict[str, Any],
    ) -> Any: ...


class Adapters(NamedTuple):
    """The checked callbacks of one run."""

    plan: Callable[..., Any]
    review: Callable[..., Any]
    execute: Callable[..., Any]


def check_adapters(planner: Any, executor: Any) -> Adapters:
    """The planner's and executor's callbacks; `AdkError` if either is not a trusted
    object: ``("invalid_planning_adapter", "planner")`` for a name (a string never
    selects code), ``("invalid_planning_adapter", role, "missing_callback")`` for an
    object without the callbacks."""
    plan = _callback(planner, "planner", "plan")
    review = _callback(planner, "planner", "review")
    if (
        not isinstance(executor, str | bytes)
        and callable(executor)
        and not hasattr(executor, "execute")
    ):
        return Adapters(plan, review, executor)
    return Adapters(plan, review, _callback(executor, "executor", "execute"))


def _callback(adapter: Any, role: str, name: str) -> Callable[..., Any]:
    if adapter is None or isinstance(adapter, str | bytes | int | float | dict | list | tuple):
        raise AdkError(
            ("invalid_planning_adapter", role), f"the {role} is an object the application built"
        )
    callback = getattr(adapter, name, None)
    if not callable(callback):
        raise AdkError(
            ("invalid_planning_adapter", role, "missing_callback"), f"the {role} has no {name}()"
        )
    return callback  # type: ignore[no-any-return]
