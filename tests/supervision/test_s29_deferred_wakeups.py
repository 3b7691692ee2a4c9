"""Deferred wake-ups in the dispatch pool (issue 20 §4, session 29: fewer cross-thread
wake-ups per hand-off between processes).

A pool worker that readies a server from a handler does not wake an idle thread for
it: it takes it itself once its handler returns. These tests pin what must still hold:
a handler that blocks in a kernel wait (`call`, `Inbox.receive`, `wait_dead`) first
hands what it readied to another thread; a worker that stays with its server (more
mail) does too; a handler blocked in user code is rescued by the watchdog; the worker
takes the readied server itself when nothing blocks; order and one-thread-at-a-time
stay.

Each test runs its servers on a pool of its own with two threads, so one of them is
idle (asleep) when the other readies a server; `block_warning` is an hour where the
watchdog must not be what rescues the test, so a missing hand-over fails (the call
or the wait runs out) instead of passing late.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import supervision as sv
from supervision.dispatch_pool import Pool, PooledServerProcess
from supervision.process import bind_thread, current_process
from supervision.reply_slot import From
from tests.helpers import wait_until

NO_WATCHDOG = 3600.0  # the watchdog's first look is half an hour away
PREFIX = "test-s29-pool-"  # not the shared pool's thread names: `thread_pools` skips them


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


def both_idle(pool: Pool) -> None:
    wait_until(lambda: len(pool._sleeping) == pool.threads)


@pytest.fixture
def quiet_pool() -> Iterator[Pool]:
    yield Pool(2, 2, block_warning=NO_WATCHDOG, prefix=PREFIX)


class Echo(sv.GenServer):
    """Replies to calls, forwards casts ``(pid, message)`` as plain sends, stops on
    ``"stop"``, and records which thread ran each message."""

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


def run_in_handler(pool: Pool, fn: Any) -> Any:
    driver = start_on(pool, Driver())
    both_idle(pool)
    driver.cast(fn)
    assert driver.server.done.wait(30), "the driver's handler never returned"
    return driver.server.outcomes[0]


def test_a_call_to_a_server_this_worker_readied_gets_its_reply(quiet_pool: Pool) -> None:
    """The server waits in the ready queue for the calling worker, which is about to
    block in the call's reply wait: `From.wait` hands it to the idle thread first."""
    echo = start_on(quiet_pool, Echo())

    def handler() -> Any:
        echo.cast(("note", 1))  # readied by this worker: its wake-up is deferred
        return sv.call(echo.pid, "ping", timeout=20)

    assert run_in_handler(quiet_pool, handler) == ("echo", "ping")


def test_an_inbox_receive_hands_the_readied_server_over(quiet_pool: Pool) -> None:
    echo = start_on(quiet_pool, Echo())

    def handler() -> Any:
        with sv.Inbox() as inbox:
            echo.cast(("send", inbox.pid, "hello"))
            return inbox.receive(timeout=20)

    assert run_in_handler(quiet_pool, handler) == "hello"


def test_wait_dead_hands_the_readied_server_over(quiet_pool: Pool) -> None:
    echo = start_on(quiet_pool, Echo())

    def handler() -> Any:
        echo.cast("stop")
        return echo.wait_dead(20)

    assert run_in_handler(quiet_pool, handler) is True
    assert echo.exit_reason == "normal"


def test_a_worker_staying_with_its_server_hands_the_readied_one_over(
    quiet_pool: Pool,
) -> None:
    """The worker has the driver's next message to run: before it does, the server it
    readied goes to the idle thread (here the next message waits for that server)."""
    echo = start_on(quiet_pool, Echo())
    reached = threading.Event()
    driver = start_on(quiet_pool, Driver())
    both_idle(quiet_pool)
    driver.cast(lambda: echo.cast(("set", reached)))
    driver.cast(lambda: reached.wait(20))  # user code: only a hand-over lets echo run
    wait_until(lambda: len(driver.server.outcomes) == 2, timeout=30)
    assert driver.server.outcomes == [None, True]


def test_a_handler_blocked_in_user_code_is_rescued_by_the_watchdog() -> None:
    """A handler that readies a server, then blocks where the kernel cannot see it
    (an Event, `time.sleep`, sync I/O): the watchdog wakes the idle thread for the
    server within its look interval (block_warning / 2), as the contract asks."""
    pool = Pool(2, 2, block_warning=0.1, prefix=PREFIX)
    echo = start_on(pool, Echo())
    reached = threading.Event()

    def handler() -> bool:
        echo.cast(("set", reached))
        return reached.wait(20)

    assert run_in_handler(pool, handler) is True


def test_the_worker_takes_the_readied_server_itself(quiet_pool: Pool) -> None:
    """Nothing blocks: the server readied by a handler runs on the same worker, right
    after that handler, with no other thread woken for it."""
    echo = start_on(quiet_pool, Echo())
    driver = start_on(quiet_pool, Driver())
    both_idle(quiet_pool)
    driver.cast(
        lambda: [echo.cast(("note", i)) for i in range(10)] and threading.current_thread().name
    )
    wait_until(lambda: len(echo.server.threads) == 10, timeout=30)
    assert set(echo.server.threads) == {driver.server.outcomes[0]}
    assert [m for m in sv.get_state(echo.pid)] == [("note", i) for i in range(10)]


def test_order_and_one_thread_at_a_time_with_deferred_wake_ups(quiet_pool: Pool) -> None:
    """Two drivers ready the same server from both workers at once: its messages
    stay in each sender's order and it never runs on two threads together."""

    class Counting(sv.GenServer):
        def init(self, args: Any) -> list[Any]:
            self.running = 0
            self.overlaps = 0
            return []

        def handle_cast(self, msg: Any, state: list[Any]) -> list[Any]:
            self.running += 1
            if self.running > 1:
                self.overlaps += 1
            threading.Event().wait(0)  # a GIL hand-over point
            state.append(msg)
            self.running -= 1
            return state

    target = start_on(quiet_pool, Counting())
    drivers = [start_on(quiet_pool, Driver()) for _ in range(2)]
    for sender, driver in enumerate(drivers):
        for batch in range(20):
            driver.cast(
                lambda sender=sender, batch=batch: [
                    target.cast((sender, batch * 10 + i)) for i in range(10)
                ]
            )
    wait_until(lambda: len(target.state or ()) == 400, timeout=30)
    received = sv.get_state(target.pid)
    for sender in range(2):
        assert [i for s, i in received if s == sender] == list(range(200))
    assert target.server.overlaps == 0


def test_a_private_pools_threads_are_not_counted_as_the_shared_pools(quiet_pool: Pool) -> None:
    names = {thread.name for thread in threading.enumerate()}
    assert {f"{PREFIX}0", f"{PREFIX}1", f"{PREFIX}watchdog"} <= names
    assert sv.thread_pool_of(f"{PREFIX}0") is None
