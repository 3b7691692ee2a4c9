"""The run actor: one supervised process per stable run.

A temporary child of the run supervisor. Its `init` takes the request from the
one-shot handoff, registers the run id (a duplicate is refused before anything
else starts), starts its credit stream (linked: they live and die together) and
its worker `Task` (owned: it dies with the actor). `init` makes no calls, so the
supervisor starts runs as fast as it can spawn processes.

Everything after that is messages, and no handler blocks. The worker's
`TaskResult` carries the invocation's outcome; the actor *decides* the terminal
exactly once, then a short settle task ends the stream with it (and, for a run
ended from outside, first records the abandonment through `runner.abandon`); when
that task is done the actor *commits*: it answers every `wait` and tells the
registry, which retains the run for `retention` seconds.

Cancel: the first reason wins. The worker has `CANCEL_GRACE` (250 ms) to end on
its own (an outcome it reaches meanwhile is kept: the session already says so),
then it is killed and the run ends `Cancelled(reason)`. A paused run
accepts one resume; only its `resumed_to` changes.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import msgspec
import structlog

from adk_actors.app import TASK_SUPERVISOR
from adk_actors.outcomes import OUTCOME_TYPES, Cancelled, Completed, Failed, Outcome, Paused
from adk_actors.runs.handoff import RunRequest, handoffs
from adk_actors.runs.registry import RUN_REGISTRY, run_name, stream_name
from adk_actors.runs.values import CANCEL_GRACE, RunError
from adk_actors.runs.worker import InvocationStarted, drive, worker_pool
from supervision import (
    AlreadyStarted,
    From,
    GenServer,
    KernelError,
    NameTaken,
    NoReply,
    Pid,
    Reply,
    Stop,
    TimerRef,
    cancel_timer,
    cast,
    register,
    reply,
    self_pid,
    send_after,
)
from supervision.credit_stream import CreditStream
from supervision.tasks import Task, TaskResult

WORKER_SLACK = 30.0
"""Seconds past the Runner's own `run_timeout` before the worker is stopped as stuck."""
_log = structlog.get_logger("adk_actors.runs")
_STATES = {Completed: "completed", Paused: "paused", Cancelled: "cancelled", Failed: "failed"}


class _GraceOver(NamedTuple):
    """Timer message: the worker had its chance to stop on its own."""


class _Run:
    """The actor's state (mutable, owned by the actor alone)."""

    def __init__(self, request: RunRequest, stream: Pid) -> None:
        self.run_id = request.run_id
        self.runner = request.runner
        self.user_id = request.user_id
        self.session_id = request.session_id
        self.retention = request.retention
        self.max_buffered_events = request.max_buffered_events
        self.parent_run_id = request.parent_run_id
        self.stream = stream
        self.worker: Task | None = None
        self.invocation_id: str | None = request.invocation_id
        self.token: str | None = request.token
        self.started_at = time.time()
        self.ended_at: float | None = None
        self.cancel_reason: Any = None
        self.cancelling = False
        self.grace: TimerRef | None = None
        self.decided: Outcome | None = None  # the terminal, chosen once
        self.settler: Task | None = None  # ends the stream with `decided`
        self.outcome: Outcome | None = None  # the terminal, committed
        self.terminal_sequence: int | None = None
        self.waiters: dict[Any, From] = {}
        self.resumed_to: str | None = None
        self.resume_pending: str | None = None


