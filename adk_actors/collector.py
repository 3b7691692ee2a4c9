"""CPython's cyclic garbage collector, tuned while the application runs.

Python collects its young generation every 700 net allocations. A runtime that
allocates per message and per event does that every few runs, and each young
collection promotes whatever is briefly held at that moment (a message in an inbox,
a stored event being appended, a span waiting in an exporter's batch) into the older
generations, which every full collection traverses again with the whole heap: on the
Runner workload a quarter of the CPU went to the collector, and most of what an
OpenTelemetry SDK's spans cost was collections they caused, not the spans.

The middle generation is collected after every 50 young collections instead of 10:
what a run holds for its few seconds in flight (its server, its turn's coroutines, its
stored events) survives a young collection and would be traversed again by each middle
one, though reference counting frees nearly all of it once the run ends. At 10 a wave of
1,024 runs with a 2 s model spent about a sixth of its CPU in the collector; at 50 it
spends half of that (docs/BENCHMARKS.md). The cost is in cycles: one that outlives a
young collection waits for the next middle one, up to 500,000 net allocations with the
default young threshold (100,000 before), and one that becomes garbage only after it
was promoted past a middle collection waits for a full collection, which CPython runs
after 10 middle ones: about every 5,000,000 net allocations instead of 1,000,000
(sooner when the old generation has grown by a quarter). The runtime itself frees its
processes and runs by reference counting (no cycles left per run); an application
that makes many cycles can pass its own thresholds.

`tune` raises the young generation's threshold (10,000 by default) and the middle one's
(to 50) when the process still has Python's default thresholds, so an application that
set its own keeps them;
`restore` puts Python's back, unless someone changed them meanwhile. Reference
counting frees acyclic garbage at once either way: the threshold only decides how
often cycles are looked for. `adk.start(gc_young_threshold=None)` leaves the
collector alone.

`finalize` is `weakref.finalize` for callbacks that take locks (a metric, a span's
end): a collection may run a finalizer on whichever thread allocated, even one
holding that lock, so there the callback is queued and run by the next
`run_deferred()` instead.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable
from queue import Empty, SimpleQueue
from typing import Any, Final

from providers.errors import AdkError
from supervision import get_logger

PYTHON_THRESHOLDS: Final = (700, 10, 10)
"""CPython's default thresholds (`gc.get_threshold()` of a fresh interpreter)."""
DEFAULT_YOUNG_THRESHOLD: Final = 10_000
"""The young generation's threshold while the application runs."""
MIDDLE_THRESHOLD: Final = 50
"""Young collections between two of the middle generation while the application runs."""
MAX_YOUNG_THRESHOLD: Final = 1_000_000
"""The highest young threshold accepted: past it cycles would wait too long."""

_lock = threading.Lock()
_tuned: tuple[int, int, int] | None = None  # the thresholds `tune` set, until restored
_collecting = False


def _track(phase: str, _info: dict[str, int]) -> None:
    global _collecting
    _collecting = phase == "start"


gc.callbacks.append(_track)


def collecting() -> bool:
    """True while CPython's cyclic collector runs, its finalizers and weakref callbacks
    included. Code reached from those interrupts whichever thread allocated, anywhere,
    even inside a lock that thread holds: it must take no lock (put the work on a
    `queue.SimpleQueue`, which is reentrant, and do it later)."""
    return _collecting


_deferred: Final[SimpleQueue[tuple[Callable[..., object], tuple[Any, ...]]]] = SimpleQueue()
_log = get_logger("adk_actors.collector")


def finalize(target: object, callback: Callable[..., object], *args: Any) -> None:
    """`weakref.finalize(target, callback, *args)` whose callback never runs inside the
    cyclic collector: freed by reference counting, `target` runs it at once; freed by a
    collection, it is queued (reentrantly) and run by the next `run_deferred()`. For a
    finalizer that takes locks (metrics, spans), which a collection could reach on a
    thread already holding one."""
    weakref.finalize(target, _finalized, callback, args).atexit = False


def _finalized(callback: Callable[..., object], args: tuple[Any, ...]) -> None:
    if _collecting:
        _deferred.put((callback, args))
    else:
        callback(*args)


def run_deferred() -> None:
    """Run the finalizers a collection queued (see `finalize`); cheap when there are
    none. A failing one is logged (``adk.collector.finalizer_failed``) and skipped."""
    while not _deferred.empty():
        try:
            callback, args = _deferred.get_nowait()
        except Empty:
            return
        try:
            callback(*args)
        except Exception as error:  # a finalizer's failure must not fail its caller
            _log.warning("adk.collector.finalizer_failed", error=type(error).__name__)


def check_young_threshold(young_threshold: object) -> int | None:
    """`young_threshold` if it is None or an int in 1..`MAX_YOUNG_THRESHOLD`;
    otherwise ``invalid_gc_young_threshold``."""
    if young_threshold is None:
        return None
    if (
        isinstance(young_threshold, bool)
        or not isinstance(young_threshold, int)
        or not 1 <= young_threshold <= MAX_YOUNG_THRESHOLD
    ):
        raise AdkError(
            "invalid_gc_young_threshold",
            f"gc_young_threshold is an int from 1 to {MAX_YOUNG_THRESHOLD:,}, or None to "
            "leave Python's collector as it is",
        )
    return young_threshold


def tune(young_threshold: int) -> bool:
    """Set the young generation's threshold to `young_threshold`, and the middle one's
    to `MIDDLE_THRESHOLD`, if the collector still has Python's default thresholds; True
    if it did."""
    global _tuned
    with _lock:
        current = gc.get_threshold()
        if current != PYTHON_THRESHOLDS:
            return False
        applied = (young_threshold, MIDDLE_THRESHOLD, current[2])
        gc.set_threshold(*applied)
        _tuned = applied
        return True


def restore() -> None:
    """Put Python's default thresholds back if `tune` set the current ones."""
    global _tuned
    with _lock:
        if _tuned is not None and gc.get_threshold() == _tuned:
            gc.set_threshold(*PYTHON_THRESHOLDS)
        _tuned = None
