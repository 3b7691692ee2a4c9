"""One agent turn: model call, tool rounds, final answer. Runs inside a `Task`.

The turn never raises: it returns one typed outcome (`TurnCompleted`, `TurnFailed`
or, under a Runner, `TurnPaused`; see `turn_outcome`), so a provider's `AdkError`
reason reaches the caller as is (a crash would only carry its class name). Around the
whole turn it runs ``before_agent``/``after_agent``, around each model call
``before_model``/``after_model`` (tool calls: `tool_round`), each after the Runner's
global plugins for the same phase (`TurnContext._global`), writes structlog events
and opentelemetry spans (metadata and durations only, never content), and checks the
agent's input and output contracts.

The final answer is settled last: ``after_agent`` may replace it, a JSON value is
formatted as canonical JSON text (`as_answer`), the output contract checks it, and
only then is it reported as the turn's final "model" step (what a Runner stores).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import cached_property
from typing import Any

import fastjsonschema
import msgspec

from adk_actors.agents import plugin_checks
from adk_actors.agents.instructions import render_instructions, static_instructions
from adk_actors.agents.scope import Scope, TurnOptions
from adk_actors.agents.spec import AgentSpec
from adk_actors.agents.tool_round import Batch, Suspend, ToolRound
from adk_actors.agents.turn_context import off_loop_in
from adk_actors.agents.turn_outcome import (
    Answer,
    Continuation,
    TurnCompleted,
    TurnFailed,
    TurnOutcome,
    TurnPaused,
    as_answer,
    decode_call,
    decode_response,
    encode_call,
    encode_response,
)
from adk_actors.observability import default_metrics, runtime_span, semconv, tracer
from adk_actors.plugins import PhaseKind
from adk_actors.tools.catalog import checked_result
from providers import content as content_model
from providers import protocol
from providers.content import Content, FunctionResponsePart
from providers.errors import AdkError
from providers.outputs import TokenUsage, metering
from providers.protocol import ToolCalls
from supervision import is_fenced_thread
from supervision.logs import get_logger

_log = get_logger("adk.agents")
_tracer = tracer()
_json_decoder = msgspec.json.Decoder()
_NO_SPAN: AbstractContextManager[object] = nullcontext()


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
    options = options or TurnOptions()
    with _invocation_span(spec, scope, invocation_id, options):
        turn = _Turn(spec, scope, invocation_id, options)
        return await turn.notify_plugins(await _guarded(spec, lambda: turn.run(history, message)))


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
    """Go on from a pause: `contents` is the invocation so far (up to the model's
    calls and the responses stored at the pause); `answer` says how the human or the
    operation answered."""
    options = options or TurnOptions()
    with _invocation_span(spec, scope, invocation_id, options):
        turn = _Turn(spec, scope, invocation_id, options)
        return await turn.notify_plugins(
            await _guarded(spec, lambda: turn.resume(history, contents, continuation, answer))
        )


def _invocation_span(
    spec: AgentSpec, scope: Scope, invocation_id: str, options: TurnOptions
) -> AbstractContextManager[object]:
    """The turn's ``invoke_agent`` span, unless its caller owns one (`own_span`)."""
    if not options.own_span:
        return _NO_SPAN
    return runtime_span(
        _tracer,
        semconv.span_name(semconv.INVOKE_AGENT, spec.name),
        attributes=lambda: semconv.invocation(  # built only for a recording span
            spec.name, invocation_id=invocation_id, session_id=scope.session_id
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


class _Turn(ToolRound):
    async def _render(self) -> None:
        """The turn's instructions: a dynamic instruction provider is user code, run in a
        pool task; templates are rendered here; static text needs nothing (the spec's
        own provider config, `TurnContext.provider_config`, is the turn's)."""
        if static_instructions(self.spec):
            return
        render = (render_instructions, self.spec, self._callback_context(), self.state)
        if callable(self.spec.instructions):
            self.provider_config = await off_loop_in(self.shares.callbacks, *render)
        else:
            self.provider_config = render[0](*render[1:])

    async def run(self, history: Sequence[Content], message: Content) -> TurnOutcome:
        await self._render()
        started = time.monotonic()
        if self.options.plugin_run:  # a Runner's run: its run-level plugin hooks
            # an early return here only skips the later plugins: it is the message too
            phase = await self._global("on_user_message", message, plugin_checks.user_message)
            message = phase.value if phase is not None else message
            phase = await self._global("before_run", message, plugin_checks.message)
            if phase is not None and phase.returned:  # answered without the agent
                return await self._complete(
                    phase.value, None, [*history, message], len(history), 0, started
                )
            message = phase.value if phase is not None else message
        if self.spec.input_validator is not None:
            _check_json(self.spec.input_validator, message.text_value(), "invalid_input")
        contents = [*history, message]
        phase = await self._global("before_agent", message, plugin_checks.message)
        if phase is not None and phase.returned:  # global plugins answered: skip the turn
            return await self._complete(phase.value, None, contents, len(history), 0, started)
        if phase is not None:
            message = contents[-1] = phase.value
        replaced = await self._callback("before_agent", None, message)
        if replaced is not None:  # the turn is skipped: this is its answer
            return await self._complete(
                as_answer(replaced), None, contents, len(history), 0, started
            )
        return await self._loop(contents, len(history), 0, None)

    async def resume(
        self,
        history: Sequence[Content],
        contents: Sequence[Content],
        continuation: Continuation,
        answer: Answer,
    ) -> TurnOutcome:
        """`contents` is the invocation so far: its last model turn with calls is the
        paused batch, followed by the responses stored when it paused (if any)."""
        await self._render()
        self.llm_calls = continuation.llm_calls
        rounds = continuation.rounds
        position = next(
            (at for at in range(len(contents) - 1, -1, -1) if contents[at].function_calls()), -1
        )
        calls = contents[position].function_calls() if position >= 0 else []
        index = continuation.call_index
        done = [decode_response(item) for item in continuation.responses]
        stored = sum(len(_responses(item)) for item in contents[position + 1 :])
        if index >= len(calls) or calls[index].id != continuation.call_id or stored > len(done):
            raise AdkError("invalid_continuation", "the paused call is not in the session")
        if continuation.calls is not None:  # the model's own arguments, not the redacted
            original = [decode_call(item) for item in continuation.calls]
            if [(c.name, c.id) for c in original] != [(c.name, c.id) for c in calls]:
                raise AdkError("invalid_continuation", "the paused batch is not the session's")
            calls = original
        call = calls[index]
        how, payload = answer.how, answer.payload
        try:
            if how == "approved":  # re-resolve the tool, recheck it, run it once
                done.append(await self._one_tool(call, approved=True))
            elif how == "rejected" or payload is None:  # nothing runs, no callback
                done.append(
                    FunctionResponsePart(
                        call.name, checked_result(call.name, payload or {}), call.id
                    )
                )
            else:  # a completion: the tool's after-callbacks see it now
                done.append(await self._finish(call, payload))
        except Suspend as suspend:
            return self._paused(suspend.at(index, done, calls), rounds, stored)
        pending = Batch(calls, index + 1, done, stored)
        return await self._loop([*history, *contents], len(history), rounds, pending)

    async def _loop(
        self, contents: list[Content], history_length: int, rounds: int, pending: Batch | None
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
                output, metadata = await self._model(preamble + contents)
                if not isinstance(output, ToolCalls):
                    return await self._complete(
                        output, metadata, contents, history_length, rounds, started
                    )
                rounds += 1
                if rounds > max_rounds:
                    return TurnFailed("max_tool_rounds_exceeded")
                contents.append(output.content)
                pending = Batch(output.calls)
            batch, pending = pending, None
            try:
                responses = await self._tools(batch)
            except Suspend as suspend:
                return self._paused(suspend, rounds, batch.stored)
            fresh = Content("tool", tuple(responses[batch.stored :]))  # not yet in the session
            self._observe("tool", fresh, None)
            contents.append(fresh)

    async def _complete(
        self,
        output: str | Content,
        metadata: Any,
        contents: list[Content],
        history_length: int,
        rounds: int,
        started: float,
    ) -> TurnOutcome:
        """Settle the final answer (``after_agent``, the output contract), report it as
        the final "model" step and end the turn."""
        spec = self.spec
        phase = await self._global("after_agent", output, plugin_checks.answer)
        if phase is not None:
            output = phase.value
        if phase is None or not phase.returned:
            replaced = await self._callback("after_agent", None, output)
            if replaced is not None:
                output = as_answer(replaced)
        if spec.output_validator is not None:
            text = output.text_value() if isinstance(output, Content) else output
            _check_json(spec.output_validator, text, "invalid_output")
        final = output if isinstance(output, Content) else content_model.from_text(output, "model")
        contents.append(final)
        self._observe("model", final, metadata)
        if not is_fenced_thread():  # a killed turn's result goes nowhere
            _log.debug(
                "adk.agent.turn_completed",
                agent=spec.name,
                tool_rounds=rounds,
                seconds=round(time.monotonic() - started, 4),
            )
        return TurnCompleted(output, contents[history_length:])

    def _paused(self, suspend: Suspend, rounds: int, stored: int) -> TurnOutcome:
        """End the turn at a pause. The batch's responses completed before the paused
        call, not yet stored, are reported first, in call order: a Runner stores them
        now, and a resume never runs those calls again (they travel in the
        continuation)."""
        fresh = suspend.done[stored:]
        if fresh:
            self._observe("tool", Content("tool", tuple(fresh)), None)
        continuation = Continuation(
            type=suspend.details["type"],
            agent=self.spec.name,
            call_index=suspend.index,
            call_id=suspend.call.id,
            tool_name=suspend.call.name,
            responses=[encode_response(part) for part in suspend.done],
            calls=[encode_call(part) for part in suspend.calls],
            llm_calls=self.llm_calls,
            rounds=rounds,
            action_id=suspend.details.get("action_id"),
            hint=suspend.details.get("hint"),
            operation_id=suspend.details.get("operation_id"),
        )
        return TurnPaused(continuation, suspend.call, suspend.message)

    # -- the model ---------------------------------------------------------------------

    async def _model(self, contents: list[Content]) -> tuple[str | Content | ToolCalls, Any]:
        """One model step: ``before_model`` (whose replacement skips the provider),
        the provider, then ``after_model`` on whichever answered. Tool calls are
        reported as a "model" step here; a final answer is reported by `_complete`."""
        contents = _joined_tool_turns(contents)
        phase = await self._global("before_model", contents, plugin_checks.model_request)
        output: Any
        if phase is not None and phase.returned:  # skips the local hook and the provider
            output, metadata = phase.value, None
        else:
            contents = phase.value if phase is not None else contents
            if self.spec.callbacks.get("before_model") is not None:
                # the hook may edit in place, as plugins may: it gets a plain deep copy
                # (stored history is read-only), and its edits are what the model sees
                contents = copy.deepcopy(contents)
            replaced = await self._callback("before_model", None, contents)
            if replaced is not None:
                output, metadata = replaced, None
            else:
                output, metadata = await self._provider_or_recovered(contents)
        seen = output.content if isinstance(output, ToolCalls) else output
        phase = await self._global("after_model", seen, plugin_checks.answer)
        if phase is not None and phase.kind is not PhaseKind.CONTINUE:
            output = phase.value
        if phase is None or not phase.returned:
            after = await self._callback("after_model", None, output)
            output = after if after is not None else output
        if isinstance(output, ToolCalls):
            self._observe("model", output.content, metadata)
            return output, metadata
        return as_answer(output), metadata

    async def _provider_or_recovered(self, contents: list[Content]) -> tuple[Any, Any]:
        """The provider's answer; a provider error goes to the ``on_model_error``
        plugins first, whose amend or return is the answer instead."""
        try:
            return await self._provider(contents)
        except AdkError as error:
            value = plugin_checks.reason_value(error.reason)
            phase = await self._global("on_model_error", value, plugin_checks.answer)
            if phase is None or phase.kind is PhaseKind.CONTINUE:
                raise
            return phase.value, None

    @cached_property
    def _model_call(self) -> tuple[dict[str, Any], str, str | None]:
        """The chat span's attributes, the provider's and the model's name: one provider
        config per turn (rendered once), so worked out once per turn, not per call."""
        attributes = semconv.model_call_from_config(self.spec.name, self.provider_config)
        model = attributes.get(semconv.REQUEST_MODEL)
        return attributes, str(attributes[semconv.PROVIDER_NAME]), str(model) if model else None

    async def _provider(self, contents: list[Content]) -> tuple[Any, Any]:
        spec = self.spec
        contents = [content_model.canonical(item) for item in contents]  # the model boundary
        declarations = spec.catalog.declarations()
        if self.options.before_request is not None:
            self.options.before_request(self.provider_config, contents, declarations)
        started = time.monotonic()
        self.llm_calls += 1
        attributes, provider, model = self._model_call
        outcome = "error"
        with metering() as meter:  # the usage the provider reports for this call
            try:
                with runtime_span(
                    _tracer,
                    semconv.span_name(semconv.CHAT, str(model or provider)),
                    attributes=attributes,
                ) as span:
                    result = await self._generate(contents, declarations)
                    outcome = "ok"
                    if span.is_recording() and meter.usage is not None:
                        span.set_attributes(_usage(meter.usage))
            finally:  # a failed or cancelled call is counted too
                usage = meter.usage
                default_metrics().model_call(
                    provider,
                    str(model or "none"),
                    outcome,
                    time.monotonic() - started,
                    input_tokens=None if usage is None else usage.input_tokens,
                    output_tokens=None if usage is None else usage.output_tokens,
                )
        output, metadata = protocol.unwrap(result)
        _log.debug(
            "adk.model.called",
            agent=spec.name,
            seconds=round(time.monotonic() - started, 4),
            tool_calls=isinstance(output, ToolCalls),
        )
        return output, metadata

    async def _generate(self, contents: list[Content], declarations: list[Any]) -> Any:
        """The provider call itself, streamed as the options ask."""
        config = self.provider_config
        if self.options.streaming == "content":
            return await protocol.astream_content(
                config, contents, declarations, lambda frame: self._observe("delta", frame, None)
            )
        if self.options.streaming == "text":
            return await protocol.astream(
                config, contents, declarations, lambda delta: self._observe("delta", delta, None)
            )
        return await protocol.agenerate(config, contents, declarations)


def _usage(usage: TokenUsage | None) -> dict[str, Any]:
    """The chat span's token counts, when the provider reported them."""
    return {} if usage is None else semconv.usage(usage.input_tokens, usage.output_tokens)


def _responses(item: Content) -> list[FunctionResponsePart]:
    return [part for part in item.parts if isinstance(part, FunctionResponsePart)]


def _joined_tool_turns(contents: list[Content]) -> list[Content]:
    """One tool turn per batch: a batch answered across several stored events (the
    responses stored at a pause, then the rest) reaches the model as one turn, so
    every call of a model turn is answered by the turn that follows it."""
    joined: list[Content] = []
    for item in contents:
        if item.role == "tool" and joined and joined[-1].role == "tool":
            joined[-1] = Content("tool", (*joined[-1].parts, *item.parts))
        else:
            joined.append(item)
    return joined


def _check_json(validator: Any, text: str, reason: str) -> None:
    """`text` must be one JSON document (strict: no NaN or Infinity, objects and arrays
    nested at most `MAX_JSON_DEPTH` deep) that `validator` accepts."""
    try:
        data = text.encode("utf-8")
        if content_model.json_too_deep_bytes(data):
            raise AdkError(
                (reason, {"kind": "too_deep", "path": [], "constraint": "max_depth"}),
                f"JSON nests at most {content_model.MAX_JSON_DEPTH} deep",
            )
        value = _json_decoder.decode(data)
    except (UnicodeEncodeError, msgspec.DecodeError, RecursionError):
        raise AdkError(
            (reason, {"kind": "not_json", "path": [], "constraint": "json"}), "not a JSON document"
        ) from None
    try:
        validator(value)
    except RecursionError:
        raise AdkError(
            (reason, {"kind": "too_deep", "path": [], "constraint": "max_depth"}), "too deep"
        ) from None
    except fastjsonschema.JsonSchemaValueException as error:
        path = [str(step) for step in (error.path or [])][1:]
        raise AdkError(
            (reason, {"kind": str(error.rule), "path": path, "constraint": str(error.rule)}),
            "contract violated",
        ) from None
