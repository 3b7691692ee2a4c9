"""One round of tool calls inside a turn: admission, callbacks, execution, order.

Each call goes through, in order: its arguments (`ToolCatalog.check_arguments`), the
Runner's runtime policy (`tool_gate`), and its approval rule; a call refused at any of
these runs no callback and never runs. A call needing approval pauses the turn under a
Runner (`Suspend`) and, anywhere else, answers the model with the structural error
``tool_confirmation_requires_runner``. A call that may run is wrapped by
``on_tool_start``, ``before_tool``, then (unless ``before_tool`` replaced its result)
its execution, ``after_tool``, the Runner's result policy (`result_gate`) and
``on_tool_end``. Every result is JSON as it stands by then (`checked_result`): a tool's
own result is checked by the catalog, a payload a callback, a policy or a resume put in
its place here; one that is not becomes ``invalid_tool_result``, never stored. A
Runner's global plugins run before each local hook (``before_tool``, then
``on_tool_error`` for a failed result and ``after_tool``; see `_begin` and
`_global_after_tool`).

Every execution runs in a task of its own under the agent's ``tool_timeout`` (`_timed`,
the one deadline rule of both modes): a call still running at its deadline is stopped
(a coroutine is cancelled, a sync tool's thread abandoned and fenced, counted for the
agent) and answers the model with a ``tool_timeout`` failure; the turn goes on. A sync
call on its own (the serial path) needs no coroutine task around its pool task: the
turn starts the pool task with the deadline itself (`_pooled`), one hand-off per call. A
turn's calls share one listing per toolset (`TurnListings`): a backend is asked once
per turn, not once per call.

Serial mode (the default) runs the calls one after another. In parallel mode the
``parallel_safe`` calls run side by side, at most ``max_concurrency`` at a time: the
start and before-callbacks run for each call in call order, the executions overlap,
then the after- and end-callbacks run for each call in call order, so the responses
and everything derived from them follow call order, never completion order. Any other
call, and a call needing approval, is a barrier.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from adk_actors.agents import plugin_checks
from adk_actors.agents.turn_context import TurnContext, off_loop, start_off_loop
from adk_actors.observability import default_metrics, failed, runtime_span, semconv, tracer
from adk_actors.plugins import PhaseKind
from adk_actors.tools import Tool, ToolContext
from adk_actors.tools.catalog import (
    checked_result,
    evaluation_failed,
    requires_runner,
    structural_error,
)
from adk_actors.tools.suspension import Suspension
from adk_actors.tools.toolset import TurnListings, listing_scope
from providers.content import FunctionCallPart, FunctionResponsePart
from providers.errors import AdkError
from supervision import Task, TaskFailed, TaskTimeout
from supervision.aio import wait_task, wait_tasks
from supervision.logs import get_logger

_log = get_logger("adk.agents")
_tracer = tracer()
_ERROR_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_GRACE = 1.0
"""Seconds past a call's deadline its task's own ending (at the deadline) may take to
arrive before the turn stops waiting and stops the task itself."""

Outcome = dict[str, Any]
"""A call's result payload before its after-callbacks (what the tool returned)."""


@dataclass
class Batch:
    """A model turn's calls still to answer: `calls[start:]`, after the responses
    `done` (of `calls[:start]`); the session already holds the first `stored` of
    them (the responses stored when the batch paused)."""

    calls: Sequence[FunctionCallPart]
    start: int = 0
    done: list[FunctionResponsePart] | None = None
    stored: int = 0


class Suspend(Exception):
    """A call asked to pause; `at` records where in its batch."""

    def __init__(self, call: FunctionCallPart, details: dict[str, Any], message: str) -> None:
        self.call = call
        self.details = details
        self.message = message
        self.index = 0
        self.done: list[FunctionResponsePart] = []
        self.calls: Sequence[FunctionCallPart] = (call,)

    def at(
        self, index: int, done: list[FunctionResponsePart], calls: Sequence[FunctionCallPart]
    ) -> Suspend:
        self.index = index
        self.done = list(done)
        self.calls = calls
        return self


