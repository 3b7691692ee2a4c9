"""The bridge from a stable run to its A2A task: one small coroutine task per run.

Why a bridge and not the store itself: following a run means waiting for its outcome
(`runs.wait_async`) and starting, resuming or cancelling it (`runs.start`,
`runs.resume`, `runs.cancel`, blocking facade calls made with `aio.run_blocking`).
Done in the store, each of those would hold its mailbox; done in a kernel `Task`
whose function is a coroutine (on the reactor, like the ambient jobs), it holds no
thread while it waits and the store only ever receives small typed casts
(`RunStarted`, `RunRefused`, `RunEnded`). The bridge also owns the run's deadline:
past ``task_timeout`` it cancels the run with reason ``"task_timeout"`` and reports
the outcome that follows.

The task needs the run's outcome only, so the bridge waits for it (one `Wait` request
the run's server answers with its terminal) rather than subscribing to the run's
events: the run then never starts a credit stream (`adk.runs` starts one for a first
subscriber only), and no request of the bridge has a bound of its own but the task's
deadline. A subscription's first request goes to the run's server, which may be busy
in a blocking session write for longer than a subscribe waits (``unavailable``); the
bridge would then have reported a live run lost (review of 3142f62, 1). A wait is only
answered later: the task fails ``run_lost`` only when the run is gone without an
outcome the registry knows.

The bridge is owned by the store: if the store dies, the kernel stops the bridge at
its next ``await``. Its run is then cancelled by the store's successor, which finds
it in the `RunLedger` kept by the child spec across restarts (see `tasks_server`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from adk_actors import runs
from adk_actors.outcomes import Failed, Outcome
from adk_actors.runner import continuations
from providers.errors import AdkError
from supervision import KernelError, Pid, cast
from supervision.aio import run_blocking
from supervision.logs import get_logger

TIMEOUT_REASON = "task_timeout"
"""The cancel reason of a run that outlived ``task_timeout`` (its task becomes FAILED)."""
CANCEL_REASON = "a2a_task_canceled"
STORE_RESTARTED_REASON = "a2a_task_store_restarted"
STORE_STOPPED_REASON = "a2a_task_store_stopped"
AFTER_CANCEL_WAIT = 5.0
"""How long the bridge keeps following a run it cancelled at its deadline."""
_log = get_logger("adk_actors.a2a")


RETRY_RELEASE = 0.05
"""How long a store waits before it tries again to start a release the pool refused."""


class RetryRelease(NamedTuple):
    """Try again to release `run_id` (the kernel's pool was full)."""

    run_id: str
    reason: str


class RunStarted(NamedTuple):
    """The bridge of `task_id` (generation `generation`) started `run_id`."""

    task_id: str
    generation: int
    run_id: str


class RunRefused(NamedTuple):
    """The run could not be started or resumed; `reason` is the refusal's reason."""

    task_id: str
    generation: int
    reason: Any


class RunEnded(NamedTuple):
    """`run_id` ended with `outcome` (``Failed(("run_lost", why))`` when it vanished)."""

    task_id: str
    generation: int
    run_id: str
    outcome: Outcome


class PauseRef(NamedTuple):
    """Where a paused run's continuation is kept: what `Runner.abandon` needs to drop it."""

    user_id: str
    session_id: str
    invocation_id: str


class RunLedger:
    """The run ids of a store's tasks that have not ended (running, and paused until
    their task lets them go), kept by the store's child spec across restarts, so the
    successor of a killed store cancels its runs.

    Each store incarnation opens an epoch (`open_epoch`, which hands back the runs the
    previous one left); a start that returns after its store's epoch is over is refused
    (`record` is False) and the caller cancels that run at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, PauseRef | None] = {}
        self._epoch = 0

    def open_epoch(self) -> tuple[int, list[str]]:
        """A new epoch, and the runs the previous one left (their pauses stay known:
        `pause_of`, until `discard`)."""
        with self._lock:
            self._epoch += 1
            return self._epoch, sorted(self._runs)

    def record(self, epoch: int, run_id: str) -> bool:
        with self._lock:
            if epoch != self._epoch:
                return False
            self._runs.setdefault(run_id, None)
            return True

    def paused(self, run_id: str, pause: PauseRef) -> None:
        """`run_id` paused at `pause`: kept until its task lets it go."""
        with self._lock:
            if run_id in self._runs:
                self._runs[run_id] = pause

    def pause_of(self, run_id: str) -> PauseRef | None:
        with self._lock:
            return self._runs.get(run_id)

    def discard(self, run_id: str) -> None:
        with self._lock:
            self._runs.pop(run_id, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)


class RunPlan(NamedTuple):
    """What a bridge does: `start` (a blocking call that returns a run id), the store to
    tell (and its ledger and epoch), the task it works for and the run's absolute
    monotonic `deadline`."""

    store: Pid
    task_id: str
    generation: int
    start: Callable[[], str]
    deadline: float
    ledger: RunLedger
    epoch: int


async def follow_run(plan: RunPlan) -> None:
    """Start (or resume) the run, tell the store, then follow it to its terminal."""
    try:
        run_id = await run_blocking(_start_recorded, plan)
    except (AdkError, KernelError) as error:
        cast(plan.store, RunRefused(plan.task_id, plan.generation, error.reason))
        return
    cast(plan.store, RunStarted(plan.task_id, plan.generation, run_id))
    outcome = await _terminal(run_id, plan.deadline)
    cast(plan.store, RunEnded(plan.task_id, plan.generation, run_id, outcome))


def _start_recorded(plan: RunPlan) -> str:
    """Start the run and record it in the ledger on the same thread (so a bridge stopped
    while the start is under way leaves no run unknown); a run whose store is gone is
    cancelled at once."""
    run_id = plan.start()
    if not plan.ledger.record(plan.epoch, run_id):
        cancel_run(run_id, STORE_RESTARTED_REASON)
    return run_id


async def _terminal(run_id: str, deadline: float) -> Outcome:
    """The run's outcome (`runs.wait_async`); past `deadline` the run is cancelled with
    `TIMEOUT_REASON` and its outcome (``Cancelled("task_timeout")``) read, for at most
    `AFTER_CANCEL_WAIT` more (then ``Failed("task_timeout")``)."""
    try:
        return await runs.wait_async(run_id, timeout=max(deadline - time.monotonic(), 0.001))
    except runs.RunTimeout:
        pass
    except AdkError as error:  # its server is gone, and the registry knows no outcome
        return Failed(("run_lost", str(error.reason)))
    await cancel_run_async(run_id, TIMEOUT_REASON)
    try:
        return await runs.wait_async(run_id, timeout=AFTER_CANCEL_WAIT)
    except runs.RunTimeout:
        return Failed(TIMEOUT_REASON)
    except AdkError as error:
        return Failed(("run_lost", str(error.reason)))


async def cancel_run_async(run_id: str, reason: str) -> None:
    """Cancel a run from a coroutine (an ended or unknown run is left alone)."""
    await run_blocking(cancel_run, run_id, reason)


def release_run(runner: Any, ledger: RunLedger, run_id: str, reason: str) -> None:
    """Release a run the store no longer wants, then take it out of `ledger`: a running
    run is cancelled; a paused one (terminal for `adk.runs`, so `runs.cancel` cannot end
    it) has its continuation dropped through `runner` (`Runner.abandon` with the
    continuation's token, so a resume under way is never ended here): it can never be
    resumed and its session records the end. A release the kernel refused (its store
    is gone) leaves the run in the ledger for the next store."""
    try:
        pause = ledger.pause_of(run_id) or _pause_of(run_id)
        if pause is None:
            try:
                runs.cancel(run_id, reason)
            except runs.RunError as error:
                pause = _pause_of(run_id) if error.reason == "already_terminal" else None
                if pause is None:
                    raise
        if pause is not None:
            claimed, token = _continuation_token(runner, pause)
            if not claimed:  # else a resume claimed it: that run is released on its own
                runner.abandon(
                    pause.user_id, pause.session_id, pause.invocation_id, reason, token=token
                )
    except AdkError:
        pass  # it has ended, is unknown, or its session is gone: nothing left to release
    except KernelError:
        return
    else:
        _log.info("adk.a2a.run_released", run_id=run_id, reason=reason, paused=pause is not None)
    ledger.discard(run_id)


def _continuation_token(runner: Any, pause: PauseRef) -> tuple[bool, str | None]:
    """Whether a resume has claimed the paused invocation's continuation, and else its
    opening token: abandoning with it drops that continuation only, never a resume's
    opening (Review2 7)."""
    session = runner.sessions.get_session(
        runner.app_name, pause.user_id, pause.session_id, include_internal=True
    )
    continuation = session.state.get(continuations.key_of(pause.invocation_id))
    if not isinstance(continuation, dict):
        return True, None
    token = continuation.get("token")
    return False, token if isinstance(token, str) else None


def _pause_of(run_id: str) -> PauseRef | None:
    """Where `run_id`'s continuation is, when it is a paused run its server still knows."""
    view = runs.status(run_id)
    if view.get("state") != "paused" or not view.get("invocation_id"):
        return None
    return PauseRef(view["user_id"], view["session_id"], view["invocation_id"])


def cancel_run(run_id: str, reason: str) -> None:
    """Cancel a run, blocking briefly (an ended or unknown run is left alone)."""
    try:
        runs.cancel(run_id, reason)
    except (AdkError, KernelError):
        pass
    else:
        _log.info("adk.a2a.run_cancelled", run_id=run_id, reason=reason)
