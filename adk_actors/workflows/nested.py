"""A nested workflow: a child run started (or resumed) by one attempt of its parent.

The child is a coordinator of its own under the workflow supervisor, started with the
parent's current state and the parent's deadline, and watched by the attempt that
started it: when that attempt ends early (the parent was cancelled, timed out, or the
attempt's own timeout killed it) the child cancels itself with
``parent_workflow_stopped``. The attempt waits for the child's outcome (releasing it:
the child stops once it has answered) and turns it into an action result:

* completed -> ``Output(child output, or its state; delta = the child's whole state)``
* paused -> `NestedPause` (the parent pauses too, keeping the child's checkpoint)
* failed -> ``("nested_workflow_failed", reason)``; past the deadline ->
  ``nested_workflow_timed_out``; cancelled -> ``("nested_workflow_cancelled", reason)``
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from adk_actors.workflows.checkpoint import Checkpoint
from adk_actors.workflows.launch import (
    fresh_launch,
    resumed_launch,
    start_supervised,
)
from adk_actors.workflows.messages import Wait
from adk_actors.workflows.outcomes import TIMED_OUT, Cancelled, Completed, Failed, Paused
from adk_actors.workflows.results import Output
from adk_actors.workflows.spec import NestedAction, NestedOptions
from providers.errors import AdkError
from supervision import ProcessExit, Ref, aio, self_pid


class NestedPause(NamedTuple):
    """A child workflow paused: its pause `details` and its `checkpoint`."""

    details: dict[str, Any]
    checkpoint: Checkpoint


class NestedFailure(NamedTuple):
    """A child workflow failed (or did not start): the public `reason`; retried under
    the step's policy like any failed attempt."""

    reason: Any


def child_options(options: NestedOptions, deadline: float | None) -> dict[str, Any]:
    """The child's run options: the node's, under the parent's deadline."""
    ends = deadline
    if options.timeout is not None:
        own = time.monotonic() + options.timeout
        ends = own if ends is None else min(own, ends)
    values: dict[str, Any] = {"deadline": ends, "timeout": None, "retention": options.retention}
    for name in ("max_steps", "max_transfers", "max_concurrency", "event_receiver"):
        value = getattr(options, name)
        if value is not None:
            values[name] = value
    return values


async def run_child(
    action: NestedAction,
    state: dict[str, Any],
    context: dict[str, Any],
    deadline: float | None,
    resume: tuple[Checkpoint, Any] | None,
) -> Any:
    """One attempt of a nested-workflow step (runs as a coroutine task: the child
    watches this task)."""
    options = child_options(action.options, deadline)
    try:
        if resume is None:
            launch = fresh_launch(action.workflow, state, watcher=self_pid(), **options)
        else:
            checkpoint, resume_input = resume
            launch = resumed_launch(
                action.workflow,
                checkpoint,
                resume_input=resume_input,
                watcher=self_pid(),
                **options,
            )
        child = await aio.run_blocking(start_supervised, launch)
    except AdkError as error:
        return NestedFailure(("nested_workflow_start_failed", error.reason))
    try:  # the child's deadline (the parent's) bounds this wait
        outcome = await aio.call(child, Wait(Ref(), True), timeout=None)
    except ProcessExit:
        return NestedFailure("nested_workflow_waiter_down")
    match outcome:
        case Completed(child_state, checkpoint):
            output = checkpoint.output if checkpoint.has_output else child_state
            return Output(output, child_state)
        case Paused(details, checkpoint):
            return NestedPause(details, checkpoint)
        case Failed(reason) if reason == TIMED_OUT:
            return NestedFailure("nested_workflow_timed_out")
        case Failed(reason):
            return NestedFailure(("nested_workflow_failed", reason))
        case Cancelled(reason):
            return NestedFailure(("nested_workflow_cancelled", reason))
    return NestedFailure("invalid_nested_workflow_result")
