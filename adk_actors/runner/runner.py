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
from collections.abc import Iterator
from typing import Any

from adk_actors.agents.api import AgentLike, _name, registered_name
from adk_actors.agents.turn import Scope, TurnOptions, as_content, run_turn
from adk_actors.events import Event, EventActions, EventError
from adk_actors.sessions.service import SessionService
from providers import content as content_codec
from providers.content import Content
from providers.errors import AdkError
from supervision import ProcessExit, call
from supervision.tasks import Task, TaskFailed, TaskTimeout

STREAMING_MODES = ("none", "text", "content")
MAX_RUN_TIMEOUT = 86_400.0
DEFAULT_MAX_STREAM_OUTPUT_BYTES = 16 << 20
MAX_STREAM_OUTPUT_BYTES = 64 << 20
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

    def run(self, user_id: str, session_id: str, message: str | Content) -> str | Content:
        """Run one invocation to its end; returns the final output or raises `AdkError`."""
        outcome: Any = None
        for item in self._invocation(user_id, session_id, message):
            if isinstance(item, _Outcome):
                outcome = item
        assert outcome is not None
        if outcome.error is not None:
            raise outcome.error
        return outcome.output  # type: ignore[no-any-return]

    def run_async(self, user_id: str, session_id: str, message: str | Content) -> Iterator[Event]:
        """The invocation's events as they are stored (a failure raises at the end)."""
        for item in self._invocation(user_id, session_id, message):
            if isinstance(item, _Outcome):
                if item.error is not None:
                    raise item.error
                return
            yield item

    # -- one invocation ------------------------------------------------------------------

    def _invocation(self, user_id: str, session_id: str, message: str | Content) -> Iterator[Any]:
        spec = self._spec()
        content = as_content(message)
        session = self.sessions.create_session(self.app_name, user_id, session_id)
        history = [e.content for e in session.events if e.content is not None and not e.partial]
        invocation_id = f"inv-{uuid.uuid4().hex}"
        stored: queue.Queue[Any] = queue.Queue()

        def store(event: Event) -> None:
            self.sessions.add_event(self.app_name, user_id, session_id, event)
            stored.put(event)

        store(Event.new("user", invocation_id, content))

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
            state=session.state,
            observer=observe,
            max_llm_calls=self.max_llm_calls,
            max_tool_rounds=self.max_tool_rounds,
            streaming=self.streaming_mode,
        )
        task = Task.start(
            _run_and_signal,
            spec,
            history,
            content,
            Scope(self.app_name, user_id, session_id),
            invocation_id,
            options,
            stored,
            deadline=time.monotonic() + self.run_timeout,
        )
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
        outcome = self._finish(task, pending, spec, invocation_id, user_id, session_id)
        if outcome.event is not None:
            yield outcome.event
        yield outcome

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
                return _Outcome(result[1], None, event)
            reason = result[1]
            event = Event.new(
                author,
                invocation_id,
                error=EventError(reason=reason, message="the invocation failed"),
            )
            self.sessions.add_event(self.app_name, user_id, session_id, event)
            return _Outcome(None, AdkError(reason, "the invocation failed"), event)
        finally:
            self.sessions.clear_temp_state(self.app_name, user_id, session_id)

    def _spec(self) -> Any:
        try:
            _status, spec = call(registered_name(self.agent_name), ("spec",), 10.0)
        except ProcessExit:
            raise AdkError("noproc", "the agent is not running") from None
        return spec


class _Outcome:
    __slots__ = ("error", "event", "output")

    def __init__(self, output: Any, error: AdkError | None, event: Event | None) -> None:
        self.output = output
        self.error = error
        self.event = event


def _run_and_signal(*args: Any) -> Any:
    stored = args[-1]
    try:
        return run_turn(*args[:-1])
    finally:
        stored.put(_DONE)


def _text(value: str) -> Content:
    from providers import content

    return content.from_text(value, role="model")


def _has_calls(value: Any) -> bool:
    return isinstance(value, Content) and bool(value.function_calls())
