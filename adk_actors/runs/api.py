"""The `adk.runs` facade: start, subscribe, wait, status, cancel and resume runs.

A run is an invocation server (`adk_actors.runner.server`) started with a run
identity: it registers ``("adk.run", run_id)``, is a temporary child of the
invocation supervisor (``adk.runs``), so a starter or subscriber that exits never
stops it, and stays after its terminal for its retention, kept by the run registry.
Every call finds the run by its registered name at call time; once an ended run's
retention is over (or it was evicted), every call says ``not_found``.

A run's credit stream (``("adk.run_stream", run_id)``) is started for its first
subscriber: a subscribe finds it by name (a registry read), or, if there is none
yet, asks the run's server for it (`OpenStream`, one round trip; the server hands it
every event so far and the terminal). `wait`, `status`, `cancel` and `resume` talk
to the server alone, so a run that is only waited for never starts a stream.

So a run's first subscribe waits for its server, which may be busy in a blocking
session read or write: a server that does not answer within
`subscription.ROUND_TRIP_TIMEOUT` (5 s) makes it ``RunError("unavailable")`` (sync or
async; try again), never a kernel `CallTimeout`. A follower that wants only the
outcome should `wait` (or `wait_async`), which no busy server can refuse: the A2A
bridge does (review of 3142f62, 1).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from adk_actors.app import RUN_SUPERVISOR
from adk_actors.outcomes import Cancelled, Failed, Outcome
from adk_actors.runner.messages import (
    BeginResume,
    Cancel,
    EndResume,
    ForgetResume,
    OpenStream,
    RunStatus,
    Status,
    Unwait,
    Wait,
    check_cancel_reason,
)
from adk_actors.runner.request import handoffs, run_name, stream_name
from adk_actors.runs import subscription
from adk_actors.runs.registry import RUN_REGISTRY, Known, Lost, Stats
from adk_actors.runs.starting import DEFAULT_CANCEL_REASON, NewRun, refusals, run_identity
from adk_actors.runs.subscription import CreditSubscription, Subscription
from adk_actors.runs.values import (
    CANCEL_GRACE,
    DEFAULT_MAX_BUFFERED_EVENTS,
    DEFAULT_RETENTION,
    RunError,
    RunTimeout,
    check_cursor,
    new_run_id,
)
from providers.errors import AdkError
from supervision import (
    CallTimeout,
    CreditStream,
    DynamicSupervisor,
    Pid,
    ProcessExit,
    Ref,
    aio,
    call,
    cast,
    random_bytes,
    whereis,
)
from supervision.logs import get_logger

DEFAULT_LIST_LIMIT = 50
MAX_LIST_LIMIT = 500
_log = get_logger("adk_actors.runs")


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
    nothing of the refused run is left behind. Returns once the run's server is started
    (by this thread itself; by a call to the invocation supervisor from an event loop's
    thread, which parks the loop: asyncio code awaits `start_async`).
    """
    new = NewRun(retention, max_buffered_events, run_id)
    with refusals():
        runner.start_invocation(user_id, session_id, message, **new.keys())
    return new.identity.run_id


async def start_async(
    runner: Any,
    user_id: str,
    session_id: str,
    message: Any,
    *,
    retention: float = DEFAULT_RETENTION,
    max_buffered_events: int = DEFAULT_MAX_BUFFERED_EVENTS,
    run_id: str | None = None,
) -> str:
    """`start` for asyncio code: the same arguments, checks, refusals (`RunError` with
    the same reasons) and result, the run tracked the same way; the start is awaited,
    so the event loop runs on (and no thread waits) while the invocation supervisor's
    thread starts the run's server. Use it from coroutines; `start` from threads.

    Cancellation: a start once sent cannot be taken back. If the awaiting task is
    cancelled (or an `asyncio.wait_for` around it times out) while the start is in
    flight, the start completes in a shielded step: a run it started is tracked by the
    run registry all the same (its server tells the registry from its `init`, as every
    run's does), then cancelled at once with the default reason
    (``Cancelled("cancelled")``; it is listed, and retained, like any other run), and
    the caller gets its `CancelledError` after that (at once if cancelled again
    meanwhile; the step still ends the run). A refused start leaves nothing behind.
    """
    new = NewRun(retention, max_buffered_events, run_id)
    with refusals():
        await runner.start_invocation_async(
            user_id, session_id, message, abandon=new.abandon, **new.keys()
        )
    return new.identity.run_id


def subscribe(run_id: str, after: int = 0) -> Subscription:
    """Push subscription: the retained items after `after`, live items, then the terminal.

    Iterate it, or ``async for`` it; ``replay_gap`` (with `gap`) if items after the
    cursor were evicted, ``cursor_ahead`` if the cursor is past the latest item.
    """
    return Subscription(run_id, _stream(run_id), check_cursor(after))