class ToolRound(TurnContext):
    @cached_property
    def _listings(self) -> TurnListings:
        """This turn's toolset listings (see `adk_actors.tools.toolset`)."""
        return TurnListings()

    async def _tools(self, batch: Batch) -> list[FunctionResponsePart]:
        """Answer `batch`: its responses in call order, whatever the mode. A call that
        pauses raises `Suspend` carrying its index and the responses before it."""
        spec = self.spec
        responses = list(batch.done or ())
        together: list[tuple[FunctionCallPart, Outcome | None]] = []  # (call, refusal)
        for index in range(batch.start, len(batch.calls)):
            call = batch.calls[index]
            tool = spec.catalog.tool(call.name)
            if spec.tool_mode == "parallel" and tool is not None and tool.parallel_safe:
                try:
                    together.append((call, await self._admit(call)))
                    continue
                except Suspend as suspend:  # an approval is a barrier
                    responses.extend(await self._parallel(together))
                    raise suspend.at(index, responses, batch.calls) from None
            responses.extend(await self._parallel(together))  # a serial call is a barrier
            together = []
            try:
                responses.append(await self._one_tool(call))
            except Suspend as suspend:
                raise suspend.at(index, responses, batch.calls) from None
        responses.extend(await self._parallel(together))
        return responses

    async def _admit(
        self, call: FunctionCallPart, approved: bool = False, ctx: ToolContext | None = None
    ) -> Outcome | None:
        """None if the call may run; else the payload the model sees instead (no
        callback runs, the tool never runs). Raises `Suspend` for an approval a
        Runner can wait for. `ctx`: the call's context, if the caller has made it."""
        spec = self.spec
        refusal = spec.catalog.check_arguments(call.name, call.args)
        if refusal is not None:
            return refusal
        if self.options.tool_gate is not None:  # after approval too: policy may have changed
            denial = self.options.tool_gate(call)
            if denial is not None:
                return denial
        tool = spec.catalog.tool(call.name)
        if approved or tool is None:
            return None
        try:
            required, hint = await _confirmation(tool, call, ctx or self._context(call))
        except Exception as error:
            return evaluation_failed(call.name, error)
        if not required:
            return None
        if not self.options.pausable:  # no channel to wait for a human: fail closed
            return requires_runner(hint)
        details = {"type": "tool_confirmation", "action_id": self._action_id(call)}
        if hint is not None:
            details["hint"] = hint
        raise Suspend(call, details, hint or f"Approve the call to {call.name}.")

    async def _one_tool(
        self, call: FunctionCallPart, approved: bool = False
    ) -> FunctionResponsePart:
        ctx = self._context(call)  # one per call: approval, callbacks and the tool
        refusal = await self._admit(call, approved, ctx)
        if refusal is not None:
            return FunctionResponsePart(call.name, refusal, call.id)
        call, outcome = await self._begin(call, ctx)
        ran = outcome is None
        if outcome is None:
            (result,) = await self._timed([(call, ctx)])
            if isinstance(result, Suspension):
                raise self._suspension(call, result)
            outcome = result
        return await self._finish(call, outcome, checked=ran, ctx=ctx)

    async def _parallel(
        self, entries: list[tuple[FunctionCallPart, Outcome | None]]
    ) -> list[FunctionResponsePart]:
        """Run the admitted calls of `entries` side by side (see the module doc); a
        refused one keeps its place with its refusal."""
        if not entries:  # serial mode: no parallel group before or after a call
            return []
        finished: dict[int, FunctionResponsePart] = {}
        admitted = [index for index, (_call, refusal) in enumerate(entries) if refusal is None]
        width = self.spec.tool_max_concurrency
        for first in range(0, len(admitted), width):
            chunk = admitted[first : first + width]
            contexts = {position: self._context(entries[position][0]) for position in chunk}
            outcomes: dict[int, Outcome | None] = {}
            calls: dict[int, FunctionCallPart] = {}  # as global plugins may amend them
            for position in chunk:  # start and before, in call order
                calls[position], outcomes[position] = await self._begin(
                    entries[position][0], contexts[position]
                )
            running = [position for position in chunk if outcomes[position] is None]
            ran = set(running)
            results = await self._timed(
                [(calls[position], contexts[position]) for position in running]
            )
            for position, result in zip(running, results, strict=True):
                if isinstance(result, Suspension):  # a pause needs the serial path
                    result = structural_error(
                        "suspension_requires_serial_tool", operation=calls[position].name
                    )
                outcomes[position] = result
            for position in chunk:  # after and end, in call order
                outcome = outcomes[position]
                assert outcome is not None
                finished[position] = await self._finish(
                    calls[position], outcome, checked=position in ran, ctx=contexts[position]
                )
        return [
            finished[position]
            if refusal is None
            else FunctionResponsePart(call.name, refusal, call.id)
            for position, (call, refusal) in enumerate(entries)
        ]

    async def _timed(
        self, runs: list[tuple[FunctionCallPart, ToolContext]]
    ) -> list[Outcome | Suspension]:
        """Execute admitted calls side by side (one, on the serial path), each in a task
        of its own, all under one deadline `tool_timeout` from now: the agent's one
        deadline rule, whatever the mode. A call that ends in time gives its result; one
        still running at the deadline is stopped (see the module doc) and answers
        ``tool_timeout``, one whose task fails answers ``tool_failed``."""
        deadline = time.monotonic() + self.spec.tool_timeout
        if len(runs) == 1 and not self.spec.catalog.is_async(runs[0][0].name):
            # one sync call: its pool task is the call's own task, with the deadline
            # (no coroutine task around it: one hand-off per call, not two)
            call, ctx = runs[0]
            return [await self._run(call, ctx, deadline)]
        tasks = [Task.start(self._run, call, ctx, deadline=deadline) for call, ctx in runs]
        # each task has the deadline itself; the grace lets its own ending arrive first
        results = await wait_tasks(tasks, deadline, grace=_GRACE)
        return [
            _task_outcome(call, result) for (call, _), result in zip(runs, results, strict=True)
        ]

    async def _begin(
        self, call: FunctionCallPart, ctx: ToolContext
    ) -> tuple[FunctionCallPart, Outcome | None]:
        """``on_tool_start``, the global ``before_tool`` plugins (an amendment's
        arguments are checked again; a return skips the rest and the tool), then
        ``before_tool``: the call to run, and its replacement result or None to run."""
        await self._callback("on_tool_start", ctx, call)
        phase = None
        if self._wants("before_tool"):  # the hook's value (a deep copy) only for a plugin
            check = plugin_checks.tool_call(call, self.spec.catalog, self.options.tool_gate)
            phase = await self._global(
                "before_tool", plugin_checks.call_value(call), check, tool=call.name
            )
        if phase is not None and phase.returned:
            return call, _as_payload(phase.value)
        if phase is not None and phase.kind is PhaseKind.AMEND:
            call = FunctionCallPart(call.name, phase.value["args"], call.id, call.thought_signature)
        replaced = await self._callback("before_tool", ctx, call)
        return call, None if replaced is None else _as_payload(replaced)

    async def _run(
        self, call: FunctionCallPart, ctx: ToolContext, deadline: float | None = None
    ) -> Outcome | Suspension:
        """Execute an admitted call, inside its `_timed` task. An async tool runs here,
        on the reactor; a sync one in a task on the pool (fenced if its turn is killed or
        its deadline passes). A toolset's tools are checked against the turn's listing.
        With a `deadline`, a sync call runs from the turn itself (`_timed`): its pool
        task has the deadline, and its end (in time or not) is the call's outcome."""
        spec = self.spec
        catalog = spec.catalog
        started = time.monotonic()
        outcome = "error"
        try:
            with (
                listing_scope(self._listings),
                runtime_span(
                    _tracer,
                    semconv.span_name(semconv.EXECUTE_TOOL, call.name),
                    attributes=lambda: semconv.tool_call(spec.name, call.name, call.id),
                ) as span,
            ):
                # approval was settled by `_admit`: the catalog need not ask again
                if catalog.is_async(call.name):
                    response = await catalog.aexecute(call, ctx, approved=True)
                else:
                    try:
                        if deadline is None:
                            response = await off_loop(catalog.execute, call, ctx, approved=True)
                        else:
                            ended = await _pooled(catalog.execute, call, ctx, deadline)
                            if isinstance(ended, BaseException):  # no result: how it ended
                                payload = _task_outcome(call, ended)
                                failed(span, _ended_type(ended, payload))
                                return payload
                            response = ended
                    except AdkError as refused:  # no thread for it: the model hears why
                        if refused.reason not in ("capacity_exhausted", "busy"):
                            raise
                        failed(span, refused)
                        return structural_error(str(refused.reason), operation=call.name)
                if isinstance(response, FunctionResponsePart):
                    success = response.response.get("success", True) is not False
                    span.set_attribute(semconv.ADK_TOOL_SUCCESS, success)
                    if not success:
                        failed(span, _error_type(response.response))
                    outcome = "ok" if success else "error"
                else:
                    outcome = "suspended"
        finally:  # a refused, failed or cancelled call is counted too
            default_metrics().tool_call(spec.name, call.name, outcome, time.monotonic() - started)
        _log.debug(
            "adk.tool.called",
            agent=spec.name,
            tool=call.name,
            seconds=round(time.monotonic() - started, 4),
        )
        if isinstance(response, Suspension):
            return response
        return dict(response.response)

    async def _finish(
        self,
        call: FunctionCallPart,
        outcome: Outcome,
        *,
        checked: bool = False,
        ctx: ToolContext | None = None,
    ) -> FunctionResponsePart:
        """``after_tool``, the result policy, then ``on_tool_end``: the final response.
        `checked`: `outcome` is what the catalog returned (already JSON as it stands);
        anything else, and whatever replaces it here, is checked (`checked_result`).
        `ctx`: the call's context, if the caller has made it."""
        if ctx is None:
            ctx = self._context(call)
        final, returned = await self._global_after_tool(call, outcome)
        if not returned:  # a global plugin's early return skips the local callback
            after = await self._callback("after_tool", ctx, final)
            final = _as_payload(after) if after is not None else final
        if not checked or final is not outcome:
            final = checked_result(call.name, final)
        if self.options.result_gate is not None:
            gated = self.options.result_gate(call, final)
            final = gated if gated is final else checked_result(call.name, gated)
        response = FunctionResponsePart(call.name, final, call.id)
        await self._callback("on_tool_end", ctx, response)
        return response

    async def _global_after_tool(
        self, call: FunctionCallPart, outcome: Outcome
    ) -> tuple[Outcome, bool]:
        """The ``on_tool_error`` plugins for a failed result (their amend or return is
        the result instead; ``retry_attempt`` counts this tool's failures in the turn),
        then the global ``after_tool`` plugins: the result, and whether one returned
        early."""
        if outcome.get("success") is False:
            attempt = self.tool_failures.get(call.name, 0)
            self.tool_failures[call.name] = attempt + 1
            phase = await self._global(
                "on_tool_error", outcome, None, tool=call.name, retry_attempt=attempt
            )
            if phase is not None and phase.kind is not PhaseKind.CONTINUE:
                outcome = _as_payload(phase.value)
        phase = await self._global("after_tool", outcome, None, tool=call.name)
        if phase is None:
            return outcome, False
        return _as_payload(phase.value), phase.returned

    def _suspension(self, call: FunctionCallPart, suspension: Suspension) -> Exception:
        """A tool asked to pause (long-running, human in the loop): a `Suspend` under a
        Runner; elsewhere the turn fails, as nothing could resume it."""
        if not self.options.pausable:
            return AdkError(
                "tool_confirmation_requires_runner",
                f"{call.name!r} pauses for a human or an operation; only a Runner can",
            )
        details = {"type": suspension.kind}
        if suspension.operation_id is not None:
            details["operation_id"] = suspension.operation_id
        return Suspend(call, details, suspension.message)

    def _action_id(self, call: FunctionCallPart) -> str:
        """An opaque digest naming the action: stable for the call, holds no argument."""
        material = json.dumps(
            [self.invocation_id, call.id, call.name, call.args], sort_keys=True, default=str
        )
        return "act-" + hashlib.sha256(material.encode()).hexdigest()[:32]