class RunServer(GenServer):
    """One stable run: its stream, its worker, its single terminal outcome."""

    def init(self, ref: str) -> Any:
        try:
            request = handoffs.take(ref)
        except RunError:
            return Stop(("shutdown", "handoff_taken"))
        try:
            register(run_name(request.run_id), self_pid())
            stream = CreditStream.start_link(
                max_buffered=request.max_buffered_events, name=stream_name(request.run_id)
            )
        except (NameTaken, AlreadyStarted):  # nothing was started: the name was the first step
            return Stop(("shutdown", "already_exists"))
        run = _Run(request, stream)
        timeout = getattr(request.runner, "run_timeout", None)
        try:
            run.worker = Task.start(
                drive,
                request,
                stream,
                self_pid(),
                notify=True,
                supervisor=TASK_SUPERVISOR,
                pool=worker_pool(),
                deadline=None if timeout is None else time.monotonic() + timeout + WORKER_SLACK,
            )
        except KernelError as error:  # our linked stream exits with us
            return Stop(("shutdown", ("worker_not_started", error.reason)))
        _log.debug("adk.runs.started", run_id=run.run_id, parent_run_id=run.parent_run_id)
        return run

    # -- requests --------------------------------------------------------------------

    def handle_call(self, request: tuple[Any, ...], from_: From, run: _Run) -> Any:
        op = request[0]
        if op == "wait":
            if run.outcome is not None:
                return Reply(run.outcome, run)
            run.waiters[request[1]] = from_
            return NoReply(run)
        if op == "status":
            return Reply(_status(run), run)
        if op == "cancel":
            return Reply(self._cancel(run, request[1]), run)
        if op == "begin_resume":
            return Reply(self._begin_resume(run, request[1]), run)
        if op == "forget_resume":  # that resume failed: if the pause is still in the
            if run.resumed_to == request[1] and _still_paused(run):  # session, resumable
                run.resumed_to = None
            return Reply(("ok", None), run)
        if op == "end_resume":
            _, new_run_id, committed = request
            if run.resume_pending == new_run_id:
                run.resume_pending = None
                if committed:
                    run.resumed_to = new_run_id
            return Reply(("ok", None), run)
        return Reply(("error", ("unknown_request", op)), run)

    def handle_cast(self, msg: tuple[Any, ...], run: _Run) -> _Run:
        if msg[0] == "unwait":  # a waiter gave up: do not keep its reply slot
            run.waiters.pop(msg[1], None)
        return run

    def handle_info(self, msg: Any, run: _Run) -> _Run:
        kind = type(msg)
        if kind is TaskResult:
            if run.settler is not None and msg.pid == run.settler.pid:
                self._commit(run, msg)
            elif run.worker is not None and msg.pid == run.worker.pid:
                self._worker_ended(run, msg)
        elif kind is InvocationStarted:
            if run.invocation_id is None:
                run.invocation_id = msg.invocation_id
        elif kind is _GraceOver:
            run.grace = None
            if run.decided is None:
                _log.info("adk.runs.worker_killed", run_id=run.run_id)
                self._decide(run, Cancelled(run.cancel_reason), abandon=True)
        return run

    # -- cancel ----------------------------------------------------------------------

    @staticmethod
    def _cancel(run: _Run, reason: Any) -> tuple[str, Any]:
        if run.outcome is not None:
            return ("error", "already_terminal")
        if not run.cancelling and run.decided is None:  # the first reason wins
            run.cancelling = True
            run.cancel_reason = reason
            run.grace = send_after(self_pid(), _GraceOver(), CANCEL_GRACE)
            _log.info("adk.runs.cancel_requested", run_id=run.run_id)
        return ("ok", None)

    # -- the one terminal: decided once, then settled in the stream, then committed ---

    def _worker_ended(self, run: _Run, result: TaskResult) -> None:
        if run.decided is not None:
            return  # a worker we already gave up on (killed): its end changes nothing
        if result.ok and isinstance(result.value, OUTCOME_TYPES):
            self._decide(run, result.value, abandon=False)  # its own outcome wins a late cancel
        elif run.cancelling:
            self._decide(run, Cancelled(run.cancel_reason), abandon=True)
        else:
            reason = result.value
            failure = (
                "timeout" if reason == "deadline_exceeded" else ("run_worker_exit", _kind(reason))
            )
            _log.warning("adk.runs.worker_exited", run_id=run.run_id, reason=str(reason)[:200])
            self._decide(run, Failed(failure), abandon=True)

    def _decide(self, run: _Run, outcome: Outcome, *, abandon: bool) -> None:
        """Choose the terminal; a settle task records it (stream, session), then we commit."""
        run.decided = outcome
        if run.grace is not None:
            cancel_timer(run.grace)
            run.grace = None
        if run.worker is not None:
            run.worker.kill()  # a no-op if it already ended; fenced if it had not
        record = None
        if abandon and run.invocation_id is not None:
            reason = getattr(outcome, "reason", None)
            record = (
                run.runner,
                run.user_id,
                run.session_id,
                run.invocation_id,
                reason,
                run.token,
            )
        try:
            run.settler = Task.start(
                _settle, run.stream, outcome, record, notify=True, supervisor=TASK_SUPERVISOR
            )
        except KernelError:  # the task pool is full: settle here rather than lose the run
            _log.warning("adk.runs.settled_inline", run_id=run.run_id)
            self._commit(run, TaskResult(self_pid(), True, _settle(run.stream, outcome, record)))

    @staticmethod
    def _commit(run: _Run, result: TaskResult) -> None:
        """The stream has its terminal: answer every waiter and start the retention."""
        outcome = run.decided
        assert outcome is not None
        run.outcome = outcome
        run.ended_at = time.time()
        run.terminal_sequence = result.value if result.ok else None
        if not result.ok:
            _log.warning(
                "adk.runs.settle_failed", run_id=run.run_id, reason=str(result.value)[:200]
            )
        waiters, run.waiters = run.waiters, {}
        for from_ in waiters.values():
            reply(from_, outcome)
        if not isinstance(outcome, Paused):
            run.runner = None  # only a resume needs it
        cast(RUN_REGISTRY, ("terminal", run.run_id, self_pid(), run.retention, run.outcome))
        _log.debug("adk.runs.finished", run_id=run.run_id, state=_STATES[type(outcome)])

    # -- resume ----------------------------------------------------------------------

    @staticmethod
    def _begin_resume(run: _Run, new_run_id: str) -> tuple[str, Any]:
        if not isinstance(run.outcome, Paused):
            return ("error", "run_not_paused")
        if run.resumed_to is not None:
            return ("error", ("already_resumed", run.resumed_to))
        if run.resume_pending is not None:
            return ("error", "resume_in_progress")
        run.resume_pending = new_run_id
        return (
            "ok",
            {
                "runner": run.runner,
                "user_id": run.user_id,
                "session_id": run.session_id,
                "event": run.outcome.event,
                "retention": run.retention,
                "max_buffered_events": run.max_buffered_events,
            },
        )


