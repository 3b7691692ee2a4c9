"""The workflow coordinator: one supervised process per workflow run.

A `temporary` child of the workflow supervisor (``adk.workflows``), registered as
``("adk.workflow", ref)``. It takes its `Launch` from the one-shot handoff in `init`,
claims durable ownership there (`Persistence.begin`), and starts the engine as a
coroutine `Task` it owns. Its phase only moves forward:

    RUNNING -> COMPLETED | PAUSED | FAILED | TIMED_OUT | CANCELLED

The engine commits every checkpoint before it goes on, so no next action starts
before its predecessor is committed: a durable run's engine asks the coordinator to
`Commit` it and waits for the answer, which comes after the ledger's write; a run
without persistence commits into the coordinator's `CommitCell` (the coordinator
would only keep it, so no round trip is spent). Either way the terminal closes the
commits first: a commit lands before the terminal, and is in its outcome, or is
refused.

Cancel, the deadline, a lost lease and the watcher's exit kill the engine (its
workers stop with it: a task dies with its owner; a sync worker's thread cannot be
interrupted, so it is fenced and signalled through its ``context["cancelled"]``, and
nothing waits for it) and end the run with the last committed checkpoint (so does
any end of the engine but a completion: its checkpoint is the last one committed); a
message that arrives after the terminal (a late commit, a late engine result) is
dropped, so a killed engine can never change the checkpoint. Waiters are answered at the one terminal;
the coordinator then stays `retention` seconds to answer `wait`/`status` (or stops
once a releasing waiter has its answer). A run started with a claim (`run_async`)
keeps its outcome for the claiming waiter however late it registers (at most
`CLAIM_HOLD_S`, for a starter that never asks): its retention counts from that answer
(or from the claim's withdrawal), never from the terminal. At most the run's `max_waiters` wait at once
(more: ``("error", "too_many_waiters")``); a waiter that gives up casts `Unwait`.

The coordinator traps exits, so a shutdown runs `terminate`: the engine is killed and
waiters get ``Failed("coordinator_stopped", checkpoint)``; a durable record keeps its
lease (a dead owner in this process is claimable at once).
"""

from __future__ import annotations

import queue
import time
from enum import Enum
from typing import Any, NamedTuple, Protocol, runtime_checkable

import msgspec

from adk_actors.events import Event
from adk_actors.workflows.checkpoint import Checkpoint
from adk_actors.workflows.engine import EngineEnd, EngineSetup, run_engine
from adk_actors.workflows.engine_state import CommitCell
from adk_actors.workflows.errors import cancel_reason, external_reason, failure_reason
from adk_actors.workflows.launch import (
    Launch,
    install,
    start_supervised,
    take_launch,
    workflow_name,
)
from adk_actors.workflows.messages import (
    Cancel,
    Commit,
    Emit,
    GetCheckpoint,
    Status,
    Unwait,
    Wait,
    WorkflowEvent,
)
from adk_actors.workflows.outcomes import (
    TIMED_OUT,
    Cancelled,
    Completed,
    Failed,
    Outcome,
    Paused,
    phase_of,
)
from adk_actors.workflows.spec import CompiledWorkflow
from providers.errors import AdkError
from supervision import (
    Down,
    ExitSignal,
    From,
    GenServer,
    NameTaken,
    NoReply,
    Pid,
    Ref,
    Reply,
    Stop,
    Task,
    TaskBusy,
    TaskResult,
    TimerRef,
    cancel_timer,
    get_logger,
    monitor,
    register,
    reply,
    self_pid,
    send,
    send_after,
    trap_exit,
)

__all__ = [
    "Begun",
    "Persistence",
    "Phase",
    "WorkflowCoordinator",
    "start_supervised",
    "status_view",
]

_log = get_logger("adk_actors.workflows")
COORDINATOR_STOPPED = "coordinator_stopped"
TOO_MANY_WAITERS = "too_many_waiters"
CLAIM_HOLD_S = 300.0
"""The longest a terminal run waits for its claiming waiter that never came."""
PARENT_STOPPED = "parent_workflow_stopped"


# -- durability hooks --------------------------------------------------------------------------


class Begun(NamedTuple):
    """What `Persistence.begin` settled: the checkpoint to run from (after a claim, the
    stored one, resume input applied) and the invocation id actions see."""

    checkpoint: Checkpoint
    invocation_id: str


