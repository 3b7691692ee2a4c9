"""An invocation server's session writes, each fenced by the server's liveness.

Every session write of an invocation server goes through here: its opening (the
user's message, or a resume's claim), each step, its end (closing the invocation
and clearing ``temp:`` state, in one step) and a policy refusal's audit event. Each is
conditional on the invocation's markers in session state (open for this server's
token, or, for the opening, not open yet) and on the server's liveness (`_alive`),
both checked inside the write's atomic step, under the session's lock, which every
read of that session waits for.

Why the fence: a ``kill`` leaves the thread of a handler running (the kernel fences
its messages, not its session writes), so without it a killed server's opening could
land after the run registry's abandonment (`Runner.abandon`) had found nothing to
close, leaving an invocation open with no terminal. With it, a write either lands
before whoever closes for the dead server reads the session (and is closed by it),
or never lands.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adk_actors.events import Event
from adk_actors.runner import continuations, steps
from adk_actors.runner.phase import Phase
from adk_actors.runner.request import Fresh
from adk_actors.runner.state import InvocationState
from providers.errors import AdkError
from supervision import is_fenced_thread
from supervision.logs import get_logger

_log = get_logger("adk_actors.runner")


def opening(state: InvocationState) -> tuple[Event, dict[str, Any], dict[str, Any]]:
    """The opening event, the state its write expects and the delta it applies: a
    fresh invocation's message if no invocation of that id is open; a resume's claim
    if its continuation is still the one checked and nobody opened it meanwhile."""
    request = state.request
    work = request.work
    inv = state.invocation_id
    if isinstance(work, Fresh):
        assert state.opening is not None
        expected: dict[str, Any] = {continuations.open_key(inv): None}
        return state.opening, expected, continuations.opened_delta(inv, request.token)
    event = continuations.claim_event(
        steps.RUNNER_AUTHOR, inv, work.continuation.type, work.answer.how
    )
    expected = {continuations.key_of(inv): work.stored, continuations.open_key(inv): None}
    return event, expected, continuations.claimed_delta(inv, request.token)


def write(
    state: InvocationState,
    event: Event,
    delta: Mapping[str, Any] | None = None,
    expected: Mapping[str, Any] | None = None,
    clear_temp: bool = False,
) -> bool:
    """One atomic step: store `event` (and apply `delta`) if the invocation is still
    open for us (or, for the opening, if `expected` holds), then (`clear_temp`) clear
    ``temp:`` state in that same step; False otherwise."""
    runner = state.runner
    request = state.request
    condition = (
        expected
        if expected is not None
        else continuations.is_open(state.invocation_id, request.token)
    )
    try:
        runner.sessions.add_event_if_state(
            runner.app_name,
            request.user_id,
            request.session_id,
            event,
            condition,
            runtime_delta=delta,
            precondition=_alive,
            clear_temp=clear_temp,
        )
    except AdkError as error:
        if error.reason in ("conflict", "not_found"):
            return False  # closed meanwhile, or this server was killed (fenced)
        raise
    return True


def write_end(state: InvocationState, event: Event) -> bool:
    """Store an error end (closing the invocation, clearing ``temp:``), if it was open."""
    if state.phase is not Phase.OPEN:
        return False
    try:
        return write(state, event, continuations.closed_delta(state.invocation_id), clear_temp=True)
    except AdkError as error:  # the store refused even that: the caller still hears
        _log.warning("adk.invocation.end_not_stored", reason=str(error.reason)[:200])
        return False


def write_refusal_audit(state: InvocationState, event: Event) -> bool:
    """Store the audit event of a refusal before opening (the only thing it leaves),
    creating the session if need be; False if this server was killed meanwhile."""
    runner = state.runner
    request = state.request
    sessions = runner.sessions
    ids = (runner.app_name, request.user_id, request.session_id)
    with sessions.lock(*ids):  # fenced like every write of this server
        if not _alive():
            return False
        sessions.create_session(*ids)
        sessions.add_event(*ids, event, precondition=_alive)
    return True


def _alive() -> bool:
    """The fence of the server's session writes, run inside each write's atomic step:
    False once this server was killed (its handler's thread still running)."""
    return not is_fenced_thread()
