"""The invocation server: one supervised process per invocation.

A `temporary` child of the invocation supervisor (``adk.runs``). It owns everything
of one invocation: its admission permit, its lane slot in the agent, the opening
event, the turn task it starts and monitors, every session write, its credit stream
(a run's is started only when needed: its first subscriber, a subscriber given at the
start, one event more than its window, or a stop while in flight; see `publish`) and
its single terminal. Its phase (`Phase`) only moves forward:

    ADMITTING -> QUEUED_IN_LANE -> OPEN -> PAUSED | COMPLETED | FAILED | CANCELLED

Waiting is a message: the permit and the lane slot are requested with
`send_request` and arrive as `Response`s (with no runtime policy to admit a fresh
invocation and no admission control, `init` asks for the lane itself; otherwise a
`Begin` to itself starts admission); the turn runs in a `Task` and reports each
step but its final answer (`TurnStep`, `AuditStep`) and its end (`TaskResult`), the
final answer kept in `state.final` just before that end (`turn_call`); cancel, the
deadline and the owner's exit are messages too. Only this process writes the
invocation's events, and a step that arrives after the terminal is dropped, so a
late or killed turn can never write. A plain invocation (`Runner.run`, `run_async`)
stops once its terminal is published (`run` and `resume` subscribe for the terminal
alone, `outcome_only`); a stable run stays, answering `Wait`, `Status`, `RunStatus` and
`OpenStream`, until the run registry ends its retention.

The server traps exits, so a shutdown from its supervisor (``adk.stop()``) runs
`terminate`, which ends an invocation still in flight the way a failure does: an
open one gets its terminal error event (reason ``shutdown``, its ``_adk:open:`` key
deleted, ``temp:`` cleared) and every subscriber and waiter its outcome
(``Failed("shutdown")``); a paused or ended one keeps what it has. Any other exit
signal but ``normal`` (the run registry's ``("shutdown", why)`` at the end of a
retention, a linked run stream that fails) still ends the server, as without
trapping, and its `terminate` runs too (a shutdown reason records ``shutdown``,
anything else ``("invocation_server_exit", kind)``). Only ``kill`` (or the process
dying) skips `terminate`: a durable store closes such an invocation when it is next
opened (``abandoned``, `sessions.owner`), a run's registry at once (`Runner.abandon`).

Every session write of the server is fenced by its liveness inside the write's
atomic step (`session_writes`), so a killed server never writes after whoever closes
for it has read the session; what it tells its stream, caller, waiters and run
registry is `publish`.

The Runner's plugins never block it: a step's ``on_event`` hooks run in a task it owns
and report back as a message (`storing`: the turn's next messages wait, in order, in
its state), and ``after_run`` / ``on_run_error`` go to the plugin notifier once the end
is published (`ends.terminal`). Its ``invoke_agent`` span starts in `init`, a child of
the caller's span (the server runs in a copy of its starter's context), is current
where the history and turn tasks start, and ends with the terminal.
"""

from __future__ import annotations

import time
from typing import Any