def subscribe_credit(run_id: str, after: int = 0) -> CreditSubscription:
    """Credit subscription: at most one unacknowledged item (`next`, then `ack`)."""
    return CreditSubscription(run_id, _stream(run_id), check_cursor(after))


async def subscribe_credit_async(run_id: str, after: int = 0) -> CreditSubscription:
    """`subscribe_credit` for asyncio code: the subscribe request is awaited, so the
    event loop never blocks and no thread waits. Read it with ``await
    sub.anext(timeout)`` and acknowledge with ``await sub.ack_async(seq)`` (awaited
    too). The run's first subscribe also asks its server to start the stream (see the
    module doc): a server or a stream that does not answer within 5 s (each) is
    ``unavailable``; a cancelled await leaves nothing subscribed."""
    stream = await _stream_async(run_id)  # a registry read once the stream is started
    return await CreditSubscription.open_async(run_id, stream, check_cursor(after))


def wait(run_id: str, timeout: float | None = None) -> Outcome:
    """The run's outcome once it has one; `RunTimeout` if not within `timeout` seconds.

    Independent of subscriptions: waiting consumes nothing.
    """
    try:
        server = _lookup(run_id)
    except RunError:
        return _lost(run_id)
    token = Ref()
    try:
        return call(server, Wait(token), timeout)  # type: ignore[no-any-return]
    except CallTimeout:
        cast(server, Unwait(token))
        raise RunTimeout(f"the run did not end within {timeout} s") from None
    except ProcessExit:
        return _lost(run_id)


async def wait_async(run_id: str, timeout: float | None = None) -> Outcome:
    """`wait` for asyncio code: the event loop keeps running meanwhile."""
    try:
        server = _lookup(run_id)
    except RunError:
        return _lost(run_id)
    token = Ref()
    try:
        return await aio.call(server, Wait(token), timeout)  # type: ignore[no-any-return]
    except CallTimeout:
        cast(server, Unwait(token))
        raise RunTimeout(f"the run did not end within {timeout} s") from None
    except ProcessExit:
        return _lost(run_id)
    except asyncio.CancelledError:
        cast(server, Unwait(token))  # the server forgets this waiter now, not at the end
        raise


def status(run_id: str) -> dict[str, Any]:
    """A JSON-safe view of the run: ``state`` (running, completed, paused, cancelled,
    failed), ``run_id``, ``parent_run_id``, ``resumed_to``, ``subscribers``, sequences..."""
    try:
        info: dict[str, Any]
        info, stream, window = _answer(_lookup(run_id), RunStatus())
        if stream is not None:  # its stream knows the window and the subscribers
            window = CreditStream.status(stream)
    except RunError as error:
        if error.reason == "unavailable":
            raise  # the server lives, busy: try again
        return _outcome_view(run_id, _lost(run_id))  # its server died: its outcome is left
    except ProcessExit:
        return _outcome_view(run_id, _lost(run_id))
    info["subscribers"] = window["subscribers"]
    info["latest_sequence"] = window["latest_sequence"]
    info["oldest_available_sequence"] = window["oldest_available_sequence"]
    return info


def cancel(run_id: str, reason: Any = DEFAULT_CANCEL_REASON) -> None:
    """Cancel a running run: its outcome becomes `Cancelled(reason)` (the first reason
    wins; its turn has `CANCEL_GRACE` to end on its own); ``already_terminal`` once it
    has ended."""
    try:
        check_cancel_reason(reason)
    except AdkError as error:
        raise RunError(error.reason, error.detail) from None
    try:
        server = _lookup(run_id)
    except RunError:
        _lost(run_id)  # not_found, unless its server died: then it has ended
        raise RunError("already_terminal", "the run has ended") from None
    _answer(server, Cancel(reason, CANCEL_GRACE))


def resume(
    run_id: str,
    response: Any,
    *,
    retention: float | None = None,
    max_buffered_events: int | None = None,
    runner: Any = None,
    user_id: str | None = None,
) -> str:
    """Resume a paused run with the human's `response`; returns the new run's id.

    A paused run stays resumable for as long as its continuation exists: once its
    retention is over, it was evicted, or the process restarted, pass the `runner` and
    `user_id` it ran for and the pause is found in the sessions.

    The paused run is left as it was except its ``resumed_to``. The Runner checks the
    response before anything is started, so a refused response changes nothing. The
    new run claims the continuation once admitted: if it ended without claiming it
    (admission refused it), the paused run can be resumed again. ``run_not_paused``;
    ``already_resumed`` (its `run_id` is the run that resumed it).
    """
    try:
        server = _lookup(run_id)
    except RunError:
        if runner is None or user_id is None:
            raise
        return _resume_from_session(
            run_id, response, runner, user_id, retention, max_buffered_events
        )
    child_id = new_run_id()
    try:
        parent = _answer(server, BeginResume(child_id))
    except RunError as error:
        if not _unclaimed(error):
            raise
        _answer(server, ForgetResume(error.run_id or ""))
        parent = _answer(server, BeginResume(child_id))
    committed = False
    try:
        _start_child(
            child_id,
            run_id,
            (parent["runner"], parent["user_id"], parent["session_id"]),
            parent["event"].invocation_id,
            response,
            retention=parent["retention"] if retention is None else retention,
            max_buffered_events=(
                parent["max_buffered_events"]
                if max_buffered_events is None
                else max_buffered_events
            ),
        )
        committed = True
    finally:
        try:
            call(server, EndResume(child_id, committed))
        except ProcessExit:
            pass  # the paused run expired meanwhile; the new run goes on
    _log.info("adk.runs.resumed", run_id=run_id, resumed_to=child_id)
    return child_id


