"""What starts a planning run, and the one-shot handoff it crosses.

The workflow supervisor's child spec carries only an opaque reference; the checked
launch (adapters, goal, context, options, owner) waits in `handoffs` (the kernel's
`OneShotHandoffs`) under it and the server takes it exactly once in `init`, so no
supervisor report or restart ever shows or replays it, and the starter withdraws
whatever was not taken. The kernel's refusals become this area's public reasons where
they are met: ``busy`` in `api.start`, ``handoff_taken`` in the server's `init`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adk_actors.planning.adapters import Adapters
from adk_actors.planning.options import PlanningOptions
from supervision import OneShotHandoffs, Pid

MAX_PENDING_LAUNCHES = 10_000


@dataclass(frozen=True)
class PlanningLaunch:
    """Everything a planning server needs; crosses the handoff, never the child spec."""

    owner: Pid
    token: str
    adapters: Adapters
    goal: Any
    context: dict[str, Any]
    options: PlanningOptions


handoffs: OneShotHandoffs[PlanningLaunch] = OneShotHandoffs(MAX_PENDING_LAUNCHES, prefix="planning")
"""The process-wide table `api.start` puts into and planning servers take from."""
