"""One event's job: its attempts, each a fresh stable run, with backoff between them.

The job is a kernel `Task` whose function is a coroutine: it runs on the kernel's
reactor, under the ambient job supervisor, started and monitored by its trigger
server, and holds no thread while it waits (`runs.wait_async`, `asyncio.sleep` for
backoff; starting or cancelling a run is a short call made with `run_blocking`, at
most `START_WINDOW` starts of the reactor's jobs in flight at once). It
tells the trigger each attempt's run id *before* starting that run (a kill cancels a
coroutine only at an ``await``: one stopped while it waits for its start's place
started nothing, and the gate refuses a start once it is closed), so the trigger
knows every run the job may have started: a job that is stopped at any point leaves
the trigger to cancel its runs and to wait for them to end (`settle`, itself a
coroutine task started by the trigger, never by the stopped job). Its return value
is its ambient outcome.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from typing import Any

from adk_actors import runs
from adk_actors.ambient.values import AmbientOutcome, Attempt, JobSpec, TimedOut
from adk_actors.outcomes import Cancelled, Completed, Failed, Paused
from providers.errors import AdkError
from supervision import KernelError, cast, self_pid
from supervision.aio import LoopWindow, run_blocking

CANCEL_GRACE = 0.5
"""Seconds a cancelled run gets to end before the job (or its settling) moves on."""
START_WINDOW = 16
"""Job starts in flight at once on one event loop (the kernel's reactor)."""
_starts = LoopWindow(START_WINDOW)


def attempt_run_id(base: str, attempt: int) -> str:
    """The run id of an event's `attempt` (its trigger chose `base`)."""
    return f"{base}.{attempt}"


async def run_job(spec: JobSpec) -> AmbientOutcome:
    retry = spec.retry
    me = self_pid()
    reason: Any = None
    for attempt in range(1, retry.max_attempts + 1):
        remaining = spec.deadline - time.monotonic()
        if remaining <= 0:
            return TimedOut()
        run_id = attempt_run_id(spec.run_base, attempt)
        cast(spec.trigger, Attempt(spec.ref, me, attempt, run_id, False))
        try:
            await _start(spec, run_id)
        except AdkError as error:
            reason = ("run_start_failed", error.reason)
        else:
            cast(spec.trigger, Attempt(spec.ref, me, attempt, run_id, True))
            try:
                timeout = min(retry.attempt_timeout, remaining)
                outcome = await runs.wait_async(run_id, timeout=timeout)
            except runs.RunTimeout:
                await _cancel(run_id, "attempt_timeout")
                if time.monotonic() >= spec.deadline:
                    return TimedOut()
                reason = "attempt_timeout"
            else:
                match outcome:
                    case Completed() | Paused():
                        return outcome
                    case Failed(failure):
                        reason = ("run_failed", failure)
                    case Cancelled(why):
                        reason = ("run_cancelled", why)
        if attempt < retry.max_attempts:
            pause = retry.delay(attempt, random.random())
            if time.monotonic() + pause >= spec.deadline:
                return TimedOut()
            await asyncio.sleep(pause)
    return Failed(reason)


async def _start(spec: JobSpec, run_id: str) -> None:
    """Start an attempt's run through the job's gate, a short blocking call. At most
    `START_WINDOW` of the reactor's job starts are in flight at once (the invocation
    supervisor starts one server at a time anyway): a burst of events then holds a few
    threads of the blocking pool, not one per event. A job stopped meanwhile leaves at
    once; its start, if made, goes on (the gate knows of it) and keeps its place till
    it answers."""
    starting = await _starts.started(
        lambda: run_blocking(
            spec.gate.start,
            spec.runner,
            spec.event.user_id,
            spec.event.session_id,
            spec.event.payload,
            run_id=run_id,
            retention=spec.run_retention,
        )
    )
    starting.add_done_callback(_retrieved)
    await asyncio.shield(starting)


def _retrieved(start: asyncio.Future[Any]) -> None:
    """A refusal nobody awaits any more (its job was stopped) is taken here, not
    logged as never retrieved."""
    if not start.cancelled():
        start.exception()


async def _cancel(run_id: str, reason: str) -> None:
    """Cancel a run and give it `CANCEL_GRACE` to end (its permit and session with it)."""
    try:
        await run_blocking(runs.cancel, run_id, reason)
    except (AdkError, KernelError):
        return  # ended already, or gone
    try:
        await runs.wait_async(run_id, timeout=CANCEL_GRACE)
    except (AdkError, KernelError):
        pass


def cancel_run(run_id: str, reason: str) -> None:
    """Cancel a run without waiting for it (an ended or unknown run is left alone)."""
    try:
        runs.cancel(run_id, reason)
    except (AdkError, KernelError):
        pass


class RunGate:
    """Every run an event's job starts goes through its gate. Once the gate is closed
    (by the trigger's settling, after the job was stopped) no run starts through it,
    and it knows every run that was started: a start in flight when the job was
    stopped (its thread is not stopped with it) finishes before `close` returns."""

    __slots__ = ("_lock", "closed", "started")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.closed = False
        self.started: list[str] = []

    def start(self, runner: Any, *args: Any, run_id: str, **options: Any) -> str:
        with self._lock:
            if self.closed:
                raise AdkError("ambient_job_stopped", "the event's job was stopped")
            started = runs.start(runner, *args, run_id=run_id, **options)
            self.started.append(started)
            return started

    def close(self) -> list[str]:
        """Close the gate, once no start is in flight; the runs started through it."""
        with self._lock:
            self.closed = True
            return list(self.started)


async def settle(gate: RunGate, reason: Any) -> None:
    """Clean up after a job that was stopped: close its gate (so no run can start any
    more), cancel its last run and wait for it to end. The event's terminal is
    published only then."""
    started = await run_blocking(gate.close)
    if not started:
        return
    await _cancel(started[-1], reason)  # the earlier runs ended before the next started
