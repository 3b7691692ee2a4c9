"""What starts a planning run, and the one-shot handoff it crosses.

The workflow supervisor's child spec carries only an opaque reference; the checked
launch (adapters, goal, context, options, owner) waits in `handoffs` under it and the
server takes it exactly once in `init`, so no supervisor report or restart ever shows
or replays it, and the starter withdraws whatever was not taken.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Any

from adk_actors.planning.adapters import Adapters
from adk_actors.planning.options import PlanningOptions
from providers.errors import AdkError
from supervision import Pid

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


class Handoffs:
    """A locked table of launches waiting for their server; each is taken at most once."""

    def __init__(self, max_pending: int = MAX_PENDING_LAUNCHES) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, PlanningLaunch] = {}
        self._max_pending = max_pending

    def put(self, launch: PlanningLaunch) -> str:
        """Store `launch`; returns the opaque reference the child spec carries."""
        ref = f"planning-{uuid.uuid4().hex}"
        with self._lock:
            if len(self._pending) >= self._max_pending:
                raise AdkError("busy", f"{self._max_pending} planning starts are in flight")
            self._pending[ref] = launch
        return ref

    def take(self, ref: str) -> PlanningLaunch:
        """The launch under `ref`, removed; ``handoff_taken`` if it is gone."""
        with self._lock:
            launch = self._pending.pop(ref, None)
        if launch is None:
            raise AdkError("handoff_taken", "this handoff was already taken or withdrawn")
        return launch

    def discard(self, ref: str) -> bool:
        """Withdraw an untaken launch; True if it was still there."""
        with self._lock:
            return self._pending.pop(ref, None) is not None


handoffs = Handoffs()
"""The process-wide table `api.start` puts into and planning servers take from."""
