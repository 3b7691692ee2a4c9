"""How a caller reads an invocation server it starts: `follow` (and `afollow` for
``async for``) yields every stored event then the outcome, for `run_async`,
`invocation` and `resume_invocation`; `await_outcome` waits for the outcome alone,
for `run` and `resume`, whose inbox the server sends the terminal only (no message
per event). Each starts the invocation with a fresh inbox as its owner, so a caller
that leaves early cancels it (``consumer_closed``), its end recorded before it
returns when the server answers the cancel within `CANCEL_WAIT` seconds; a server
that dies before its terminal is ``("invocation_exit", kind)``.

Leaving early never replaces the caller's own exception (``KeyboardInterrupt``, say)
and always closes the inbox: a server too busy to answer the cancel in time (a slow
session write) is logged, and ends with the cancel (still in its mailbox) or with
its inbox owner's exit once it gets to them.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterator

from adk_actors.events import Event
from adk_actors.outcomes import Failed, Outcome
from adk_actors.runner.messages import Cancel, StreamOpened
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
    inbox, server = _open(start, started)
    ended = False
    try:
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
    start: Callable[[Pid], Pid], started: Callable[[Pid], None] | None = None
) -> AsyncGenerator[Event | Outcome, None]:
    """`follow` for ``async for``: the inbox is awaited, so a consumer waiting for a
    slow model holds no thread (the event loop runs on meanwhile)."""
    inbox, server = _open(start, started)
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
                await aio.call(server, Cancel("consumer_closed", 0.0), CANCEL_WAIT)
        except ProcessExit:
            pass
        except CallTimeout:
            _log.warning("adk.invocation.cancel_unanswered", server=repr(server))
        finally:  # also when the cancel could not be awaited (a loop that is closing)
            inbox.close()


def await_outcome(start: Callable[[Pid], Pid]) -> Outcome:
    """Start an invocation whose caller wants only its end (`Runner.run`, `resume`):
    a fresh inbox is its owner and its outcome-only subscriber, so the server sends
    it the terminal alone, no message per event. The inbox monitors the server (a
    plain invocation's stream): a server gone before its terminal is
    ``("invocation_exit", kind)``, as for `follow`. Leaving while it runs (an
    exception in the wait, e.g. ``KeyboardInterrupt``) cancels it with
    ``consumer_closed`` (see `_leave`) and raises that exception."""
    inbox, server = _open(start, None)
    ended = False
    try:
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


def _leave(server: Pid, inbox: Inbox, ended: bool) -> None:
    """A sync reader is done: if the invocation has not ended (the caller left early),
    cancel it with ``consumer_closed`` (its end is recorded once the server answers);
    then close the inbox, whatever the cancel did. Nothing here replaces the caller's
    own exception: a server gone meanwhile recorded its own end, and one too busy to
    answer within `CANCEL_WAIT` is logged (the cancel stays queued for it, and so does
    the exit of its owner, this inbox)."""
    try:
        if not ended:
            call(server, Cancel("consumer_closed", 0.0), CANCEL_WAIT)
    except ProcessExit:
        pass
    except CallTimeout:
        _log.warning("adk.invocation.cancel_unanswered", server=repr(server))
    finally:
        inbox.close()


def _open(start: Callable[[Pid], Pid], started: Callable[[Pid], None] | None) -> tuple[Inbox, Pid]:
    """A fresh inbox, and the invocation started with it as owner and subscriber."""
    inbox = Inbox(label="invocation caller")
    try:
        server = start(inbox.pid)
    except BaseException:
        inbox.close()
        raise
    if started is not None:
        started(server)
    return inbox, server


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
