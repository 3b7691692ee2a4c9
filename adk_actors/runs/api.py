"""The `adk.runs` facade: start, subscribe, wait, status, cancel and resume runs.

A run is not owned by the caller that starts it: its actor is a temporary child of
the run supervisor (`adk.runs`), so a starter or subscriber that exits never stops
it. Every call finds the run by its registered name at call time; once an ended
run's retention is over (or it was evicted), every call says ``not_found``.
"""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import structlog

from adk_actors.app import RUN_SUPERVISOR, ensure_started
from adk_actors.outcomes import Failed, Outcome
from adk_actors.runs.actor import RunServer
from adk_actors.runs.handoff import RunRequest, handoffs
from adk_actors.runs.registry import RUN_REGISTRY, run_name, stream_name
from adk_actors.runs.subscription import CreditSubscription, Subscription
from adk_actors.runs.values import (
    DEFAULT_MAX_BUFFERED_EVENTS,
    DEFAULT_RETENTION,
    RunError,
    RunTimeout,
    check_cursor,
    check_max_buffered_events,
    check_retention,
    check_run_id,
    new_run_id,
)
from supervision import (
    CallTimeout,
    ChildSpec,
    DynamicSupervisor,
    MaxChildrenReached,
    Pid,
    ProcessExit,
    Ref,
    SupervisorError,
    aio,
    call,
    cast,
    whereis,
)
from supervision.credit_stream import CreditStream

MAX_CANCEL_REASON_BYTES = 1024
_log = structlog.get_logger("adk_actors.runs")


def start(
    runner: Any,
    user_id: str,
    session_id: str,
    message: Any,
    *,
    retention: float = DEFAULT_RETENTION,
    max_buffered_events: int = DEFAULT_MAX_BUFFERED_EVENTS,
    run_id: str | None = None,
) -> str:
    """Start a supervised run of one Runner invocation; returns its id (``run-<uuid4>``).

    An explicit `run_id` that is already in use raises ``already_exists``, and
    nothing of the refused run is left behind.
    """
    request = RunRequest(
        run_id=new_run_id() if run_id is None else check_run_id(run_id),
        runner=runner,
        user_id=user_id,
        session_id=session_id,
        message=message,
        retention=check_retention(retention),
        max_buffered_events=check_max_buffered_events(max_buffered_events),
        invocation_id=f"inv-{uuid.uuid4().hex}",
        token=uuid.uuid4().hex,
    )
    ensure_started()
    return _launch(request)


def subscribe(run_id: str, after: int = 0) -> Subscription:
    """Push subscription: the retained items after `after`, live items, then the terminal.

    Iterate it, or ``async for`` it; ``replay_gap`` (with `gap`) if items after the
    cursor were evicted, ``cursor_ahead`` if the cursor is past the latest item.
    """
    _, stream = _lookup(run_id)
    return Subscription(run_id, stream, check_cursor(after))


def subscribe_credit(run_id: str, after: int = 0) -> CreditSubscription:
    """Credit subscription: at most one unacknowledged item (`next`, then `ack`)."""
    _, stream = _lookup(run_id)
    return CreditSubscription(run_id, stream, check_cursor(after))


def wait(run_id: str, timeout: float | None = None) -> Outcome:
    """The run's outcome once it has one; `RunTimeout` if not within `timeout` seconds.

    Independent of subscriptions: waiting consumes nothing.
    """
    try:
        actor, _ = _lookup(run_id)
    except RunError:
        return _lost(run_id)
    token = Ref()
    try:
        return call(actor, ("wait", token), timeout)  # type: ignore[no-any-return]
    except CallTimeout:
        cast(actor, ("unwait", token))
        raise RunTimeout(f"the run did not end within {timeout} s") from None
    except ProcessExit:
        return _lost(run_id)


async def wait_async(run_id: str, timeout: float | None = None) -> Outcome:
    """`wait` for asyncio code: the event loop keeps running meanwhile."""
    try:
        actor, _ = _lookup(run_id)
    except RunError:
        return _lost(run_id)
    token = Ref()
    try:
        return await aio.call(actor, ("wait", token), timeout)  # type: ignore[no-any-return]
    except CallTimeout:
        cast(actor, ("unwait", token))
        raise RunTimeout(f"the run did not end within {timeout} s") from None
    except ProcessExit:
        return _lost(run_id)


def status(run_id: str) -> dict[str, Any]:
    """A JSON-safe view of the run: ``state`` (running, completed, paused, cancelled,
    failed), ``run_id``, ``parent_run_id``, ``resumed_to``, ``subscribers``, sequences..."""
    try:
        actor, stream = _lookup(run_id)
        info: dict[str, Any] = call(actor, ("status",))
        window = CreditStream.status(stream)
    except (RunError, ProcessExit):
        outcome = _lost(run_id)  # a run whose actor died has only its outcome left
        return {"run_id": run_id, "state": "failed", "outcome": msgspec.to_builtins(outcome)}
    info["subscribers"] = window["subscribers"]
    info["latest_sequence"] = window["latest_sequence"]
    info["oldest_available_sequence"] = window["oldest_available_sequence"]
    return info


def cancel(run_id: str, reason: Any = "cancelled") -> None:
    """Cancel a running run: its outcome becomes `Cancelled(reason)` (the first reason
    wins); ``already_terminal`` once it has ended."""
    try:
        size = len(msgspec.json.encode(reason))
    except (TypeError, msgspec.EncodeError):
        size = MAX_CANCEL_REASON_BYTES + 1
    if size > MAX_CANCEL_REASON_BYTES:
        raise RunError("invalid_cancel_reason", "a reason is JSON-safe, at most 1 KiB")
    try:
        actor, _ = _lookup(run_id)
    except RunError:
        _lost(run_id)  # not_found, unless its actor died: then it has ended
        raise RunError("already_terminal", "the run has ended") from None
    _answer(actor, ("cancel", reason))