@runtime_checkable
class Persistence(Protocol):
    """A durable run's hooks (`durable.DurablePersistence`). Each runs in the
    coordinator, between messages; a refusal raises `AdkError`, which the coordinator
    shapes itself (bounded, secret-free)."""

    def begin(self, workflow: CompiledWorkflow, checkpoint: Checkpoint, owner: Pid) -> Begun:
        """Once, in `init`, before the engine starts: create and/or claim the record
        (owner: this coordinator). A refusal fails the start with
        ``("workflow_start_failed", reason)``."""
        ...

    def commit(self, checkpoint: Checkpoint) -> None:
        """Every checkpoint, before the engine may go on. A refusal ends the run
        ``Failed(("durable_checkpoint_failed", reason))`` (no `finish`)."""
        ...

    @property
    def renew_interval(self) -> float | None:
        """Seconds between `renew` calls while the run is active (None: never)."""
        ...

    def renew(self) -> None:
        """Extend the lease. A refusal ends the run ``Failed(("durable_lease_lost",
        reason))`` (no `finish`)."""
        ...

    def finish(self, phase: str, outcome: Outcome, checkpoint: Checkpoint) -> None:
        """Record the terminal (`phase` is ``completed``, ``paused``, ``failed``,
        ``timed_out`` or ``cancelled``) before waiters hear it. A refusal makes the
        outcome ``Failed(("durable_terminal_failed", reason))`` with the last committed
        checkpoint (for a completion: not the final one, which nothing recorded)."""
        ...


class _DeadlineReached(NamedTuple):
    pass


class _RenewLease(NamedTuple):
    pass


class _RetentionOver(NamedTuple):
    pass


# -- the phase ---------------------------------------------------------------------------------


class Phase(Enum):
    RUNNING = "running"
    COMPLETED = "completed"
    PAUSED = "paused"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self is not Phase.RUNNING


def advance(current: Phase, new: Phase) -> Phase:
    """`new` if the lifecycle allows it (only RUNNING moves, to a terminal phase);
    raises otherwise (a bug: the coordinator crashes rather than end twice)."""
    if current is not Phase.RUNNING or new is Phase.RUNNING:
        raise AdkError(
            ("invalid_phase_transition", current.value, new.value),
            "a workflow run moved against its lifecycle",
        )
    return new


class CoordinatorState:
    """A run's coordinator state. Invariants: `engine` is None once terminal;
    `outcome` is set exactly when the phase is terminal; `checkpoint` (held by `cell`)
    only ever takes a committed checkpoint or the terminal's."""

    __slots__ = (
        "cell",
        "claim",
        "deadline_timer",
        "engine",
        "event_count",
        "expire_timer",
        "finished_at",
        "invocation_id",
        "launch",
        "outcome",
        "phase",
        "release",
        "renew_timer",
        "started_at",
        "waiters",
        "watched",
    )

    def __init__(self, launch: Launch, checkpoint: Checkpoint, invocation_id: str | None) -> None:
        self.launch = launch
        self.cell = CommitCell(checkpoint)
        self.invocation_id = invocation_id
        self.phase = Phase.RUNNING
        self.outcome: Outcome | None = None
        self.engine: Task | None = None
        self.waiters: dict[Ref, tuple[From, bool]] = {}
        self.release = False
        self.watched = launch.runtime.watcher is not None
        self.claim = launch.runtime.claim
        self.deadline_timer: TimerRef | None = None
        self.renew_timer: TimerRef | None = None
        self.expire_timer: TimerRef | None = None
        self.started_at = time.time()
        self.finished_at: float | None = None
        self.event_count = 0

    @property
    def checkpoint(self) -> Checkpoint:
        """The last committed checkpoint (the terminal's once the run ended)."""
        return self.cell.checkpoint

    def __repr__(self) -> str:
        # What `get_state` shows: counters only, never the workflow, state or checkpoint.
        return (
            f"<WorkflowRun phase={self.phase.value} engine_running={self.engine is not None}"
            f" durable={self.launch.persistence is not None} waiters={len(self.waiters)}"
            f" events={self.event_count}>"
        )


# -- the server --------------------------------------------------------------------------------


