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
import time
from collections.abc import Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

import supervision as sv
from supervision.dispatch_pool import Pool
from supervision.leases import LmdbLeases
from tests.helpers import wait_until
from tests.supervision.private_pools import (
    PREFIX,
    Driver,
    Echo,
    all_idle,
    private_pool,
    run_in_handler,
    start_on,
)


@pytest.fixture
def quiet_pool() -> Iterator[Pool]:
    with private_pool() as pool:
        yield pool


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
    all_idle(quiet_pool)
    driver.cast(lambda: echo.cast(("set", reached)))
    driver.cast(lambda: reached.wait(20))  # user code: only a hand-over lets echo run
    wait_until(lambda: len(driver.server.outcomes) == 2, timeout=30)
    assert driver.server.outcomes == [None, True]


def test_a_handler_blocked_in_user_code_is_rescued_by_the_watchdog() -> None:
    """A handler that readies a server, then blocks where the kernel cannot see it
    (an Event, `time.sleep`, sync I/O): the watchdog wakes the idle thread for the
    server within its look interval (block_warning / 2), as the contract asks."""
    with private_pool(block_warning=0.1) as pool:
        echo = start_on(pool, Echo())
        reached = threading.Event()

        def handler() -> bool:
            echo.cast(("set", reached))
            return reached.wait(20)

        assert run_in_handler(pool, handler) is True


def test_the_worker_takes_the_readied_server_itself(quiet_pool: Pool) -> None:
    """Nothing blocks: the server readied by a handler runs on the same worker, right
    after that handler, with no other thread woken for it. Review of 28b5589, finding
    3: this asserts the wake-up itself, so a `schedule` that wakes a sleeper for every
    readied server fails here (the thread that ran echo would not tell: on a GIL the
    driver's worker usually gets to echo before a woken thread does)."""
    echo = start_on(quiet_pool, Echo())
    driver = start_on(quiet_pool, Driver())
    all_idle(quiet_pool)

    def handler() -> tuple[str, list[Any], list[Any], int]:
        asleep = list(quiet_pool._sleeping)  # the other worker's wake lock
        for i in range(10):
            echo.cast(("note", i))
        owed = quiet_pool._this_worker.worker.owed  # type: ignore[union-attr]
        return threading.current_thread().name, asleep, list(quiet_pool._sleeping), owed

    driver.cast(handler)
    wait_until(lambda: len(echo.server.threads) == 10, timeout=30)
    driver_thread, asleep, asleep_after_casts, owed = driver.server.outcomes[0]
    assert len(asleep) == 1
    assert asleep_after_casts == asleep, "a cast from a handler woke the idle thread"
    assert owed == 1, "the readied server is this worker's to take (one wake-up owed)"
    assert set(echo.server.threads) == {driver_thread}
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


def test_a_private_pools_threads_are_not_counted_as_the_shared_pools() -> None:
    with private_pool() as pool:
        threads = [t for t in threading.enumerate() if t.name.startswith(PREFIX)]
        assert {f"{PREFIX}0", f"{PREFIX}1", f"{PREFIX}watchdog"} <= {t.name for t in threads}
        assert sv.thread_pool_of(f"{PREFIX}0") is None
        echo = start_on(pool, Echo())
        assert sv.call(echo.pid, "ping", timeout=5) == ("echo", "ping")
    # Review of 28b5589, finding 6: `stop` (the fixture's finalizer) ends the threads.
    assert not any(thread.is_alive() for thread in threads)


# -- review of 28b5589 (session 29) ----------------------------------------------------


def test_the_public_hook_hands_the_readied_server_over_before_user_code_blocks(
    quiet_pool: Pool,
) -> None:
    """Finding 1: code that blocks where the kernel cannot see it calls
    `sv.before_blocking()` first; the server it readied then runs at once on the idle
    thread (no watchdog on this pool: without the hand-over the wait runs out)."""
    echo = start_on(quiet_pool, Echo())
    reached = threading.Event()

    def handler() -> bool:
        echo.cast(("set", reached))
        sv.before_blocking()
        return reached.wait(10)

    assert run_in_handler(quiet_pool, handler) is True
    sv.before_blocking()  # on a thread that is no pool worker: nothing to do


