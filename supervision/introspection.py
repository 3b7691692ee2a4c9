"""`kernel_stats()`: counts of what the kernel holds, so tests can prove nothing leaked;
`thread_pools()`: the kernel's thread pools against their bounds (pools keep idle
threads after load by design, so a thread leak check counts them apart)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

from supervision import dispatch_pool, sync_pool
from supervision.aio import THREAD_PREFIX, executor_bounds
from supervision.process import live_processes
from supervision.registry import registered
from supervision.sync_pool import pool_stats
from supervision.timers import timer_count

TASK_POOLS = "tasks"
DISPATCH_POOL = "dispatch"
_AIO_THREAD = re.compile(re.escape(THREAD_PREFIX) + r"([a-z]+)_\d+")
_DISPATCH_THREAD = re.compile(re.escape(dispatch_pool.WORKER_PREFIX) + r"\d+")


def kernel_stats(include_pseudo: bool = False) -> dict[str, int]:
    """Live processes, registered names, links, monitors, timers and server threads,
    and the sync task pools' threads (summed over every shared pool):
    ``task_threads``, ``task_threads_busy``, ``task_threads_abandoned`` (running a
    task that was stopped, e.g. a tool past its timeout: a thread cannot be killed)
    and ``task_queue``.

    Pseudo-processes of plain threads are left out unless `include_pseudo`.
    """
    processes = [p for p in live_processes() if include_pseudo or not p.is_pseudo]
    links = monitors = timers = 0
    for process in processes:
        process_links, process_monitors, process_timers = process.counts()
        links += process_links
        monitors += process_monitors
        timers += process_timers
    server_threads = sum(1 for t in threading.enumerate() if t.name.startswith("_ServerActor-"))
    pools = pool_stats()
    return {
        "processes": len(processes),
        "registered": len(registered()),
        "links": links // 2 if include_pseudo else links,
        "monitors": monitors,
        "timers": timer_count(),
        "server_threads": server_threads,
        "task_threads": pools["threads"],
        "task_threads_busy": pools["busy"],
        "task_threads_abandoned": pools["abandoned"],
        "task_queue": pools["queued"],
    }


def thread_pool_of(name: str) -> str | None:
    """The `thread_pools` key of the pool whose threads carry this name, or None for a
    thread outside the kernel's pools."""
    if name == sync_pool.THREAD_NAME:
        return TASK_POOLS
    if _DISPATCH_THREAD.fullmatch(name):
        return DISPATCH_POOL
    matched = _AIO_THREAD.fullmatch(name)
    if matched is not None and matched[1] in executor_bounds():
        return f"{THREAD_PREFIX}{matched[1]}"
    return None


def thread_pools(threads: Iterable[threading.Thread] | None = None) -> dict[str, dict[str, int]]:
    """Each kernel thread pool started so far, with ``threads`` (its live threads among
    `threads`, every live thread by default, counted by name) and ``max_threads`` (its
    bound): ``tasks`` (the shared sync pools, hung-task replacements included),
    ``dispatch`` (the pooled servers' workers) and ``aio-<name>`` (`aio`'s executors).
    A pool starts threads under load and keeps idle ones (a while, or for good), but
    never more than its bound; a pool over it is a leak."""
    pools = {
        TASK_POOLS: {"threads": 0, "max_threads": sync_pool.shared_pools_bound()},
        DISPATCH_POOL: {"threads": 0, "max_threads": dispatch_pool.pool_bound()},
    }
    for name, bound in executor_bounds().items():
        pools[f"{THREAD_PREFIX}{name}"] = {"threads": 0, "max_threads": bound}
    for thread in threading.enumerate() if threads is None else threads:
        pool = thread_pool_of(thread.name)
        if pool is not None:
            pools[pool]["threads"] += 1
    return pools
