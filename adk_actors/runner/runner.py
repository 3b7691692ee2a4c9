"""`Runner`: one invocation per call, every step stored as an event in a session.

The turn runs in a supervised `Task` owned by the caller (never in the agent's
mailbox): the user event, each model event, each tool-response event and the final
event are written to the session as they happen. Budgets (`max_llm_calls`,
`max_tool_rounds`, `run_timeout`) are checked at construction and enforced during
the run; ``temp:`` state is cleared when the invocation ends, whether it completed
or failed. With ``streaming_mode="text"`` each text delta is stored as a partial
event; partial events stay out of the next model call's history.
"""

from __future__ import annotations

import queue
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from adk_actors.agents.api import AgentLike, _name, registered_name
from adk_actors.agents.turn import Scope, TurnOptions, as_content, resume_turn, run_turn
from adk_actors.events import Event, EventActions, EventError
from adk_actors.outcomes import OUTCOME_TYPES, Completed, Failed, Outcome, Paused
from adk_actors.runner import continuations
from adk_actors.runner.context import ContextPolicy
from adk_actors.runner.history import model_history, split_events, visible_state
from adk_actors.sessions.service import SessionService
from providers import content as content_codec
from providers.content import Content
from providers.errors import AdkError
from supervision import ProcessExit, call
from supervision.process import is_fenced_thread
from supervision.tasks import Task, TaskFailed, TaskTimeout

STREAMING_MODES = ("none", "text", "content")
MAX_RUN_TIMEOUT = 86_400.0
DEFAULT_MAX_STREAM_OUTPUT_BYTES = 16 << 20
MAX_STREAM_OUTPUT_BYTES = 64 << 20
PAUSE_AUTHOR = "runner"
_DONE = object()


