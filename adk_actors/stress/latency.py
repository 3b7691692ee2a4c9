"""Latency: bounded reservoirs (Algorithm R) with nearest-rank percentiles, and the
scripted model's delay draws (uniform ``[low, high]`` or lognormal by median and 99th
percentile), the one model both targets use."""

from __future__ import annotations

import math
import random
from typing import Generic, TypeVar

from adk_actors.stress.scenario import Lognormal

DEFAULT_RESERVOIR = 50_000
MAX_RESERVOIR = 1_000_000
Z99 = 2.3263478740408408
"""The standard normal's 99th percentile: sigma = ln(p99 / median) / z99."""
LOGNORMAL_CAP = 4.0
"""A lognormal draw is capped at this many times the scenario's p99 (its tail is long,
and one draw must never outlast a run's deadline by itself)."""

ItemT = TypeVar("ItemT")
Latency = tuple[float, float] | Lognormal
"""A scenario's ``model.latency``."""


class SampleReservoir(Generic[ItemT]):
    """At most `size` of the items seen, kept uniformly at random (Algorithm R)."""

    def __init__(self, size: int, *, rng: random.Random) -> None:
        if not 1 <= size <= MAX_RESERVOIR:
            raise ValueError(f"a reservoir holds 1..{MAX_RESERVOIR} samples")
        self._size = size
        self._rng = rng
        self.items: list[ItemT] = []
        self.seen = 0

    def add(self, item: ItemT) -> ItemT | None:
        """Offer `item`; what is not kept is returned (`item` itself, or the item it
        replaced), so a caller can release it; None when nothing left the sample."""
        self.seen += 1
        if len(self.items) < self._size:
            self.items.append(item)
            return None
        slot = self._rng.randrange(self.seen)
        if slot >= self._size:
            return item
        evicted, self.items[slot] = self.items[slot], item
        return evicted


class Reservoir:
    """Latency samples: a `SampleReservoir` of floats plus the exact count, sum and
    maximum; percentiles come from the kept samples."""

    def __init__(self, size: int = DEFAULT_RESERVOIR, *, seed: int = 0) -> None:
        self._samples: SampleReservoir[float] = SampleReservoir(size, rng=random.Random(seed))
        self.count = 0
        self.total = 0.0
        self.maximum: float | None = None

    def add(self, value: float) -> None:
        """Record one sample."""
        self.count += 1
        self.total += value
        self.maximum = value if self.maximum is None else max(self.maximum, value)
        self._samples.add(value)

    def percentiles(self, *quantiles: float) -> list[float | None]:
        """Nearest-rank percentiles (`quantiles` in 0..100); None without samples."""
        if not self._samples.items:
            return [None for _ in quantiles]
        ordered = sorted(self._samples.items)
        last = len(ordered) - 1
        return [
            ordered[min(last, max(0, math.ceil(q / 100 * len(ordered)) - 1))] for q in quantiles
        ]

    def mean(self) -> float | None:
        """The exact mean of every sample recorded (None without samples)."""
        return self.total / self.count if self.count else None


def draw_delay(latency: Latency, rng: random.Random) -> float:
    """One model-call delay in seconds: uniform in ``[low, high]``, or lognormal capped
    at `LOGNORMAL_CAP` times its p99."""
    if isinstance(latency, Lognormal):
        sigma = math.log(latency.p99_s / latency.median_s) / Z99
        value = rng.lognormvariate(math.log(latency.median_s), sigma)
        return min(value, LOGNORMAL_CAP * latency.p99_s)
    low, high = latency
    return rng.uniform(low, high)
