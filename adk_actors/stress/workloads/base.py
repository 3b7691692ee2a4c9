"""The `Workload` protocol (one stress kind the in-process target drives) and the small
helpers its implementations share: bounded polling, invariant results, deadlines.

The in-process target starts the runtime, hands each workload the scenario and the shared
scripted model, then calls `run_one` concurrently and `close` once to collect invariants.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from adk_actors.stress.records import InvariantResult, Outcome
from adk_actors.stress.scenario import Scenario
from providers import ScriptedProvider
from providers.errors import AdkError

POLL_S = 0.02
"""How often a settling check looks again."""
DEFAULT_SETTLE_S = 10.0
"""How long `close` lets in-flight items and counters settle before it checks."""
MAX_SETTLE_S = 600.0
INVALID = "invalid_stress_workload"
"""The reason of a refused workload option (with the option's name)."""


class Workload(Protocol):
    """One stress kind: open once, run many items concurrently, close with invariants."""

    kind: str

    async def open(self, scenario: Scenario, provider: ScriptedProvider) -> None:
        """Spawn what the kind needs (agents, workflow, trigger); `adk.start()` is done."""
        ...

    async def run_one(self, index: int, deadline: float) -> Outcome:
        """Run item `index` to its terminal before `deadline` (``time.monotonic()``)."""
        ...

    async def close(self) -> list[InvariantResult]:
        """Settle, check the kind's invariants and tear down what `open` started."""
        ...


class ItemsInFlight(dict[int, str | None]):
    """A workload's items under way: key -> the runtime's reference once it has one
    (bounded by the engine's concurrency); what `close` waits for and cancels."""

    def __init__(self) -> None:
        super().__init__()
        self._keys = itertools.count()

    async def run(self, item: Callable[[int], Awaitable[Outcome]]) -> Outcome:
        """Run `item(key)` under a fresh key, tracked here until it ends."""
        key = next(self._keys)
        self[key] = None
        try:
            return await item(key)
        finally:
            del self[key]


def invariant(name: str, held: bool, detail: str) -> InvariantResult:
    """One checked invariant; `detail` says what was measured either way."""
    return InvariantResult(name=name, held=held, detail=detail)


def settle_seconds(value: float) -> float:
    """A settle bound checked for the constructors (0..`MAX_SETTLE_S`); else
    ``("invalid_stress_workload", "settle_s")``."""
    if isinstance(value, bool) or not (
        isinstance(value, int | float) and 0.0 <= value <= MAX_SETTLE_S
    ):
        raise AdkError(
            (INVALID, "settle_s"), f"settle_s is a number of seconds within 0..{MAX_SETTLE_S}"
        )
    return float(value)


async def wait_until(check: Callable[[], Awaitable[bool]], timeout: float) -> bool:
    """Poll `check` until it is true or `timeout` seconds passed; its last answer."""
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(POLL_S)


def remaining(deadline: float) -> float:
    """Seconds left until `deadline` (``time.monotonic()``), never negative."""
    return max(0.0, deadline - time.monotonic())
