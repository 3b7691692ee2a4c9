"""The run worker: a `Task` that drives one Runner invocation into the run's stream.

It iterates `runner.invocation(...)` (or a resumed run's claimed continuation) and
publishes each stored event to the credit stream, where it gets its sequence
number; it returns the invocation's one outcome, which reaches the run actor as
the task's `TaskResult`. It tells the actor the invocation id with the first event
(`InvocationStarted`), so a cancel can record the abandonment in the session.

A cancel gives it `CANCEL_GRACE` to end on its own, then kills it: a killed sync
task is fenced, so what it would still publish or store through the kernel is
dropped, and the Runner's own turn task (owned by this task) stops with it at once.
It never closes the Runner's iterator early while the turn still runs: the Runner
would record that as its own ``consumer_closed`` abandonment.

Workers run on their own bounded `SyncPool`, not the kernel's default one: each
waits on a turn task that runs on the default pool, and sharing one pool would let
enough waiting workers take every thread their turns need.
"""

from __future__ import annotations

from typing import NamedTuple

import structlog

from adk_actors.outcomes import OUTCOME_TYPES, Failed, Outcome
from adk_actors.runs.handoff import RunRequest
from providers.errors import AdkError
from supervision import Pid, send
from supervision.credit_stream import CreditStream
from supervision.process import is_fenced_thread
from supervision.sync_pool import SyncPool, shared_pool

WORKER_QUEUE = 10_000
PUBLISH_TIMEOUT = 30.0
_log = structlog.get_logger("adk_actors.runs")


class InvocationStarted(NamedTuple):
    """Worker -> run actor, once: the invocation id the Runner chose."""

    invocation_id: str


def worker_pool() -> SyncPool:
    """The run workers' own pool (`ADK_RUN_WORKER_THREADS` threads, default 256)."""
    return shared_pool("adk.run_workers", "ADK_RUN_WORKER_THREADS", 256, WORKER_QUEUE)


def drive(request: RunRequest, stream: Pid, actor: Pid) -> Outcome:
    """Publish the invocation's events to `stream`; return its outcome."""
    items = (
        request.items
        if request.items is not None
        else request.runner.invocation(
            request.user_id,
            request.session_id,
            request.message,
            invocation_id=request.invocation_id,
            token=request.token,
        )
    )
    announced = False
    try:
        for item in items:
            if isinstance(item, OUTCOME_TYPES):
                return item
            if not announced:
                send(actor, InvocationStarted(item.invocation_id))
                announced = True
            CreditStream.publish(stream, item, timeout=PUBLISH_TIMEOUT)
    except AdkError as error:  # e.g. the agent is not running: the Runner never started
        return Failed(error.reason)
    finally:  # after the outcome, or once its turn is gone: closing records nothing
        close = getattr(items, "close", None)
        if close is not None:
            close()
    return _no_outcome(request)


def _no_outcome(request: RunRequest) -> Outcome:
    if not is_fenced_thread():  # a killed worker's Runner stops without an outcome by design
        _log.warning("adk.runs.no_outcome", run_id=request.run_id)
    return Failed("invocation_ended_without_outcome")