class WorkflowCoordinator(GenServer):
    """One workflow run: its engine, checkpoints, deadline, cancel, waiters, terminal."""

    def init(self, handoff: Any) -> Any:
        try:
            launch = take_launch(handoff)
        except AdkError as error:
            return Stop(("shutdown", error.reason))
        try:
            register(workflow_name(launch.ref), self_pid())
        except NameTaken:  # nothing has started yet
            return Stop(("shutdown", "already_exists"))
        trap_exit(True)  # a shutdown runs `terminate`
        checkpoint, invocation_id = launch.checkpoint, None
        if launch.persistence is not None:
            try:
                checkpoint, invocation_id = launch.persistence.begin(
                    launch.workflow, launch.checkpoint, self_pid()
                )
            except Exception as error:
                return Stop(("shutdown", ("workflow_start_failed", _hook_reason("begin", error))))
        state = CoordinatorState(launch, checkpoint, invocation_id)
        setup = EngineSetup(
            workflow=launch.workflow,
            checkpoint=checkpoint,
            runtime=launch.runtime,
            coordinator=self_pid(),
            invocation_id=invocation_id,
            cell=state.cell if launch.persistence is None else None,
        )
        try:
            state.engine = Task.start(run_engine, setup, notify=True)
        except TaskBusy:
            return Stop(("shutdown", ("workflow_start_failed", "busy")))
        deadline = launch.runtime.deadline
        if deadline is not None:
            delay = max(0.0, deadline - time.monotonic())
            state.deadline_timer = send_after(self_pid(), _DeadlineReached(), delay)
        if launch.runtime.watcher is not None:
            monitor(launch.runtime.watcher)
        self._schedule_renew(state)
        return state

    # -- calls -----------------------------------------------------------------------------

    def handle_call(self, request: Any, from_: From, state: CoordinatorState) -> Any:
        answer = self._call(request, from_, state)
        if isinstance(answer, Reply) and self._should_stop(state):
            return Stop("normal", state, reply=answer.value)
        return answer

    def _call(self, request: Any, from_: From, state: CoordinatorState) -> Any:
        match request:
            case Commit(engine, checkpoint):
                return Reply(self._commit(state, engine, checkpoint), state)
            case Wait(token, release):
                if state.outcome is not None:
                    state.release = state.release or release
                    self._unclaim(state, token)
                    return Reply(state.outcome, state)
                if token not in state.waiters and (
                    len(state.waiters) >= state.launch.runtime.max_waiters
                ):
                    return Reply(("error", TOO_MANY_WAITERS), state)
                state.waiters[token] = (from_, release)
                return NoReply(state)
            case Status():
                return Reply(status_view(state), state)
            case GetCheckpoint():
                return Reply(state.checkpoint, state)
            case Cancel(reason):
                return Reply(self._cancel(state, reason), state)
        return Reply(("error", ("invalid_request", type(request).__name__[:64])), state)

    def handle_cast(self, msg: Any, state: CoordinatorState) -> Any:
        match msg:
            case Unwait(token):
                state.waiters.pop(token, None)
                self._unclaim(state, token)
            case Emit(engine, event) if self._from_engine(state, engine):
                state.event_count += 1
                _deliver(state.launch, event)
        if self._should_stop(state):
            return Stop("normal", state)
        return state

    def _unclaim(self, state: CoordinatorState, token: Ref) -> None:
        """The claiming waiter had its answer (or gave up): from now on the run is
        retained as any other, its retention counted from this moment."""
        if state.claim is None or token != state.claim:
            return
        state.claim = None
        if state.phase.terminal:
            self._retain(state)

    def _retain(self, state: CoordinatorState) -> None:
        """Start the terminal run's retention: `CLAIM_HOLD_S` while a claim waits for
        its waiter, else the run's own retention (none once a releasing waiter asked)."""
        if state.expire_timer is not None:
            cancel_timer(state.expire_timer)
            state.expire_timer = None
        retention = state.launch.runtime.retention
        if state.claim is not None:
            retention = max(retention, CLAIM_HOLD_S)
        elif state.release:
            return
        if retention > 0:
            state.expire_timer = send_after(self_pid(), _RetentionOver(), retention)

    def handle_info(self, msg: Any, state: CoordinatorState) -> Any:
        match msg:
            case TaskResult(pid=pid) if state.engine is not None and pid == state.engine.pid:
                state.engine = None
                self._engine_ended(state, msg)
            case _DeadlineReached() if not state.phase.terminal:
                state.deadline_timer = None
                self._terminal(state, Failed(TIMED_OUT, state.checkpoint))
            case _RenewLease() if not state.phase.terminal:
                state.renew_timer = None
                self._renew(state)
            case Down(pid=pid) if state.watched and pid == state.launch.runtime.watcher:
                state.watched = False  # the watcher (a nested run's parent attempt) is gone
                self._terminal(state, Cancelled(PARENT_STOPPED, state.checkpoint))
            case _RetentionOver():
                return Stop("normal", state)
            case ExitSignal(reason=reason) if reason != "normal":
                return Stop(reason, state)
        if self._should_stop(state):
            return Stop("normal", state)
        return state

    def terminate(self, reason: Any, state: Any) -> None:
        if not isinstance(state, CoordinatorState):
            return
        committed = state.cell.close()
        _kill_engine(state)
        _cancel_timers(state)
        if not state.phase.terminal:
            stopped = Failed(COORDINATOR_STOPPED, committed)
            for from_, _release in state.waiters.values():
                reply(from_, stopped)
            state.waiters.clear()

    # -- the run ---------------------------------------------------------------------------

    def _from_engine(self, state: CoordinatorState, engine: Any) -> bool:
        return not state.phase.terminal and state.engine is not None and engine == state.engine.pid

    def _commit(self, state: CoordinatorState, engine: Any, checkpoint: Any) -> Any:
        if not self._from_engine(state, engine) or not isinstance(checkpoint, Checkpoint):
            return ("error", "not_running")
        persistence = state.launch.persistence
        if persistence is not None:
            try:
                persistence.commit(checkpoint)
            except Exception as error:
                why = ("durable_checkpoint_failed", _hook_reason("checkpoint", error))
                self._terminal(state, Failed(why, state.checkpoint), persist=False)
                return ("error", "not_running")
        state.cell.store(checkpoint)
        return "ok"

    def _engine_ended(self, state: CoordinatorState, result: TaskResult) -> None:
        if state.phase.terminal:
            return  # a late end (cancel or the deadline came first): dropped
        if not result.ok:
            kind = getattr(result.value, "kind", None) or result.value
            why = ("engine_process_down", external_reason("adk_workflow_engine", "run", kind))
            self._terminal(state, Failed(why, state.checkpoint))
            return
        end = result.value
        if not isinstance(end, EngineEnd):
            self._terminal(state, Failed("invalid_engine_outcome", state.checkpoint))
            return
        self._terminal(state, _outcome(end, state.checkpoint))

    def _cancel(self, state: CoordinatorState, reason: Any) -> Any:
        if state.phase.terminal:
            return ("error", "already_terminal")
        _log.info("adk.workflow.cancel_requested", workflow=state.launch.ref)
        self._terminal(state, Cancelled(cancel_reason(reason), state.checkpoint))
        return ("ok", None)

    def _renew(self, state: CoordinatorState) -> None:
        persistence = state.launch.persistence
        if persistence is None:
            return
        try:
            persistence.renew()
        except Exception as error:
            why = ("durable_lease_lost", _hook_reason("renew", error))
            self._terminal(state, Failed(why, state.checkpoint), persist=False)
            return
        self._schedule_renew(state)

    def _schedule_renew(self, state: CoordinatorState) -> None:
        persistence = state.launch.persistence
        interval = None if persistence is None else persistence.renew_interval
        if interval is not None and not state.phase.terminal:
            state.renew_timer = send_after(self_pid(), _RenewLease(), max(0.001, interval))

    def _terminal(self, state: CoordinatorState, outcome: Outcome, persist: bool = True) -> None:
        """The one terminal: close the commits, stop the engine, record the end
        (durable), answer waiters. Every outcome but a completion carries the checkpoint
        committed as the commits closed (whatever its caller read before)."""
        if state.phase.terminal:
            return
        committed = state.cell.close()
        if not isinstance(outcome, Completed):
            outcome = msgspec.structs.replace(outcome, checkpoint=committed)
        _kill_engine(state)
        persistence = state.launch.persistence
        if persist and persistence is not None:
            try:
                persistence.finish(phase_of(outcome), outcome, outcome.checkpoint)
            except Exception as error:
                # the run did not end as recorded: it fails with its last committed
                # checkpoint (a refused completion's final one was never committed)
                why = ("durable_terminal_failed", _hook_reason("finish", error))
                outcome = Failed(why, committed)
        state.phase = advance(state.phase, Phase(phase_of(outcome)))
        state.outcome = outcome
        state.cell.store(outcome.checkpoint)
        state.finished_at = time.time()
        _cancel_timers(state)
        waiters, state.waiters = state.waiters, {}
        for token, (from_, release) in waiters.items():
            state.release = state.release or release
            if token == state.claim:
                state.claim = None  # the claiming waiter was there in time
            reply(from_, outcome)
        self._retain(state)
        _log.debug("adk.workflow.ended", workflow=state.launch.ref, phase=state.phase.value)

    def _should_stop(self, state: CoordinatorState) -> bool:
        """Stop once terminal when nothing is retained: a releasing waiter has its
        answer, or there is no retention and no watcher left to ask for the outcome."""
        if not state.phase.terminal:
            return False
        if state.claim is not None:
            return False
        return state.release or (state.launch.runtime.retention <= 0 and not state.watched)


