"""A trigger's server: one GenServer per registered trigger, owning its queue, its
events, their idempotency keys, waiters and counters.

`Submit` admits an event synchronously: checked against the trigger's options, then
either started (a job `Task` under the ambient job supervisor, monitored here), queued
(bounded by `max_queue`), or refused (``ambient_queue_full``). An event moves through
`Phase`: QUEUED -> RUNNING -> (SETTLING ->) TERMINAL. A job that ends with an outcome
publishes it; a job that is cancelled, hits the event's deadline or dies is stopped,
and a settling task closes its run gate (no run starts after), cancels the run it
started and waits for it to end; only once the job has exited and that is done is
the terminal published (waiters answered, the slot freed, the next queued events
started, iteratively). Every trigger's held events count against one
application-wide bound (`EVENT_BUDGET`, ``ambient_capacity_exhausted``). An event's
job runs in the contextvars its submitter had.
One timer covers the earliest queued deadline. Terminal events (and their
idempotency keys) are retained for `retention` seconds, at most `max_retained`.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
import uuid
from collections import deque
from typing import Any, NamedTuple

import msgspec

from adk_actors.ambient.job import RunGate, cancel_run, run_job, settle
from adk_actors.ambient.options import Event, TriggerOptions, normalize_event, public_policy
from adk_actors.ambient.values import (
    AmbientOutcome,
    Attempt,
    Cancel,
    JobSpec,
    Phase,
    Refusal,
    Status,
    Submit,
    Submitted,
    TimedOut,
    TriggerStatus,
    Unregister,
    Unwait,
    Wait,
)
from adk_actors.outcomes import Cancelled, Failed
from providers.errors import AdkError
from supervision import (
    DEADLINE_REASON,
    Down,
    From,
    GenServer,
    KernelError,
    NoReply,
    Pid,
    Ref,
    Reply,
    Stop,
    Task,
    TaskResult,
    TimerRef,
    cancel_timer,
    demonitor,
    is_normal_exit,
    monitor,
    reply,
    self_pid,
    send_after,
)
from supervision.logs import get_logger

JOB_SUPERVISOR = "adk.ambient.jobs"
_log = get_logger("adk_actors.ambient")


DEFAULT_MAX_EVENTS = 10_000
MAX_EVENTS = 100_000
"""The application-wide bound on events held (queued, running or settling) across
every trigger: ``ADK_AMBIENT_MAX_EVENTS`` (default `DEFAULT_MAX_EVENTS`, at most
`MAX_EVENTS`); past it `submit` raises ``ambient_capacity_exhausted``."""


class _EventBudget:
    """The events held across all triggers (their servers share this process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.held = 0

    @staticmethod
    def limit() -> int:
        try:
            value = int(os.environ.get("ADK_AMBIENT_MAX_EVENTS", DEFAULT_MAX_EVENTS))
        except ValueError:
            value = DEFAULT_MAX_EVENTS
        return max(1, min(value, MAX_EVENTS))

    def take(self) -> bool:
        limit = self.limit()
        with self._lock:
            if self.held >= limit:
                return False
            self.held += 1
            return True

    def give(self) -> None:
        with self._lock:
            self.held = max(0, self.held - 1)

    def reset(self) -> None:
        """A new ambient tree: its triggers (and their events) all went with the old."""
        with self._lock:
            self.held = 0


EVENT_BUDGET = _EventBudget()


class _QueueDeadline(NamedTuple):
    """Timer message: the earliest queued deadline is due."""

    token: int


class _Job:
    __slots__ = (
        "attempts",
        "context",
        "created_at",
        "deadline",
        "event",
        "finished_at",
        "finished_mono",
        "gate",
        "job_alive",
        "monitor",
        "outcome",
        "pending",
        "phase",
        "ref",
        "run_base",
        "run_id",
        "run_started",
        "settles",
        "started_at",
        "task",
        "waiters",
    )

    def __init__(self, ref: str, event: Event, context: contextvars.Context | None = None) -> None:
        self.ref = ref
        self.context = context  # the submitter's: the job runs in it
        self.event = event
        self.deadline = time.monotonic() + event.timeout
        self.phase = Phase.QUEUED
        self.outcome: AmbientOutcome | None = None
        self.pending: AmbientOutcome | None = None  # published once settled
        self.attempts = 0
        self.run_base = f"run-{uuid.uuid4().hex}"
        self.gate = RunGate()
        self.run_id: str | None = None
        self.run_started = False
        self.job_alive = False  # its job's process has not exited yet
        self.settles = 0  # settling tasks still cleaning up its runs
        self.task: Task | None = None
        self.monitor: Ref | None = None
        self.waiters: dict[Ref, tuple[From, Ref | None]] = {}
        self.created_at = time.time()
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.finished_mono = 0.0


class _State:
    def __init__(self, name: str, runner: Any, options: TriggerOptions) -> None:
        self.name = name
        self.runner = runner
        self.options = options
        self.queue: deque[str] = deque()
        self.jobs: dict[str, _Job] = {}
        self.dedupe: dict[str, str] = {}
        self.terminal: deque[str] = deque()
        self.by_pid: dict[Pid, str] = {}  # running job task -> event ref
        self.stopping: dict[Pid, str] = {}  # stopped job task, not yet exited -> event ref
        self.settling: dict[Pid, str] = {}  # settling task -> event ref
        self.waiter_monitors: dict[Ref, tuple[str, Ref]] = {}
        self.active = 0
        self.peak_active = 0
        self.counts = {"submitted": 0, "duplicates": 0, "rejected": 0, "terminal": 0}
        self.timer: TimerRef | None = None
        self.timer_token = 0


class TriggerServer(GenServer):
    """Started by the ambient registry under the trigger supervisor (temporary)."""

    def init(self, args: tuple[str, Any, TriggerOptions]) -> _State:
        return _State(*args)

    def handle_call(self, request: Any, from_: From, state: _State) -> Any:
        _purge(state)
        match request:
            case Submit(event, context):
                return Reply(self._submit(state, event, context), state)
            case Status(ref):
                job = state.jobs.get(ref)
                return Reply(_not_found(ref) if job is None else _view(state, job), state)
            case Wait(ref, token, waiter):
                job = state.jobs.get(ref)
                if job is None:
                    return Reply(_not_found(ref), state)
                if job.outcome is not None:
                    return Reply(job.outcome, state)
                if len(job.waiters) >= state.options.max_waiters:
                    return Reply(
                        Refusal("waiter_limit_reached", "the event has max_waiters waiters"),
                        state,
                    )
                watch = monitor(waiter) if waiter is not None else None
                job.waiters[token] = (from_, watch)
                if watch is not None:
                    state.waiter_monitors[watch] = (ref, token)
                return NoReply(state)
            case Cancel(ref, reason):
                return Reply(self._cancel(state, ref, reason), state)
            case TriggerStatus():
                return Reply(_trigger_view(state), state)
            case Unregister():
                if state.active or state.queue:
                    return Reply(
                        Refusal("trigger_busy", "the trigger has queued or active events"),
                        state,
                    )
                return Stop("normal", state, reply=None)
        return Reply(Refusal("unsupported_request", type(request).__name__), state)

    def handle_cast(self, msg: Any, state: _State) -> _State:
        match msg:
            case Unwait(ref, token):
                job = state.jobs.get(ref)
                if job is not None:
                    _drop_waiter(state, job, token)
            case Attempt(ref, job_pid, attempt, run_id, started):
                job = state.jobs.get(ref)
                if job is None or job.task is None or job.task.pid != job_pid:
                    return state
                if job.phase in (Phase.RUNNING, Phase.SETTLING) and attempt >= job.attempts:
                    job.attempts, job.run_id, job.run_started = attempt, run_id, started
        return state

    def handle_info(self, msg: Any, state: _State) -> _State:
        match msg:
            case TaskResult(pid, ok, value):
                ref = state.settling.pop(pid, None)
                if ref is not None:  # a settling task: its run is cleaned up
                    job = state.jobs.get(ref)
                    if job is not None and job.phase is Phase.SETTLING:
                        job.settles -= 1
                        self._settled(state, job)
                    return state
                if self._stopped_exit(state, pid):
                    return state
                ref = state.by_pid.pop(pid, None)
                job = state.jobs.get(ref) if ref is not None else None
                if job is None or job.phase is not Phase.RUNNING:
                    return state
                if ok:
                    self._complete(state, job, value)
                else:
                    job.job_alive = False
                    self._stop_job(state, job, _job_down(value))
            case Down(watch, pid, reason):
                waiter = state.waiter_monitors.pop(watch, None)
                if waiter is not None:
                    job = state.jobs.get(waiter[0])
                    if job is not None:
                        job.waiters.pop(waiter[1], None)
                    return state
                if not isinstance(pid, Pid) or self._stopped_exit(state, pid):
                    return state
                if is_normal_exit(reason):
                    return state  # a job's result comes as its TaskResult
                ref = state.by_pid.pop(pid, None)
                job = state.jobs.get(ref) if ref is not None else None
                if job is not None and job.phase is Phase.RUNNING:
                    job.job_alive = False
                    self._stop_job(state, job, _job_down(reason))
            case _QueueDeadline(token) if token == state.timer_token:
                state.timer = None
                now = time.monotonic()
                for ref in [r for r in state.queue if state.jobs[r].deadline <= now]:
                    self._finish(state, state.jobs[ref], TimedOut())
                self._drain(state)
        return state

    def terminate(self, reason: Any, state: _State) -> None:
        if state.timer is not None:
            cancel_timer(state.timer)
        for job in state.jobs.values():  # its jobs end with it (they are its tasks);
            if job.phase is not Phase.TERMINAL:
                EVENT_BUDGET.give()
            if job.phase in (Phase.RUNNING, Phase.SETTLING):
                job.gate.closed = True  # nothing more starts;
                if job.run_id is not None:
                    cancel_run(job.run_id, "ambient_trigger_stopped")  # their runs end too

    # --- admission

    def _submit(
        self, state: _State, raw: Any, context: contextvars.Context | None = None
    ) -> Submitted | Refusal:
        try:
            event = normalize_event(raw, state.options)
        except AdkError as error:
            return Refusal(error.reason, error.detail)
        existing = state.dedupe.get(event.idempotency_key)
        if existing is not None and existing in state.jobs:
            state.counts["duplicates"] += 1
            return Submitted(existing, True)
        options = state.options
        if state.active >= options.max_concurrency and len(state.queue) >= options.max_queue:
            state.counts["rejected"] += 1
            return Refusal("ambient_queue_full", f"{len(state.queue)} events are queued")
        if not EVENT_BUDGET.take():
            state.counts["rejected"] += 1
            return Refusal(
                "ambient_capacity_exhausted",
                f"{EVENT_BUDGET.limit()} ambient events are held across the triggers",
            )
        ref = f"amb-{uuid.uuid4().hex}:{state.name}"
        job = _Job(ref, event, context)
        state.jobs[ref] = job
        state.dedupe[event.idempotency_key] = ref
        state.counts["submitted"] += 1
        if state.active < options.max_concurrency:
            failure = self._start(state, job)
            if failure is not None:
                self._complete(state, job, failure)
        else:
            state.queue.append(ref)
            _reschedule(state)
        return Submitted(ref, False)

    def _start(self, state: _State, job: _Job) -> AmbientOutcome | None:
        """Start a job (taken off the queue, if it was queued): None once it runs,
        else the outcome it ends with (the caller publishes it)."""
        if job.deadline <= time.monotonic():
            return TimedOut()
        spec = JobSpec(
            self_pid(),
            job.ref,
            state.runner,
            job.event,
            job.deadline,
            state.options.retry,
            state.options.run_retention,
            job.run_base,
            job.gate,
        )
        context, job.context = job.context, None  # entered once, then let go
        try:
            task = _run_in(
                context,
                Task.start,
                run_job,
                spec,
                deadline=job.deadline,
                notify=True,
                supervisor=JOB_SUPERVISOR,
            )
        except (AdkError, KernelError) as error:
            return Failed(("job_start_failed", error.reason))
        job.phase, job.task, job.started_at = Phase.RUNNING, task, time.time()
        job.job_alive = True
        job.monitor = monitor(task.pid)
        state.by_pid[task.pid] = job.ref
        state.active += 1
        state.peak_active = max(state.peak_active, state.active)
        return None

    # --- cancel, stop, complete

    def _cancel(self, state: _State, ref: str, reason: Any) -> Any:
        job = state.jobs.get(ref)
        if job is None:
            return _not_found(ref)
        if job.phase is Phase.TERMINAL:
            return Refusal("already_terminal", "the event has ended")
        if job.phase is Phase.QUEUED:
            self._complete(state, job, Cancelled(reason))
        elif job.phase is Phase.RUNNING:
            self._stop_job(state, job, Cancelled(reason), reason)
        return None

    def _stop_job(
        self, state: _State, job: _Job, outcome: AmbientOutcome, reason: Any = None
    ) -> None:
        """Stop a running job; publish `outcome` once its job has exited and every run
        it told of has ended (the slot stays taken until then)."""
        job.phase, job.pending = Phase.SETTLING, outcome
        if job.task is not None:
            state.by_pid.pop(job.task.pid, None)
            if job.job_alive:
                state.stopping[job.task.pid] = job.ref
            job.task.kill()
        cancel_reason = reason if reason is not None else _settle_reason(outcome)
        try:
            task = Task.start(
                settle, job.gate, cancel_reason, notify=True, supervisor=JOB_SUPERVISOR
            )
        except (AdkError, KernelError):
            job.gate.closed = True  # no task to wait with: start nothing more, cancel
            if job.run_id is not None:
                cancel_run(job.run_id, cancel_reason)
        else:
            state.settling[task.pid] = job.ref
            job.settles += 1
        self._settled(state, job)

    def _stopped_exit(self, state: _State, pid: Pid) -> bool:
        """A stopped job's process exited: no run can be started by it any more."""
        ref = state.stopping.pop(pid, None)
        if ref is None:
            return False
        job = state.jobs.get(ref)
        if job is not None and job.phase is Phase.SETTLING:
            job.job_alive = False
            self._settled(state, job)
        return True

    def _settled(self, state: _State, job: _Job) -> None:
        if job.phase is Phase.SETTLING and not job.job_alive and job.settles <= 0:
            assert job.pending is not None
            self._complete(state, job, job.pending)

    def _complete(self, state: _State, job: _Job, outcome: AmbientOutcome) -> None:
        """Publish `outcome`, then start queued events into the free slots."""
        self._finish(state, job, outcome)
        self._drain(state)

    def _drain(self, state: _State) -> None:
        """Start queued events while there are free slots; iterative, however many of
        them have expired or fail to start."""
        while state.queue and state.active < state.options.max_concurrency:
            job = state.jobs[state.queue.popleft()]
            failure = self._start(state, job)
            if failure is not None:
                self._finish(state, job, failure, dequeued=True)
        _reschedule(state)

    def _finish(
        self, state: _State, job: _Job, outcome: AmbientOutcome, dequeued: bool = False
    ) -> None:
        if job.phase is Phase.TERMINAL:
            return
        EVENT_BUDGET.give()
        if job.phase is Phase.QUEUED:
            if not dequeued:
                try:
                    state.queue.remove(job.ref)
                except ValueError:
                    pass
        else:
            state.active -= 1
            if job.monitor is not None:
                demonitor(job.monitor, flush=True)
            if job.task is not None:
                state.by_pid.pop(job.task.pid, None)
                state.stopping.pop(job.task.pid, None)
        job.phase, job.outcome, job.pending, job.task, job.monitor = (
            Phase.TERMINAL,
            outcome,
            None,
            None,
            None,
        )
        job.context = None
        job.finished_at, job.finished_mono = time.time(), time.monotonic()
        for from_, watch in job.waiters.values():
            reply(from_, outcome)
            if watch is not None:
                demonitor(watch, flush=True)
                state.waiter_monitors.pop(watch, None)
        job.waiters.clear()
        state.terminal.append(job.ref)
        state.counts["terminal"] += 1
        _log.debug("adk.ambient.terminal", trigger=state.name, outcome=type(outcome).__name__)
        _purge(state)


def _run_in(context: contextvars.Context | None, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """`fn` called in `context` (the submitter's), or in a fresh one for none."""
    return (context if context is not None else contextvars.Context()).run(fn, *args, **kwargs)


def _settle_reason(outcome: AmbientOutcome) -> Any:
    match outcome:
        case Cancelled(reason):
            return reason
        case TimedOut():
            return "deadline_exceeded"
    return "ambient_job_stopped"


def _job_down(reason: Any) -> AmbientOutcome:
    if reason == DEADLINE_REASON:
        return TimedOut()
    return Failed(("job_process_down", str(getattr(reason, "kind", reason))[:200]))


def _drop_waiter(state: _State, job: _Job, token: Ref) -> None:
    entry = job.waiters.pop(token, None)
    if entry is not None and entry[1] is not None:
        demonitor(entry[1], flush=True)
        state.waiter_monitors.pop(entry[1], None)


def _purge(state: _State) -> None:
    """Forget terminal events past their retention, or past `max_retained`."""
    options = state.options
    horizon = time.monotonic() - options.retention
    while state.terminal:
        job = state.jobs.get(state.terminal[0])
        within = len(state.terminal) <= options.max_retained
        if job is not None and within and job.finished_mono > horizon:
            break
        state.terminal.popleft()
        if job is not None:
            del state.jobs[job.ref]
            if state.dedupe.get(job.event.idempotency_key) == job.ref:
                del state.dedupe[job.event.idempotency_key]


def _reschedule(state: _State) -> None:
    """One timer, for the earliest queued deadline."""
    if state.timer is not None:
        cancel_timer(state.timer)
        state.timer = None
    if not state.queue:
        return
    earliest = min(state.jobs[ref].deadline for ref in state.queue)
    state.timer_token += 1
    state.timer = send_after(
        self_pid(), _QueueDeadline(state.timer_token), max(0.0, earliest - time.monotonic())
    )


def _not_found(ref: str) -> Refusal:
    return Refusal("not_found", "no such event (never submitted, or no longer retained)")


def _view(state: _State, job: _Job) -> dict[str, Any]:
    return {
        "ref": job.ref,
        "trigger": state.name,
        "state": job.phase.value,
        "idempotency_key": job.event.idempotency_key,
        "attempts": job.attempts,
        "run_id": job.run_id,
        "user_id": job.event.user_id,
        "session_id": job.event.session_id,
        "metadata": job.event.metadata,
        "waiter_count": len(job.waiters),
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "outcome": None if job.outcome is None else msgspec.to_builtins(job.outcome),
    }


def _trigger_view(state: _State) -> dict[str, Any]:
    options = state.options
    return {
        "name": state.name,
        "active": state.active,
        "queued": len(state.queue),
        "retained": len(state.terminal),
        "peak_active": state.peak_active,
        "max_concurrency": options.max_concurrency,
        "max_queue": options.max_queue,
        "event_timeout": options.event_timeout,
        "session_policy": public_policy(options.session_policy),
        **state.counts,
    }
