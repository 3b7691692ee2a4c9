"""One action of a workflow, with its attempts: what a step, branch, member, body or
graph node runs.

`perform` runs an action under its policy: every attempt is a fresh monitored `Task`
(a sync callable on the bounded pool, a coroutine on the reactor) with its own
deadline, ``min(now + policy timeout, the run's deadline)``. A failed attempt (an
`Error` result, an exception, its timeout, its worker's death) is retried after the
backoff, if attempts are left; a success, a pause, a refused result, the run's
deadline and cancellation are not. Cancelling `perform` (the engine was killed, a
sibling failed) stops its running attempt and ends its backoff at once.

Stopping an attempt (`AttemptFence`): a coroutine is cancelled. A sync callable cannot
be: its task is killed, which fences it (its result is dropped, whatever it sends
later is too), its ``context["cancelled"]`` (a `threading.Event`) is set, and its
thread runs on until the callable returns. The next attempt of that step never
overlaps it: it starts only once that thread has returned, waiting at most the
step's timeout (at least its backoff, never past the run's deadline); a thread still
running then fails the step ``("attempt_still_running", attempt, last_reason)``.

`call` runs one callback (a predicate, a router, a custom merge) the same way, once,
under the run's deadline only.

Agents are resolved by name when an attempt runs (a restarted agent is found), after
checking that the process under the name reports that very name
(``agent_identity_mismatch`` otherwise: nothing is invoked). Tools that want approval
fail closed (``tool_confirmation_requires_runner``; a failing check is
``tool_confirmation_evaluation_failed``): a workflow has no human to ask. Neither is
retried.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import threading
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import msgspec

from adk_actors.agents.api import agent_spec, invoke
from adk_actors.agents.scope import Scope
from adk_actors.tools import ToolContext
from adk_actors.tools.suspension import Suspension
from adk_actors.workflows import nested
from adk_actors.workflows.checkpoint import Checkpoint
from adk_actors.workflows.errors import (
    ACTION_COMPONENT,
    exception_reason,
    external_reason,
    public_failure,
)
from adk_actors.workflows.nested import NestedFailure, NestedPause
from adk_actors.workflows.results import Control, Output, normalize
from adk_actors.workflows.retry import delays, jittered, remaining
from adk_actors.workflows.spec import (
    Action,
    AgentAction,
    Callback,
    NestedAction,
    Policy,
    RetryPolicy,
    ToolAction,
    json_copy,
)
from providers.content import Content
from providers.errors import AdkError
from supervision import Task, TaskBusy, TaskFailed, TaskTimeout, aio

APP_NAME = "adk_workflow"
"""The app name of every agent lane and tool context a workflow opens."""
AGENT_COMPONENT = "adk_workflow_agent"
TOOL_COMPONENT = "adk_workflow_tool"
DEFAULT_BACKOFF_CAP = 60.0
"""The backoff cap of a growing backoff (``backoff_factor`` > 1) without ``max_backoff``."""
NOT_RETRIED = frozenset(
    {"tool_confirmation_requires_runner", "tool_confirmation_evaluation_failed"}
)
STOP_GRACE_FLOOR = 0.1
"""The least time a retry waits for a stopped sync attempt's thread to return."""
AGENT_CALL_SLACK = 0.05
"""An agent call's own timeout ends this long after its attempt's deadline."""
ATTEMPT_STILL_RUNNING = "attempt_still_running"


# -- what an action comes to ---------------------------------------------------------------------


class Done(NamedTuple):
    """The action returned a result (checked: any `Control` kind, ``invalid`` included)."""

    control: Control


class Failure(NamedTuple):
    """The action failed for good: `reason` is public (shaped, bounded)."""

    reason: Any


class TimedOut(NamedTuple):
    """The run's deadline passed."""


ActionResult = Done | Failure | TimedOut | NestedPause