def _outcome(end: EngineEnd, committed: Checkpoint) -> Outcome:
    """The outcome of the engine's end. Only a completion brings its own (final)
    checkpoint; any other end keeps the last committed one, so no delta that was not
    committed can reach an outcome or the ledger (the engine's is the same one)."""
    match end.kind:
        case "completed":
            return Completed(end.value, end.checkpoint)
        case "paused":
            return Paused(end.value, committed)
        case "timed_out":
            return Failed(TIMED_OUT, committed)
    return Failed(failure_reason(end.value), committed)


def _kill_engine(state: CoordinatorState) -> None:
    engine, state.engine = state.engine, None
    if engine is not None:
        engine.kill()  # its workers die with it: every task is owned by the engine


def _cancel_timers(state: CoordinatorState) -> None:
    for name in ("deadline_timer", "renew_timer", "expire_timer"):
        timer = getattr(state, name)
        if timer is not None:
            cancel_timer(timer)
            setattr(state, name, None)


def _deliver(launch: Launch, event: Event) -> None:
    receiver = launch.runtime.event_receiver
    if isinstance(receiver, Pid):
        send(receiver, WorkflowEvent(launch.ref, event))
    elif isinstance(receiver, queue.Queue):
        try:
            receiver.put_nowait(WorkflowEvent(launch.ref, event))
        except queue.Full:
            _log.warning("adk.workflow.event_dropped", workflow=launch.ref)