async def _confirmation(tool: Tool, call: FunctionCallPart, ctx: ToolContext) -> Any:
    """A tool's approval check: user code (a `require_confirmation` method, or an
    overridden `confirmation`) runs in a pool task; a plain True/False is read here."""
    rule = getattr(tool, "require_confirmation", None)
    if type(tool).confirmation is not Tool.confirmation or callable(rule):
        return await off_loop(tool.confirmation, dict(call.args), ctx)
    if rule is None or rule is False:  # what `Tool.confirmation` says, without a copy
        return False, None
    return tool.confirmation(dict(call.args), ctx)


def _task_outcome(call: FunctionCallPart, result: Any) -> Outcome | Suspension:
    """A call's outcome from how its task ended: its result (`_run`'s own copy of the
    payload, or a `Suspension`), or ``tool_timeout`` / ``tool_failed``."""
    if isinstance(result, BaseException):
        reason = "tool_timeout" if isinstance(result, TaskTimeout) else "tool_failed"
        error = {"component": "tool", "operation": call.name, "reason": reason}
        return {"success": False, "error": error}
    return result  # type: ignore[no-any-return]


def _ended_type(ended: BaseException, payload: Outcome | Suspension) -> Any:
    """`error.type` for a sync call that gave no result: ``tool_timeout`` or
    ``tool_failed`` when its task ended so, else the class of what it raised."""
    if isinstance(ended, TaskTimeout | TaskFailed) and isinstance(payload, dict):
        return payload["error"]["reason"]
    return ended