from adk_actors import admission as admission_api
from adk_actors import collector
from adk_actors.agents.messages import EnterLane
from adk_actors.agents.names import registered_name
from adk_actors.agents.scope import Scope
from adk_actors.agents.turn_outcome import TurnCompleted, TurnFailed, TurnPaused
from adk_actors.events import Event
from adk_actors.observability import semconv, tracer
from adk_actors.observability.tracing import OpenSpan, start_span
from adk_actors.runner import ends, session_writes, steps, storing
from adk_actors.runner.ends import end_cancelled, end_failed, fail_open, refuse
from adk_actors.runner.guard import Guard
from adk_actors.runner.history import read_history, visible_state
from adk_actors.runner.messages import (
    AuditStep,
    Begin,
    BeginResume,
    Cancel,
    DeadlineReached,
    EndResume,
    ForgetResume,
    GraceOver,
    OpenStream,
    RunStatus,
    Status,
    TurnStep,
    Unwait,
    Wait,
)
from adk_actors.runner.phase import Phase, advance
from adk_actors.runner.publish import (
    announce_stream,
    close_stream,
    new_backlog,
    open_for_shutdown,
    open_stream,
    publish,
    start_stream,
    track_run,
)
from adk_actors.runner.release import admission_server, give_back, kill_tasks, release
from adk_actors.runner.request import Fresh, InvocationRequest, Resumed, handoffs
from adk_actors.runner.state import (
    InvocationState,
    begin_resume,
    status_view,
    still_paused,
    window_view,
)
from adk_actors.runner.turn_call import invocation_pool, turn_call
from providers.errors import AdkError
from supervision import (
    DEADLINE_REASON,
    AlreadyStarted,
    Down,
    ExitSignal,
    From,
    GenServer,
    NameTaken,
    NoReply,
    Pid,
    Ref,
    Reply,
    Response,
    Stop,
    Task,
    TaskBusy,
    TaskResult,
    cancel_timer,
    is_normal_exit,
    monitor,
    self_pid,
    send,
    send_after,
    send_request,
    trap_exit,
    whereis,
)
from supervision.logs import get_logger

LANE_RETRIES = 3
"""Times a lane request follows a restarted agent before the invocation fails."""
SHUTDOWN = "shutdown"
"""The reason an invocation in flight ends with when the application stops."""
KILLED = "killed"
"""The ``invoke_agent`` span's ``error.type`` when its server was killed mid-flight."""
_log = get_logger("adk_actors.runner")