def _resume_from_session(
    run_id: str,
    response: Any,
    runner: Any,
    user_id: str,
    retention: float | None,
    max_buffered_events: int | None,
) -> str:
    """Resume a run no longer in memory: its pause, found in the sessions, is claimed by
    the new run exactly once (a second resume finds no pause: ``no_paused_invocation``)."""
    found = runner.find_paused_run(user_id, run_id)
    if found is None:
        raise RunError("not_found", "no such run, and no pause of it in the sessions")
    session_id, invocation_id = found
    child_id = _start_child(
        new_run_id(),
        run_id,
        (runner, user_id, session_id),
        invocation_id,
        response,
        retention=DEFAULT_RETENTION if retention is None else retention,
        max_buffered_events=(
            DEFAULT_MAX_BUFFERED_EVENTS if max_buffered_events is None else max_buffered_events
        ),
    )
    _log.info("adk.runs.resumed_from_session", run_id=run_id, resumed_to=child_id)
    return child_id


def _start_child(
    child_id: str,
    parent_run_id: str,
    where: tuple[Any, str, str],
    invocation_id: str,
    response: Any,
    *,
    retention: Any,
    max_buffered_events: Any,
) -> str:
    """Start the run that resumes `parent_run_id`'s pause (checked by the Runner before
    anything starts), tracked by the registry; its id."""
    runner, user_id, session_id = where
    identity = run_identity(child_id, retention, max_buffered_events, parent_run_id)
    with refusals():
        runner.start_resume(
            user_id, session_id, response, invocation_id, token=random_bytes(16).hex(), run=identity
        )
    return child_id


