"""`Runner`: one invocation per call, every step stored as an event in a session.

The model and tool work runs in a supervised `Task` (never in the agent's mailbox);
see `invocation.py`. Around it the Runner applies, in order: the runtime policy
(agent and input), the context policy (which history the model sees), admission
(a permit owned by the worker), the budgets (`max_llm_calls`, `max_tool_rounds`,
`run_timeout`) and, at the end, the final-output policy. ``temp:`` state is cleared
when an invocation ends, unless it paused: `resume` continues a paused invocation
(human approval, a long-running operation) and `update_long_running` records
progress. `run` blocks; `run_async` streams events with ``for`` or ``async for``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

from adk_actors.agents.api import AgentLike, _name, registered_name
from adk_actors.agents.turn import Scope, as_content, resume_turn, run_turn
from adk_actors.events import Event, EventError
from adk_actors.outcomes import OUTCOME_TYPES, Completed, Failed, Outcome, Paused
from adk_actors.policy import RuntimePolicy
from adk_actors.runner import continuations
from adk_actors.runner.context import ContextPolicy
from adk_actors.runner.history import model_history, split_events
from adk_actors.runner.invocation import Invocation
from adk_actors.sessions.service import SessionService
from providers.content import Content
from providers.errors import AdkError, check_options
from supervision import CallTimeout, ProcessExit, aio, call

STREAMING_MODES = ("none", "text", "content")
MAX_RUN_TIMEOUT = 86_400.0
MAX_INVOCATION_ID_CHARS = 128
DEFAULT_MAX_STREAM_OUTPUT_BYTES = 16 << 20
MAX_STREAM_OUTPUT_BYTES = 64 << 20


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
        runtime_policy: Mapping[str, Any] | RuntimePolicy | None = None,
        admission_control: Mapping[str, Any] | None = None,
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
        self.runtime_policy = (
            None if runtime_policy is None else RuntimePolicy.compile(runtime_policy)
        )
        self.admission_control = _admission_options(admission_control)

    def run(self, user_id: str, session_id: str, message: str | Content) -> str | Content | Paused:
        """Run one invocation to its end: the final output, a `Paused` outcome to
        `resume` later, or a raised `AdkError`."""
        outcome: Any = None
        for item in self.invocation(user_id, session_id, message):
            if isinstance(item, OUTCOME_TYPES):
                outcome = item
        return _result(outcome)

    def run_async(self, user_id: str, session_id: str, message: str | Content) -> EventStream:
        """The invocation's events as they are stored, with ``for`` or ``async for``
        (a failure raises at the end). Leaving the loop early cancels the invocation."""
        return EventStream(lambda: self.invocation(user_id, session_id, message))

    def invocation(
        self,
        user_id: str,
        session_id: str,
        message: str | Content,
        *,
        invocation_id: str | None = None,
        token: str | None = None,
    ) -> Iterator[Event | Outcome]:
        """The invocation's stored events in order, then exactly one outcome
        (`Completed`, `Paused` or `Failed`) as the last item. What `adk.runs` drives;
        it may choose the `invocation_id` (``inv-`` + hex by default) and the `token` it
        would `abandon` it with."""
        yield from self._invocation(user_id, session_id, message, invocation_id, token)

    def abandon(
        self,
        user_id: str,
        session_id: str,
        invocation_id: str,
        reason: Any,
        *,
        token: str | None = None,
    ) -> Event | None:
        """End an invocation from outside (a cancelled run): an error event with
        `reason`, its continuation dropped if it paused, ``temp:`` state cleared. With
        `token` (what the caller opened it with) only that opening is closed, so an
        abandonment never ends another resume's work. None, and nothing written, if
        there is nothing of it to end."""
        try:
            state = self.sessions.get_session(self.app_name, user_id, session_id).state
        except AdkError as error:
            if error.reason == "not_found":
                return None  # the session itself is gone: nothing left to close
            raise
        holder = state.get(continuations.open_key(invocation_id))
        continuation = state.get(continuations.key_of(invocation_id))
        if holder is not None and token in (None, holder):
            expected = continuations.is_open(invocation_id, holder)
            delta = continuations.closed_delta(invocation_id)
        elif isinstance(continuation, dict) and token in (None, continuation.get("token")):
            expected = {continuations.key_of(invocation_id): continuation}
            delta = continuations.dropped_delta(invocation_id)  # it cannot resume after this
        else:
            return None
        event = Event.new(
            self.agent_name,
            invocation_id,
            error=EventError(reason=reason, message="the invocation was cancelled"),
        )
        try:
            self.sessions.add_event_if_state(
                self.app_name, user_id, session_id, event, expected, runtime_delta=delta
            )
        except AdkError as error:
            if error.reason == "conflict":  # it moved on meanwhile: look again
                return self.abandon(user_id, session_id, invocation_id, reason, token=token)
            raise
        self.sessions.clear_temp_state(self.app_name, user_id, session_id)
        return event

    def resume(
        self,
        user_id: str,
        session_id: str,
        response: Any,
        invocation_id: str | None = None,
    ) -> str | Content | Paused:
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
        *,
        token: str | None = None,
    ) -> Iterator[Event | Outcome]:
        """Resume a paused invocation; iterate like `invocation`: the claim event, the
        resumed steps, one outcome. Everything that can refuse it is checked now,
        before anything is consumed (``no_paused_invocation``, ``ambiguous_paused_
        invocation``, ``paused_by_another_agent``, an invalid response, a context
        budget); the continuation is then claimed by the worker once admitted, so an
        invocation refused by admission stays resumable. Of racing resumes exactly one
        claims it; the others end ``no_paused_invocation``.

        `response` is ``{"confirmed": bool}`` for a tool approval, the completion
        ``{"operation_id", "status", ...}`` for a long-running operation, or the human's
        JSON object for ``request_human_approval``.
        """
        spec = self._spec()
        session = self._paused_session(user_id, session_id)
        invocation_id, continuation = continuations.select(
            session.state, invocation_id, agent=spec.name
        )
        how, payload = continuations.answer(continuation, response)
        past, current = split_events(
            session.events, invocation_id, self.context_policy.include_partial
        )
        if not current:
            raise AdkError("invalid_continuation", "the paused invocation is not in the session")
        history = model_history(self.context_policy.select(past, current[0], spec.name)[:-1])
        contents = [event.content for event in current if event.content is not None]
        claim = continuations.claim_event(invocation_id, continuation["type"], how)
        invocation = Invocation(
            self, spec, user_id, session_id, invocation_id, session.state, token
        )
        work = (
            spec,
            history,
            contents,
            continuation,
            (how, payload),
            Scope(self.app_name, user_id, session_id),
            invocation_id,
        )
        return invocation.events(
            resume_turn,
            work,
            opening=claim,
            opening_delta=continuations.claimed_delta(invocation_id, invocation.token),
            expected={continuations.key_of(invocation_id): continuation},
        )

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
        invocation_id, continuation = continuations.select(
            session.state, invocation_id, agent=self.agent_name
        )
        if continuation.get("operation_id") != operation_id:
            raise AdkError("long_running_operation_mismatch", "another operation is paused there")
        event = continuations.progress_event(self.agent_name, invocation_id, continuation, update)
        return self._add_while_paused(user_id, session_id, invocation_id, continuation, event)

    def _add_while_paused(
        self,
        user_id: str,
        session_id: str,
        invocation_id: str,
        continuation: Mapping[str, Any],
        event: Event,
    ) -> Event:
        """Store `event` only if the continuation is still the one read (one atomic step);
        a resume that got there first makes this ``no_paused_invocation``."""
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
                raise AdkError("no_paused_invocation", "it was resumed already") from None
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

    def _invocation(
        self,
        user_id: str,
        session_id: str,
        message: str | Content,
        invocation_id: str | None,
        token: str | None,
    ) -> Iterator[Any]:
        spec = self._spec()
        content = as_content(message)
        invocation_id = _invocation_id(invocation_id)
        session = self.sessions.create_session(self.app_name, user_id, session_id)
        user_event = Event.new("user", invocation_id, content)
        invocation = Invocation(
            self, spec, user_id, session_id, invocation_id, session.state, token
        )
        try:  # nothing is stored before these pass, except a policy's audit event
            invocation.guard.admit(spec.name, content)
        except AdkError as error:
            return iter([*invocation.drain(), Failed(error.reason)])
        past, _ = split_events(session.events, None, self.context_policy.include_partial)
        history = model_history(self.context_policy.select(past, user_event, spec.name)[:-1])
        work = (spec, history, content, Scope(self.app_name, user_id, session_id), invocation_id)
        return invocation.events(
            run_turn,
            work,
            opening=user_event,
            opening_delta=continuations.opened_delta(invocation_id, invocation.token),
        )

    def _spec(self) -> Any:
        try:
            _status, spec = call(registered_name(self.agent_name), ("spec",), 10.0)
        except ProcessExit:
            raise AdkError("noproc", "the agent is not running") from None
        except CallTimeout:
            raise AdkError("agent_unresponsive", "the agent did not answer in 10 s") from None
        return spec


def _invocation_id(chosen: str | None) -> str:
    if chosen is None:
        return f"inv-{uuid.uuid4().hex}"
    if not isinstance(chosen, str) or not 1 <= len(chosen) <= MAX_INVOCATION_ID_CHARS:
        raise AdkError(
            "invalid_invocation_id", f"an invocation id is 1..{MAX_INVOCATION_ID_CHARS} chars"
        )
    return chosen


def _result(outcome: Outcome | None) -> Any:
    """What `run` returns for an outcome: the output, the `Paused` outcome, or a raise."""
    if isinstance(outcome, Completed):
        return outcome.output
    if isinstance(outcome, Paused):
        return outcome
    reason = outcome.reason if outcome is not None else "invocation_worker_exit"
    raise AdkError(reason, "the invocation failed")


_ADMISSION_KEYS = {"overflow", "queue_timeout", "server"}


def _admission_options(options: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A Runner's admission settings: overflow mode, queue timeout, controller name."""
    if options is None:
        return None
    options = check_options(
        options, _ADMISSION_KEYS, "invalid_admission_control", "admission_control"
    )
    if options.get("overflow", "reject") not in ("reject", "queue"):
        raise AdkError(("invalid_admission_control", "overflow"), "overflow: reject or queue")
    timeout = options.get("queue_timeout", 30.0)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout <= MAX_RUN_TIMEOUT
    ):
        raise AdkError(
            ("invalid_admission_control", "queue_timeout"),
            f"queue_timeout is seconds in (0, {MAX_RUN_TIMEOUT}]",
        )
    return {
        "overflow": options.get("overflow", "reject"),
        "queue_timeout": float(timeout),
        **({"server": options["server"]} if "server" in options else {}),
    }


class EventStream:
    """One invocation's events: iterate with ``for`` or ``async for`` (never both).
    Nothing starts until iteration does; a failed invocation raises `AdkError` after
    its last event; a pause ends the stream after the pause event."""

    def __init__(self, start: Callable[[], Iterator[Event | Outcome]]) -> None:
        self._start = start

    def __iter__(self) -> Iterator[Event]:
        items = self._start()
        try:
            for item in items:
                if isinstance(item, OUTCOME_TYPES):
                    _result(item)
                    return
                yield item
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    def __aiter__(self) -> AsyncIterator[Event]:
        return aio.iterate(iter(self))