def _hook_reason(operation: str, error: BaseException) -> Any:
    """A durability hook's refusal, made public: its stable reason, else a failure dict."""
    if isinstance(error, AdkError):
        return failure_reason(external_reason("adk_workflow_ledger", operation, error.reason))
    return {
        "component": "adk_workflow_ledger",
        "operation": operation,
        "reason": "exception",
        "class": type(error).__name__[:64],
    }


def status_view(state: CoordinatorState) -> dict[str, Any]:
    """``workflow_ref``, ``workflow_id``, ``kind``, ``state`` (running, completed,
    paused, failed, timed_out, cancelled), ``outcome`` (None while running),
    ``deadline``, ``started_at``, ``finished_at``, ``checkpoint``, ``waiter_count``,
    ``event_count``; a durable run adds ``invocation_id`` and ``durable``."""
    launch = state.launch
    view: dict[str, Any] = {
        "workflow_ref": launch.ref,
        "workflow_id": launch.workflow.id,
        "kind": launch.workflow.kind,
        "state": state.phase.value,
        "outcome": state.outcome,
        "deadline": launch.runtime.deadline,
        "started_at": state.started_at,
        "finished_at": state.finished_at,
        "checkpoint": state.checkpoint,
        "waiter_count": len(state.waiters),
        "event_count": state.event_count,
    }
    if launch.persistence is not None:
        view["invocation_id"] = state.invocation_id
        view["durable"] = True
    return view


install(WorkflowCoordinator)
