"""One agent turn: model call, tool rounds, final answer. Runs inside a `Task`.

The turn never raises: it returns one typed outcome (`TurnCompleted`, `TurnFailed`
or, under a Runner, `TurnPaused`; see `turn_outcome`), so a provider's `AdkError`
reason reaches the caller as is (a crash would only carry its class name). Around the model and each tool call it
runs the agent's local callbacks, writes structlog events and opentelemetry spans
(metadata and durations only, never content), and checks the agent's input and
output contracts.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import fastjsonschema
from opentelemetry import trace

from adk_actors.agents.callbacks import run_callback
from adk_actors.agents.instructions import render_instructions
from adk_actors.agents.scope import Scope, TurnOptions
from adk_actors.agents.spec import AgentSpec
from adk_actors.agents.turn_outcome import (
    Answer,
    Continuation,
    TurnCompleted,
    TurnFailed,
    TurnOutcome,
    TurnPaused,
    decode_response,
    encode_response,
)
from adk_actors.tools import ToolContext
from adk_actors.tools.suspension import Suspension
from providers import content as content_model
from providers import protocol
from providers.content import Content, FunctionCallPart, FunctionResponsePart
from providers.errors import AdkError
from providers.protocol import ToolCalls
from supervision import Task, TaskBusy, TaskFailed, TaskTimeout, is_fenced_thread
from supervision.aio import wait_task, wait_tasks
from supervision.logs import get_logger

_log = get_logger("adk.agents")
_tracer = trace.get_tracer("adk_actors")


async def run_turn(
    spec: AgentSpec,
    history: Sequence[Content],
    message: Content,
    scope: Scope,
    invocation_id: str,
    options: TurnOptions | None = None,
) -> TurnOutcome:
    """A coroutine: `Task.start(run_turn, ...)` runs it on the kernel's reactor, so a
    turn waiting for its model or an async tool holds no thread."""
    with _tracer.start_as_current_span("adk.agent.turn", attributes={"adk.agent": spec.name}):
        return await _guarded(
            spec,
            lambda: _Turn(spec, scope, invocation_id, options or TurnOptions()).run(
                history, message
            ),
        )


async def resume_turn(
    spec: AgentSpec,
    history: Sequence[Content],
    contents: Sequence[Content],
    continuation: Continuation,
    answer: Answer,
    scope: Scope,
    invocation_id: str,
    options: TurnOptions | None = None,
) -> TurnOutcome:
    """Go on from a pause: `contents` is the invocation so far (ending with the model's
    calls); `answer` says how the human or the operation answered."""
    with _tracer.start_as_current_span("adk.agent.turn", attributes={"adk.agent": spec.name}):
        return await _guarded(
            spec,
            lambda: _Turn(spec, scope, invocation_id, options or TurnOptions()).resume(
                history, contents, continuation, answer
            ),
        )


async def _guarded(
    spec: AgentSpec, body: Callable[[], Coroutine[Any, Any, TurnOutcome]]
) -> TurnOutcome:
    try:
        return await body()
    except AdkError as error:
        if not is_fenced_thread():
            _log.info("adk.agent.turn_failed", agent=spec.name, reason=str(error.reason)[:200])
        return TurnFailed(error.reason)


class _Turn:
    def __init__(
        self, spec: AgentSpec, scope: Scope, invocation_id: str, options: TurnOptions
    ) -> None:
        self.spec = spec
        self.scope = scope
        self.invocation_id = invocation_id
        self.ancestry = options.ancestry
        self.global_instruction = options.global_instruction or spec.global_instruction
        self.state = MappingProxyType(dict(options.state))
        self.provider_config: Mapping[str, Any] = spec.provider_config
        self.options = options
        self.llm_calls = 0

    async def _render(self) -> None:
        """The turn's instructions: a dynamic instruction provider is user code, run in a
        pool task; templates and static text are rendered here."""
        render = (render_instructions, self.spec, self._callback_context(), self.state)
        if callable(self.spec.instructions):
            self.provider_config = await _off_loop(*render)
        else:
            self.provider_config = render[0](*render[1:])

    async def run(self, history: Sequence[Content], message: Content) -> TurnOutcome:
        await self._render()
        if self.spec.input_validator is not None:
            _check_json(self.spec.input_validator, message.text_value(), "invalid_input")
        return await self._loop([*history, message], len(history), 0, None)

    async def resume(
        self,
        history: Sequence[Content],
        contents: Sequence[Content],
        continuation: Continuation,
        answer: Answer,
    ) -> TurnOutcome:
        await self._render()
        self.llm_calls = continuation.llm_calls
        rounds = continuation.rounds
        calls = contents[-1].function_calls() if contents else []
        index = continuation.call_index
        if index >= len(calls) or calls[index].id != continuation.call_id:
            raise AdkError("invalid_continuation", "the paused call is not in the session")
        done = [decode_response(item) for item in continuation.responses]
        call = calls[index]
        how, payload = answer.how, answer.payload
        try:
            if how == "approved":  # re-resolve the tool, recheck it, run it once
                done.append(await self._one_tool(call, approved=True))
            elif how == "rejected" or payload is None:  # nothing runs, no callback
                done.append(FunctionResponsePart(call.name, payload or {}, call.id))
            else:  # a completion: the tool's after-callbacks see it now
                done.append(await self._after_tool(call, payload))
        except _Suspend as suspend:
            return self._paused(suspend.at(index, done), rounds)
        pending = (calls, index + 1, done)
        return await self._loop([*history, *contents], len(history), rounds, pending)

    async def _loop(
        self,
        contents: list[Content],
        history_length: int,
        rounds: int,
        pending: tuple[Sequence[FunctionCallPart], int, list[FunctionResponsePart]] | None,
    ) -> TurnOutcome:
        """Model calls and tool rounds until an answer, an error or a pause; `pending` is
        a tool batch to finish first (after a resume)."""
        spec = self.spec
        started = time.monotonic()
        preamble = (
            [content_model.from_text(self.global_instruction, role="system")]
            if self.global_instruction
            else []
        )
        max_rounds = self.options.max_tool_rounds or spec.max_tool_rounds
        while True:
            if pending is None:
                if (
                    self.options.max_llm_calls is not None
                    and self.llm_calls >= self.options.max_llm_calls
                ):
                    return TurnFailed("max_llm_calls_exceeded")
                output = await self._model(preamble + contents)
                if not isinstance(output, ToolCalls):
                    if spec.output_validator is not None:
                        text = output.text_value() if isinstance(output, Content) else output
                        _check_json(spec.output_validator, text, "invalid_output")
                    contents.append(
                        output
                        if isinstance(output, Content)
                        else content_model.from_text(output, role="model")
                    )
                    if not is_fenced_thread():  # a killed turn's result goes nowhere
                        _log.info(
                            "adk.agent.turn_completed",
                            agent=spec.name,
                            tool_rounds=rounds,
                            seconds=round(time.monotonic() - started, 4),
                        )
                    return TurnCompleted(output, contents[history_length:])
                rounds += 1
                if rounds > max_rounds:
                    return TurnFailed("max_tool_rounds_exceeded")
                contents.append(output.content)
                pending = (output.calls, 0, [])
            calls, start, done = pending
            pending = None
            try:
                responses = await self._tools(calls, start, done)
            except _Suspend as suspend:
                return self._paused(suspend, rounds)
            batch = Content("tool", tuple(responses))
            self._observe("tool", batch, None)
            contents.append(batch)

    def _paused(self, suspend: _Suspend, rounds: int) -> TurnOutcome:
        continuation = Continuation(
            type=suspend.details["type"],
            agent=self.spec.name,
            call_index=suspend.index,
            call_id=suspend.call.id,
            tool_name=suspend.call.name,
            responses=[encode_response(part) for part in suspend.done],
            llm_calls=self.llm_calls,
            rounds=rounds,
            action_id=suspend.details.get("action_id"),
            hint=suspend.details.get("hint"),
            operation_id=suspend.details.get("operation_id"),
        )
        return TurnPaused(continuation, suspend.call, suspend.message)

    # -- the model ---------------------------------------------------------------------

    async def _model(self, contents: list[Content]) -> Any:
        spec = self.spec
        replaced = await self._callback("before_model", self._callback_context(), contents)
        if replaced is not None:
            return replaced
        contents = [content_model.canonical(item) for item in contents]  # the model boundary
        if self.options.before_request is not None:
            self.options.before_request(self.provider_config, contents, spec.catalog.declarations())
        started = time.monotonic()
        self.llm_calls += 1
        with _tracer.start_as_current_span(
            "adk.model.call", attributes={"adk.agent": spec.name}
        ) as span:
            if self.options.streaming == "content":
                result = await protocol.astream_content(
                    self.provider_config,
                    contents,
                    spec.catalog.declarations(),
                    lambda frame: self._observe("delta", frame, None),
                )
            elif self.options.streaming == "text":
                result = await protocol.astream(
                    self.provider_config,
                    contents,
                    spec.catalog.declarations(),
                    lambda delta: self._observe("delta", delta, None),
                )
            else:
                result = await protocol.agenerate(
                    self.provider_config, contents, spec.catalog.declarations()
                )
            span.set_attribute("adk.duration_ms", round((time.monotonic() - started) * 1000, 3))
        output, metadata = protocol.unwrap(result)
        _log.debug(
            "adk.model.called",
            agent=spec.name,
            seconds=round(time.monotonic() - started, 4),
            tool_calls=isinstance(output, ToolCalls),
        )
        after = await self._callback("after_model", self._callback_context(), output)
        output = after if after is not None else output
        produced = output.content if isinstance(output, ToolCalls) else output
        if isinstance(produced, str):
            produced = content_model.from_text(produced, role="model")
        self._observe("model", produced, metadata)
        return output

    def _observe(self, kind: str, value: Any, metadata: Any) -> None:
        observer = self.options.observer
        if observer is not None and not is_fenced_thread():
            observer(kind, value, metadata)

    # -- tools -------------------------------------------------------------------------

    def _context(self, call: FunctionCallPart) -> ToolContext:
        return ToolContext(
            app_name=self.scope.app_name,
            user_id=self.scope.user_id,
            session_id=self.scope.session_id,
            invocation_id=self.invocation_id,
            call_id=call.id,
            agent_name=self.spec.name,
            state=self.state,
            ancestry=(*self.ancestry, self.spec.name),
            global_instruction=self.global_instruction,
        )

    async def _tools(
        self, calls: Sequence[FunctionCallPart], start: int, done: list[FunctionResponsePart]
    ) -> list[FunctionResponsePart]:
        """Run calls[start:] after `done`; responses come back in call order whatever the
        mode. A call that pauses raises `_Suspend` carrying where it stopped."""
        spec = self.spec
        responses = list(done)
        batch: list[FunctionCallPart] = []
        for index in range(start, len(calls)):
            call = calls[index]
            tool = spec.catalog.tool(call.name)
            if (
                spec.tool_mode == "parallel"
                and tool is not None
                and tool.parallel_safe
                and not await self._needs_approval(call)
            ):
                batch.append(call)
                continue
            responses.extend(await self._parallel(batch))  # a serial call is a barrier
            batch = []
            try:
                responses.append(await self._one_tool(call))
            except _Suspend as suspend:
                raise suspend.at(index, responses) from None
        responses.extend(await self._parallel(batch))
        return responses

    async def _needs_approval(self, call: FunctionCallPart) -> bool:
        """Would this call pause for approval? (An approval is a serial barrier.)"""
        tool = self.spec.catalog.tool(call.name)
        if not self.options.pausable or tool is None:
            return False
        try:
            required, _hint = await _confirmation(tool, call, self._context(call))
            return bool(required)
        except Exception:
            return True  # let the serial path report the failing check

    async def _parallel(self, calls: list[FunctionCallPart]) -> list[FunctionResponsePart]:
        responses: list[FunctionResponsePart] = []
        width = self.spec.tool_max_concurrency
        for start in range(0, len(calls), width):
            chunk = calls[start : start + width]
            deadline = time.monotonic() + self.spec.tool_timeout
            tasks = [Task.start(self._parallel_tool, call, deadline=deadline) for call in chunk]
            # each task has the deadline itself; the grace lets its own ending arrive first
            outcomes = await wait_tasks(tasks, deadline, grace=1.0)
            for call, outcome in zip(chunk, outcomes, strict=True):
                if isinstance(outcome, TaskTimeout | TaskFailed):
                    reason = "tool_timeout" if isinstance(outcome, TaskTimeout) else "tool_failed"
                    error = {"component": "tool", "operation": call.name, "reason": reason}
                    outcome = FunctionResponsePart(
                        call.name, {"success": False, "error": error}, call.id
                    )
                responses.append(outcome)
        return responses

    async def _parallel_tool(self, call: FunctionCallPart) -> FunctionResponsePart:
        try:
            return await self._one_tool(call)
        except _Suspend:  # a pause needs the serial path: declare the tool not parallel_safe
            error = {"type": "suspension_requires_serial_tool", "operation": call.name}
            return FunctionResponsePart(call.name, {"success": False, "error": error}, call.id)

    async def _one_tool(
        self, call: FunctionCallPart, approved: bool = False
    ) -> FunctionResponsePart:
        """Validate, gate, run and wrap one call. Order: arguments, approval, callbacks,
        execution; a refused or rejected call runs no callback."""
        spec = self.spec
        ctx = self._context(call)
        refusal = spec.catalog.check_arguments(call.name, call.args)
        if refusal is not None:  # invalid arguments: no callbacks, the tool never runs
            return FunctionResponsePart(call.name, refusal, call.id)
        if self.options.tool_gate is not None:  # after approval too: policy may have changed
            denial = self.options.tool_gate(call)
            if denial is not None:
                return FunctionResponsePart(call.name, denial, call.id)
        tool = spec.catalog.tool(call.name)
        if self.options.pausable and not approved and tool is not None:
            try:
                required, hint = await _confirmation(tool, call, ctx)
            except Exception as error:
                _log.warning(
                    "adk.tool.confirmation_failed", tool=call.name, error=type(error).__name__
                )
                failure = {"type": "tool_confirmation_evaluation_failed", "operation": call.name}
                return FunctionResponsePart(
                    call.name, {"success": False, "error": failure}, call.id
                )
            if required:
                details = {"type": "tool_confirmation", "action_id": self._action_id(call)}
                if hint is not None:
                    details["hint"] = hint
                raise _Suspend(call, details, hint or f"Approve the call to {call.name}.")
        replaced = await self._callback("before_tool", ctx, call)
        if replaced is not None:
            return FunctionResponsePart(call.name, _as_payload(replaced), call.id)
        started = time.monotonic()
        with _tracer.start_as_current_span(
            "adk.tool.call", attributes={"adk.agent": spec.name, "adk.tool": call.name}
        ) as span:
            # validated above; under a Runner the approval was settled above too
            response = await self._execute(call, ctx)
            span.set_attribute("adk.duration_ms", round((time.monotonic() - started) * 1000, 3))
            if isinstance(response, FunctionResponsePart):
                span.set_attribute(
                    "adk.tool.success", response.response.get("success", True) is not False
                )
        _log.debug(
            "adk.tool.called",
            agent=spec.name,
            tool=call.name,
            seconds=round(time.monotonic() - started, 4),
        )
        if isinstance(response, Suspension):
            if not self.options.pausable:
                raise AdkError(
                    "tool_confirmation_requires_runner",
                    f"{call.name!r} pauses for a human or an operation; only a Runner can",
                )
            details = {"type": response.kind}
            if response.operation_id is not None:
                details["operation_id"] = response.operation_id
            raise _Suspend(call, details, response.message)
        return await self._after_tool(call, response.response)

    async def _execute(
        self, call: FunctionCallPart, ctx: ToolContext
    ) -> FunctionResponsePart | Suspension:
        """An async tool runs here, on the reactor; a sync one in a task on the pool
        (fenced if its turn is killed), awaited without holding this coroutine's thread."""
        catalog = self.spec.catalog
        approved = self.options.pausable
        if catalog.is_async(call.name):
            return await catalog.aexecute(call, ctx, approved=approved)
        return await _off_loop(catalog.execute, call, ctx, approved=approved)  # type: ignore[no-any-return]

    async def _callback(self, hook: str, ctx: Any, value: Any) -> Any:
        """A user callback, if the agent has one for `hook`, on a pool thread."""
        if self.spec.callbacks.get(hook) is None:
            return None
        return await _off_loop(run_callback, self.spec, hook, ctx, value)

    async def _after_tool(
        self, call: FunctionCallPart, payload: dict[str, Any]
    ) -> FunctionResponsePart:
        after = await self._callback("after_tool", self._context(call), payload)
        final = _as_payload(after) if after is not None else payload
        if self.options.result_gate is not None:
            final = self.options.result_gate(call, final)
        return FunctionResponsePart(call.name, final, call.id)

    def _action_id(self, call: FunctionCallPart) -> str:
        """An opaque digest naming the action: stable for the call, holds no argument."""
        material = json.dumps(
            [self.invocation_id, call.id, call.name, call.args], sort_keys=True, default=str
        )
        return "act-" + hashlib.sha256(material.encode()).hexdigest()[:32]

    def _callback_context(self) -> dict[str, Any]:
        return {
            "agent_name": self.spec.name,
            "invocation_id": self.invocation_id,
            "app_name": self.scope.app_name,
            "user_id": self.scope.user_id,
            "session_id": self.scope.session_id,
        }


