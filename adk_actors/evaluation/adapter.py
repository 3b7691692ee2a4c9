"""`EvalAdapter`: what the engine drives for each sample, and what one turn returns.

An adapter opens a sample (a fresh conversation: an agent, a session, a remote
session...), runs its turns one after another and closes it. `close_sample` is
called exactly once for every sample that opened, also after a failure or a
timeout, and then possibly from another thread while `run_turn` is still running:
it must make that call return (cancel the run) and release everything. A custom
adapter lets the same engine evaluate a remote system or a deterministic fixture.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import msgspec

from adk_actors.evaluation.evalset import EvalCase, EvalTurn
from adk_actors.evaluation.results import TrajectoryStep


class TurnOutput(msgspec.Struct, frozen=True, kw_only=True):
    """What one turn produced: the answer text, the tool steps (with their arguments;
    the engine drops them from results unless ``capture_tool_content``), bounded
    JSON metadata, and the run's events as JSON (kept only with ``capture_events``)."""

    text: str | None
    trajectory: list[TrajectoryStep] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    events: list[dict[str, Any]] = msgspec.field(default_factory=list)


@runtime_checkable
class EvalAdapter(Protocol):
    """The system under evaluation, one sample at a time (all three calls block)."""

    def open_sample(self, case: EvalCase, sample_index: int) -> Any:
        """Start a fresh conversation for sample `sample_index` of `case`; the handle."""
        ...

    def run_turn(self, handle: Any, turn: EvalTurn, deadline: float) -> TurnOutput:
        """Send `turn`'s input and return its output before `deadline`
        (`time.monotonic()`-based); raise `AdkError` when it fails."""
        ...

    def close_sample(self, handle: Any) -> None:
        """Release the sample's resources; make a running `run_turn` return."""
        ...