def _settle(stream: Pid, outcome: Outcome, record: tuple[Any, ...] | None) -> int:
    """Record an abandonment in the session (if any), then end the stream with `outcome`."""
    if record is not None:
        runner, user_id, session_id, invocation_id, reason, token = record
        try:
            runner.abandon(user_id, session_id, invocation_id, reason, token=token)
        except Exception as error:  # the terminal must still be published
            _log.warning("adk.runs.abandon_failed", reason=str(getattr(error, "reason", ""))[:200])
    return CreditStream.finish(stream, outcome)


def _kind(reason: Any) -> str:
    """A bounded name for a worker's exit reason (a `Crash`'s kind, or the reason)."""
    kind = getattr(reason, "kind", None)
    return str(kind if kind is not None else reason)[:200]


def _still_paused(run: _Run) -> bool:
    """Is this run's continuation still unclaimed in its session (a short read)?"""
    if not isinstance(run.outcome, Paused) or run.resume_pending is not None:
        return False
    try:
        paused = run.runner.paused_invocations(run.user_id, run.session_id)
    except Exception:
        return False
    return run.outcome.event.invocation_id in paused


def _status(run: _Run) -> dict[str, Any]:
    outcome = run.outcome
    return {
        "run_id": run.run_id,
        "state": "running" if outcome is None else _STATES[type(outcome)],
        "parent_run_id": run.parent_run_id,
        "resumed_to": run.resumed_to,
        "invocation_id": run.invocation_id,
        "user_id": run.user_id,
        "session_id": run.session_id,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "terminal_sequence": run.terminal_sequence,
        "outcome": _builtins(outcome),
        "retention": run.retention,
        "max_buffered_events": run.max_buffered_events,
    }


def _builtins(outcome: Outcome | None) -> Any:
    if outcome is None:
        return None
    try:
        return msgspec.to_builtins(outcome)
    except (TypeError, msgspec.EncodeError):
        return {"type": _STATES[type(outcome)], "reason": repr(getattr(outcome, "reason", None))}
