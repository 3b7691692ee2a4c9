"""The plugin notifier: a run's end notifications, off the process that ended it.

An invocation server publishes its terminal without waiting for ``after_run`` or
``on_run_error``: it takes a ticket (`announce`), publishes the end, then hands the
notification here (`send`). The notifier, a child of the root tree started before the
invocation servers that use it (so it stops after them), runs each one in a kernel task
it owns (``Pipeline.arun``: every hook in a task of its own with its deadline, the
whole bounded by the sum of those deadlines), under the trace context the sender gave
(the run's ``invoke_agent`` span), so a notification outlives the server that announced
it (a plain invocation's stops at once), and whatever it does, the run's outcome stands.

At most `MAX_RUNNING` notifications run at once, so slow hooks never take more than
that many threads of the kernel's shared pool (tools, providers and other Runners use
it too); up to `MAX_PENDING` more wait in order behind them. A notification past that,
one that cannot start, one cast to a notifier that is stopping or has died, or one still
waiting when the notifier stops is dropped: logged (``adk.plugin.notification_dropped``
with ``why``), counted (`dropped_notifications`) and its ticket closed.

`wait_notifications` waits until every notification announced before it has ended
(a test, a graceful exit): a ticket never outlives the notifier it was sent to. A
notifier that stops closes its own; one killed (no ``terminate``) has its tickets
closed as it dies, by the kernel's death notice (`Notifier.init`), whether or not a
successor follows (the successor's `init` also closes any left, one lock for both, so
each ticket is counted once); and a send that looked up a notifier killed since drops
its notification at once (`_Tickets.assign`). On stop the notifier gives the running
ones up to `DRAIN_SECONDS` before they are killed.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from adk_actors.plugins.pipeline import Pipeline
from supervision import (
    AlreadyStarted,
    ChildSpec,
    ExitSignal,
    GenServer,
    Inbox,
    MaxChildrenReached,
    NameTaken,
    Pid,
    Stop,
    Task,
    TaskBusy,
    TaskFailed,
    TaskResult,
    TaskTimeout,
    cast,
    is_fenced_thread,
    register,
    self_pid,
    trap_exit,
    whereis,
)
from supervision.logs import get_logger

NOTIFIER_NAME = "adk.plugin_notifier"
MAX_RUNNING = 16
"""Notifications running at once (half the kernel's default pool): the rest wait."""
MAX_PENDING = 10_000
"""Notifications waiting for a running one to end; past it a new one is dropped."""
DRAIN_SECONDS = 5.0
"""On stop, how long the running notifications get to end before they are killed."""
DROPPED = "adk.plugin.notification_dropped"
"""The log event of a notification that never ran (or was killed on stop)."""
_log = get_logger("adk.plugins")

Scope = Callable[[], AbstractContextManager[Any]]
"""Entered around a notification's task start: the sender's trace context."""


class Notify(NamedTuple):
    """Cast: run `hook` of `pipeline` with `ctx` and `value` under `scope`; `ticket`
    from `announce`."""

    ticket: int
    pipeline: Pipeline
    hook: str
    ctx: Mapping[str, Any]
    value: Any
    scope: Scope | None = None


_GONE: Any = object()
"""What `_Tickets.drop` finds for a ticket closed already."""


class _Tickets:
    """The notifications announced and not yet ended (for `wait_notifications`), each
    with the notifier it was sent to (None until sent), and the drops counted."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._next = 0
        self._open: dict[int, Pid | None] = {}
        self._stopping: set[Pid] = set()
        self.dropped: Counter[str] = Counter()

    def announce(self) -> int:
        with self._changed:
            self._next += 1
            self._open[self._next] = None
            return self._next

    def assign(self, ticket: int, notifier: Pid) -> str | None:
        """Record that `ticket` goes to `notifier` (None), or why it cannot: the
        notifier is stopping, or it is gone. A sender may hold a notifier killed since
        it looked it up, and the one its supervisor started instead may have swept the
        tickets already; recorded for the dead one, the ticket would stay open until the
        next restart (second review of the runner/plugins fixes, finding 7). A process
        is marked dead before its exit is told to anyone, and this check, its death
        notice (`notifier_down`) and `sweep` hold one lock: either the notifier was
        alive here, and its death notice (or the next one's sweep) comes later and
        closes the ticket, or it is dead here."""
        with self._changed:
            if notifier in self._stopping:
                return "stopping"
            if not notifier.is_alive():
                return "notifier_exited"
            if ticket in self._open:
                self._open[ticket] = notifier
            return None

    def close(self, ticket: int) -> None:
        with self._changed:
            self._open.pop(ticket, None)
            self._changed.notify_all()

    def drop(self, ticket: int, why: str) -> bool:
        """Close `ticket` and count it dropped for `why`, under one lock (a waiter woken
        by the close sees the count); False, counting nothing, when it was closed
        already: by the death notice of its notifier or a successor's sweep, while a
        fenced callback of the killed one still ran. So a drop is counted once."""
        with self._changed:
            if self._open.pop(ticket, _GONE) is _GONE:
                return False
            self.dropped[why] += 1
            self._changed.notify_all()
            return True

    def stopping(self, notifier: Pid) -> None:
        """From now on nothing more is sent to `notifier`."""
        with self._changed:
            self._stopping.add(notifier)

    def sweep(self, stale: Callable[[Pid], bool], why: str) -> int:
        """Close the sent tickets whose notifier is `stale`, counted as dropped for
        `why` under the same lock (a waiter woken by the close sees the count); how
        many. Forgets the stopping notifiers that are gone (`assign` refuses a dead one
        anyway)."""
        with self._changed:
            self._stopping = {pid for pid in self._stopping if pid.is_alive()}
            gone = [t for t, owner in self._open.items() if owner is not None and stale(owner)]
            for ticket in gone:
                del self._open[ticket]
            if gone:
                self.dropped[why] += len(gone)
            self._changed.notify_all()
            return len(gone)

    def counts(self) -> dict[str, int]:
        with self._changed:
            return dict(self.dropped)

    def notifier_down(self, notifier: Pid) -> None:
        """`notifier` has died: close the tickets sent to it that are still open, counted
        and logged as ``notifier_exited`` (none after a graceful stop: its `terminate`
        closed them). Run by the kernel on the thread that ended it (a kill, or the
        notifier's own exit), so it only takes the lock and logs."""
        if notifier.is_alive():
            return  # the watch's inbox got a message: only its exit tells of the death
        lost = self.sweep(lambda owner: owner == notifier, "notifier_exited")
        if lost:
            _log.warning(DROPPED, why="notifier_exited", count=lost)

    def wait(self, timeout: float | None) -> bool:
        """Until the tickets open now have closed; False after `timeout` seconds (None:
        no limit). No polling: every ticket is closed by its notifier, or at the
        notifier's death (`notifier_down`), and each close wakes the waiters."""
        with self._changed:
            before = set(self._open)
            return self._changed.wait_for(lambda: before.isdisjoint(self._open), timeout)


_tickets = _Tickets()


def announce() -> int:
    """A ticket for a notification about to be sent: take it before the end it tells
    of is published, so a `wait_notifications` after that end waits for it. Every
    ticket must reach `send` (from a ``finally``): until it is sent, nothing but `send`
    closes it (no notifier owns it), and a `wait_notifications(None)` would wait for
    it for good."""
    return _tickets.announce()


def send(
    ticket: int,
    pipeline: Pipeline,
    hook: str,
    ctx: Mapping[str, Any],
    value: Any,
    scope: Scope | None = None,
) -> None:
    """Hand a notification to the notifier without waiting (dropped, and its ticket
    closed, when there is no notifier, it is stopping or gone, or the caller was
    killed)."""
    notifier = whereis(NOTIFIER_NAME)
    if is_fenced_thread():
        _tickets.close(ticket)
        return
    refused = "no_notifier" if notifier is None else _tickets.assign(ticket, notifier)
    if refused is not None:
        _drop(ticket, hook, refused)
        return
    cast(notifier, Notify(ticket, pipeline, hook, ctx, value, scope))


def wait_notifications(timeout: float | None = 5.0) -> bool:
    """Wait until every run-end notification announced before this call has ended;
    False when some had not within `timeout` seconds (None: wait without a limit).
    From a thread of your own, not from a process's callback."""
    return _tickets.wait(timeout)


def dropped_notifications() -> dict[str, int]:
    """How many notifications were dropped in this process, by why (see the module)."""
    return _tickets.counts()


def child_spec() -> ChildSpec:
    """The notifier as a child of the root tree (its stop drains, then kills)."""
    return ChildSpec("plugin_notifier", _start_notifier, shutdown=DRAIN_SECONDS + 1.0)


def _start_notifier() -> Pid:
    """Start a `Notifier` linked to the caller; `AlreadyStarted` (naming
    `NOTIFIER_NAME`) when one runs, as when the kernel took the name before `init`.
    The notifier registers the name itself, inside `init` (see there)."""
    try:
        return Notifier.start_link()
    except AlreadyStarted as running:
        raise AlreadyStarted(NOTIFIER_NAME, running.pid) from None


@dataclass
class _State:
    running: dict[Pid, tuple[int, Task]] = field(default_factory=dict)
    pending: deque[Notify] = field(default_factory=deque)


class Notifier(GenServer):
    """Starts one task per notification (at most `MAX_RUNNING` at once, the rest wait
    in order) and closes its ticket when it ends."""

    def init(self, _args: Any) -> _State | Stop:
        """Watch its own death, take the name, then close what notifiers before it left.

        A notifier killed runs no ``terminate``, and when its supervisor gives up (or is
        itself stopping) no successor comes to close its tickets (Low leftovers of
        session 28, item 1). So its death closes them: an `Inbox` it owns exits with it,
        and the inbox's waker, run by the kernel once it exits, closes them
        (`_Tickets.notifier_down`). The name is registered only after that, so a sender
        never finds a notifier whose death nobody would hear of; and before the sweep,
        so a second notifier started while one runs fails with ``already_started``
        (`AlreadyStarted`) having touched nothing: the sweep would close the live one's
        tickets (second review of bd5d6c5, N-A). Its inbox exits with it, and finds no
        ticket of its own to close."""
        trap_exit(True)  # a shutdown runs `terminate`, which drains
        me = self_pid()
        Inbox(label="plugin notifier death watch").set_waker(
            functools.partial(_tickets.notifier_down, me)
        )
        try:
            register(NOTIFIER_NAME, me)
        except NameTaken:
            return Stop(("already_started", whereis(NOTIFIER_NAME)), None)
        lost = _tickets.sweep(lambda owner: owner != me, "notifier_exited")  # now gone
        if lost:
            _log.warning(DROPPED, why="notifier_exited", count=lost)
        return _State()

    def handle_cast(self, msg: Any, state: _State) -> Any:
        match msg:
            case Notify() if len(state.running) < MAX_RUNNING:
                self._start(state, msg)
            case Notify() if len(state.pending) < MAX_PENDING:
                state.pending.append(msg)
            case Notify(ticket=ticket, hook=hook):
                _drop(ticket, hook, "too_many")
        return state

    def handle_info(self, msg: Any, state: _State) -> Any:
        match msg:
            case TaskResult(pid=pid) if pid in state.running:
                ticket, _task = state.running.pop(pid)
                _tickets.close(ticket)
                while state.pending and len(state.running) < MAX_RUNNING:
                    self._start(state, state.pending.popleft())
            case ExitSignal(reason=reason) if reason != "normal":
                return Stop(reason, state)
        return state

    def terminate(self, reason: Any, state: Any) -> None:
        me = self_pid()
        _tickets.stopping(me)  # first: a later `send` drops at once
        if isinstance(state, _State):
            for waiting in state.pending:
                _drop(waiting.ticket, waiting.hook, "stopping")
            state.pending.clear()
            deadline = time.monotonic() + DRAIN_SECONDS
            for ticket, task in state.running.values():
                try:
                    task.wait(max(0.0, deadline - time.monotonic()))
                except (TaskFailed, TaskTimeout):
                    task.kill()
                _tickets.close(ticket)
            state.running.clear()
        lost = _tickets.sweep(lambda owner: owner == me, "stopping")  # casts left behind
        if lost:
            _log.warning(DROPPED, why="stopping", count=lost)

    def _start(self, state: _State, msg: Notify) -> None:
        ticket, pipeline, hook, ctx, value, scope = msg
        try:
            with nullcontext() if scope is None else scope():  # the run's trace
                task = Task.start(
                    _notify,
                    pipeline,
                    hook,
                    ctx,
                    value,
                    deadline=_deadline(pipeline, hook),
                    notify=True,
                )
        except (TaskBusy, MaxChildrenReached):
            _drop(ticket, hook, "busy")
            return
        state.running[task.pid] = (ticket, task)


def _drop(ticket: int, hook: str, why: str) -> None:
    """A notification that will not run: its ticket closed, logged and counted, unless
    it was closed already (a killed notifier's fenced callback: its death counted it)."""
    if _tickets.drop(ticket, why):
        _log.warning(DROPPED, hook=hook, why=why)


async def _notify(pipeline: Pipeline, hook: str, ctx: Mapping[str, Any], value: Any) -> None:
    """One notification: its hooks in order, failures recorded by the pipeline."""
    await pipeline.arun(hook, ctx, value)


def _deadline(pipeline: Pipeline, hook: str) -> float:
    """The sum of the hooks' waits (each its timeout plus the second `arun` allows)."""
    waits = sum(
        plugin.options.timeout + 1.0
        for plugin in pipeline.plugins
        if plugin.plugin.hook_function(hook) is not None
    )
    return time.monotonic() + waits + 1.0