class ActionFailure(NamedTuple):
    """What a built-in adapter (agent, tool, nested workflow) returns for a failed
    attempt: an already public `reason`, retried unless `retryable` is false."""

    reason: Any
    retryable: bool = True


class _Raised(NamedTuple):
    """An attempt's callable raised: the exception made public (class and tag only)."""

    failure: dict[str, Any]


# -- stopping an attempt -------------------------------------------------------------------------


class AttemptFence:
    """The stop signal and the exit notice of one attempt (or one callback call).

    `cancelled` (the action's ``context["cancelled"]``) is set when the attempt is
    given up before it delivered: its timeout, the run's deadline or cancel, a failing
    sibling. A sync callable runs through `run` on its pool thread, so the engine knows
    whether it still runs (`still_running`) and can wait until it returns (`stopped`);
    one given up before its thread picked it up never starts. Create it on the
    engine's event loop."""

    __slots__ = ("_exited", "_lock", "_loop", "_phase", "cancelled")

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self._lock = threading.Lock()
        self._phase = "new"  # -> "running" -> "exited"; or "new" -> "abandoned"
        self._loop = asyncio.get_running_loop()
        self._exited: asyncio.Future[None] = self._loop.create_future()

    def run(self, fn: Any, *args: Any) -> Any:
        """Call `fn(*args)` (on the pool thread), unless the attempt was given up."""
        with self._lock:
            if self._phase != "new":
                return None  # given up before it started: it never runs (and is fenced)
            self._phase = "running"
        try:
            return fn(*args)
        finally:
            with self._lock:
                self._phase = "exited"
            try:
                self._loop.call_soon_threadsafe(_resolve, self._exited)
            except RuntimeError:
                pass  # the loop is closed: nobody waits

    def abandon(self) -> None:
        """The attempt is given up: signal it; a callable not started never will be."""
        self.cancelled.set()
        with self._lock:
            if self._phase == "new":
                self._phase = "abandoned"

    @property
    def still_running(self) -> bool:
        """Does a sync callable of this attempt still run on its thread?"""
        with self._lock:
            return self._phase == "running"

    async def stopped(self, timeout: float) -> bool:
        """Wait (on the loop, at most `timeout` s) until no callable of it runs."""
        if not self.still_running:
            return True
        try:
            await asyncio.wait_for(asyncio.shield(self._exited), max(0.0, timeout))
        except TimeoutError:
            return not self.still_running
        return True


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


# -- running an action ---------------------------------------------------------------------------


async def perform(
    action: Action,
    policy: Policy,
    state: dict[str, Any],
    context: dict[str, Any],
    deadline: float | None,
    resume: tuple[Checkpoint, Any] | None = None,
) -> ActionResult:
    """Run `action` with `state` and `context` under `policy` until it succeeds or its
    attempts are used up. `resume` (a nested workflow's child checkpoint and resume
    input) resumes a paused child instead of starting one."""
    retry = policy.retry
    waits = delays(retry.backoff, retry.backoff_factor, _backoff_cap(retry))
    attempt = 1
    while True:
        if remaining(deadline) <= 0:
            return TimedOut()
        private = copy_state(state)
        fence = AttemptFence()
        attempt_context = {
            **context,
            "state": private,
            "attempt": attempt,
            "cancelled": fence.cancelled,
        }
        attempt_deadline = _attempt_deadline(policy.timeout, deadline)
        entry, args = _entry(action, private, attempt_context, deadline, attempt_deadline, resume)
        kind, value = await _attempt(entry, args, attempt_deadline, fence)
        if kind == "deadline" or (kind == "timeout" and remaining(deadline) <= 0):
            return TimedOut()
        if kind == "value":
            if isinstance(value, NestedPause):
                return value
            if isinstance(value, ActionFailure):
                raw, retryable = value.reason, value.retryable
                last: Any = ("returned_error", raw)
            elif isinstance(value, NestedFailure):
                raw, retryable = value.reason, True
                last = ("returned_error", raw)
            elif isinstance(value, _Raised):
                raw = last = ("action_exception", value.failure)
                retryable = True
            else:
                control = normalize(value)
                if control.kind != "error":
                    return Done(control)
                raw, retryable = control.reason, not _not_retried(control.reason)
                last = ("returned_error", raw)
        elif kind == "timeout":
            raw = last = ("action_timed_out", policy.timeout)
            retryable = True
        else:
            raw = last = ("attempt_worker_down", value)
            retryable = True
        if not retryable or attempt >= retry.max_attempts:
            return Failure(("retry_exhausted", attempt, last) if retryable and attempt > 1 else raw)
        wait = jittered(next(waits), retry.jitter)
        left = remaining(deadline)
        if wait >= left:
            await asyncio.sleep(max(0.0, left))
            return TimedOut()
        began = time.monotonic()
        if fence.still_running:  # a stopped sync attempt: the next one must not overlap it
            grace = max(wait, policy.timeout or 0.0, STOP_GRACE_FLOOR)
            if not await fence.stopped(min(grace, left)):
                if remaining(deadline) <= 0:
                    return TimedOut()
                return Failure((ATTEMPT_STILL_RUNNING, attempt, last))
        await asyncio.sleep(max(0.0, wait - (time.monotonic() - began)))
        attempt += 1