async def _confirmation(tool: Any, call: FunctionCallPart, ctx: ToolContext) -> Any:
    """A tool's approval check: a `require_confirmation` method is user code (a pool
    task); a plain True/False attribute is read here."""
    if callable(getattr(tool, "require_confirmation", None)):
        return await _off_loop(tool.confirmation, dict(call.args), ctx)
    return tool.confirmation(dict(call.args), ctx)


async def _off_loop(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run sync user code (a tool, a callback) in a pool task owned by this turn, and
    await it without holding a thread; an exception it raises is raised here as is.
    The task dies with the turn (a killed turn's tool is fenced). A full pool is
    ``busy``."""
    try:
        task = Task.start(_caught, fn, args, kwargs)
    except TaskBusy:
        raise AdkError("busy", "the pool for tools and callbacks is full") from None
    kind, value = await wait_task(task)
    if kind == "error":
        raise value
    return value


def _caught(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        return "ok", fn(*args, **kwargs)
    except Exception as error:  # crosses as a value: the coroutine re-raises it
        return "error", error


class _Suspend(Exception):
    """A call asked to pause; `at` records where in its batch."""

    def __init__(self, call: FunctionCallPart, details: dict[str, Any], message: str) -> None:
        self.call = call
        self.details = details
        self.message = message
        self.index = 0
        self.done: list[FunctionResponsePart] = []

    def at(self, index: int, done: list[FunctionResponsePart]) -> _Suspend:
        self.index = index
        self.done = list(done)
        return self


def _as_payload(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"result": value}


def _check_json(validator: Any, text: str, reason: str) -> None:
    try:
        value = json.loads(text)
    except ValueError:
        raise AdkError(
            (reason, {"kind": "not_json", "path": [], "constraint": "json"}), "not a JSON document"
        ) from None
    try:
        validator(value)
    except fastjsonschema.JsonSchemaValueException as error:
        path = [str(step) for step in (error.path or [])][1:]
        raise AdkError(
            (reason, {"kind": str(error.rule), "path": path, "constraint": str(error.rule)}),
            "contract violated",
        ) from None