def _positive_int(name: str, value: Any, reason: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
        raise AdkError(reason, f"{name} is an int in 1..10000")
    return value


class Runner:
    """Runs an agent against a session service. Options fail at construction."""

    def __init__(
        self,
        agent: AgentLike,
        app_name: str,
        sessions: SessionService,
        *,
        run_timeout: float = 120.0,
        max_llm_calls: int = 32,
        max_tool_rounds: int = 16,
        streaming_mode: str = "none",
        max_stream_output_bytes: int = DEFAULT_MAX_STREAM_OUTPUT_BYTES,
        context_policy: Mapping[str, Any] | ContextPolicy | None = None,
    ) -> None:
        if (
            isinstance(run_timeout, bool)
            or not isinstance(run_timeout, int | float)
            or not 0 < run_timeout <= MAX_RUN_TIMEOUT
        ):
            raise AdkError(
                "invalid_run_timeout", f"run_timeout is seconds in (0, {MAX_RUN_TIMEOUT}]"
            )
        if streaming_mode not in STREAMING_MODES:
            raise AdkError("invalid_streaming_mode", f"streaming_mode is one of {STREAMING_MODES}")
        if not isinstance(sessions, SessionService):
            raise AdkError("invalid_session_service", "sessions is a session service")
        self.agent_name = _name(agent)
        self.app_name = app_name
        self.sessions = sessions
        self.run_timeout = float(run_timeout)
        self.max_llm_calls = _positive_int("max_llm_calls", max_llm_calls, "invalid_max_llm_calls")
        self.max_tool_rounds = _positive_int(
            "max_tool_rounds", max_tool_rounds, "invalid_max_tool_rounds"
        )
        self.streaming_mode = streaming_mode
        if (
            isinstance(max_stream_output_bytes, bool)
            or not isinstance(max_stream_output_bytes, int)
            or not 1 <= max_stream_output_bytes <= MAX_STREAM_OUTPUT_BYTES
        ):
            raise AdkError("invalid_max_stream_output_bytes", f"1..{MAX_STREAM_OUTPUT_BYTES} bytes")
        self.max_stream_output_bytes = max_stream_output_bytes
        self.context_policy = ContextPolicy.compile(context_policy)

    def run(self, user_id: str, session_id: str, message: str | Content) -> str | Content:
        """Run one invocation to its end; returns the final output or raises `AdkError`."""
        outcome: Any = None
        for item in self.invocation(user_id, session_id, message):
            if isinstance(item, OUTCOME_TYPES):
                outcome = item
        return _result(outcome)

    def run_async(self, user_id: str, session_id: str, message: str | Content) -> Iterator[Event]:
        """The invocation's events as they are stored (a failure raises at the end)."""
        for item in self.invocation(user_id, session_id, message):
            if isinstance(item, OUTCOME_TYPES):
                _result(item)
                return
            yield item

    def invocation(
        self, user_id: str, session_id: str, message: str | Content
    ) -> Iterator[Event | Outcome]:
        """The invocation's stored events in order, then exactly one outcome
        (`Completed`, `Paused` or `Failed`) as the last item. What `adk.runs` drives."""
        yield from self._invocation(user_id, session_id, message)

    def abandon(self, user_id: str, session_id: str, invocation_id: str, reason: Any) -> Event:
        """Record that an invocation ended from outside (a cancelled run): an error event
        with `reason`, and its ``temp:`` state cleared."""
        event = Event.new(
            self.agent_name,
            invocation_id,
            error=EventError(reason=reason, message="the invocation was cancelled"),
        )
        try:
            self.sessions.add_event(self.app_name, user_id, session_id, event)
        finally:
            self.sessions.clear_temp_state(self.app_name, user_id, session_id)
        return event

    def resume(
        self,
        user_id: str,
        session_id: str,
        response: Any,
        invocation_id: str | None = None,
    ) -> Any:
        """Resume a paused invocation to its end, like `run` (it may pause again)."""
        outcome: Any = None
        for item in self.resume_invocation(user_id, session_id, response, invocation_id):
            if isinstance(item, OUTCOME_TYPES):
                outcome = item
        return _result(outcome)

    def resume_invocation(
        self,
        user_id: str,
        session_id: str,
        response: Any,
        invocation_id: str | None = None,
    ) -> Iterator[Event | Outcome]:
        """Claim a paused invocation's continuation now (raising if it cannot be), then
        iterate like `invocation`: the claim event, the resumed steps, one outcome.

        `response` is ``{"confirmed": bool}`` for a tool approval, the completion
        ``{"operation_id", "status", ...}`` for a long-running operation, or the human's
        JSON object for ``request_human_approval``. An invalid response consumes nothing.
        """
        spec = self._spec()
        session = self._paused_session(user_id, session_id)
        invocation_id, continuation = continuations.select(session.state, invocation_id)
        how, payload = continuations.answer(continuation, response)
        claim = continuations.claim_event(invocation_id, continuation["type"], how)
        try:
            self.sessions.add_event_if_state(
                self.app_name,
                user_id,
                session_id,
                claim,
                {continuations.key_of(invocation_id): continuation},
            )
        except AdkError as error:
            if error.reason == "conflict":  # another resume won the race
                raise AdkError("no_paused_invocation", "already resumed") from None
            raise
        past, current = split_events(
            session.events, invocation_id, self.context_policy.include_partial
        )
        if not current:
            raise AdkError("invalid_continuation", "the paused invocation is not in the session")
        history = model_history(self.context_policy.select(past, current[0], spec.name)[:-1])
        contents = [event.content for event in current if event.content is not None]
        work = (
            resume_turn,
            spec,
            history,
            contents,
            continuation,
            (how, payload),
            Scope(self.app_name, user_id, session_id),
            invocation_id,
        )
        return self._drive(spec, user_id, session_id, invocation_id, session.state, [claim], work)

    def update_long_running(
        self,
        user_id: str,
        session_id: str,
        invocation_id: str,
        operation_id: str,
        update: Mapping[str, Any],
    ) -> Event:
        """Record a non-terminal progress update of a paused long-running operation,
        atomically against its resume (a consumed pause gives ``no_paused_invocation``)."""
        session = self._paused_session(user_id, session_id)
        invocation_id, continuation = continuations.select(session.state, invocation_id)
        if continuation.get("operation_id") != operation_id:
            raise AdkError("long_running_operation_mismatch", "another operation is paused there")
        event = continuations.progress_event(self.agent_name, invocation_id, continuation, update)
        try:
            return self.sessions.add_event_if_state(
                self.app_name,
                user_id,
                session_id,
                event,
                {continuations.key_of(invocation_id): continuation},
            )
        except AdkError as error:
            if error.reason == "conflict":
                raise AdkError("no_paused_invocation", "the operation already resumed") from None
            raise

    def paused_invocations(self, user_id: str, session_id: str) -> list[str]:
        """The ids of the session's paused invocations, sorted."""
        try:
            session = self.sessions.get_session(self.app_name, user_id, session_id)
        except AdkError as error:
            if error.reason == "not_found":
                return []
            raise
        return sorted(continuations.paused(session.state))

    def _paused_session(self, user_id: str, session_id: str) -> Any:
        try:  # never creates a session: no session, no pause
            return self.sessions.get_session(self.app_name, user_id, session_id)
        except AdkError as error:
            if error.reason == "not_found":
                raise AdkError("no_paused_invocation", "no such session") from None
            raise

    # -- one invocation ------------------------------------------------------------------

    def _invocation(self, user_id: str, session_id: str, message: str | Content) -> Iterator[Any]:
        spec = self._spec()
        content = as_content(message)
        session = self.sessions.create_session(self.app_name, user_id, session_id)
        invocation_id = f"inv-{uuid.uuid4().hex}"
        user_event = Event.new("user", invocation_id, content)
        past, _ = split_events(session.events, None, self.context_policy.include_partial)
        # selected before anything is stored: a context failure leaves the session as is
        history = model_history(self.context_policy.select(past, user_event, spec.name)[:-1])
        self.sessions.add_event(self.app_name, user_id, session_id, user_event)
        work = (
            run_turn,
            spec,
            history,
            content,
            Scope(self.app_name, user_id, session_id),
            invocation_id,
        )
        return self._drive(
            spec, user_id, session_id, invocation_id, session.state, [user_event], work
        )

    def _drive(
        self,
        spec: Any,
        user_id: str,
        session_id: str,
        invocation_id: str,
        state: Mapping[str, Any],
        already_stored: list[Event],
        work: tuple[Any, ...],
    ) -> Iterator[Any]:
        """Run `work` (a turn function and its arguments) in a Task, storing and yielding
        each step's event, then the final, error or pause event and the outcome."""
        stored: queue.Queue[Any] = queue.Queue()

        def store(event: Event) -> None:
            if is_fenced_thread():
                return
            self.sessions.add_event(self.app_name, user_id, session_id, event)
            stored.put(event)

        partials: list[Event] = []  # this model round's deltas, stored when the round ends
        streamed = [0]

        def observe(kind: str, value: Any, metadata: Any) -> None:
            if kind == "delta":
                frame = value if isinstance(value, Content) else _text(value)
                streamed[0] += (
                    len(content_codec.encode(frame))
                    if isinstance(value, Content)
                    else len(value.encode())
                )
                if streamed[0] > self.max_stream_output_bytes:
                    raise AdkError(
                        "stream_output_limit_exceeded",
                        f"a model round streamed over {self.max_stream_output_bytes} bytes",
                    )
                partials.append(Event.new(spec.name, invocation_id, frame, partial=True))
                return
            if kind == "model":
                for partial in partials:
                    store(partial)
                partials.clear()
                streamed[0] = 0
            if kind == "tool":
                store(Event.new(spec.name, invocation_id, value))
            elif kind == "model" and _has_calls(value):
                store(Event.new(spec.name, invocation_id, value, provider_metadata=metadata))
            elif kind == "model":
                pending["final"] = (value, metadata)

        pending: dict[str, Any] = {}
        options = TurnOptions(
            state=visible_state(state),
            observer=observe,
            max_llm_calls=self.max_llm_calls,
            max_tool_rounds=self.max_tool_rounds,
            streaming=self.streaming_mode,
            pausable=True,
            before_request=self.context_policy.check_request,
        )
        task = Task.start(
            _run_and_signal,
            *work,
            options,
            stored,
            deadline=time.monotonic() + self.run_timeout,
        )
        yield from already_stored
        while True:
            try:
                item = stored.get(timeout=0.05)
            except queue.Empty:
                if task.done():  # stopped at its deadline: its thread may never signal
                    break
                continue
            if item is _DONE:
                break
            yield item
        if is_fenced_thread():  # cancelled from outside: whoever killed us records it
            return
        outcome = self._finish(task, pending, spec, invocation_id, user_id, session_id)
        if outcome.event is not None:
            yield outcome.event
        yield outcome.outcome

    def _finish(
        self,
        task: Task,
        pending: dict[str, Any],
        spec: Any,
        invocation_id: str,
        user_id: str,
        session_id: str,
    ) -> _Outcome:
        author = spec.name
        try:
            result = task.wait(self.run_timeout + 5)
        except TaskTimeout:
            result = ("error", "timeout")
        except TaskFailed as failure:
            result = ("error", ("invocation_worker_exit", str(failure.reason)[:200]))
        paused = False
        try:
            if result[0] == "ok":
                final_content, metadata = pending.get("final", (None, None))
                actions = EventActions()
                if spec.output_key is not None:  # committed in the same final event
                    text = result[1].text_value() if isinstance(result[1], Content) else result[1]
                    actions = EventActions(state_delta={spec.output_key: text})
                event = Event.new(
                    author,
                    invocation_id,
                    final_content,
                    is_final=True,
                    provider_metadata=metadata,
                    actions=actions,
                )
                self.sessions.add_event(self.app_name, user_id, session_id, event)
                return _Outcome(Completed(result[1]), event)
            if result[0] == "paused":
                _, continuation, call, message = result
                event = continuations.pause_event(
                    PAUSE_AUTHOR, invocation_id, continuation, call, message
                )
                self.sessions.add_event(self.app_name, user_id, session_id, event)
                paused = True  # temp: state stays until the resumed invocation ends
                return _Outcome(Paused(event), event)
            reason = result[1]
            event = Event.new(
                author,
                invocation_id,
                error=EventError(reason=reason, message="the invocation failed"),
            )
            self.sessions.add_event(self.app_name, user_id, session_id, event)
            return _Outcome(Failed(reason), event)
        finally:
            if not paused:
                self.sessions.clear_temp_state(self.app_name, user_id, session_id)

    def _spec(self) -> Any:
        try:
            _status, spec = call(registered_name(self.agent_name), ("spec",), 10.0)
        except ProcessExit:
            raise AdkError("noproc", "the agent is not running") from None
        return spec


class _Outcome:
    __slots__ = ("event", "outcome")

    def __init__(self, outcome: Outcome, event: Event | None) -> None:
        self.outcome = outcome
        self.event = event


def _result(outcome: Outcome | None) -> Any:
    """What `run` returns for an outcome: the output, the `Paused` outcome, or a raise."""
    if isinstance(outcome, Completed):
        return outcome.output
    if isinstance(outcome, Paused):
        return outcome
    reason = outcome.reason if outcome is not None else "invocation_worker_exit"
    raise AdkError(reason, "the invocation failed")


def _run_and_signal(turn: Callable[..., Any], *args: Any) -> Any:
    """Run a turn function; tell the driving loop when it is over, however it ends."""
    stored = args[-1]
    try:
        return turn(*args[:-1])
    finally:
        stored.put(_DONE)


def _text(value: str) -> Content:
    from providers import content

    return content.from_text(value, role="model")


def _has_calls(value: Any) -> bool:
    return isinstance(value, Content) and bool(value.function_calls())