async def call(
    callback: Callback,
    args: tuple[Any, ...],
    deadline: float | None,
    fence: AttemptFence | None = None,
) -> tuple[str, Any]:
    """Run one callback once in a task under the run's deadline: ``("value", v)``,
    ``("failure", public_reason)`` (it raised, or its worker died) or ``("deadline",
    None)``. `fence` is the one whose signal the callback's context holds."""
    if remaining(deadline) <= 0:
        return ("deadline", None)
    entry = _call_async if callback.is_async else _call_sync
    kind, value = await _attempt(entry, (callback, args), deadline, fence or AttemptFence())
    if kind in ("deadline", "timeout"):
        return ("deadline", None)
    if kind == "value":
        if isinstance(value, _Raised):
            return ("failure", value.failure)
        return ("value", value)
    return ("failure", ("worker_down", value))


def _backoff_cap(retry: RetryPolicy) -> float:
    if retry.max_backoff is not None:
        return retry.max_backoff
    if retry.backoff_factor <= 1.0:
        return retry.backoff
    return max(retry.backoff, DEFAULT_BACKOFF_CAP)


def _not_retried(reason: Any) -> bool:
    tag = reason.get("reason") if isinstance(reason, Mapping) else reason
    return tag in NOT_RETRIED


def _attempt_deadline(timeout: float | None, deadline: float | None) -> float | None:
    if timeout is None:
        return deadline
    ends = time.monotonic() + timeout
    return ends if deadline is None else min(ends, deadline)


def copy_state(state: dict[str, Any]) -> dict[str, Any]:
    """A private copy of the (JSON-exact) state: an action can never change the
    state a checkpoint holds, nor a sibling's view of it."""
    copied: dict[str, Any] = msgspec.msgpack.decode(msgspec.msgpack.encode(state))
    return copied


async def _attempt(
    entry: Any, args: tuple[Any, ...], deadline: float | None, fence: AttemptFence
) -> tuple[str, Any]:
    """One attempt in a fresh task: ``("value", v)``, ``("timeout", None)`` (its own
    deadline), ``("deadline", None)`` (a past deadline: it never started) or
    ``("down", reason)``. Leaving (cancelled included) kills the task; leaving without
    its value also abandons `fence` (a sync callable is signalled, and fenced)."""
    if deadline is not None and deadline - time.monotonic() <= 0:
        return ("deadline", None)
    delivered = False
    if not inspect.iscoroutinefunction(entry):
        entry, args = fence.run, (entry, *args)
    try:
        task = Task.start(entry, *args, deadline=deadline)
    except TaskBusy as busy:
        fence.abandon()
        return ("down", busy.reason)
    try:
        value = await aio.wait_task(task)
        delivered = True
        return ("value", value)
    except TaskTimeout:
        return ("timeout", None)
    except TaskFailed as error:
        return ("down", external_reason(ACTION_COMPONENT, "worker", _exit_tag(error.reason)))
    finally:
        task.kill()  # a no-op once it ended
        if not delivered:
            fence.abandon()


