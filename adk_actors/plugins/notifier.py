"""The plugin notifier: a run's end notifications, off the process that ended it.

An invocation server publishes its terminal without waiting for ``after_run`` or
``on_run_error``: it takes a ticket (`announce`), publishes the end, then hands the
notification here (`send`). The notifier, the last child of the root tree, runs each
one in a kernel task it owns (``Pipeline.arun``: every hook in a task of its own with
its deadline, the whole bounded by the sum of those deadlines), so a notification
outlives the server that announced it (a plain invocation's stops at once), and
whatever it does, the run's outcome stands.

`wait_notifications` waits until every notification announced before it has ended
(a test, a graceful exit). On stop the notifier gives the running ones up to
`DRAIN_SECONDS` before they are killed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from adk_actors.plugins.pipeline import Pipeline
from supervision import (
    ChildSpec,
    ExitSignal,
    GenServer,
    MaxChildrenReached,
    Pid,
    Stop,
    Task,
    TaskBusy,
    TaskFailed,
    TaskResult,
    TaskTimeout,
    cast,
    is_fenced_thread,
    trap_exit,
    whereis,
)
from supervision.logs import get_logger

NOTIFIER_NAME = "adk.plugin_notifier"
MAX_RUNNING = 10_000
"""Notifications running at once; past it a new one is dropped (and logged)."""
DRAIN_SECONDS = 5.0
"""On stop, how long the running notifications get to end before they are killed."""
_log = get_logger("adk.plugins")


class Notify(NamedTuple):
    """Cast: run `hook` of `pipeline` with `ctx` and `value`; `ticket` from `announce`."""

    ticket: int
    pipeline: Pipeline
    hook: str
    ctx: Mapping[str, Any]
    value: Any


class _Tickets:
    """The notifications announced and not yet ended, for `wait_notifications`."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._next = 0
        self._open: set[int] = set()

    def announce(self) -> int:
        with self._changed:
            self._next += 1
            self._open.add(self._next)
            return self._next

    def close(self, ticket: int) -> None:
        with self._changed:
            self._open.discard(ticket)
            self._changed.notify_all()

    def wait(self, timeout: float) -> bool:
        with self._changed:
            before = set(self._open)
            return self._changed.wait_for(lambda: not before & self._open, timeout)


_tickets = _Tickets()


def announce() -> int:
    """A ticket for a notification about to be sent: take it before the end it tells
    of is published, so a `wait_notifications` after that end waits for it."""
    return _tickets.announce()


def send(ticket: int, pipeline: Pipeline, hook: str, ctx: Mapping[str, Any], value: Any) -> None:
    """Hand a notification to the notifier without waiting (dropped, and its ticket
    closed, when there is no notifier or the caller was killed)."""
    notifier = whereis(NOTIFIER_NAME)
    if notifier is None or is_fenced_thread():
        _tickets.close(ticket)
        if notifier is None:
            _log.warning("adk.plugin.notifier_missing", hook=hook)
        return
    cast(notifier, Notify(ticket, pipeline, hook, ctx, value))


def wait_notifications(timeout: float = 5.0) -> bool:
    """Wait until every run-end notification announced before this call has ended;
    False when some had not within `timeout` seconds. From a thread of your own, not
    from a process's callback."""
    return _tickets.wait(timeout)


def child_spec() -> ChildSpec:
    """The notifier as a child of the root tree (its stop drains, then kills)."""
    return ChildSpec(
        "plugin_notifier",
        lambda: Notifier.start_link(name=NOTIFIER_NAME),
        shutdown=DRAIN_SECONDS + 1.0,
    )


@dataclass
class _State:
    running: dict[Pid, tuple[int, Task]] = field(default_factory=dict)


class Notifier(GenServer):
    """Starts one task per notification and closes its ticket when it ends."""

    def init(self, _args: Any) -> _State:
        trap_exit(True)  # a shutdown runs `terminate`, which drains
        return _State()

    def handle_cast(self, msg: Any, state: _State) -> Any:
        match msg:
            case Notify(ticket, pipeline, hook, ctx, value):
                self._start(state, ticket, pipeline, hook, ctx, value)
        return state

    def handle_info(self, msg: Any, state: _State) -> Any:
        match msg:
            case TaskResult(pid=pid) if pid in state.running:
                ticket, _task = state.running.pop(pid)
                _tickets.close(ticket)
            case ExitSignal(reason=reason) if reason != "normal":
                return Stop(reason, state)
        return state

    def terminate(self, reason: Any, state: Any) -> None:
        if not isinstance(state, _State):
            return
        deadline = time.monotonic() + DRAIN_SECONDS
        for ticket, task in state.running.values():
            try:
                task.wait(max(0.0, deadline - time.monotonic()))
            except (TaskFailed, TaskTimeout):
                task.kill()
            _tickets.close(ticket)
        state.running.clear()

    def _start(
        self,
        state: _State,
        ticket: int,
        pipeline: Pipeline,
        hook: str,
        ctx: Mapping[str, Any],
        value: Any,
    ) -> None:
        if len(state.running) >= MAX_RUNNING:
            _log.warning("adk.plugin.notification_dropped", hook=hook, why="too_many")
            _tickets.close(ticket)
            return
        try:
            task = Task.start(
                _notify, pipeline, hook, ctx, value, deadline=_deadline(pipeline, hook), notify=True
            )
        except (TaskBusy, MaxChildrenReached):
            _log.warning("adk.plugin.notification_dropped", hook=hook, why="busy")
            _tickets.close(ticket)
            return
        state.running[task.pid] = (ticket, task)


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
