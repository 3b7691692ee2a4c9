"""`thread_pools` / `thread_pool_of`: the kernel's thread pools grow under load and keep
idle threads (by design), within a bound a leak check can hold them to."""

from __future__ import annotations

import asyncio
import threading

import supervision as sv
from supervision import Task, aio


def test_pool_threads_are_told_by_name() -> None:
    asyncio.run(aio.run_blocking(int))  # the blocking executor exists from here on
    assert sv.thread_pool_of("supervision-task") == "tasks"
    assert sv.thread_pool_of("supervision-pool-3") == "dispatch"
    assert sv.thread_pool_of("aio-blocking_4") == "aio-blocking"
    for other in ("supervision-pool-watchdog", "aio-rogue_0", "aio-blocking", "Thread-1"):
        assert sv.thread_pool_of(other) is None


def test_a_pool_keeps_its_grown_threads_within_its_bound() -> None:
    """Tasks that all run at once make the task pool start threads; once they are done
    the threads stay (idle) and the pool is still within its bound."""
    before = sv.thread_pools()["tasks"]["threads"]
    count = before + 4
    barrier = threading.Barrier(count)
    tasks = [Task.start(barrier.wait, 10.0) for _ in range(count)]
    for task in tasks:
        task.wait(10)
    pools = sv.thread_pools()
    assert pools["tasks"]["threads"] >= count  # grown, and kept while idle
    assert 0 < pools["tasks"]["threads"] <= pools["tasks"]["max_threads"]


def test_threads_past_a_bound_are_counted_against_it() -> None:
    """`thread_pools` over a given set of threads: a pool with more threads than its
    bound shows it (what a leak check fails on); other names are not counted."""
    asyncio.run(aio.run_blocking(int))
    bound = sv.thread_pools()["aio-blocking"]["max_threads"]
    threads = [threading.Thread(name=f"aio-blocking_{n}") for n in range(bound + 1)]
    threads.append(threading.Thread(name="left-behind"))
    pools = sv.thread_pools(threads)
    assert pools["aio-blocking"] == {"threads": bound + 1, "max_threads": bound}
    assert sum(pool["threads"] for pool in pools.values()) == bound + 1