def _exit_tag(reason: Any) -> Any:
    kind = getattr(reason, "kind", None)
    if isinstance(kind, str):
        return "crashed"
    if isinstance(reason, tuple) and reason and isinstance(reason[0], str):
        return reason[0]
    return reason if isinstance(reason, str) else "exited"


def _entry(
    action: Action,
    state: dict[str, Any],
    context: dict[str, Any],
    deadline: float | None,
    attempt_deadline: float | None,
    resume: tuple[Checkpoint, Any] | None,
) -> tuple[Any, tuple[Any, ...]]:
    """The task function and its arguments for one attempt of `action`. An agent call
    is bounded by the attempt's own deadline (plus `AGENT_CALL_SLACK`, so the attempt's
    timeout is what is reported), so its thread is free again soon after."""
    if isinstance(action, Callback):
        entry = _call_async if action.is_async else _call_sync
        return entry, (action, (state, context))
    if isinstance(action, AgentAction):
        ends = None if attempt_deadline is None else attempt_deadline + AGENT_CALL_SLACK
        return _agent_attempt, (action, state, context, ends)
    if isinstance(action, ToolAction):
        attempt = _tool_attempt_async if action.tool.is_async else _tool_attempt
        return attempt, (action, state, context)
    assert isinstance(action, NestedAction)
    return nested.run_child, (action, state, context, deadline, resume)


def _call_sync(callback: Callback, args: tuple[Any, ...]) -> Any:
    try:
        value = callback.fn(*args[: callback.arity])
    except Exception as error:
        return _Raised(exception_reason(ACTION_COMPONENT, "execute", error))
    if inspect.iscoroutine(value):  # a sync callable returned a coroutine: never awaited
        value.close()
        return ActionFailure(("invalid_control", "coroutine"), retryable=False)
    return value


async def _call_async(callback: Callback, args: tuple[Any, ...]) -> Any:
    try:
        return await callback.fn(*args[: callback.arity])
    except Exception as error:
        return _Raised(exception_reason(ACTION_COMPONENT, "execute", error))


# -- agents ---------------------------------------------------------------------------------------


def _agent_attempt(
    action: AgentAction, state: dict[str, Any], context: dict[str, Any], deadline: float | None
) -> Any:
    """Ask the agent registered as `action.name` (looked up now), fresh, in the
    workflow's lane; its answer is the output unless `decide` says otherwise."""
    name = action.name
    prompt = action.prompt
    if isinstance(prompt, Callback):
        prompt = _call_sync(prompt, (state, context))
        if isinstance(prompt, _Raised | ActionFailure):
            return prompt
    if not isinstance(prompt, str):
        return ActionFailure(public_failure(AGENT_COMPONENT, name, "invalid_agent_prompt"), False)
    timeout = _timeout(deadline)
    try:
        actual = agent_spec(name, timeout=min(timeout, 10.0)).name
    except AdkError as error:
        if error.reason == "noproc":
            return ActionFailure(("agent_not_found", name))
        return ActionFailure(("agent_error", external_reason(AGENT_COMPONENT, "identity", error)))
    if actual != name:
        return ActionFailure(public_failure(AGENT_COMPONENT, "identity", "agent_identity_mismatch"))
    scope = Scope(APP_NAME, context["user_id"], context["session_id"])
    try:
        answer = invoke(name, prompt, scope, timeout=timeout)
    except AdkError as error:
        if error.reason == "noproc":
            return ActionFailure(("agent_not_found", name))
        return ActionFailure(("agent_error", external_reason(AGENT_COMPONENT, "invoke", error)))
    response = answer.text_value() if isinstance(answer, Content) else answer
    if action.decide is None:
        return Output(response, {"last_agent": name, "last_response": response})
    return _call_sync(action.decide, (response, state, context))


