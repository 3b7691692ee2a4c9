"""One event's job: its attempts, each a fresh stable run, with backoff between them.

The job is a kernel `Task` on the ambient pool (it waits on runs, so it takes its own
pool), under the ambient job supervisor, started and monitored by its trigger
server. It tells the trigger each attempt's run id *before* starting that run, so a
job stopped at any point leaves the trigger able to cancel the run. A stopped job's
thread is fenced: it cancels a run it started after being stopped, and starts no
other. Its return value is its ambient outcome.
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

from adk_actors import runs
from adk_actors.ambient.values import AmbientOutcome, Attempt, JobSpec, TimedOut
from adk_actors.outcomes import Cancelled, Completed, Failed, Paused
from providers.errors import AdkError
from supervision import KernelError, cast, is_fenced_thread, self_pid, shared_pool

CANCEL_GRACE = 0.5
"""Seconds a cancelled run gets to end before the job (or its settling) moves on."""


def pool() -> Any:
    """The ambient jobs' own pool (``ADK_AMBIENT_THREADS``, 64 threads by default): a
    job waits on its run, whose work runs elsewhere."""
    return shared_pool("ambient", "ADK_AMBIENT_THREADS", 64)


def run_job(spec: JobSpec) -> AmbientOutcome:
    retry = spec.retry
    me = self_pid()
    reason: Any = None
    for attempt in range(1, retry.max_attempts + 1):
        remaining = spec.deadline - time.monotonic()
        if remaining <= 0 or is_fenced_thread():
            return TimedOut()
        run_id = f"run-{uuid.uuid4()}"
        cast(spec.trigger, Attempt(spec.ref, me, attempt, run_id, False))
        try:
            runs.start(
                spec.runner,
                spec.event.user_id,
                spec.event.session_id,
                spec.event.payload,
                run_id=run_id,
                retention=spec.run_retention,
            )
        except AdkError as error:
            reason = ("run_start_failed", error.reason)
        else:
            if is_fenced_thread():  # stopped while starting: the trigger may have missed it
                _cancel(run_id, "ambient_job_stopped")
                return Cancelled("ambient_job_stopped")
            cast(spec.trigger, Attempt(spec.ref, me, attempt, run_id, True))
            try:
                outcome = runs.wait(run_id, timeout=min(retry.attempt_timeout, remaining))
            except runs.RunTimeout:
                _cancel(run_id, "attempt_timeout")
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
            time.sleep(pause)
    return Failed(reason)


def _cancel(run_id: str, reason: str) -> None:
    """Cancel a run and give it `CANCEL_GRACE` to end (its permit and session with it)."""
    try:
        runs.cancel(run_id, reason)
    except AdkError:
        return  # ended already, or gone
    try:
        runs.wait(run_id, timeout=CANCEL_GRACE)
    except AdkError:
        pass


def cancel_run(run_id: str, reason: str) -> None:
    """Cancel a run without waiting for it (an ended or unknown run is left alone)."""
    try:
        runs.cancel(run_id, reason)
    except (AdkError, KernelError):
        pass


def settle(run_id: str | None, started: bool, reason: Any) -> None:
    """Cancel the current run of a job that was stopped, and wait for it to end: the
    event's terminal is published only after its run is cleaned up. A run still being
    started (``not_found`` yet) is retried for `CANCEL_GRACE`."""
    if run_id is None:
        return
    until = time.monotonic() + CANCEL_GRACE
    while True:
        try:
            runs.cancel(run_id, reason)
        except AdkError as error:
            if error.reason == "not_found" and not started and time.monotonic() < until:
                time.sleep(0.01)
                continue
            if error.reason == "not_found":
                return
        break
    try:
        runs.wait(run_id, timeout=CANCEL_GRACE)
    except AdkError:
        pass
