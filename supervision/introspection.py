"""`kernel_stats()`: counts of what the kernel holds, so tests can prove nothing leaked."""

from __future__ import annotations

import threading

from supervision.process import live_processes
from supervision.registry import registered
from supervision.sync_pool import pool_stats
from supervision.timers import timer_count


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