def resume(
    run_id: str,
    response: Any,
    *,
    retention: float | None = None,
    max_buffered_events: int | None = None,
) -> str:
    """Resume a paused run with the human's `response`; returns the new run's id.

    The paused run is left as it was except its ``resumed_to``. The Runner checks the
    response before anything is started, so a refused response changes nothing. The
    new run claims the continuation once admitted: if it ended without claiming it
    (admission refused it), the paused run can be resumed again. ``run_not_paused``;
    ``already_resumed`` (its `run_id` is the run that resumed it).
    """
    actor, _ = _lookup(run_id)
    child_id = new_run_id()
    try:
        parent = _answer(actor, ("begin_resume", child_id))
    except RunError as error:
        if not _unclaimed(error):
            raise
        _answer(actor, ("forget_resume", error.run_id))
        parent = _answer(actor, ("begin_resume", child_id))
    committed = False
    token = uuid.uuid4().hex
    try:
        runner = parent["runner"]
        items = runner.resume_invocation(
            parent["user_id"],
            parent["session_id"],
            response,
            invocation_id=parent["event"].invocation_id,
            token=token,
        )
        request = RunRequest(
            run_id=child_id,
            runner=runner,
            user_id=parent["user_id"],
            session_id=parent["session_id"],
            message=None,
            retention=parent["retention"] if retention is None else check_retention(retention),
            max_buffered_events=(
                parent["max_buffered_events"]
                if max_buffered_events is None
                else check_max_buffered_events(max_buffered_events)
            ),
            parent_run_id=run_id,
            items=items,
            invocation_id=parent["event"].invocation_id,
            token=token,
        )
        try:
            _launch(request)
        except BaseException:
            _log.warning("adk.runs.resume_not_started", run_id=run_id)
            _close(items)
            raise
        committed = True
    finally:
        try:
            call(actor, ("end_resume", child_id, committed))
        except ProcessExit:
            pass  # the paused run expired meanwhile; the new run goes on
    _log.info("adk.runs.resumed", run_id=run_id, resumed_to=child_id)
    return child_id


def stats() -> dict[str, int]:
    """Live counts: run actors (running and retained), retained ended runs, pending handoffs."""
    try:
        _, counts = call(RUN_REGISTRY, ("stats",))
        actors = DynamicSupervisor.count_children(RUN_SUPERVISOR)["active"]
    except ProcessExit:
        counts, actors = {"retained": 0}, 0
    return {
        "actors": actors,
        "retained": counts["retained"],
        "pending_handoffs": handoffs.pending(),
    }


# -- helpers -------------------------------------------------------------------------------


def _launch(request: RunRequest) -> str:
    """Start the run actor: the request crosses the handoff, the child spec has only a ref."""
    ref = handoffs.put(request)
    spec = ChildSpec(ref, lambda: RunServer.start_link(ref), restart="temporary")
    try:
        actor = DynamicSupervisor.start_child(RUN_SUPERVISOR, spec)
        closing = (
            request.runner,
            request.user_id,
            request.session_id,
            request.invocation_id,
            request.token,
        )
        cast(RUN_REGISTRY, ("track", request.run_id, actor, request.retention, closing))
    except MaxChildrenReached:
        raise RunError("too_many_runs", "the run supervisor is at max_children") from None
    except SupervisorError as error:
        reason = error.reason
        if isinstance(reason, tuple) and len(reason) == 2 and reason[0] == "shutdown":
            reason = reason[1]
        if reason in ("already_exists", "handoff_taken"):
            raise RunError(reason, f"run {request.run_id!r} was not started") from None
        raise RunError(("run_start_failed", str(reason)[:200]), "the run did not start") from None
    except ProcessExit:
        raise RunError("not_started", "the application is not running") from None
    finally:
        handoffs.discard(ref)  # taken by the actor, or withdrawn: never left behind
    return request.run_id


def _unclaimed(error: RunError) -> bool:
    """Did the resume that made this run `already_resumed` fail (it may not have
    claimed the continuation; the paused run's actor checks the session)?"""
    if error.reason != "already_resumed" or error.run_id is None:
        return False
    try:
        return isinstance(wait(error.run_id, timeout=1.0), Failed)
    except RunError:
        return False  # still running, or gone


def _lost(run_id: str) -> Outcome:
    """The outcome the registry recorded for a run whose actor died, or ``not_found``."""
    try:
        status, value = call(RUN_REGISTRY, ("lost", run_id))
    except ProcessExit:
        status = "error"
    if status != "ok":
        raise RunError("not_found", "no such run, or its retention is over")
    return value  # type: ignore[no-any-return]


def _lookup(run_id: str) -> tuple[Pid, Pid]:
    """The run's actor and stream, by their registered names (no message round trip)."""
    if not isinstance(run_id, str):
        raise RunError("not_found", "a run id is a string")
    actor, stream = whereis(run_name(run_id)), whereis(stream_name(run_id))
    if actor is None or stream is None:
        raise RunError("not_found", "no such run, or its retention is over")
    return actor, stream


def _answer(actor: Pid, request: tuple[Any, ...]) -> Any:
    """Call the run actor; turn its ``("error", reason)`` into a `RunError`."""
    try:
        status, value = call(actor, request)
    except ProcessExit:
        raise RunError("not_found", "the run is no longer retained") from None
    if status == "ok":
        return value
    if isinstance(value, tuple) and value[:1] == ("already_resumed",):
        raise RunError("already_resumed", f"resumed as {value[1]}", run_id=value[1])
    raise RunError(value, "refused by the run")


def _close(items: Any) -> None:
    close = getattr(items, "close", None)
    if close is not None:
        close()
