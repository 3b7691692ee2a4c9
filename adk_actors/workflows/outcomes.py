"""How a workflow run ends: `Completed`, `Paused`, `Failed` or `Cancelled`, each with
the checkpoint of its last committed boundary.

Frozen msgspec structs, built positionally (``Completed(state, checkpoint)``) and
matched the same way (``case Failed(reason, checkpoint):``). A run that passes its
deadline ends ``Failed("timed_out", checkpoint)``. Every reason here is already
public: bounded and secret-free (`errors.failure_reason`, `errors.cancel_reason`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from adk_actors.workflows.checkpoint import Checkpoint

TIMED_OUT = "timed_out"
"""The reason of a run that passed its deadline."""


class Completed(msgspec.Struct, frozen=True):
    """The run completed: its final `state`; ``checkpoint.output`` is the last
    committed output (``checkpoint.completed`` is true)."""

    state: dict[str, Any]
    checkpoint: Checkpoint


class Paused(msgspec.Struct, frozen=True):
    """The run paused (a graph node, a fork branch or a nested workflow returned
    `Pause`): `details` (``reason``, ``details``, ``node_id``/``step_id``, ...);
    resume it with `workflows.resume(wf, checkpoint, resume_input=...)`."""

    details: dict[str, Any]
    checkpoint: Checkpoint


class Failed(msgspec.Struct, frozen=True):
    """The run failed with `reason` (``timed_out`` for its deadline); `checkpoint` is
    the last committed boundary, resumable unless the failure is the workflow's own."""

    reason: Any
    checkpoint: Checkpoint


class Cancelled(msgspec.Struct, frozen=True):
    """The run was cancelled with `reason` (the first one given); `checkpoint` is the
    last committed boundary, exactly as `workflows.checkpoint` saw it."""

    reason: Any
    checkpoint: Checkpoint


Outcome = Completed | Paused | Failed | Cancelled


def phase_of(outcome: Outcome) -> str:
    """The terminal phase an outcome is recorded under: ``completed``, ``paused``,
    ``failed``, ``timed_out`` (a `Failed` for the deadline) or ``cancelled``."""
    match outcome:
        case Completed():
            return "completed"
        case Paused():
            return "paused"
        case Cancelled():
            return "cancelled"
        case Failed(reason=reason) if reason == TIMED_OUT:
            return TIMED_OUT
    return "failed"
