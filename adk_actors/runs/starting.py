"""How `adk.runs` starts a run's server through the Runner's contract (`start`,
`start_async`, and the run a resume starts): the new run (`NewRun`: its identity,
options and id checked before anything starts, and the keys it starts with), the
Runner's refusals as `RunError`s with the same reason (`refusals`), and what becomes
of a run whose awaited start answered after its caller left (`NewRun.abandon`).

The starter never tells the run registry of the run: its server does, from its own
`init` (`runner.publish.track_run`), so the registry hears of it before its end
however late the starter gets the start's answer, and a run whose starter left is
tracked all the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from adk_actors.runner.messages import Cancel
from adk_actors.runner.request import RunIdentity
from adk_actors.runs import subscription
from adk_actors.runs.options import RunOptions, run_options
from adk_actors.runs.registry import RUN_REGISTRY
from adk_actors.runs.values import RunError, check_run_id, new_run_keys
from providers.errors import AdkError
from supervision import CallTimeout, Pid, ProcessExit, aio
from supervision.logs import get_logger

DEFAULT_CANCEL_REASON = "cancelled"
"""The reason `adk.runs.cancel` ends a run with when given none, and the one a run
whose starter left before it got the run's id ends with."""
_log = get_logger("adk_actors.runs")


class NewRun:
    """A fresh run about to start (`start`, `start_async`): its identity, options and
    an explicit run id checked now, before anything starts; its invocation id and
    opening token from one random draw with its run id."""

    __slots__ = ("identity", "invocation_id", "token")

    def __init__(self, retention: Any, max_buffered_events: Any, run_id: str | None) -> None:
        new_id, self.invocation_id, self.token = new_run_keys()
        chosen = new_id if run_id is None else run_id
        self.identity = run_identity(chosen, retention, max_buffered_events)

    def keys(self) -> dict[str, Any]:
        """The keyword arguments `Runner.start_invocation(_async)` starts it with."""
        return {"invocation_id": self.invocation_id, "token": self.token, "run": self.identity}

    async def abandon(self, server: Pid) -> None:
        """A run whose `start_async` caller was cancelled while its start was in flight
        (the caller never got its id; its server has told the registry of it, as every
        run's does): cancelled at once with `DEFAULT_CANCEL_REASON`, awaited on the
        caller's loop."""
        try:
            await aio.call(
                server, Cancel(DEFAULT_CANCEL_REASON, 0.0), subscription.ROUND_TRIP_TIMEOUT
            )
        except ProcessExit:
            pass  # it ended meanwhile: the registry has its end
        except CallTimeout:  # the cancel stays queued for it
            _log.warning("adk.runs.abandoned_cancel_unanswered", run_id=self.identity.run_id)


def run_identity(
    run_id: str, retention: Any, max_buffered_events: Any, parent_run_id: str | None = None
) -> RunIdentity:
    """A new run's identity: its options checked, then its id (`RunError` with the
    spec's reason: ``invalid_retention``, ``invalid_max_buffered_events``,
    ``invalid_run_id``...)."""
    options = _options(retention=retention, max_buffered_events=max_buffered_events)
    return RunIdentity(
        run_id=check_run_id(run_id),
        retention=options.retention,
        max_buffered_events=options.max_buffered_events,
        registry=RUN_REGISTRY,
        parent_run_id=parent_run_id,
    )


@contextmanager
def refusals() -> Iterator[None]:
    """A run's start inside the block: its refusals become `RunError`s with the same
    reason (``not_started``, ``already_exists``, ``too_many_runs``...)."""
    try:
        yield
    except RunError:
        raise
    except AdkError as error:
        reason = error.reason
        if reason == "not_started":
            raise RunError("not_started", "the application is not running") from None
        raise RunError(reason, f"the run was not started: {error.detail}") from None


def _options(**options: Any) -> RunOptions:
    """A run's options, checked (`RunError` with the spec's reason)."""
    try:
        return run_options(**options)
    except AdkError as error:
        raise RunError(error.reason, error.detail) from None
