"""One planner or executor call, isolated in a monitored task with a bounded wait.

A sync callback runs on the bounded task pool, a coroutine function on the reactor;
either way in a `Task` owned by the planning engine, so cancelling the run or the
owner's exit stops it too. The wait is ``min(callback_timeout, time left)``: past it
the task is killed (a sync one is abandoned and fenced) and the call ends
``callback_timeout``, or `DeadlinePassed` when the run's own deadline came first.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from adk_actors.planning.result import exception_reason
from supervision import Task, TaskBusy, TaskFailed, TaskTimeout
from supervision import aio as kernel_aio


class Returned(NamedTuple):
    """The callback returned `value` (not checked yet)."""

    value: Any


class CallbackFailed(NamedTuple):
    """The callback raised, timed out or its worker died; `reason` is a stable word
    (``callback_timeout``, ``callback_exception``, an `AdkError`'s reason,
    ``callback_worker_down``, ``callback_capacity_exhausted``)."""

    reason: str
    error_class: str | None = None


class DeadlinePassed(NamedTuple):
    """The run's absolute deadline passed before the callback answered."""


Outcome = Returned | CallbackFailed | DeadlinePassed


async def call(
    fn: Callable[..., Any], args: tuple[Any, ...], *, deadline: float, callback_timeout: float
) -> Outcome:
    """Run ``fn(*args)`` in its own task and wait for it (see the module doc)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return DeadlinePassed()
    wait = min(remaining, callback_timeout)
    try:
        if _is_async(fn):
            task = Task.start(_guarded_async, fn, args)
        else:
            task = Task.start(_guarded_sync, fn, args)
    except TaskBusy:
        return CallbackFailed("callback_capacity_exhausted")
    try:
        answer = await kernel_aio.wait_task(task, wait)
    except TaskTimeout:
        task.kill()
        return (
            DeadlinePassed()
            if remaining <= callback_timeout
            else CallbackFailed("callback_timeout")
        )
    except TaskFailed:
        return CallbackFailed("callback_worker_down")
    match answer:
        case ("returned", value):
            return Returned(value)
        case ("raised", reason, error_class):
            return CallbackFailed(reason, error_class)
    return CallbackFailed("callback_worker_down")  # pragma: no cover - the guards answer one of two


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object whose __call__ is async
    )


def _guarded_sync(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
    try:
        value = fn(*args)
    except Exception as error:  # the failure is the answer; nothing of its text leaves
        return ("raised", exception_reason(error), type(error).__name__)
    if inspect.iscoroutine(value):  # a sync callable that forgot to await
        value.close()
        return ("returned", _NotAResult())
    return ("returned", value)


async def _guarded_async(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
    try:
        value = await fn(*args)
    except Exception as error:
        return ("raised", exception_reason(error), type(error).__name__)
    return ("returned", value)


class _NotAResult:
    """Stands for an answer that is not a value at all (an un-awaited coroutine)."""