class InvocationServer(GenServer):
    """One invocation: its permit, lane slot, turn, session writes, stream, terminal."""

    def init(self, ref: str) -> Any:
        try:
            request = handoffs.take(ref)
        except AdkError:
            return Stop(("shutdown", "handoff_taken"))
        try:
            stream = start_stream(request)
        except (NameTaken, AlreadyStarted):  # the name was the first step: nothing started
            return Stop(("shutdown", "already_exists"))
        announce_stream(request, stream)
        timeout = request.runner.run_timeout
        state = InvocationState(
            request,
            stream,
            time.monotonic() + timeout,
            backlog=new_backlog(request, stream),
            partials=steps.Partials(request.runner.max_partial_events),
            span=_invocation_span(request),  # a child of the caller's current span
        )
        # a killed server runs no `terminate`: its span ends once its state is dropped
        # (never inside the cyclic collector: see `collector.finalize`)
        collector.finalize(state, state.span.end, KILLED)
        collector.run_deferred()
        trap_exit(True)  # a shutdown runs `terminate`, which records the end
        track_run(request)  # a run's registry hears of it before anything else of it
        state.deadline_timer = send_after(self_pid(), DeadlineReached(), timeout)
        if request.owner is not None:
            state.owner_ref = monitor(request.owner)
        agent = _agent(state) if _nothing_before_the_lane(request) else None
        if agent is not None:  # no policy or admission to pass: ask for the lane now
            self._enter_lane(state, agent)  # a request only: `init` still returns at once
        else:
            send(self_pid(), Begin())
        return state

    # -- requests --------------------------------------------------------------------

    def handle_call(self, request: Any, from_: From, state: InvocationState) -> Any:
        answer = self._call(request, from_, state)
        if isinstance(answer, Reply) and state.phase.terminal and state.request.run is None:
            return Stop("normal", state, reply=answer.value)  # ended by this call
        return answer

    def _call(self, request: Any, from_: From, state: InvocationState) -> Any:
        match request:
            case Wait(token):
                if state.outcome is not None:
                    return Reply(state.outcome, state)
                state.waiters[token] = from_
                return NoReply(state)
            case Status():
                return Reply(("ok", status_view(state)), state)
            case RunStatus() if state.request.run is not None:  # no stream: its window here
                window = None if state.stream is not None else window_view(state)
                return Reply(("ok", (status_view(state), state.stream, window)), state)
            case OpenStream() if state.request.run is not None:
                return Reply(("ok", open_stream(state)), state)
            case RunStatus() | OpenStream():
                return Reply(("error", "not_a_run"), state)
            case Cancel(reason, float() | int() as grace):
                return Reply(self._cancel(state, reason, float(grace)), state)
            case BeginResume(str() as new_run_id):
                return Reply(begin_resume(state, new_run_id), state)
            case ForgetResume(str() as run_id):
                if state.resumed_to == run_id and still_paused(state):
                    state.resumed_to = None
                return Reply(("ok", None), state)
            case EndResume(str() as new_run_id, bool() as committed):
                if state.resume_pending == new_run_id:
                    state.resume_pending = None
                    if committed:
                        state.resumed_to = new_run_id
                return Reply(("ok", None), state)
        return Reply(("error", ("invalid_request", type(request).__name__)), state)

    def handle_cast(self, msg: Any, state: InvocationState) -> Any:
        match msg:
            case Unwait(token):
                state.waiters.pop(token, None)
        return state

    def handle_info(self, msg: Any, state: InvocationState) -> Any:
        match msg:
            case TurnStep() | AuditStep() if state.phase is Phase.OPEN and storing.busy(state):
                state.deferred.append(msg)  # after the steps still on their way
            case TurnStep() | AuditStep() if state.phase is Phase.OPEN:
                self._turn_message(state, msg)
            case TaskResult(pid=pid) if state.turn is not None and pid == state.turn.pid:
                state.turn = None
                self._stop_grace(state)  # the turn ended within the grace: its outcome stands
                if storing.busy(state):  # its outcome counts once its steps are stored
                    state.deferred.append(msg)
                else:
                    self._turn_ended(state, msg)
            case TaskResult(pid=pid) if state.hook is not None and pid == state.hook.pid:
                storing.hook_done(state, msg)
                self._drain(state)
            case TaskResult(pid=pid) if state.preparing is not None and pid == state.preparing.pid:
                state.preparing = None
                if state.phase is Phase.QUEUED_IN_LANE:
                    self._prepared(state, msg)
            case Response(request_id=request_id):
                self._response(state, request_id, msg)
            case Begin() if state.phase is Phase.ADMITTING:
                self._begin(state)
            case GraceOver() if not state.phase.terminal:
                state.grace = None
                _log.info("adk.invocation.turn_killed", invocation_id=state.invocation_id)
                end_cancelled(state)
            case DeadlineReached() if not state.phase.terminal:
                state.deadline_timer = None
                self._deadline(state)
            case Down(ref=ref) if ref == state.owner_ref and not state.phase.terminal:
                state.owner_ref = None  # whoever waited for it is gone: stop at once
                state.cancel_reason = "consumer_closed"
                end_cancelled(state)
            case ExitSignal(reason=reason) if reason != "normal":
                return Stop(reason, state)  # as without trapping: any exit but normal ends it
        return self._after(state)

    def terminate(self, reason: Any, state: Any) -> None:
        if isinstance(state, InvocationState):
            if not state.phase.terminal:
                self._end_in_terminate(state, reason)
            release(state)
            close_stream(state)

    def _end_in_terminate(self, state: InvocationState, reason: Any) -> None:
        """The server stops with the invocation in flight (a shutdown, or a crash):
        record its end as a failure, so the session never keeps it open."""
        if is_normal_exit(reason):
            why: Any = SHUTDOWN
        else:
            kind = getattr(reason, "kind", None) or reason  # a crash's kind, never its text
            why = (
                "invocation_server_exit",
                (kind if isinstance(kind, str) else type(kind).__name__)[:200],
            )
        state.stopping = True  # no plugin notification while the server stops
        open_for_shutdown(state)  # a subscriber arriving meanwhile gets the end
        try:
            kill_tasks(state)
            if state.phase is Phase.OPEN:
                state.partials.clear()  # an unfinished round's deltas are not stored
                end_failed(state, why)
            else:
                refuse(state, why)
        except Exception as error:  # the end is best effort here: never mask the exit
            _log.warning(
                "adk.invocation.end_not_recorded",
                invocation_id=state.invocation_id,
                kind=type(error).__name__,
            )

    # -- admission and the lane --------------------------------------------------------

    def _begin(self, state: InvocationState) -> None:
        request = state.request
        runner = request.runner
        if isinstance(request.work, Fresh) and runner.runtime_policy is not None:
            guard = Guard(runner.runtime_policy, state.invocation_id, self._audit_refusal(state))
            try:
                guard.admit(runner.agent_name, request.work.message)
            except AdkError as error:
                refuse(state, error.reason)
                return
        admission = runner.admission_control
        if admission is None:
            self._enter_lane(state)
            return
        state.admission_request_id = admission_api.new_request_id()
        try:
            state.admission_request = admission_api.request_permit(
                runner.agent_name,
                overflow=admission.overflow,
                deadline=min(state.deadline_at, time.monotonic() + admission.queue_timeout),
                request_id=state.admission_request_id,
                server=admission_server(state),
            )
        except AdkError as error:
            refuse(state, ("admission_failed", error.reason))

    def _response(self, state: InvocationState, request_id: Ref, response: Response) -> None:
        if request_id == state.admission_request:
            state.admission_request = None
            try:
                permit = admission_api.permit_from_response(
                    response, server=admission_server(state)
                )
            except AdkError as error:
                if state.phase is Phase.ADMITTING:
                    refuse(state, ("admission_failed", error.reason))
                return
            if state.phase is not Phase.ADMITTING:  # ended meanwhile: give it back
                give_back(permit)
                return
            if time.monotonic() >= state.deadline_at:  # granted after our deadline passed
                give_back(permit)
                refuse(state, "timeout")
                return
            state.permit = permit
            self._enter_lane(state)
        elif request_id == state.lane_request:
            state.lane_request = None
            if state.phase is not Phase.QUEUED_IN_LANE:
                return
            if response.ok and response.value[0] == "ok":
                self._prepare(state, response.value[1])
            elif response.ok:
                refuse(state, response.value[1])
            elif state.lane_attempts < LANE_RETRIES and _agent(state) is not None:
                self._enter_lane(state)  # the agent restarted meanwhile: ask the new one
            else:
                refuse(state, "noproc")

    def _enter_lane(self, state: InvocationState, agent: Pid | None = None) -> None:
        """Ask the agent (`agent`, or the one registered now) for the session's lane."""
        if state.phase is Phase.ADMITTING:
            state.phase = advance(state.phase, Phase.QUEUED_IN_LANE)
        request = state.request
        lane = Scope(request.runner.app_name, request.user_id, request.session_id).lane()
        state.lane_attempts += 1
        state.lane_agent = agent if agent is not None else _agent(state)
        if state.lane_agent is None:
            refuse(state, "noproc")
            return
        state.lane_request = send_request(state.lane_agent, EnterLane(lane, self_pid()))

    # -- opening -------------------------------------------------------------------------

    def _prepare(self, state: InvocationState, spec: Any) -> None:
        """The lane is ours. A fresh invocation first reads its session and chooses the
        history its model sees (a context policy may run a compressor), in a task of its
        own so this server stays responsive; a resume chose its history when checked."""
        state.spec = spec
        request = state.request
        _log.debug("adk.invocation.preparing", invocation_id=state.invocation_id)
        if isinstance(request.work, Resumed):
            self._open(state, request.work.history, visible_state(request.work.state))
            return
        state.opening = Event.new("user", state.invocation_id, request.work.message)
        if not request.runner.context_policy.runs_user_code:  # a short read: do it here
            self._prepared(state, read_history(request, state.opening, spec.name))
            return
        try:
            with state.span.activate():  # a compressor's model call is the invocation's
                state.preparing = Task.start(
                    read_history,
                    request,
                    state.opening,
                    spec.name,
                    notify=True,
                    pool=invocation_pool(),
                )
        except TaskBusy:
            refuse(state, "busy")

    def _prepared(self, state: InvocationState, result: Any) -> None:
        """The history task's result (a `TaskResult`), or the value it would return."""
        if isinstance(result, TaskResult):
            if not result.ok:
                kind = getattr(result.value, "kind", None) or str(result.value)
                refuse(state, ("invocation_worker_exit", kind[:200]))
                return
            result = result.value
        if isinstance(result, TurnFailed):
            refuse(state, result.reason)
        else:
            self._open(state, *result)

    def _open(self, state: InvocationState, history: list[Any], visible: dict[str, Any]) -> None:
        """Store the opening (the user's message, or a resume's claim) and start the
        turn. A claim someone else made first is ``no_paused_invocation``."""
        work = state.request.work
        opening, expected, delta = session_writes.opening(state)
        try:
            if not session_writes.write(state, opening, delta, expected):
                fresh = isinstance(work, Fresh)
                refuse(state, "invocation_already_open" if fresh else "no_paused_invocation")
                return
        except AdkError as error:
            refuse(state, error.reason)
            return
        state.phase = advance(state.phase, Phase.OPEN)
        turn, args = turn_call(state, history, visible)
        try:  # a coroutine: it runs on the kernel's reactor, holding no thread while it waits
            with state.span.activate():  # the turn's spans are the invocation's
                state.turn = Task.start(turn, *args, deadline=state.deadline_at, notify=True)
        except TaskBusy:
            publish(state, opening)
            end_failed(state, "busy")
            return
        publish(state, opening)  # once its turn runs: a subscriber may count on it

    # -- steps ---------------------------------------------------------------------------

    def _turn_message(self, state: InvocationState, msg: Any) -> None:
        """A message of the turn, in the order it sent them (see `storing`)."""
        match msg:
            case TurnStep(kind, value, metadata):
                self._step(state, kind, value, metadata)
            case AuditStep(event):
                storing.store(state, event)
            case TaskResult():
                self._turn_ended(state, msg)

    def _drain(self, state: InvocationState) -> None:
        """The turn's messages that waited for a hook, until the next hook runs."""
        while state.hook is None and state.deferred and state.phase is Phase.OPEN:
            self._turn_message(state, state.deferred.popleft())

    def _step(self, state: InvocationState, kind: str, value: Any, metadata: Any) -> None:
        """A step of the turn becomes a stored event; deltas wait for their round's end,
        and the final round's deltas wait for the final-output policy. The final answer
        is not a step: the turn hands it over in `state.final` (`_end_completed`)."""
        name = state.spec.name
        if kind == "delta":
            limit = state.runner.max_stream_output_bytes
            if not state.partials.add(name, state.invocation_id, value, limit):
                state.partials.clear()  # none of this round's deltas is stored
                fail_open(state, "stream_output_limit_exceeded")
        elif kind == "tool":
            storing.store(state, Event.new(name, state.invocation_id, value))
        elif steps.is_final_answer(kind, value):  # never a message (`turn_call`)
            fail_open(state, ("invalid_turn_step", "final_answer"))  # never dropped silently
        elif kind == "model":  # a round that ends in tool calls
            self._flush_partials(state)
            storing.store(
                state, Event.new(name, state.invocation_id, value, provider_metadata=metadata)
            )

    def _flush_partials(self, state: InvocationState) -> None:
        for partial in state.partials.take(state.spec.name, state.invocation_id):
            storing.store(state, partial)

    # -- the end ---------------------------------------------------------------------------

    def _stop_grace(self, state: InvocationState) -> None:
        if state.grace is not None:
            cancel_timer(state.grace)
            state.grace = None

    def _turn_ended(self, state: InvocationState, result: TaskResult) -> None:
        self._stop_grace(state)
        if not result.ok:
            if state.cancel_reason is not None:
                end_cancelled(state)
            elif result.value == DEADLINE_REASON:
                end_failed(state, "timeout")
            else:  # the kind only: exception text stays out of sessions
                kind = getattr(result.value, "kind", None) or str(result.value)
                end_failed(state, (ends.WORKER_EXIT, kind[:200]))
            return
        match result.value:
            case TurnCompleted(output=output):
                self._end_completed(state, output)
            case TurnPaused(continuation, call, message):
                ends.end_paused(state, continuation, call, message)
            case TurnFailed(reason=reason):
                end_failed(state, reason)
            case other:
                end_failed(state, ("invalid_turn_outcome", type(other).__name__))

    def _end_completed(self, state: InvocationState, output: Any) -> None:
        """The final-output policy, then the round's deltas and the final event, each
        after the steps before it (`storing`)."""
        runner = state.runner
        guard = Guard(runner.runtime_policy, state.invocation_id, self._audit_step(state))
        try:
            guard.final(state.spec.name, output)
        except AdkError as error:  # its deltas and text are never stored
            state.partials.clear()
            storing.fail_after(state, error.reason)  # after the denial's audit event
            return
        self._flush_partials(state)
        if state.phase.terminal:  # a step could not be stored: that ended it
            return
        content, metadata = state.final.value
        event = steps.final_event(state.spec, state.invocation_id, output, content, metadata)
        storing.store_final(state, event, output)

    def _deadline(self, state: InvocationState) -> None:
        if state.phase is Phase.ADMITTING and state.admission_request is not None:
            return  # the controller holds the same deadline and answers it
        kill_tasks(state)
        if state.phase is Phase.OPEN:
            end_failed(state, "timeout")
        else:
            refuse(state, "timeout")

    def _after(self, state: InvocationState) -> Any:
        """A plain invocation stops once its terminal is out; a run stays retained."""
        if state.phase.terminal and state.request.run is None:
            return Stop("normal", state)
        return state

    # -- cancel --------------------------------------------------------------------------

    def _cancel(self, state: InvocationState, reason: Any, grace: float) -> tuple[str, Any]:
        if state.phase.terminal:
            return ("error", "already_terminal")
        if state.cancel_reason is not None:
            return ("ok", None)  # the first reason wins
        state.cancel_reason = reason
        _log.info("adk.invocation.cancel_requested", invocation_id=state.invocation_id)
        if state.phase is Phase.OPEN and grace > 0 and state.turn is not None:
            # the running turn may still end on its own (its result stops the grace,
            # even while its last steps still wait for a hook); one that ended already,
            # its steps still on their way to the session, is cancelled at once
            state.grace = send_after(self_pid(), GraceOver(), grace)
        else:
            end_cancelled(state)
        return ("ok", None)

    # -- plumbing --------------------------------------------------------------------------

    def _audit_refusal(self, state: InvocationState) -> Any:
        """Store an audit event of a refusal before opening (the only thing it leaves)."""

        def store(event: Event) -> None:
            if session_writes.write_refusal_audit(state, event):
                publish(state, event)

        return store

    def _audit_step(self, state: InvocationState) -> Any:
        return lambda event: storing.store(state, event)


def _agent(state: InvocationState) -> Pid | None:
    return whereis(registered_name(state.runner.agent_name))


def _nothing_before_the_lane(request: InvocationRequest) -> bool:
    """No runtime policy to admit a fresh invocation and no admission control: `init`
    asks for the lane itself, saving the `Begin` message (and a dispatch) per run."""
    runner = request.runner
    if runner.admission_control is not None:
        return False
    return runner.runtime_policy is None or not isinstance(request.work, Fresh)


def _invocation_span(request: Any) -> OpenSpan:
    """The invocation's ``invoke_agent`` span: admission, lane, turn and terminal."""
    name = request.runner.agent_name
    run = request.run
    return start_span(
        tracer(),
        semconv.span_name(semconv.INVOKE_AGENT, name),
        lambda: semconv.invocation(
            name,
            invocation_id=request.invocation_id,
            session_id=request.session_id,
            run_id=run.run_id if run is not None else None,
        ),
    )
