"""Servers on a dispatch pool of a test's own, to pin the deferred wake-ups (28b5589).

A pool worker that readies a server from a handler does not wake an idle thread for
it: it owes that wake-up, and pays it when the handler returns, before the handler
blocks (`supervision.before_blocking`), or at the watchdog's next look. The tests that
use these helpers run on a pool of two threads, so one is idle (asleep) while the other
runs a handler, and with `NO_WATCHDOG` where the watchdog must not be what rescues the
test: a missing hand-over then fails (a wait runs out) instead of passing late.

`private_pool` stops the pool after the test (review of 28b5589, finding 6: the tests
left their pools' threads and a watchdog polling every 50 ms running for the session).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import supervision as sv
from supervision.dispatch_pool import Pool, PooledServerProcess
from supervision.process import bind_thread, current_process
from supervision.reply_slot import From
from tests.helpers import wait_until

NO_WATCHDOG = 3600.0  # the watchdog's first look is half an hour away
PREFIX = "test-s29-pool-"  # not the shared pool's thread names: `thread_pools` skips them


@contextmanager
def private_pool(
    threads: int = 2, max_threads: int | None = None, block_warning: float = NO_WATCHDOG
) -> Iterator[Pool]:
    """A pool of its own for one test, stopped (every thread joined) after it."""
    pool = Pool(threads, max_threads or threads, block_warning=block_warning, prefix=PREFIX)
    try:
        yield pool
    finally:
        assert pool.stop(10), "a private pool's thread did not stop"


def start_on(pool: Pool, server: sv.GenServer) -> PooledServerProcess:
    """Start `server` on `pool` as `GenServer.start` does (init on this thread)."""
    process = PooledServerProcess(server, None, pool=pool)
    started = From()
    caller = current_process()
    bind_thread(process)
    try:
        process.run_init(None, None, started)
    finally:
        bind_thread(caller)
    assert started.wait(5) and not started.failed
    return process


def all_idle(pool: Pool) -> None:
    wait_until(lambda: len(pool._sleeping) == pool.threads)


class Echo(sv.GenServer):
    """Replies to calls, forwards casts ``("send", pid, message)`` as plain sends, sets
    the event of ``("set", event)``, stops on ``"stop"``, and records which thread ran
    each message."""

    def init(self, args: Any) -> list[Any]:
        self.threads: list[str] = []
        return []

    def handle_call(self, request: Any, from_: From, state: list[Any]) -> sv.Reply:
        self.threads.append(threading.current_thread().name)
        return sv.Reply(("echo", request), state)

    def handle_cast(self, msg: Any, state: list[Any]) -> Any:
        self.threads.append(threading.current_thread().name)
        if msg == "stop":
            return sv.Stop("normal", state)
        if isinstance(msg, tuple) and msg[0] == "send":
            sv.send(msg[1], msg[2])
        elif isinstance(msg, tuple) and msg[0] == "set":
            msg[1].set()
        state.append(msg)
        return state


class Driver(sv.GenServer):
    """Runs the function it is cast, in its handler, and keeps what it returned."""

    def init(self, args: Any) -> list[Any]:
        self.outcomes: list[Any] = []
        self.done = threading.Event()
        return []

    def handle_cast(self, msg: Any, state: list[Any]) -> list[Any]:
        try:
            self.outcomes.append(msg())
        except BaseException as exc:
            self.outcomes.append(exc)
        self.done.set()
        return state


def run_in_handler(pool: Pool, fn: Callable[[], Any], timeout: float = 30) -> Any:
    """Run `fn` in a pooled handler on `pool` (the other threads idle) and return what
    it returned (or raised)."""
    driver = start_on(pool, Driver())
    all_idle(pool)
    driver.cast(fn)
    assert driver.server.done.wait(timeout), "the driver's handler never returned"
    return driver.server.outcomes[0]
