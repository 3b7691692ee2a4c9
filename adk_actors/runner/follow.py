"""How a caller reads an invocation server it starts: `follow` (and `afollow` for
``async for``) yields every stored event then the outcome, for `run_async`,
`invocation` and `resume_invocation`; `await_outcome` waits for the outcome alone,
for `run` and `resume`, whose inbox the server sends the terminal only (no message
per event). Each starts the invocation with a fresh inbox as its owner, so a caller
that leaves early cancels it (``consumer_closed``), its end recorded before it
returns; a server that dies before its terminal is ``("invocation_exit", kind)``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterator

from adk_actors.events import Event
from adk_actors.outcomes import Failed, Outcome
from adk_actors.runner.messages import Cancel, StreamOpened
from providers.errors import AdkError
from supervision import (
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
        if not ended:  # the caller left early: the end is recorded before we return
            try:
                call(server, Cancel("consumer_closed", 0.0))
            except ProcessExit:
                pass  # it ended meanwhile, and recorded its own end
        inbox.close()


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
                await aio.call(server, Cancel("consumer_closed", 0.0))
        except ProcessExit:
            pass
        finally:  # also when the cancel could not be awaited (a loop that is closing)
            inbox.close()


def await_outcome(start: Callable[[Pid], Pid]) -> Outcome:
    """Start an invocation whose caller wants only its end (`Runner.run`, `resume`):
    a fresh inbox is its owner and its outcome-only subscriber, so the server sends
    it the terminal alone, no message per event. The inbox monitors the server (a
    plain invocation's stream): a server gone before its terminal is
    ``("invocation_exit", kind)``, as for `follow`. Leaving while it runs (an
    exception in the wait, e.g. ``KeyboardInterrupt``) cancels it with
    ``consumer_closed``, its end recorded before this returns."""
    inbox, server = _open(start, None)
    ended = False
    try:
        inbox.monitor(server)  # its terminal comes first: the server sent it before exiting
        while True:
            message = inbox.receive(None, None)
            if type(message) is StreamTerminal:
                ended = True
                return message.outcome  # type: ignore[no-any-return]
            if type(message) is Down:
                ended = True
                kind = getattr(message.reason, "kind", None) or str(message.reason)
                return Failed(("invocation_exit", kind[:200]))
    finally:
        if not ended:  # the caller left early: the end is recorded before we return
            try:
                call(server, Cancel("consumer_closed", 0.0))
            except ProcessExit:
                pass  # it ended meanwhile, and recorded its own end
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
