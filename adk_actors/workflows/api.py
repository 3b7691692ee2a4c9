"""The workflow facade: `compile_workflow`, `run_workflow`, and `start`, `wait`,
`status`, `checkpoint`, `cancel`, `resume` on a run's reference.

A run is a coordinator process under the workflow supervisor, registered as
``("adk.workflow", ref)``; every call finds it by name at call time. Once a finished
run's retention is over, calls say ``not_found``. Refusals raise `AdkError` with a
stable reason; outcomes are returned (`Completed`, `Paused`, `Failed`, `Cancelled`),
never raised.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from adk_actors.workflows import coordinator as _coordinator
from adk_actors.workflows.checkpoint import Checkpoint
from adk_actors.workflows.compile import compile_workflow
from adk_actors.workflows.coordinator import TOO_MANY_WAITERS
from adk_actors.workflows.errors import cancel_reason
from adk_actors.workflows.launch import (
    NOT_GIVEN,
    fresh_launch,
    resumed_launch,
    start_supervised,
    workflow_name,
)
from adk_actors.workflows.messages import Cancel, GetCheckpoint, Status, Unwait, Wait
from adk_actors.workflows.outcomes import Outcome
from adk_actors.workflows.spec import DEFAULT_RETENTION, CompiledWorkflow
from providers.errors import AdkError
from supervision import CallTimeout, Pid, ProcessExit, Ref, aio, call, cast, whereis
from supervision.aio import run_blocking

__all__ = [
    "cancel",
    "checkpoint",
    "compile_workflow",
    "resume",
    "run_async",
    "run_workflow",
    "start",
    "status",
    "wait",
    "wait_async",
]

CALL_TIMEOUT = 5.0
_INSTALLED = _coordinator.WorkflowCoordinator  # importing it installs the coordinator


def run_workflow(wf: CompiledWorkflow, state: Any = None, **options: Any) -> Outcome:
    """Run `wf` from `state` under the workflow supervisor and wait for its outcome.

    Options as `start` (``timeout=30.0`` seconds by default covers the whole run);
    the coordinator stops as soon as it has answered (so `retention` does not matter). Raises `AdkError` only when the
    run cannot start (an invalid state or option, the input schema, a full supervisor).
    """
    ref = start(wf, state, **_held(options))
    return _wait(ref, None, release=True)


def _held(options: dict[str, Any]) -> dict[str, Any]:
    """`run_workflow`'s options with a retention that outlasts its own `wait`: a short
    one could let a fast run end and stop before the wait finds it. The releasing wait
    stops the run once answered, so the retention given is never observable."""
    retention = options.get("retention", DEFAULT_RETENTION)
    if type(retention) in (int, float) and 0 <= retention < DEFAULT_RETENTION:
        return {**options, "retention": DEFAULT_RETENTION}
    return options


def start(wf: CompiledWorkflow, state: Any = None, **options: Any) -> str:
    """Start `wf` from `state` (a JSON object); returns the run's reference.

    Options: ``timeout`` (seconds, default 30; None: no deadline) or ``deadline`` (an
    absolute `time.monotonic()` instant), ``max_steps``, ``max_transfers``,
    ``max_concurrency`` (a ceiling on the spec's own bounds), ``retention`` (seconds a
    finished run stays queryable, default 60), ``max_waiters`` (`wait` calls waiting at
    once, default 1024, at most 65 536), ``event_receiver`` (a Pid or a `queue.Queue`;
    gets `WorkflowEvent(ref, event)` for each transfer). Raises ``invalid_compiled_workflow``,
    ``("invalid_initial_state", why)``, ``("input_schema_validation_failed", failure)``
    (no action ran), ``("invalid_workflow_options", key)``, ``too_many_workflows``.
    """
    launch = fresh_launch(wf, state, **options)
    start_supervised(launch)
    return launch.ref


async def run_async(
    wf: CompiledWorkflow,
    state: Any = None,
    *,
    on_start: Callable[[str], None] | None = None,
    wait_timeout: float | None = None,
    **options: Any,
) -> Outcome:
    """Start `wf` and await its outcome (asyncio), the wait registered with the start:
    the run holds its outcome for this caller however late the await reaches it, so a
    fast run can never expire first (``not_found``). `on_start(ref)` is called once the
    run exists (to track, cancel or ask its `status`; the run's `retention` counts from
    the answer). Options and refusals as `start`; ``timeout`` when `wait_timeout`
    seconds pass first (the run goes on, retained as usual), ``coordinator_stopped``
    when its coordinator was killed."""
    claim = Ref()
    launch = fresh_launch(wf, state, claim=claim, **options)
    await run_blocking(start_supervised, launch)
    if on_start is not None:
        on_start(launch.ref)
    try:
        server = _lookup(launch.ref)
    except AdkError:
        raise AdkError("coordinator_stopped", "the workflow's coordinator stopped") from None
    with _waiting(server, claim, wait_timeout):
        answer: Any = await aio.call(server, Wait(claim), wait_timeout)
    return _answered(answer)


def resume(
    wf: CompiledWorkflow,
    checkpoint: Checkpoint | bytes,
    resume_input: Any = NOT_GIVEN,
    **options: Any,
) -> str:
    """Start a new run of `wf` from `checkpoint` (a `Checkpoint` or its encoded bytes);
    returns its reference. Nothing committed runs again; budgets left in the
    checkpoint are not replenished. A paused checkpoint needs `resume_input` (any JSON
    value), which goes to the paused node's router (or becomes the paused fork
    branch's output, or resumes the paused child workflow).

    Raises ``invalid_checkpoint``, ``checkpoint_workflow_mismatch``,
    ``checkpoint_complete``, ``invalid_checkpoint_state``, ``resume_input_required``,
    ``("invalid_resume_input", why)``, and the option errors of `start`.
    """
    launch = resumed_launch(wf, checkpoint, resume_input=resume_input, **options)
    start_supervised(launch)
    return launch.ref


def wait(ref: str, timeout: float | None = None) -> Outcome:
    """The run's outcome, once it has one; ``timeout`` if not within `timeout`
    seconds (the run goes on), ``not_found`` for an unknown or expired run,
    ``too_many_waiters`` when the run's ``max_waiters`` calls are waiting already."""
    return _wait(ref, timeout, release=False)