async def _pooled(
    execute: Callable[..., FunctionResponsePart | Suspension],
    call: FunctionCallPart,
    ctx: ToolContext,
    deadline: float,
) -> FunctionResponsePart | Suspension | BaseException:
    """`execute(call, ctx, approved=True)` in a pool task of its own with `deadline`
    (counted against the turn's tools share, as `off_loop` is): its result, or how the
    task ended instead, as a value: `TaskTimeout` at the deadline (the thread is
    abandoned and fenced), `TaskFailed` if it was stopped, or what `execute` raised.
    A task still running `_GRACE` past the deadline is stopped here."""
    share = Task.current_share()
    task = start_off_loop(share, execute, (call, ctx), {"approved": True}, deadline)
    try:
        _kind, value = await wait_task(task, max(0.0, deadline + _GRACE - time.monotonic()))
    except (TaskTimeout, TaskFailed) as ended:
        task.kill()
        return ended
    ended_with: FunctionResponsePart | Suspension | BaseException = value  # or what it raised
    return ended_with


def _as_payload(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"result": value}


def _error_type(payload: Any) -> str:
    """`error.type` for a failed tool result: the exception's class (or its stable
    reason) when the catalog caught one, the ``kind`` of a structural refusal, else
    ``tool_error``. Nothing but a bounded identifier is taken from the payload (a tool's
    own failure payload is content)."""
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        return "tool_error"
    if error.get("component") == "tool":  # the catalog's `_failure`
        reason, name = error.get("reason"), error.get("class")
        found = name if reason == "tool_failed" else reason
    else:
        found = error.get("kind")
    if isinstance(found, str) and _ERROR_TYPE.fullmatch(found):
        return found
    return "tool_error"
