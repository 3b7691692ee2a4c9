"""Starting an invocation server under the invocation supervisor: `launch`, and
`launch_async` for asyncio code.

Both hand the request over the one-shot handoff (the child spec holds only its
reference), withdraw it once the start has answered (taken by the server, or never
left behind) and turn the supervisor's refusals into the same `AdkError`s
(`_handed_off`). `launch` is a direct start or a call (the caller's thread waits);
`launch_async` is awaited, so the event loop runs on while the supervisor's thread
starts the server. A start, once sent, cannot be taken back, so the awaited one runs
in a step of its own that cancelling the caller does not interrupt: see
`launch_async` for what becomes of a server it starts after its caller left.

The awaited starts of one event loop go through a window of `START_WINDOW` starts in
flight (sent, not yet answered); more wait their turn, in order. Without it, a loop
whose coroutines start many runs at once sends every start before it handles the first
answer (the answers queue behind the sends), and on a busy process (the supervisor's
thread starting servers, the runs themselves) its callers come back to their runs only
once all are started: a run that ended meanwhile may be gone before its caller waits
for it (the run registry keeps at most 100 ended runs). The window keeps the loop
handling answers, and its callers' next steps, as the starts go on, and bounds what
one loop queues at the supervisor; the supervisor starts one server at a time anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

from adk_actors.app import RUN_SUPERVISOR, ensure_started
from adk_actors.runner.request import InvocationRequest, handoffs
from adk_actors.runner.server import InvocationServer
from providers.errors import AdkError
from supervision import (
    ChildSpec,
    DynamicSupervisor,
    MaxChildrenReached,
    Pid,
    ProcessExit,
    SupervisorError,
    aio,
)
from supervision.logs import get_logger

Abandon = Callable[[Pid], Awaitable[None]]
"""Ends a server whose awaited start answered after its caller left (`launch_async`)."""

START_WINDOW = 16
"""Awaited starts one event loop has in flight at most (see the module doc)."""

_log = get_logger("adk_actors.runner")


_starts = aio.LoopWindow(START_WINDOW)
"""Each event loop's awaited starts in flight."""

_abandoning: set[asyncio.Task[None]] = set()
"""The steps ending such servers, kept here while they run (the loop keeps only weak
references to its tasks)."""


def launch(request: InvocationRequest) -> Pid:
    """Start an invocation server under the invocation supervisor; the request crosses
    the one-shot handoff (the child spec holds only its reference). Refusals raise
    `AdkError`: ``already_exists`` (a run id in use), ``too_many_runs``, ``not_started``,
    ``("invocation_start_failed", why)``."""
    ensure_started()
    with _handed_off(request) as spec:
        server = DynamicSupervisor.start_child(RUN_SUPERVISOR, spec)
    return _started(server)


async def launch_async(request: InvocationRequest, abandon: Abandon) -> Pid:
    """`launch` for asyncio code: the start is awaited (the event loop runs on, and no
    thread waits, while the invocation supervisor's thread starts the server); the same
    refusals. At most `START_WINDOW` of one loop's starts are in flight at once; a caller
    beyond them waits its turn (cancelled meanwhile, it has sent nothing).

    Cancelling the caller (its task cancelled, an `asyncio.wait_for` that timed out)
    does not take back a start already sent: the start goes on in a shielded step, and
    the caller gets its `CancelledError` once the start has answered. A server started
    meanwhile is handed to `abandon` first, which must end it without blocking the
    loop (a run's server has told its registry of itself already, from its `init`); a
    refused start leaves nothing behind. If the caller is cancelled again while it
    waits for that answer, it leaves at once and the step still hands the server to
    `abandon` when the start answers. A loop torn down meanwhile (the end of
    `asyncio.run` cancels every task left) cancels the step too: the answer is lost and
    a server already started runs on (a run's server has told its registry)."""
    ensure_started()
    starting = await _starts.started(lambda: _start_awaited(request))
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        ending = asyncio.ensure_future(_abandon_once_started(starting, abandon))
        _abandoning.add(ending)
        ending.add_done_callback(_abandoning.discard)
        await asyncio.wait((ending,))
        raise


async def _start_awaited(request: InvocationRequest) -> Pid:
    """The awaited start itself (the step `launch_async` shields)."""
    with _handed_off(request) as spec:
        server = await DynamicSupervisor.start_child_async(RUN_SUPERVISOR, spec)
    return _started(server)


async def _abandon_once_started(starting: asyncio.Future[Pid], abandon: Abandon) -> None:
    """Wait for a start whose caller left; hand a server it started to `abandon`."""
    await asyncio.wait((starting,))
    if not starting.cancelled() and starting.exception() is None:
        try:
            await abandon(starting.result())
        except Exception as error:  # nobody awaits this step: say it here
            _log.warning("adk.invocation.abandon_failed", error=type(error).__name__)


@contextmanager
def _handed_off(request: InvocationRequest) -> Iterator[ChildSpec]:
    """The child spec of a server that takes `request` from the handoff; the start made
    with it inside the block. The handoff is withdrawn once the block is over (taken by
    the server, or never left behind), and the supervisor's refusals become
    `AdkError`s: ``too_many_runs``, ``already_exists`` / ``handoff_taken``,
    ``("invocation_start_failed", why)`` and ``not_started`` (no invocation
    supervisor)."""
    ref = handoffs.put(request)
    try:
        yield ChildSpec(ref, lambda: InvocationServer.start_link(ref), restart="temporary")
    except MaxChildrenReached:
        raise AdkError("too_many_runs", "the invocation supervisor is at max_children") from None
    except SupervisorError as error:
        reason = error.reason
        if isinstance(reason, tuple) and len(reason) == 2 and reason[0] == "shutdown":
            reason = reason[1]
        if reason in ("already_exists", "handoff_taken"):
            raise AdkError(reason, "the invocation was not started") from None
        raise AdkError(
            ("invocation_start_failed", str(reason)[:200]), "the invocation did not start"
        ) from None
    except ProcessExit:
        raise AdkError("not_started", "the application is not running") from None
    finally:
        handoffs.discard(ref)  # taken by the server, or withdrawn: never left behind


def _started(server: Pid | None) -> Pid:
    if server is None:  # a temporary child that ended at once (cannot happen: it waits)
        raise AdkError("not_started", "the invocation ended before it started")
    return server
