"""The surface the stress engine drives: a `Target` (in-process runtime or a daemon).

The engine calls `open` once, then `run_one` concurrently (each call ends in exactly
one `Outcome`), `chaos` at the scheduled rates and `restarts` for progress, and
finally `close`, which settles, checks the target's invariants and tears down.
"""

from __future__ import annotations

import random
from typing import Protocol

from adk_actors.stress.records import ChaosAction, ChaosEvent, InvariantResult, Outcome
from adk_actors.stress.scenario import Scenario

__all__ = ["Target"]


class Target(Protocol):
    """What a stress scenario runs against; every method is called on the engine's loop."""

    async def open(self, scenario: Scenario) -> None:
        """Start the runtime or daemon and the agents; record the baselines."""
        ...

    async def run_one(self, kind: str, index: int, deadline: float) -> Outcome:
        """Run unit `index` of `kind` before `deadline` (``time.monotonic()``)."""
        ...

    async def chaos(self, action: ChaosAction, rng: random.Random) -> ChaosEvent:
        """Do one chaos `action`, choosing the victim with `rng`; the engine fills `t_s`."""
        ...

    def restarts(self) -> int:
        """Processes restarted by their supervisors so far (a monotonic count)."""
        ...

    async def close(self) -> list[InvariantResult]:
        """Settle, check the target's invariants, tear everything down."""
        ...
