"""Which tasks a task store keeps, and what forgetting one releases (run on the store's
thread, on the state its server hands in).

A terminal task, or one waiting for input, is kept ``retention`` seconds after it
settled (`State.settled`: oldest settled first, so the oldest always expires first);
at most ``max_tasks`` are kept, the one settled longest ago evicted first for a new one.
Expiry is a `Prune` timer, one at a time, set for the oldest settled task (Review2 7:
an expired task's paused run is released then, not at the next request); a timer that
fires early (its task was resumed or evicted meanwhile) prunes nothing and sets the
next. Every store call prunes first too. Forgetting a task waiting for input releases
its paused run (`release_later`): no paused run outlives its task.

Nothing holds a task for its sender: a blocking send is answered as the task settles
(`tasks_protocol.ReplyWhenSettled`), before retention can forget it.
"""

from __future__ import annotations

import time

from adk_actors.a2a.task_runs import CANCEL_REASON, RETRY_RELEASE, RetryRelease, release_run
from adk_actors.a2a.tasks_protocol import Detached, Phase, Prune, State
from supervision import KernelError, Task, demonitor, self_pid, send, send_after

PRUNE_SLACK = 0.01
"""How long after a task's retention ends its `Prune` timer fires."""


def release_later(state: State, run_id: str, reason: str = CANCEL_REASON) -> None:
    """Release a run (cancel a running one, drop a paused one's continuation) off the
    store's thread, in a kernel task that takes it out of the ledger once done; when the
    pool is full the store tries again shortly (`RetryRelease`), never blocking here."""
    try:
        Task.start(release_run, state.runner, state.ledger, run_id, reason)
    except KernelError:
        send_after(self_pid(), RetryRelease(run_id, reason), RETRY_RELEASE)


def expired(state: State, now: float) -> list[str]:
    """The settled tasks whose retention is over at `now` (monotonic), oldest first."""
    cutoff = now - state.options.retention
    gone = []
    for task_id in state.settled:
        settled_at = state.tasks[task_id].settled_at
        if settled_at is None or settled_at > cutoff:
            break
        gone.append(task_id)
    return gone


def next_expiry(state: State) -> float | None:
    """When the task settled longest ago expires (monotonic); None when no task is
    settled."""
    for task_id in state.settled:
        settled_at = state.tasks[task_id].settled_at
        return None if settled_at is None else settled_at + state.options.retention
    return None


def prune(state: State) -> None:
    """Forget the tasks whose retention is over (terminal or waiting for input)."""
    for task_id in expired(state, time.monotonic()):
        forget(state, task_id)


def arm_prune(state: State) -> None:
    """Set the `Prune` timer for when the oldest settled task expires, unless one is
    set: it is never later than that (a task settled since expires after it)."""
    expires = None if state.prune_armed else next_expiry(state)
    if expires is None:
        return
    send_after(self_pid(), Prune(), max(expires - time.monotonic(), 0.0) + PRUNE_SLACK)
    state.prune_armed = True


def evict_one(state: State) -> bool:
    """Forget the task settled longest ago (terminal or waiting for input); False when
    every task is active."""
    if not state.settled:
        return False
    forget(state, next(iter(state.settled)))
    return True


def forget(state: State, task_id: str) -> None:
    """Drop the task: its paused run is released, its subscribers detached."""
    entry = state.tasks.pop(task_id)
    state.settled.pop(task_id, None)
    if entry.phase is Phase.INTERRUPTED and entry.run_id is not None:
        release_later(state, entry.run_id)  # its paused run: nobody can resume it
    for sub_id, sub in list(entry.subscribers.items()):
        send(sub.pid, Detached(sub_id))
        demonitor(sub.watch, flush=True)
        state.watches.pop(sub.watch, None)
