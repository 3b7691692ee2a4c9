"""One Runner invocation, driven from the caller: a worker task does the model and tool
work while this side stores and yields each step's event, then exactly one outcome.

The worker is a `Task` owned by whoever iterates (a caller, or a run actor's worker),
so it dies with its owner. It first takes an admission permit if the Runner asks for
one (the task owns it: a kill releases it through the controller's monitor), then
stores the opening event (the user's message, or a resume's claim of its
continuation), then runs the turn. Every step is written as it happens, and only
while the invocation is open (see `continuations`): one terminal event ends it, and
nothing lands after that, whoever wrote it.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from adk_actors import admission as admission_api
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
from supervision.sync_pool import SyncPool, TaskBusy, shared_pool
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
        token: str | None = None,
    ) -> None:
        self.runner = runner
        self.token = token or continuations.new_token()
        self.spec = spec
        self.user_id = user_id
        self.session_id = session_id
        self.invocation_id = invocation_id
        self.state = state
        # worker -> caller; bounded by the invocation's own budgets (model calls, tool
        # rounds, streamed bytes): a blocking bound here could stall the worker forever
        # behind a consumer that went away
        self._stored: queue.Queue[Any] = queue.Queue()
        self._partials: list[Event] = []  # this model round's deltas, stored when it ends
        self._streamed = 0
        self._final: tuple[Any, Any] = (None, None)
        self._opened = False
        self.guard = Guard(runner.runtime_policy, invocation_id, self._audit)

    def events(
        self,
        turn: Callable[..., Any],
        args: tuple[Any, ...],
        *,
        opening: Event,
        opening_delta: Mapping[str, Any],
        expected: Mapping[str, Any] | None = None,
    ) -> Iterator[Event | Outcome]:
        """Start the worker, then yield each stored event and finally the outcome. The
        worker stores `opening` once admitted, only if `expected` state holds (a
        resume's claim); otherwise the invocation ends ``no_paused_invocation``."""
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
        try:
            task = Task.start(
                self._work,
                turn,
                (*args, options),
                opening,
                opening_delta,
                expected,
                deadline,
                deadline=deadline,
                pool=invocation_pool(),
            )
        except TaskBusy:
            raise AdkError("busy", "too many invocations are waiting to start") from None
        try:
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
                runner.abandon(
                    self.user_id,
                    self.session_id,
                    self.invocation_id,
                    "consumer_closed",
                    token=self.token,
                )
            elif not is_fenced_thread():
                self._finish(task)  # it ended meanwhile: record how
            raise
        if is_fenced_thread():  # cancelled from outside: whoever killed us records it
            return
        event, outcome = self._finish(task)
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
        opening: Event,
        opening_delta: Mapping[str, Any],
        expected: Mapping[str, Any] | None,
        deadline: float,
    ) -> Any:
        """Runs in the worker task: admission, the opening event, then the turn."""
        permit = None
        try:
            admission = self.runner.admission_control
            if admission is not None:
                try:
                    permit = admission_api.acquire(
                        self.spec.name,
                        overflow=admission["overflow"],
                        deadline=min(deadline, time.monotonic() + admission["queue_timeout"]),
                        server=admission.get("server", admission_api.NAME),
                    )
                except AdkError as error:
                    return ("rejected", ("admission_failed", error.reason))
            if not self._open(opening, opening_delta, expected):
                return ("rejected", "no_paused_invocation")
            return turn(*args)
        finally:
            if permit is not None:
                try:
                    permit.release()
                except AdkError:
                    pass  # the controller is gone, and its permits with it
            self._stored.put(_DONE)

    def _open(
        self, opening: Event, delta: Mapping[str, Any], expected: Mapping[str, Any] | None
    ) -> bool:
        runner = self.runner
        if is_fenced_thread():
            return False
        try:  # absent: nobody opened it; a killed worker opens nothing (checked in the step)
            runner.sessions.add_event_if_state(
                runner.app_name,
                self.user_id,
                self.session_id,
                opening,
                {**(expected or {}), continuations.open_key(self.invocation_id): None},
                runtime_delta=delta,
                precondition=_alive,
            )
        except AdkError as error:
            if error.reason == "conflict":  # another resume claimed it first
                return False
            raise
        self._opened = True
        self._stored.put(opening)
        return True

    def _audit(self, event: Event) -> None:
        """A policy decision: a step of the open invocation, or (refused before it
        opened) the only record the invocation leaves."""
        if self._opened:
            self._store(event)
        elif not is_fenced_thread():
            runner = self.runner
            runner.sessions.add_event(runner.app_name, self.user_id, self.session_id, event)
            self._stored.put(event)

    def _store(self, event: Event) -> None:
        """Store one step, only while the invocation is open (never after its end)."""
        if self._add_if_open(event):
            self._stored.put(event)

    def _add_if_open(self, event: Event, delta: Mapping[str, Any] | None = None) -> bool:
        """One atomic step: store `event` (and apply `delta`) if the invocation is still
        open. False when a killed thread tries, or when it ended (a cancel, a timeout)."""
        if is_fenced_thread():
            return False
        runner = self.runner
        try:
            runner.sessions.add_event_if_state(
                runner.app_name,
                self.user_id,
                self.session_id,
                event,
                continuations.is_open(self.invocation_id, self.token),
                runtime_delta=delta,
                precondition=_alive,
            )
        except AdkError as error:
            if error.reason == "conflict":
                return False
            raise
        return True

    def _observe(self, kind: str, value: Any, metadata: Any) -> None:
        """Turn steps into stored events: deltas wait for their round's end, and the
        final round's deltas wait for the final-output policy."""
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
        if kind == "tool":
            self._store(Event.new(spec.name, self.invocation_id, value))
        elif kind == "model" and isinstance(value, Content) and value.function_calls():
            self._flush_partials()
            self._store(Event.new(spec.name, self.invocation_id, value, provider_metadata=metadata))
        elif kind == "model":
            self._final = (value, metadata)  # its deltas are stored with it, if it passes

    def _flush_partials(self) -> None:
        for partial in self._partials:
            self._store(partial)
        self._partials.clear()
        self._streamed = 0

    # -- the end ---------------------------------------------------------------------------

    def _finish(self, task: Task) -> tuple[Event | None, Outcome]:
        """Store the one terminal event (final, pause or error), if nobody ended the
        invocation first; ``temp:`` state is cleared at a final or error end."""
        runner = self.runner
        try:
            result = task.wait(runner.run_timeout + 5)
        except TaskTimeout:
            result = ("error", "timeout")
        except TaskFailed as failure:  # the kind only: exception text stays out of sessions
            kind = getattr(failure.reason, "kind", None) or str(failure.reason)
            result = ("error", ("invocation_worker_exit", kind[:200]))
        if result[0] == "rejected":  # nothing was stored, nothing to close
            return None, Failed(result[1])
        if result[0] == "paused":
            return self._paused(*result[1:])
        if result[0] == "ok":
            try:
                self.guard.final(self.spec.name, result[1])
            except AdkError as error:  # its deltas and text are never stored
                return self._failed(error.reason)
            self._flush_partials()
            return self._completed(result[1])
        return self._failed(result[1])

    def _paused(self, continuation: dict[str, Any], call: Any, message: str) -> Any:
        # JSON-normalised (a NaN becomes null), so what is stored compares equal to
        # what is read back from any backend; the token says whose pause it is
        continuation = msgspec.json.decode(
            msgspec.json.encode({**continuation, "token": self.token})
        )
        event = continuations.pause_event(
            PAUSE_AUTHOR, self.invocation_id, continuation, call, message
        )
        try:  # temp: state stays until the resumed invocation ends
            stored = self._end(
                event, continuations.paused_delta(self.invocation_id, continuation), False
            )
        except AdkError as error:  # e.g. a continuation over the state limit
            return self._failed(("pause_not_stored", error.reason))
        return (event, Paused(event)) if stored else self._ended_elsewhere()

    def _completed(self, output: Any) -> tuple[Event | None, Outcome]:
        final_content, metadata = self._final
        delta: dict[str, Any] = {}
        if self.spec.output_key is not None:  # committed in the same final event
            delta[self.spec.output_key] = (
                output.text_value() if isinstance(output, Content) else output
            )
        event = Event.new(
            self.spec.name,
            self.invocation_id,
            final_content,
            is_final=True,
            provider_metadata=metadata,
            actions=EventActions(state_delta=delta),
        )
        try:
            stored = self._end(event, continuations.closed_delta(self.invocation_id))
        except AdkError as error:  # e.g. an output_key value over the state limit
            return self._failed(("final_not_stored", error.reason))
        return (event, Completed(output)) if stored else self._ended_elsewhere()

    def _failed(self, reason: Any) -> tuple[Event | None, Outcome]:
        event = Event.new(
            self.spec.name,
            self.invocation_id,
            error=EventError(reason=reason, message="the invocation failed"),
        )
        stored = self._end(event, continuations.closed_delta(self.invocation_id))
        return (event, Failed(reason)) if stored else self._ended_elsewhere()

    def _ended_elsewhere(self) -> tuple[None, Outcome]:
        """Someone else wrote the end (a cancel, a consumer that left): theirs stands."""
        return None, Failed("invocation_ended_elsewhere")

    def _end(self, event: Event, delta: Mapping[str, Any], clear_temp: bool = True) -> bool:
        """Store a terminal event (its delta closes the invocation) only if it is still
        open for us: exactly one end per invocation, whoever writes it."""
        if not self._add_if_open(event, delta):  # killed, or someone else ended it first
            return False
        runner = self.runner
        if clear_temp:
            runner.sessions.clear_temp_state(runner.app_name, self.user_id, self.session_id)
        return True


def _alive() -> bool:
    """Checked inside each write's atomic step: a killed worker writes nothing."""
    return not is_fenced_thread()


def invocation_pool() -> SyncPool:
    """Invocation workers' own threads (`ADK_INVOCATION_THREADS`, default 256): they
    wait for admission and for their model, and must never starve the default pool
    that parallel tool calls run on."""
    return shared_pool("adk.invocations", "ADK_INVOCATION_THREADS", 256, 10_000)


def _model_text(value: str) -> Content:
    return content_codec.from_text(value, role="model")
