"""One-shot lock wake-ups: how a kernel thread sleeps until another thread wakes it.

A mailbox's `receive`, an idle dispatch-pool worker and an idle sync-pool thread all
wait the same way, without a `threading.Condition` (a Python-level `notify` with an
ownership check on every hand-off). Each shared structure has a *guard* lock and a
list of *sleepers*; a sleeping thread blocks on a lock of its own (its *wake* lock),
which it holds. Under the guard, a waker pops a sleeper's lock from the list and
releases it: that one release is the wake-up.

`sleep` is the only delicate part, so it lives here once: register under the guard,
let the guard go, wait, take the guard back, and whatever ended the wait (a wake-up,
the timeout, or an exception such as Ctrl-C in the main thread) leave the list and
hold the wake lock again. Then a thread may keep one wake lock for all its sleeps,
and no waiter that is gone stays registered (as `Condition.wait` promised too).
"""

from __future__ import annotations

import threading
from _thread import LockType

__all__ = ["held_lock", "sleep", "wake_all", "wake_one"]


def held_lock() -> LockType:
    """A new lock, already acquired: a wake lock for `sleep`."""
    lock = threading.Lock()
    lock.acquire()
    return lock


def sleep(guard: LockType, sleepers: list[LockType], wake: LockType, timeout: float) -> bool:
    """Block until `wake_one`/`wake_all` take `wake` out of `sleepers`, or `timeout`
    seconds pass (-1: no limit, as for `Lock.acquire`). True if a waker took this
    sleeper out. Any other `timeout` outside 0..`threading.TIMEOUT_MAX` raises
    (`ValueError`, `OverflowError`), as any exception does below: callers bound theirs
    once, not on every sleep.

    The caller holds `guard` and `wake` on entry. On every way out, a return or an
    exception raised while waiting, it holds both again and `wake` is no longer in
    `sleepers`: a thread may reuse `wake` for its next sleep, and a wait that was
    interrupted leaves nothing behind. (Only a second exception landing as the guard is
    re-taken, a second Ctrl-C just then, can skip that, as in `Condition.wait`.)
    """
    sleepers.append(wake)
    woken = False
    try:
        guard.release()  # first in `try`: an exception can land only once it is done
        woken = wake.acquire(True, timeout)
    finally:
        guard.acquire()
        if not woken:  # timed out or interrupted, or a waker released `wake` just after
            if wake in sleepers:
                sleepers.remove(wake)
            else:  # a waker took it out (and released it, under the guard we now hold)
                wake.acquire(False)  # held again (False: it may be ours already)
                woken = True
    return woken


def wake_one(sleepers: list[LockType]) -> None:
    """Wake the sleeper that went to sleep last (hold the guard; `sleepers` is not
    empty). The last one first: its caches are warm, and the others' idle time runs
    on, so an idle pool thread at the bottom can time out and retire."""
    sleepers.pop().release()


def wake_all(sleepers: list[LockType]) -> None:
    """Wake every sleeper (hold the guard): each re-checks its own condition."""
    for wake in sleepers:
        wake.release()
    sleepers.clear()