def _timeout(deadline: float | None) -> float:
    left = remaining(deadline)
    return 86_400.0 if math.isinf(left) else max(0.0, left)


# -- tools ----------------------------------------------------------------------------------------


def _tool_args(action: ToolAction, state: dict[str, Any], context: dict[str, Any]) -> Any:
    args: Any = action.args
    if isinstance(args, Callback):
        args = _call_sync(args, (state, context))
        if isinstance(args, _Raised | ActionFailure):
            return args
    if not isinstance(args, Mapping):
        return ActionFailure("invalid_tool_args", False)
    try:
        return json_copy(args)
    except (AdkError, RecursionError):
        return ActionFailure("invalid_tool_args", False)


def _tool_context(state: dict[str, Any], context: dict[str, Any]) -> ToolContext:
    return ToolContext(
        app_name=APP_NAME,
        user_id=context["user_id"],
        session_id=context["session_id"],
        invocation_id=context.get("invocation_id") or context["session_id"],
        call_id=context["step_id"],
        state=MappingProxyType(state),
    )


def _tool_refusal(action: ToolAction, args: dict[str, Any], ctx: ToolContext) -> Any:
    """None if the tool may run now; else the fail-closed refusal (never retried)."""
    try:
        required, _hint = action.tool.confirmation(args, ctx)
    except Exception:
        return ActionFailure(
            public_failure(TOOL_COMPONENT, "confirmation", "tool_confirmation_evaluation_failed"),
            False,
        )
    if required:
        return ActionFailure(
            public_failure(TOOL_COMPONENT, "confirmation", "tool_confirmation_requires_runner"),
            False,
        )
    return None


def _tool_result(action: ToolAction, value: Any) -> Any:
    if isinstance(value, Suspension):  # a long-running tool: no runner to pause for it
        return ActionFailure(
            public_failure(TOOL_COMPONENT, "execute", "tool_confirmation_requires_runner"), False
        )
    if action.result_key is not None:
        return Output(value, {action.result_key: value})
    if isinstance(value, Mapping):
        return Output(value, value)
    return ActionFailure(("invalid_tool_result", "expected_object"), False)


class _ToolCall(NamedTuple):
    args: dict[str, Any]
    context: ToolContext


def _tool_call(action: ToolAction, state: dict[str, Any], context: dict[str, Any]) -> Any:
    """The checked arguments and context of a tool call that may run now, or why it
    may not (a failure or the fail-closed refusal, returned as is)."""
    args = _tool_args(action, state, context)
    if not isinstance(args, dict):
        return args
    ctx = _tool_context(state, context)
    refusal = _tool_refusal(action, args, ctx)
    return _ToolCall(args, ctx) if refusal is None else refusal


def _tool_attempt(action: ToolAction, state: dict[str, Any], context: dict[str, Any]) -> Any:
    call = _tool_call(action, state, context)
    if not isinstance(call, _ToolCall):
        return call
    try:
        value = action.tool.execute(*call)
    except Exception as error:
        return _Raised(exception_reason(TOOL_COMPONENT, "execute", error))
    return _tool_result(action, value)


async def _tool_attempt_async(
    action: ToolAction, state: dict[str, Any], context: dict[str, Any]
) -> Any:
    call = _tool_call(action, state, context)
    if not isinstance(call, _ToolCall):
        return call
    try:
        value = await action.tool.execute(*call)
    except Exception as error:
        return _Raised(exception_reason(TOOL_COMPONENT, "execute", error))
    return _tool_result(action, value)
