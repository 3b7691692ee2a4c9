"""The stores hand a pooled handler's deferred wake-ups over before they block (review
of 28b5589, finding 1).

A pooled handler that sends to another pooled server owes it a wake-up: the worker
runs that server itself once the handler returns. If the handler then blocks where the
kernel cannot see it, the receiver waited for the whole block (or up to the watchdog's
`block_warning / 2`). The hot case is the invocation server's event loop
(`runner/storing.py`): it publishes an event to a pooled stream, then writes the next
one to LMDB (the session lock, LMDB's writer lock, a commit with fsync). The session
store, its per-session lock and the workflow ledger call `supervision.before_blocking`
first.

Each test runs the handler on a private pool with no watchdog and makes the block last
until the readied server has run: only the hand-over lets it run, so a store that does
not hand over fails the test (its wait runs out) instead of passing late.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adk_actors.sessions import LmdbSessionService
from adk_actors.workflows.ledger_lmdb import LmdbLedger
from supervision.dispatch_pool import Pool
from tests.adk_actors.workflows._ledger_support import CP0, META
from tests.supervision.private_pools import Driver, Echo, all_idle, private_pool, start_on


@pytest.fixture
def quiet_pool() -> Iterator[Pool]:
    with private_pool() as pool:
        yield pool


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[LmdbSessionService]:
    service = LmdbSessionService(tmp_path / "sessions")
    try:
        yield service
    finally:
        service.close()


def blocked_until_handed_over(
    pool: Pool, block: Any, step: Callable[[], Any]
) -> tuple[bool, list[Any]]:
    """Hold `block` (a context manager: the lock or transaction `step` will wait for)
    on this thread until the server a pooled handler readied has run, or 10 s. The
    handler readies it, then runs `step`. Returns whether the server ran while `block`
    was held, and what the handler returned."""
    echo = start_on(pool, Echo())
    reached = threading.Event()
    driver = start_on(pool, Driver())
    all_idle(pool)

    def handler() -> Any:
        echo.cast(("set", reached))  # its wake-up is deferred: this worker owes it
        return step()

    with block:
        driver.cast(handler)
        handed_over = reached.wait(10)
    assert driver.server.done.wait(10), "the handler never returned"
    return handed_over, driver.server.outcomes


def test_an_lmdb_session_write_hands_the_readied_server_over(
    quiet_pool: Pool, sessions: LmdbSessionService
) -> None:
    """The write waits for LMDB's writer lock (held here by this thread, as another
    invocation's commit would): `_run` hands over before it begins."""
    handed_over, outcomes = blocked_until_handed_over(
        quiet_pool,
        sessions._env.begin(write=True),
        lambda: sessions.create_session("app", "user", "written").id,
    )
    assert handed_over, "the session write waited owing the readied server its thread"
    assert outcomes == ["written"]


def test_a_session_lock_wait_hands_the_readied_server_over(
    quiet_pool: Pool, sessions: LmdbSessionService
) -> None:
    """Another thread holds the session's lock (a turn, a history task): an operation
    on that session hands over before it waits for it."""
    sessions.create_session("app", "user", "locked")
    handed_over, outcomes = blocked_until_handed_over(
        quiet_pool,
        sessions.lock("app", "user", "locked"),
        lambda: sessions.get_session("app", "user", "locked").id,
    )
    assert handed_over, "the session operation waited owing the readied server its thread"
    assert outcomes == ["locked"]


def test_the_locks_context_manager_hands_the_readied_server_over(
    quiet_pool: Pool, sessions: LmdbSessionService
) -> None:
    """`SessionService.lock` itself: its wait hands over too."""

    def hold_it() -> str:
        with sessions.lock("app", "user", "held"):
            return "held"

    handed_over, outcomes = blocked_until_handed_over(
        quiet_pool, sessions.lock("app", "user", "held"), hold_it
    )
    assert handed_over
    assert outcomes == ["held"]


def test_a_ledger_write_hands_the_readied_server_over(quiet_pool: Pool, tmp_path: Path) -> None:
    """The LMDB workflow ledger: a step waits for LMDB's writer lock, then commits."""
    ledger = LmdbLedger(tmp_path / "ledger")
    try:
        handed_over, outcomes = blocked_until_handed_over(
            quiet_pool,
            ledger._shared.env.begin(write=True),
            lambda: ledger.create("inv-1", META, CP0),
        )
        assert handed_over, "the ledger write waited owing the readied server its thread"
        assert outcomes == [None]
        assert ledger.get("inv-1").revision == 0
    finally:
        ledger.close()


def test_a_ledger_read_hands_the_readied_server_over(quiet_pool: Pool, tmp_path: Path) -> None:
    """A ledger read passes the lock a write holds through its commit."""
    ledger = LmdbLedger(tmp_path / "ledger")
    try:
        ledger.create("inv-1", META, CP0)
        handed_over, outcomes = blocked_until_handed_over(
            quiet_pool, ledger._shared.lock, lambda: ledger.get("inv-1").revision
        )
        assert handed_over
        assert outcomes == [0]
    finally:
        ledger.close()
