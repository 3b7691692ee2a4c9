"""The one-shot handoff: how a run's request reaches its actor without the child spec.

The run supervisor's child spec carries only a fresh opaque reference. The request
(runner, message, options) waits in this table under that reference; the run actor
takes it exactly once in `init`, and a second take fails, so a restarted or
duplicated child can never run a request twice. The starter discards whatever was
not taken (a refused start), so nothing is left behind.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Any

from adk_actors.runs.values import RunError

MAX_PENDING_HANDOFFS = 10_000


@dataclass(frozen=True)
class RunRequest:
    """Everything a run actor needs; crosses the handoff, never the child spec."""

    run_id: str
    runner: Any
    user_id: str
    session_id: str
    message: Any
    retention: float
    max_buffered_events: int
    parent_run_id: str | None = None
    items: Any = None
    """For a resumed run: the runner's resume iterator (it claims the continuation)."""
    invocation_id: str | None = None
    """Chosen before the start, so a cancel or a lost actor can always close it."""
    token: str | None = None
    """The opening's token: an abandonment by this run closes only what this run opened."""


class Handoffs:
    """A locked table of requests waiting for their actor; each is taken at most once."""

    def __init__(self, max_pending: int = MAX_PENDING_HANDOFFS) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, RunRequest] = {}
        self._max_pending = max_pending

    def put(self, request: RunRequest) -> str:
        """Store `request`; returns the opaque reference the child spec will carry."""
        ref = f"handoff-{uuid.uuid4().hex}"
        with self._lock:
            if len(self._pending) >= self._max_pending:
                raise RunError("busy", f"{self._max_pending} run starts are already in flight")
            self._pending[ref] = request
        return ref

    def take(self, ref: str) -> RunRequest:
        """The request under `ref`, removed; ``handoff_taken`` if it is gone."""
        with self._lock:
            request = self._pending.pop(ref, None)
        if request is None:
            raise RunError("handoff_taken", "this handoff was already taken or withdrawn")
        return request

    def discard(self, ref: str) -> bool:
        """Withdraw an untaken request; True if it was still there."""
        with self._lock:
            return self._pending.pop(ref, None) is not None

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)


handoffs = Handoffs()
"""The process-wide table the facade puts into and run actors take from."""
