"""How a caller reads an invocation server it starts: `follow` (and `afollow` for
``async for``) yields every stored event then the outcome, for `run_async`,
`invocation` and `resume_invocation`; `await_outcome` waits for the outcome alone,
for `run` and `resume`, whose inbox the server sends the terminal only (no message
per event). Each starts the invocation with a fresh inbox as its owner, so a caller
that leaves early cancels it (``consumer_closed``), its end recorded before it
returns when the server answers the cancel within `CANCEL_WAIT` seconds; a server
that dies before its terminal is ``("invocation_exit", kind)``. `afollow` awaits its
start too (`launch.launch_async`): a consumer cancelled while the start is in flight
leaves once it has answered, an invocation started meanwhile cancelled with
``consumer_closed`` (`cancel_abandoned`) and its inbox closed.

Leaving early never replaces the caller's own exception (``KeyboardInterrupt``, say)
and always closes the inbox: a server too busy to answer the cancel in time (a slow
session write) is logged, and ends with the cancel (still in its mailbox) or with
its inbox owner's exit once it gets to them. A caller that leaves before its start has
answered (an interrupt in the start's tail, as the server begins its turn) cannot name
the server to cancel: closing the inbox is how it leaves, and the server records
``consumer_closed`` itself on its owner's exit, shortly after the caller has left.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import contextmanager

from adk_actors.events import Event
from adk_actors.outcomes import Cancelled, Completed, Failed, Outcome, Paused
from adk_actors.runner.messages import Cancel, StreamOpened
from providers.content import Content
from providers.errors import AdkError
from supervision import (
    CallTimeout,
    Down,
    Inbox,
    Pid,
    ProcessExit,
    StreamDetached,
    StreamItem,
    StreamTerminal,
    aio,
    call,
)
from supervision.logs import get_logger

CANCEL_WAIT = 5.0
"""Seconds a caller that leaves early waits for the server to record its cancel."""
_log = get_logger("adk_actors.runner")


def follow(
    start: Callable[[Pid], Pid], started: Callable[[Pid], None] | None = None
) -> Iterator[Event | Outcome]:
    """Start an invocation with a fresh inbox as its owner and subscriber (`started`
    is told its server), then yield its stream: each event, then the outcome. Closing
    early closes the inbox, which the server sees as its caller leaving
    (``consumer_closed``)."""
    inbox = Inbox(label="invocation caller")
    server: Pid | None = None
    ended = False
    try:
        server = start(inbox.pid)
        _told(started, server)
        opened = inbox.receive(5.0, _is_opened)
        inbox.monitor(opened.stream)  # closed after the terminal; killed with its server
        while not ended:
            followed = _followed(inbox.receive(None, None))
            if followed is not None:
                ended, item = followed
                yield item
    finally:
        _leave(server, inbox, ended)


async def afollow(
    start: Callable[[Pid], Awaitable[Pid]], started: Callable[[Pid], None] | None = None
) -> AsyncGenerator[Event | Outcome, None]:
    """`follow` for ``async for``: the start (`launch.launch_async`) and the inbox are
    awaited, so a consumer waiting for its server to start or for a slow model holds
    no thread (the event loop runs on meanwhile)."""
    inbox = Inbox(label="invocation caller")
    with _closed_on_failure(inbox):
        server = await start(inbox.pid)
    _told(started, server)
    ended = False
    try:
        opened = await inbox.areceive(5.0, _is_opened)
        inbox.monitor(opened.stream)
        while not ended:
            followed = _followed(await inbox.areceive(None, None))
            if followed is not None:
                ended, item = followed
                yield item
    finally:
        try:
            if not ended:
                await cancel_abandoned(server)
        finally:  # also when the cancel could not be awaited (a loop that is closing)
            inbox.close()


async def cancel_abandoned(server: Pid) -> None:
    """Cancel, awaited, an invocation whose caller left before its end (the consumer of
    an ``async for`` that left early, or one cancelled while its start was in flight):
    ``consumer_closed``, its end recorded once the server answers. A server gone
    meanwhile recorded its own end; one too busy to answer within `CANCEL_WAIT` is
    logged (the cancel stays queued for it)."""
    try:
        await aio.call(server, Cancel("consumer_closed", 0.0), CANCEL_WAIT)
    except ProcessExit:
        pass
    except CallTimeout:
        _log.warning("adk.invocation.cancel_unanswered", server=repr(server))


def await_outcome(start: Callable[[Pid], Pid]) -> Outcome:
    """Start an invocation whose caller wants only its end (`Runner.run`, `resume`):
    a fresh inbox is its owner and its outcome-only subscriber, so the server sends
    it the terminal alone, no message per event. The inbox monitors the server (a
    plain invocation's stream): a server gone before its terminal is
    ``("invocation_exit", kind)``, as for `follow`. Leaving while it runs (an
    exception in the wait, e.g. ``KeyboardInterrupt``) cancels it with
    ``consumer_closed`` (see `_leave`) and raises that exception."""
    inbox = Inbox(label="invocation caller")
    server: Pid | None = None
    ended = False
    try:
        server = start(inbox.pid)
        ref = inbox.monitor(server)  # its terminal comes first: sent before it exits
        while True:
            message = inbox.receive(None, None)
            if type(message) is StreamTerminal:
                ended = True
                outcome: Outcome = message.outcome
                return outcome
            if type(message) is Down and message.ref == ref:
                ended = True
                kind = getattr(message.reason, "kind", None) or str(message.reason)
                return Failed(("invocation_exit", kind[:200]))
    finally:
        _leave(server, inbox, ended)


def result_of(outcome: Outcome | None) -> str | Content | Paused:
    """What `run` returns for an outcome: the output, the `Paused` outcome, or a raise
    (a cancel's as ``("cancelled", reason)``)."""
    if isinstance(outcome, Completed):
        return outcome.output
    if isinstance(outcome, Paused):
        return outcome
    if isinstance(outcome, Cancelled):
        raise AdkError(("cancelled", outcome.reason), "the invocation was cancelled")
    reason = outcome.reason if outcome is not None else "invocation_worker_exit"
    raise AdkError(reason, "the invocation failed")


def _leave(server: Pid | None, inbox: Inbox, ended: bool) -> None:
    """A sync reader is done: if the invocation has not ended (the caller left early),
    cancel it with ``consumer_closed`` (its end is recorded once the server answers);
    then close the inbox, whatever the cancel did. Nothing here replaces the caller's
    own exception: a server gone meanwhile recorded its own end, and one too busy to
    answer within `CANCEL_WAIT` is logged (the cancel stays queued for it, and so does
    the exit of its owner, this inbox). A caller that left before its start answered
    (`server` unknown: an interrupt in the start, or as it returned) only closes the
    inbox: a server started after all has it as owner, sees its caller gone and
    records ``consumer_closed`` itself, shortly after."""
    try:
        if not ended and server is not None:
            call(server, Cancel("consumer_closed", 0.0), CANCEL_WAIT)
    except ProcessExit:
        pass
    except CallTimeout:
        _log.warning("adk.invocation.cancel_unanswered", server=repr(server))
    finally:
        inbox.close()


@contextmanager
def _closed_on_failure(inbox: Inbox) -> Iterator[None]:
    """Close `inbox` if its invocation's start fails (or its caller is cancelled): a
    server started after all has it as owner, and so sees its caller gone."""
    try:
        yield
    except BaseException:
        inbox.close()
        raise


def _told(started: Callable[[Pid], None] | None, server: Pid) -> None:
    if started is not None:
        started(server)


def _is_opened(message: object) -> bool:
    return type(message) is StreamOpened


def _followed(message: object) -> tuple[bool, Event | Outcome] | None:
    """One message of an invocation's stream for its follower: (ended, what to yield),
    or None for a message that is not the stream's."""
    match message:
        case StreamItem(item=item):
            return False, item
        case StreamTerminal(outcome=outcome):
            return True, outcome
        case StreamDetached():
            raise AdkError("slow_subscriber", "the caller fell too far behind")
        case Down(reason=reason):  # before its terminal: the invocation is gone
            kind = getattr(reason, "kind", None) or str(reason)
            return True, Failed(("invocation_exit", kind[:200]))
    return None
