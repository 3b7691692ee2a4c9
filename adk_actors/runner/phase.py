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
        # by value: a str's hash is cached, an Enum member's is a Python-level call,
        # and the server asks this after every message
        return self._value_ in _TERMINAL


_TERMINAL = frozenset(
    phase.value for phase in (Phase.PAUSED, Phase.COMPLETED, Phase.FAILED, Phase.CANCELLED)
)
_ALLOWED: dict[str, frozenset[str]] = {
    current.value: frozenset(phase.value for phase in allowed)
    for current, allowed in (
        (Phase.ADMITTING, (Phase.QUEUED_IN_LANE, Phase.FAILED, Phase.CANCELLED)),
        (Phase.QUEUED_IN_LANE, (Phase.OPEN, Phase.FAILED, Phase.CANCELLED)),
        (Phase.OPEN, (Phase.PAUSED, Phase.COMPLETED, Phase.FAILED, Phase.CANCELLED)),
    )
}
"""The transitions each phase allows, by value (see `terminal`)."""


def advance(current: Phase, new: Phase) -> Phase:
    """`new`, if the lifecycle allows moving there from `current`; raises otherwise
    (a bug: the server crashes rather than write a second terminal)."""
    if new._value_ not in _ALLOWED.get(current._value_, frozenset()):
        raise AdkError(
            ("invalid_phase_transition", current.value, new.value),
            "an invocation moved against its lifecycle",
        )
    return new
