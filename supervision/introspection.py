"""`kernel_stats()`: counts of what the kernel holds, so tests can prove nothing leaked."""

from __future__ import annotations

import threading

from supervision.process import live_processes
from supervision.registry import registered
from supervision.timers import timer_count


def kernel_stats(include_pseudo: bool = False) -> dict[str, int]:
    """Live processes, registered names, links, monitors, timers and server threads.

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
    return {
        "processes": len(processes),
        "registered": len(registered()),
        "links": links // 2 if include_pseudo else links,
        "monitors": monitors,
        "timers": timer_count(),
        "server_threads": server_threads,
    }
