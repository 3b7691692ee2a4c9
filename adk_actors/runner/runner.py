"""`Runner`: one invocation per call, every step stored as an event in a session.

Each invocation is one supervised process, its invocation server (`server.py`),
which the Runner starts and follows as a subscriber of its event stream (`run` and
`resume`, which return only the outcome, subscribe for the terminal alone). Around the
turn the server applies, in order: the runtime policy (agent and input), admission
(a permit it owns), the agent's lane for the session, the context policy (which
history the model sees), the budgets (`max_llm_calls`, `max_tool_rounds`,
`run_timeout`) and, at the end, the final-output policy. ``temp:`` state is cleared
when an invocation ends, unless it paused: `resume` continues a paused invocation
(human approval, a long-running operation) and `update_long_running` records
progress. `run` blocks; `run_async` streams events with ``for`` or ``async for``,
and `Runner.cancel(stream, reason)` cancels the invocation behind such a stream.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from adk_actors.agents.api import AgentLike, _name
from adk_actors.agents.scope import as_content
from adk_actors.agents.turn_outcome import Continuation
from adk_actors.events import Event, EventError
from adk_actors.outcomes import Outcome, Paused
from adk_actors.plugins import Pipeline
from adk_actors.policy import RuntimePolicy
from adk_actors.runner import continuations
from adk_actors.runner.context import ContextPolicy
from adk_actors.runner.event_stream import DEFAULT_CANCEL_REASON, EventStream
from adk_actors.runner.follow import await_outcome, cancel_abandoned, follow, result_of
from adk_actors.runner.history import model_history, split_events
from adk_actors.runner.launch import Abandon, launch, launch_async
from adk_actors.runner.options import (
    DEFAULT_MAX_PARTIAL_EVENTS,
    DEFAULT_MAX_STREAM_OUTPUT_BYTES,
    runner_admission,
    runner_options,
)
from adk_actors.runner.request import Fresh, InvocationRequest, Resumed, RunIdentity
from adk_actors.sessions.service import SessionService
from providers.content import Content
from providers.errors import AdkError
from supervision import (
    Pid,
    random_bytes,
)

MAX_INVOCATION_ID_CHARS = 128
MAX_PENDING_RESULTS = 100


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
        max_partial_events: int = DEFAULT_MAX_PARTIAL_EVENTS,
        context_policy: Mapping[str, Any] | ContextPolicy | None = None,
        runtime_policy: Mapping[str, Any] | RuntimePolicy | None = None,
        admission_control: Mapping[str, Any] | None = None,
        plugins: Sequence[Any] | Pipeline | None = None,
    ) -> None:
        options = runner_options(
            run_timeout=run_timeout,
            max_llm_calls=max_llm_calls,
            max_tool_rounds=max_tool_rounds,
            streaming_mode=streaming_mode,
            max_stream_output_bytes=max_stream_output_bytes,
            max_partial_events=max_partial_events,
        )
        if not isinstance(sessions, SessionService):
            raise AdkError("invalid_session_service", "sessions is a session service")
        self.agent_name = _name(agent)
        self.app_name = app_name
        self.sessions = sessions
        self.run_timeout = float(options.run_timeout)
        self.max_llm_calls = options.max_llm_calls
        self.max_tool_rounds = options.max_tool_rounds
        self.streaming_mode = options.streaming_mode
        self.max_stream_output_bytes = options.max_stream_output_bytes
        self.max_partial_events = options.max_partial_events
        self.context_policy = ContextPolicy.compile(context_policy)
        self.runtime_policy = (
            None if runtime_policy is None else RuntimePolicy.compile(runtime_policy)
        )
        self.admission_control = runner_admission(admission_control)
        self.plugins = Pipeline.compile(() if plugins is None else plugins)
        """Global plugins, checked here (`adk_actors.plugins`): they run in every
        invocation and its sub-agents, before the agent's own callbacks."""

    def run(self, user_id: str, session_id: str, message: str | Content) -> str | Content | Paused:
        """Run one invocation to its end: the final output, a `Paused` outcome to
        `resume` later, or a raised `AdkError`. Only the end is sent to the caller (no
        message per event): every event is stored, and seen by the plugins, as when
        streamed."""
        return result_of(
            await_outcome(
                lambda inbox: self.start_invocation(
                    user_id, session_id, message, owner=inbox, subscriber=inbox, outcome_only=True
                )
            )
        )

    def run_async(self, user_id: str, session_id: str, message: str | Content) -> EventStream:
        """The invocation's events as they are stored, with ``for`` or ``async for``
        (a failure raises at the end). Leaving the loop early cancels the invocation;
        so does `Runner.cancel(stream, reason)` from anywhere."""
        content = as_content(message)
        return EventStream(
            lambda inbox: self._fresh(user_id, session_id, content, None, None, inbox, inbox)
        )

    @staticmethod
    def cancel(stream: EventStream, reason: Any = DEFAULT_CANCEL_REASON) -> None:
        """Cancel the invocation behind a `run_async` stream, from any thread: its
        turn is stopped, the session records the cancel, and the stream ends with the
        outcome `Cancelled(reason)` (iterating it raises ``("cancelled", reason)``
        after the events stored before). The first reason wins; once the invocation
        has ended this does nothing. A stream not iterated yet is cancelled as soon
        as it starts. A reason is JSON-safe and at most 1 KiB
        (``invalid_cancel_reason``); anything but an `EventStream` is
        ``invalid_stream``."""
        if not isinstance(stream, EventStream):
            raise AdkError("invalid_stream", "cancel a stream that run_async returned")
        stream.cancel(reason)

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
        (`Completed`, `Paused`, `Failed` or `Cancelled`) as the last item, read from the
        invocation server's stream. Leaving early cancels it (``consumer_closed``)."""
        work = Fresh(as_content(message))
        chosen, token = _identity(invocation_id, token)
        yield from follow(
            lambda inbox: launch(
                self._request(user_id, session_id, chosen, token, work, inbox, inbox)
            )
        )

    def start_invocation(
        self,
        user_id: str,
        session_id: str,
        message: str | Content,
        *,
        invocation_id: str | None = None,
        token: str | None = None,
        owner: Pid | None = None,
        subscriber: Pid | None = None,
        run: RunIdentity | None = None,
        outcome_only: bool = False,
    ) -> Pid:
        """Start the invocation's server and return its pid (what `adk.runs` drives).
        `owner`'s exit cancels it; `subscriber` gets its stream from the first item;
        `run` makes it a retained stable run. With `outcome_only` (a plain invocation's
        subscriber that wants only its end, as `run`) the subscriber is sent the
        `StreamTerminal` alone: no `StreamOpened`, no item per event (monitor the
        returned server instead); the events are stored and seen by plugins as ever.
        `outcome_only` with a `run`, or without a `subscriber`, is ``invalid_request``."""
        return launch(
            self._fresh(
                user_id,
                session_id,
                message,
                invocation_id,
                token,
                owner,
                subscriber,
                run,
                outcome_only=outcome_only,
            )
        )

    async def start_invocation_async(
        self,
        user_id: str,
        session_id: str,
        message: str | Content,
        *,
        invocation_id: str | None = None,
        token: str | None = None,
        owner: Pid | None = None,
        subscriber: Pid | None = None,
        run: RunIdentity | None = None,
        outcome_only: bool = False,
        abandon: Abandon = cancel_abandoned,
    ) -> Pid:
        """`start_invocation` for asyncio code (what `adk.runs.start_async` drives): the
        start is awaited, so the event loop runs on while the invocation supervisor's
        thread starts the server. The same arguments, checks and refusals. A start once
        sent cannot be taken back: if the awaiting task is cancelled meanwhile, the
        start still completes and a server it started is handed to `abandon` (by
        default cancelled with ``consumer_closed``, nobody being left to follow it)
        before the `CancelledError` reaches the caller (see `launch.launch_async`)."""
        return await launch_async(
            self._fresh(
                user_id,
                session_id,
                message,
                invocation_id,
                token,
                owner,
                subscriber,
                run,
                outcome_only=outcome_only,
            ),
            abandon,
        )

    def _fresh(
        self,
        user_id: str,
        session_id: str,
        message: str | Content,
        invocation_id: str | None,
        token: str | None,
        owner: Pid | None,
        subscriber: Pid | None,
        run: RunIdentity | None = None,
        *,
        outcome_only: bool = False,
    ) -> InvocationRequest:
        """A fresh invocation's request: its message as content, its id and token (given,
        checked, or drawn now), the rest as `_request`."""
        work = Fresh(as_content(message))
        chosen, token = _identity(invocation_id, token)
        return self._request(
            user_id,
            session_id,
            chosen,
            token,
            work,
            owner,
            subscriber,
            run,
            outcome_only=outcome_only,
        )

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
            state = self._session(user_id, session_id).state
        except AdkError as error:
            if error.reason == "not_found":
                return None  # the session itself is gone: nothing left to close
            raise
        holder = state.get(continuations.open_key(invocation_id))
        continuation = state.get(continuations.key_of(invocation_id))
        if holder is not None and token in (None, continuations.token_of(holder)):
            expected = {continuations.open_key(invocation_id): holder}
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
        """Resume a paused invocation to its end, like `run` (it may pause again);
        checked like `resume_invocation` before anything starts."""
        chosen, work = self._resumed(user_id, session_id, response, invocation_id)
        return result_of(
            await_outcome(
                lambda inbox: launch(
                    self._request(
                        user_id, session_id, chosen, None, work, inbox, inbox, outcome_only=True
                    )
                )
            )
        )

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
        budget); the continuation is then claimed by the invocation server once
        admitted and in its lane, so an invocation refused by admission stays
        resumable. Of racing resumes exactly one claims it; the others end
        ``no_paused_invocation``.

        `response` is ``{"confirmed": bool}`` for a tool approval, the completion
        ``{"operation_id", "status", ...}`` for a long-running operation, or the human's
        JSON object for ``request_human_approval``.
        """
        chosen, work = self._resumed(user_id, session_id, response, invocation_id)
        return follow(
            lambda inbox: launch(
                self._request(user_id, session_id, chosen, token, work, inbox, inbox)
            )
        )

    def start_resume(
        self,
        user_id: str,
        session_id: str,
        response: Any,
        invocation_id: str | None = None,
        *,
        token: str | None = None,
        owner: Pid | None = None,
        subscriber: Pid | None = None,
        run: RunIdentity | None = None,
        outcome_only: bool = False,
    ) -> Pid:
        """`resume_invocation` as a server of its own (what `adk.runs.resume` drives):
        checked now, claimed once admitted. `owner`, `subscriber`, `run` and
        `outcome_only` as for `start_invocation`."""
        chosen, work = self._resumed(user_id, session_id, response, invocation_id)
        return launch(
            self._request(
                user_id,
                session_id,
                chosen,
                token,
                work,
                owner,
                subscriber,
                run,
                outcome_only=outcome_only,
            )
        )

    def _request(
        self,
        user_id: str,
        session_id: str,
        invocation_id: str,
        token: str | None,
        work: Fresh | Resumed,
        owner: Pid | None = None,
        subscriber: Pid | None = None,
        run: RunIdentity | None = None,
        *,
        outcome_only: bool = False,
    ) -> InvocationRequest:
        """The request an invocation's server is started with (see `InvocationRequest`
        for the fields). An outcome-only caller must be a plain invocation's subscriber: a run's terminal
        goes through its credit stream, which such a caller never subscribes to."""
        if outcome_only and (run is not None or subscriber is None):
            raise AdkError("invalid_request", "outcome_only is for a plain invocation's subscriber")
        token = token or continuations.new_token()
        return InvocationRequest(
            self,
            user_id,
            session_id,
            invocation_id,
            token,
            work,
            owner,
            subscriber,
            run,
            outcome_only=outcome_only,
        )

    def _resumed(
        self, user_id: str, session_id: str, response: Any, invocation_id: str | None
    ) -> tuple[str, Resumed]:
        """Every check a resume must pass before anything starts; what it resumes."""
        session = self._paused_session(user_id, session_id)
        chosen, stored, continuation = continuations.select(
            session.state, invocation_id, agent=self.agent_name
        )
        answer = continuations.answer(continuation, response)
        past, current = split_events(session.events, chosen, self.context_policy.include_partial)
        if not current:
            raise AdkError("invalid_continuation", "the paused invocation is not in the session")
        history = model_history(self.context_policy.select(past, current[0], self.agent_name)[:-1])
        contents = [event.content for event in current if event.content is not None]
        return chosen, Resumed(stored, continuation, answer, history, contents, dict(session.state))

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
        invocation_id, stored, continuation = continuations.select(
            session.state, invocation_id, agent=self.agent_name
        )
        if continuation.operation_id != operation_id:
            raise AdkError("long_running_operation_mismatch", "another operation is paused there")
        event = continuations.progress_event(self.agent_name, invocation_id, continuation, update)
        return self._add_while_paused(user_id, session_id, invocation_id, stored, event)

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
            session = self._session(user_id, session_id)
        except AdkError as error:
            if error.reason == "not_found":
                return []
            raise
        return sorted(continuations.paused(session.state))

    def pending(
        self, user_id: str, session_id: str | None = None, *, limit: int = MAX_PENDING_RESULTS
    ) -> list[dict[str, Any]]:
        """What waits for a human or an operation, read from the sessions (so it survives a
        restart): one JSON-safe record per unclaimed pause of this Runner's agent, in
        `session_id` or in every session of the user (newest sessions first), at most
        `limit`. Each has ``invocation_id``, ``session_id``, ``type``, ``tool_name``,
        ``action_id``/``operation_id``/``hint`` when set, and ``run_id`` for a stable run."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 500:
            raise AdkError("invalid_limit", "limit is 1..500")
        if session_id is not None:
            try:
                chosen = [self._session(user_id, session_id)]
            except AdkError as error:
                if error.reason != "not_found":
                    raise
                chosen = []
        else:
            chosen = self.sessions.list_sessions(
                self.app_name, user_id, limit=500, include_internal=True
            )
        found: list[dict[str, Any]] = []
        for session in chosen:
            for invocation_id, stored in sorted(continuations.paused(session.state).items()):
                try:
                    paused = Continuation.load(stored)
                except AdkError:
                    continue  # not one this runtime can resume: nothing to show
                if paused.agent != self.agent_name:
                    continue
                record = {
                    "invocation_id": invocation_id,
                    "app_name": self.app_name,
                    "user_id": user_id,
                    "session_id": session.id,
                    "agent": paused.agent,
                    "tool_name": paused.tool_name,
                    "run_id": paused.run_id,
                    **paused.details(),
                }
                if paused.hint is not None:
                    record["hint"] = paused.hint
                found.append(record)
                if len(found) >= limit:
                    return found
        return found

    def find_paused_run(self, user_id: str, run_id: str) -> tuple[str, str] | None:
        """(session id, invocation id) of the pause a stable run left, from the sessions."""
        for record in self.pending(user_id, limit=500):
            if record["run_id"] == run_id:
                return record["session_id"], record["invocation_id"]
        return None

    def _session(self, user_id: str, session_id: str) -> Any:
        """The session with the runtime's own ``_adk:`` keys (its open invocations and
        paused continuations), which a session shown to anyone never has."""
        return self.sessions.get_session(self.app_name, user_id, session_id, include_internal=True)

    def _paused_session(self, user_id: str, session_id: str) -> Any:
        try:  # never creates a session: no session, no pause
            return self._session(user_id, session_id)
        except AdkError as error:
            if error.reason == "not_found":
                raise AdkError("no_paused_invocation", "no such session") from None
            raise


def _identity(chosen: str | None, token: str | None) -> tuple[str, str | None]:
    """A fresh invocation's id (`chosen`, checked, or a new ``inv-<32 hex>``) and its
    opening token (`token`, or None for `_launch` to draw one); both new ones come from
    one random draw, the token from its other half."""
    if chosen is None and token is None:
        drawn = random_bytes(32).hex()
        return f"inv-{drawn[:32]}", drawn[32:]
    return _invocation_id(chosen), token


def _invocation_id(chosen: str | None) -> str:
    if chosen is None:
        return f"inv-{uuid.uuid4().hex}"
    if not isinstance(chosen, str) or not 1 <= len(chosen) <= MAX_INVOCATION_ID_CHARS:
        raise AdkError(
            "invalid_invocation_id", f"an invocation id is 1..{MAX_INVOCATION_ID_CHARS} chars"
        )
    return chosen