async def wait_async(ref: str, timeout: float | None = None) -> Outcome:
    """`wait` for asyncio code: the event loop keeps running meanwhile. Cancelling the
    awaiting task (``asyncio.wait_for``, ``task.cancel()``) withdraws the waiter."""
    server = _lookup(ref)
    token = Ref()
    with _waiting(server, token, timeout):
        answer: Any = await aio.call(server, Wait(token), timeout)
    return _answered(answer)


def status(ref: str) -> dict[str, Any]:
    """``workflow_ref``, ``workflow_id``, ``kind``, ``state`` (running, completed,
    paused, failed, timed_out, cancelled), ``outcome``, ``deadline``, ``started_at``,
    ``finished_at``, ``checkpoint``, ``waiter_count``, ``event_count``."""
    view: dict[str, Any] = _ask(ref, Status())
    return view


def checkpoint(ref: str) -> Checkpoint:
    """The run's last committed checkpoint (its terminal one once it ended)."""
    found: Checkpoint = _ask(ref, GetCheckpoint())
    return found


def cancel(ref: str, reason: Any = "user_cancelled") -> None:
    """Cancel a running run: it ends ``Cancelled(reason, last committed checkpoint)``
    at once; its async workers are cancelled, a sync one is fenced (its result is
    dropped) and signalled through ``context["cancelled"]``; a reason that is not a stable
    tag is recorded as a bounded failure. ``already_terminal`` once it has ended."""
    answer = _ask(ref, Cancel(cancel_reason(reason)))
    if answer != ("ok", None):
        raise AdkError(answer[1], "the workflow has already ended")


def _lookup(ref: Any) -> Pid:
    if not isinstance(ref, str) or not ref:
        raise AdkError("invalid_workflow_ref", "a workflow reference is the string start returned")
    server = whereis(workflow_name(ref))
    if server is None:
        raise AdkError("not_found", "no such workflow (or its retention is over)")
    return server


def _ask(ref: str, request: Any) -> Any:
    server = _lookup(ref)
    try:
        return call(server, request, CALL_TIMEOUT)
    except CallTimeout:
        raise AdkError("timeout", "the workflow did not answer in time") from None
    except ProcessExit as exit_:
        raise _gone(exit_) from None


def _gone(exit_: ProcessExit) -> AdkError:
    """``not_found`` for a run that was gone already; ``coordinator_stopped`` for one
    whose coordinator died while we asked (killed: no outcome was recorded)."""
    if exit_.reason in ("noproc", "normal"):
        return AdkError("not_found", "the workflow is gone")
    return AdkError("coordinator_stopped", "the workflow's coordinator stopped")


def _wait(ref: str, timeout: float | None, *, release: bool) -> Outcome:
    server = _lookup(ref)
    token = Ref()
    with _waiting(server, token, timeout):
        answer: Any = call(server, Wait(token, release), timeout)
    return _answered(answer)


def _answered(answer: Any) -> Outcome:
    if isinstance(answer, tuple) and answer == ("error", TOO_MANY_WAITERS):
        raise AdkError(TOO_MANY_WAITERS, "too many callers are waiting for this workflow")
    outcome: Outcome = answer
    return outcome


@contextmanager
def _waiting(server: Pid, token: Ref, timeout: float | None) -> Iterator[None]:
    """A `Wait` call's refusals: ``timeout`` (the waiter withdrawn, the run goes on),
    ``not_found`` / ``coordinator_stopped``. A wait left any other way (an asyncio
    cancellation, ``KeyboardInterrupt``) withdraws its waiter too, then goes on."""
    try:
        yield
    except CallTimeout:
        cast(server, Unwait(token))
        raise AdkError("timeout", f"the workflow did not end within {timeout} s") from None
    except ProcessExit as exit_:
        raise _gone(exit_) from None
    except BaseException:
        cast(server, Unwait(token))
        raise
