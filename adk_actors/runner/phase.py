"""An invocation's phase, and the only transitions it may take.

    ADMITTING -> QUEUED_IN_LANE -> OPEN -> PAUSED | COMPLETED | FAILED | CANCELLED

An invocation may also end before it opens (FAILED: refused by policy, admission,
its lane or its claim; CANCELLED), and then nothing of it is in the session. A
terminal phase is final: there is no transition out of it.
"""

from __future__ import annotations

from enum import Enum

from providers.errors import AdkError


class Phase(Enum):
    ADMITTING = "admitting"
    """Waiting for an admission permit (skipped without admission control)."""
    QUEUED_IN_LANE = "queued_in_lane"
    """Holding a permit, waiting for the agent's lane slot for its session."""
    OPEN = "open"
    """The opening event is stored; the turn runs; only this server writes steps."""
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset({Phase.PAUSED, Phase.COMPLETED, Phase.FAILED, Phase.CANCELLED})
_ALLOWED: dict[Phase, frozenset[Phase]] = {
    Phase.ADMITTING: frozenset({Phase.QUEUED_IN_LANE, Phase.FAILED, Phase.CANCELLED}),
    Phase.QUEUED_IN_LANE: frozenset({Phase.OPEN, Phase.FAILED, Phase.CANCELLED}),
    Phase.OPEN: frozenset({Phase.PAUSED, Phase.COMPLETED, Phase.FAILED, Phase.CANCELLED}),
}


def advance(current: Phase, new: Phase) -> Phase:
    """`new`, if the lifecycle allows moving there from `current`; raises otherwise
    (a bug: the server crashes rather than write a second terminal)."""
    if new not in _ALLOWED.get(current, frozenset()):
        raise AdkError(
            ("invalid_phase_transition", current.value, new.value),
            "an invocation moved against its lifecycle",
        )
    return new