def list_runs(
    *,
    state: str | None = None,
    agent: str | None = None,
    app_name: str | None = None,
    user_id: str | None = None,
    session_id: str | None = None,
    limit: int = DEFAULT_LIST_LIMIT,
    cursor: str | None = None,
) -> dict[str, Any]:
    """The runs this process knows (running and retained), oldest first, as `status`
    views filtered by `state` (running, paused, completed, failed, cancelled), `agent`
    and app/user/session; ``{"runs": [...], "next_cursor": str | None}``, at most
    `limit` (1..500) a page. For pauses that outlived a restart, see `pending`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise RunError("invalid_limit", f"limit is 1..{MAX_LIST_LIMIT}")
    start = _cursor_offset(cursor)
    wanted = {
        "state": state,
        "agent": agent,
        "app_name": app_name,
        "user_id": user_id,
        "session_id": session_id,
    }
    try:
        known = call(RUN_REGISTRY, Known())
    except ProcessExit:
        known = []
    views = []
    for run_id, server, lost in known:
        view = _view(run_id, server, lost)
        if view is not None and all(v is None or view.get(k) == v for k, v in wanted.items()):
            views.append(view)
    page = views[start : start + limit]
    more = start + limit < len(views)
    return {"runs": page, "next_cursor": f"offset:{start + limit}" if more else None}


def pending(
    runner: Any, user_id: str, session_id: str | None = None, *, limit: int = 100
) -> list[dict[str, Any]]:
    """What waits for a human or an operation, from the sessions (it survives a
    restart): see `Runner.pending`. A record's ``run_id`` resumes with
    ``resume(run_id, response, runner=runner, user_id=user_id)``."""
    records: list[dict[str, Any]] = runner.pending(user_id, session_id, limit=limit)
    return records


def _view(run_id: str, server: Pid | None, lost: Any) -> dict[str, Any] | None:
    if server is None:
        return None if lost is None else _outcome_view(run_id, lost)
    try:
        status, value = call(server, Status(), timeout=2.0)
    except (ProcessExit, CallTimeout):
        return None  # it went away meanwhile, or is too busy to say
    return value if status == "ok" else None


def _outcome_view(run_id: str, outcome: Outcome) -> dict[str, Any]:
    """The status of a run whose server is gone: the outcome recorded for it (its own
    terminal, or ``run_actor_exit`` if it died before one), and the state it names."""
    builtins = msgspec.to_builtins(outcome)
    return {"run_id": run_id, "state": builtins["type"], "outcome": builtins}


def _cursor_offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if isinstance(cursor, str) and cursor.startswith("offset:") and cursor[7:].isdigit():
        return int(cursor[7:])
    raise RunError("invalid_cursor", "pass back a next_cursor this function returned")


def stats() -> dict[str, int]:
    """Live counts: run servers (running and retained), retained ended runs, pending
    handoffs."""
    try:
        counts = call(RUN_REGISTRY, Stats())
        actors = DynamicSupervisor.count_children(RUN_SUPERVISOR)["active"]
    except ProcessExit:
        counts, actors = {"retained": 0}, 0
    return {
        "actors": actors,
        "retained": counts["retained"],
        "pending_handoffs": handoffs.pending(),
    }


# -- helpers -------------------------------------------------------------------------------


def _unclaimed(error: RunError) -> bool:
    """Did the resume that made this run `already_resumed` fail (it may not have
    claimed the continuation; the paused run's server checks the session)?"""
    if error.reason != "already_resumed" or error.run_id is None:
        return False
    try:  # ended without a pause or an answer: it may never have claimed it
        return isinstance(wait(error.run_id, timeout=1.0), Failed | Cancelled)
    except RunError:
        return False  # still running, or gone


def _lost(run_id: str) -> Outcome:
    """The outcome the registry recorded for a run whose server died, or ``not_found``."""
    try:
        outcome = call(RUN_REGISTRY, Lost(run_id))
    except ProcessExit:
        outcome = None
    if outcome is None:
        raise RunError("not_found", "no such run, or its retention is over")
    return outcome  # type: ignore[no-any-return]


def _lookup(run_id: str) -> Pid:
    """The run's server, by its registered name (no message round trip)."""
    if not isinstance(run_id, str):
        raise RunError("not_found", "a run id is a string")
    server = whereis(run_name(run_id))
    if server is None:
        raise RunError("not_found", "no such run, or its retention is over")
    return server


def _stream(run_id: str) -> Pid:
    """The run's credit stream: by its registered name (no message round trip), or
    started by its server for this first subscriber (`OpenStream`); ``unavailable`` if
    the server does not answer within `ROUND_TRIP_TIMEOUT`."""
    server, stream = _known_stream(run_id)
    if stream is not None:
        return stream
    try:
        answer = call(server, OpenStream(), subscription.ROUND_TRIP_TIMEOUT)
    except (ProcessExit, CallTimeout) as error:
        raise _open_error(error) from None
    return _opened(answer)


async def _stream_async(run_id: str) -> Pid:
    """`_stream` for asyncio code: the `OpenStream` request is awaited (the event loop
    keeps running); a server that does not answer within `ROUND_TRIP_TIMEOUT` is
    ``unavailable``."""
    server, stream = _known_stream(run_id)
    if stream is not None:
        return stream
    try:
        answer = await aio.call(server, OpenStream(), subscription.ROUND_TRIP_TIMEOUT)
    except (ProcessExit, CallTimeout) as error:
        raise _open_error(error) from None
    return _opened(answer)


def _known_stream(run_id: str) -> tuple[Pid, Pid | None]:
    """The run's server and its stream if one is registered (None: ask the server)."""
    return _lookup(run_id), whereis(stream_name(run_id))


def _open_error(error: ProcessExit | CallTimeout) -> RunError:
    """The `RunError` for an `OpenStream` request that got no answer: the server is
    gone (``not_found``) or did not answer in time (``unavailable``)."""
    if isinstance(error, ProcessExit):
        return RunError("not_found", "the run is no longer retained")
    return RunError("unavailable", "the run's server did not answer in time")


def _opened(answer: Any) -> Pid:
    status, value = answer
    if status != "ok":
        raise RunError(value, "refused by the run")
    return value  # type: ignore[no-any-return]


def _answer(server: Pid, request: Any) -> Any:
    """Call the run's server; turn its ``("error", reason)`` into a `RunError`, and a
    server that does not answer within `ROUND_TRIP_TIMEOUT` into ``unavailable`` (try
    again; the daemon answers 503), never the kernel's `CallTimeout`."""
    try:
        status, value = call(server, request, subscription.ROUND_TRIP_TIMEOUT)
    except ProcessExit:
        raise RunError("not_found", "the run is no longer retained") from None
    except CallTimeout:
        raise RunError("unavailable", "the run's server did not answer in time") from None
    if status == "ok":
        return value
    if isinstance(value, tuple) and value[:1] == ("already_resumed",):
        raise RunError("already_resumed", f"resumed as {value[1]}", run_id=value[1])
    raise RunError(value, "refused by the run")
