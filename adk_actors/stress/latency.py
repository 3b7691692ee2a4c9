"""Latency: a bounded reservoir with nearest-rank percentiles, and the scripted model's
delay draws (uniform ``[low, high]`` or lognormal by median and 99th percentile)."""

from __future__ import annotations

import math
import random

from adk_actors.stress.scenario import Lognormal, Model

DEFAULT_RESERVOIR = 50_000
MAX_RESERVOIR = 1_000_000
_Z99 = 2.3263478740408408
"""The standard normal's 99th percentile: sigma = ln(p99 / median) / z99."""


class Reservoir:
    """At most `size` samples kept uniformly at random (Algorithm R), plus the exact
    count, sum and maximum; percentiles come from the kept samples."""

    def __init__(self, size: int = DEFAULT_RESERVOIR, *, seed: int = 0) -> None:
        if not 1 <= size <= MAX_RESERVOIR:
            raise ValueError(f"a reservoir holds 1..{MAX_RESERVOIR} samples")
        self._size = size
        self._rng = random.Random(seed)
        self._samples: list[float] = []
        self.count = 0
        self.total = 0.0
        self.maximum: float | None = None

    def add(self, value: float) -> None:
        """Record one sample."""
        self.count += 1
        self.total += value
        self.maximum = value if self.maximum is None else max(self.maximum, value)
        if len(self._samples) < self._size:
            self._samples.append(value)
            return
        slot = self._rng.randrange(self.count)
        if slot < self._size:
            self._samples[slot] = value

    def percentiles(self, *quantiles: float) -> list[float | None]:
        """Nearest-rank percentiles (`quantiles` in 0..100); None without samples."""
        if not self._samples:
            return [None for _ in quantiles]
        ordered = sorted(self._samples)
        last = len(ordered) - 1
        return [
            ordered[min(last, max(0, math.ceil(q / 100 * len(ordered)) - 1))] for q in quantiles
        ]

    def mean(self) -> float | None:
        """The exact mean of every sample recorded (None without samples)."""
        return self.total / self.count if self.count else None


def draw_delay(model: Model, rng: random.Random) -> float:
    """One model-call delay in seconds, capped at the scenario's latency ceiling."""
    latency = model.latency
    if isinstance(latency, Lognormal):
        sigma = math.log(latency.p99_s / latency.median_s) / _Z99
        value = rng.lognormvariate(math.log(latency.median_s), sigma)
        return min(value, 4 * latency.p99_s)
    low, high = latency
    return rng.uniform(low, high)
