"""One Runner invocation, driven from the caller: a worker task does the model and tool
work while this side stores and yields each step's event, then exactly one outcome.

The worker is a `Task` owned by whoever iterates (a caller, or a run actor's worker),
so it dies with its owner. It first takes an admission permit if the Runner asks for
one (the task owns it: a kill releases it through the controller's monitor), then
stores the invocation's opening events, then runs the turn. Every step is written to
the session as it happens; a killed (fenced) thread writes nothing more.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from adk_actors.agents.turn import TurnOptions
from adk_actors.events import Event, EventActions, EventError
from adk_actors.outcomes import Completed, Failed, Outcome, Paused
from adk_actors.runner import continuations
from adk_actors.runner.guard import Guard
from adk_actors.runner.history import visible_state
from providers import content as content_codec
from providers.content import Content
from providers.errors import AdkError
from supervision.process import is_fenced_thread
from supervision.tasks import Task, TaskFailed, TaskTimeout

if TYPE_CHECKING:
    from adk_actors.runner.runner import Runner

PAUSE_AUTHOR = "runner"
_DONE = object()
_POLL_SECONDS = 0.05


class Invocation:
    """The caller's side of one invocation."""

    def __init__(
        self,
        runner: Runner,
        spec: Any,
        user_id: str,
        session_id: str,
        invocation_id: str,
        state: Mapping[str, Any],
    ) -> None:
        self.runner = runner
        self.spec = spec
        self.user_id = user_id
        self.session_id = session_id
        self.invocation_id = invocation_id
        self.state = state
        self._stored: queue.Queue[Any] = queue.Queue()
        self._partials: list[Event] = []  # this model round's deltas, stored when it ends
        self._streamed = 0
        self._final: tuple[Any, Any] = (None, None)
        self.guard = Guard(runner.runtime_policy, invocation_id, self._store)

    def events(
        self,
        turn: Callable[..., Any],
        args: tuple[Any, ...],
        *,
        opening: list[Event],
        already_stored: list[Event],
    ) -> Iterator[Event | Outcome]:
        """Start the worker, then yield each stored event and finally the outcome.
        `opening` events are stored by the worker once admitted; `already_stored` were
        written before (a resume's claim) and are only yielded."""
        runner = self.runner
        deadline = time.monotonic() + runner.run_timeout
        options = TurnOptions(
            state=visible_state(self.state),
            observer=self._observe,
            max_llm_calls=runner.max_llm_calls,
            max_tool_rounds=runner.max_tool_rounds,
            streaming=runner.streaming_mode,
            pausable=True,
            before_request=runner.context_policy.check_request,
            tool_gate=self.guard.tool_call,
            result_gate=self.guard.tool_result,
        )
        task = Task.start(self._work, turn, (*args, options), opening, deadline, deadline=deadline)
        try:
            yield from already_stored
            while True:
                try:
                    item = self._stored.get(timeout=_POLL_SECONDS)
                except queue.Empty:
                    if task.done():  # stopped at its deadline: its thread may never signal
                        break
                    continue
                if item is _DONE:
                    break
                yield item
        except GeneratorExit:  # the consumer stopped listening: so does the work
            if not task.done():
                task.kill()
                runner.abandon(self.user_id, self.session_id, self.invocation_id, "consumer_closed")
            raise
        if is_fenced_thread():  # cancelled from outside: whoever killed us records it
            return
        event, outcome = self._finish(task, opened=bool(already_stored))
        yield from self.drain()  # audit events stored while finishing
        if event is not None:
            yield event
        yield outcome

    def drain(self) -> list[Event]:
        """Events stored but not yet yielded (audit events written on the caller's side)."""
        items = []
        while not self._stored.empty():
            item = self._stored.get_nowait()
            if item is not _DONE:
                items.append(item)
        return items

    # -- the worker's side ---------------------------------------------------------------

    def _work(
        self,
        turn: Callable[..., Any],
        args: tuple[Any, ...],
        opening: list[Event],
        deadline: float,
    ) -> Any:
        """Runs in the worker task: admission, the opening events, then the turn."""
        permit = None
        try:
            admission = self.runner.admission_control
            if admission is not None:
                from adk_actors import admission as admission_api

                try:
                    permit = admission_api.acquire(
                        self.spec.name,
                        overflow=admission.get("overflow"),
                        deadline=min(
                            deadline, time.monotonic() + admission.get("queue_timeout", 3600.0)
                        ),
                        server=admission.get("server", admission_api.NAME),
                    )
                except AdkError as error:
                    return ("rejected", ("admission_failed", error.reason))
            for event in opening:
                self._store(event)
            return turn(*args)
        finally:
            if permit is not None:
                permit.release()
            self._stored.put(_DONE)

    def _store(self, event: Event) -> None:
        if is_fenced_thread():
            return
        runner = self.runner
        runner.sessions.add_event(runner.app_name, self.user_id, self.session_id, event)
        self._stored.put(event)

    def _observe(self, kind: str, value: Any, metadata: Any) -> None:
        """Turn steps into stored events: deltas wait for their round's end."""
        spec = self.spec
        if kind == "delta":
            frame = value if isinstance(value, Content) else _model_text(value)
            self._streamed += (
                len(content_codec.encode(frame))
                if isinstance(value, Content)
                else len(value.encode())
            )
            limit = self.runner.max_stream_output_bytes
            if self._streamed > limit:
                raise AdkError(
                    "stream_output_limit_exceeded", f"a model round streamed over {limit} bytes"
                )
            self._partials.append(Event.new(spec.name, self.invocation_id, frame, partial=True))
            return
        if kind == "model":
            for partial in self._partials:
                self._store(partial)
            self._partials.clear()
            self._streamed = 0
        if kind == "tool":
            self._store(Event.new(spec.name, self.invocation_id, value))
        elif kind == "model" and isinstance(value, Content) and value.function_calls():
            self._store(Event.new(spec.name, self.invocation_id, value, provider_metadata=metadata))
        elif kind == "model":
            self._final = (value, metadata)

    # -- the end ---------------------------------------------------------------------------

    def _finish(self, task: Task, opened: bool) -> tuple[Event | None, Outcome]:
        """Store the final, pause or error event; ``temp:`` state is cleared unless paused."""
        runner = self.runner
        try:
            result = task.wait(runner.run_timeout + 5)
        except TaskTimeout:
            result = ("error", "timeout")
        except TaskFailed as failure:
            result = ("error", ("invocation_worker_exit", str(failure.reason)[:200]))
        paused = False
        try:
            if result[0] == "ok":
                try:
                    self.guard.final(self.spec.name, result[1])
                except AdkError as error:
                    return self._failed(error.reason)
                return self._completed(result[1])
            if result[0] == "paused":
                _, continuation, call, message = result
                event = continuations.pause_event(
                    PAUSE_AUTHOR, self.invocation_id, continuation, call, message
                )
                self._add(event)
                paused = True  # temp: state stays until the resumed invocation ends
                return event, Paused(event)
            if result[0] == "rejected" and not opened:
                return None, Failed(result[1])  # nothing was stored: nothing to close
            return self._failed(result[1])
        finally:
            if not paused and not is_fenced_thread():
                runner.sessions.clear_temp_state(runner.app_name, self.user_id, self.session_id)

    def _completed(self, output: Any) -> tuple[Event, Outcome]:
        final_content, metadata = self._final
        actions = EventActions()
        if self.spec.output_key is not None:  # committed in the same final event
            text = output.text_value() if isinstance(output, Content) else output
            actions = EventActions(state_delta={self.spec.output_key: text})
        event = Event.new(
            self.spec.name,
            self.invocation_id,
            final_content,
            is_final=True,
            provider_metadata=metadata,
            actions=actions,
        )
        self._add(event)
        return event, Completed(output)

    def _failed(self, reason: Any) -> tuple[Event, Outcome]:
        event = Event.new(
            self.spec.name,
            self.invocation_id,
            error=EventError(reason=reason, message="the invocation failed"),
        )
        self._add(event)
        return event, Failed(reason)

    def _add(self, event: Event) -> None:
        if is_fenced_thread():  # killed while finishing: whoever killed us records the end
            return
        runner = self.runner
        runner.sessions.add_event(runner.app_name, self.user_id, self.session_id, event)


def _model_text(value: str) -> Content:
    return content_codec.from_text(value, role="model")