def test_a_lease_write_hands_the_readied_server_over_first(quiet_pool: Pool, tmp_path) -> None:
    """Finding 1: `LmdbLeases` steps wait for LMDB's writer lock, then commit with
    fsync. Here another thread holds the writer lock until the server the handler
    readied has run: only a hand-over before the write lets it run."""
    leases = LmdbLeases(tmp_path / "leases")
    echo = start_on(quiet_pool, Echo())
    reached = threading.Event()
    driver = start_on(quiet_pool, Driver())
    all_idle(quiet_pool)
    try:
        with leases.env.begin(write=True):  # LMDB's writer lock, held by this thread

            def handler() -> str:
                echo.cast(("set", reached))
                return leases.acquire("job", "me", 30.0).owner

            driver.cast(handler)
            handed_over = reached.wait(10)
        assert driver.server.done.wait(10)
        assert handed_over, "the handler waited for the writer lock owing echo its thread"
        assert driver.server.outcomes == ["me"]
    finally:
        leases.close()


def test_a_settled_reply_slot_keeps_the_deferred_wake_ups(quiet_pool: Pool) -> None:
    """Finding 4: `From.wait` hands over only when it will block. A slot already
    settled, and a poll (timeout 0) of an open one, leave the wake-up owed (the idle
    thread is not woken: the worker takes echo itself after the handler)."""
    echo = start_on(quiet_pool, Echo())

    def handler() -> tuple[bool, bool, int, int]:
        asleep = len(quiet_pool._sleeping)
        echo.cast(("note", 1))
        settled = sv.From()
        settled.settle("done", False)
        got = settled.wait(5)
        polled = sv.From().wait(0)
        owed = quiet_pool._this_worker.worker.owed  # type: ignore[union-attr]
        return got, polled, owed, asleep - len(quiet_pool._sleeping)

    assert run_in_handler(quiet_pool, handler) == (True, False, 1, 0)
    wait_until(lambda: echo.server.threads)


def test_the_watchdog_outlives_a_look_that_raises() -> None:
    """Finding 2: the watchdog is what pays the wake-ups owed by a handler blocked in
    user code. A look that raises (here its ``handler_blocked`` log write fails, as a
    full pipe's would) is logged as ``supervision.dispatch.watchdog_failed`` and the
    watchdog goes on: a later handler blocked in user code is still rescued."""
    failures: list[str] = []

    def failing_log_write(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
        if event["event"] == "supervision.dispatch.handler_blocked":
            failures.append(event["event"])
            raise OSError("the log pipe is full")
        return event

    gate = threading.Event()
    with private_pool(block_warning=0.1) as pool, capture_logs([failing_log_write]) as logs:
        blocked = start_on(pool, Driver())
        blocked.cast(lambda: gate.wait(20))  # past block_warning: the look logs it, and fails
        wait_until(lambda: failures, timeout=10)
        gate.set()
        wait_until(lambda: blocked.server.done.is_set(), timeout=10)
        time.sleep(0.15)  # a few looks after the failure: the old watchdog was gone by now
        echo = start_on(pool, Echo())
        reached = threading.Event()

        def handler() -> bool:
            echo.cast(("set", reached))
            return reached.wait(5)  # user code: only the watchdog hands echo over

        assert run_in_handler(pool, handler) is True
    failed = [e for e in logs if e["event"] == "supervision.dispatch.watchdog_failed"]
    assert failed and "the log pipe is full" in failed[0]["error"]
    assert failed[0]["log_level"] == "error"


def test_stop_ends_a_pools_threads_and_is_idempotent() -> None:
    """Finding 6: a private pool's `stop` joins its workers (idle or finishing a
    handler) and its watchdog."""
    pool = Pool(2, 3, block_warning=0.1, prefix=PREFIX + "stop-")
    echo = start_on(pool, Echo())
    assert sv.call(echo.pid, "ping", timeout=5) == ("echo", "ping")
    threads = [t for t in threading.enumerate() if t.name.startswith(PREFIX + "stop-")]
    assert len(threads) == 3
    assert pool.stop(10) is True
    assert not any(thread.is_alive() for thread in threads)
    assert pool.stop(1) is True
