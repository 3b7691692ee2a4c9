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

A dispatch-pool worker may *defer* a wake-up: a process it readies waits for this
same worker, which takes it as soon as its handler returns, instead of waking another
thread that, on a GIL, would only take turns with it (a futex wake, a GIL hand-over,
and often a woken thread that finds the work already taken). A kernel wait that is
about to block calls `before_blocking` first: on such a worker it wakes the threads
it owes, so a handler blocked in a `call`, a `receive` or `wait_dead` never holds up
the processes it readied. Code that blocks where the kernel cannot see it (LMDB
commits, the session lock, `time.sleep`) calls the same hook, exported as
`supervision.before_blocking` (and, for a lock, `supervision.acquire_or_hand_over`);
a handler blocked in user code that does not is the pool watchdog's, which pays what
it owes within `block_warning / 2`.
"""

from __future__ import annotations

import threading
from _thread import LockType
from typing import Protocol

__all__ = [
    "Owing",
    "acquire_or_hand_over",
    "before_blocking",
    "blocking_hook",
    "held_lock",
    "on_blocking",
    "sleep",
    "wake_all",
    "wake_one",
]


class Owing:
    """What a thread that may defer wake-ups registers with `on_blocking`: `owed`, the
    wake-ups it deferred (0: nothing to pay, the common case), and `hand_over`, which
    pays them. A dispatch-pool worker is one."""

    __slots__ = ("owed",)

    def __init__(self) -> None:
        self.owed = 0

    def hand_over(self) -> None:
        """Wake the threads this one owes (called when `owed` is not 0)."""
        raise NotImplementedError


class _ThisThread(threading.local):
    """What `before_blocking` pays on this thread; a class-level None for every other
    thread (a missing attribute would cost a raised and caught AttributeError)."""

    owing: Owing | None = None


blocking_hook = _ThisThread()
"""This thread's `owing` (None on all but pool workers): `before_blocking` reads it,
and so does `From.wait` inline (a call's every reply wait)."""


def on_blocking(owing: Owing | None) -> None:
    """Make `owing` what `before_blocking` pays on the calling thread (None: no more):
    a dispatch-pool worker registers itself, whose `owed` counts its deferred wake-ups."""
    blocking_hook.owing = owing


def before_blocking() -> None:
    """Call just before this thread may block (a lock another thread may hold, I/O, a
    commit with fsync, a sleep, a wait) where the kernel cannot see it.

    In a pooled server's handler, a message the handler sent to another pooled server
    does not wake a thread for it: the worker runs that server itself once the handler
    returns. If the handler blocks first, the receiver waits for it, or for the pool
    watchdog's next look (at most `block_warning / 2`, 50 ms on the shared pool). This
    call wakes the threads the worker owes, so the receiver runs at once. Every kernel
    wait (`call`, `receive`, `wait_dead`, `Task.wait`) already calls it; code that
    blocks otherwise (a store's write transaction, a contended lock, `time.sleep`,
    sync I/O) calls it itself. Elsewhere, and when nothing is owed, it costs one
    thread-local read; it never blocks.
    """
    owing = blocking_hook.owing
    if owing is not None and owing.owed:
        owing.hand_over()


class Acquirable(Protocol):
    """A lock: `threading.Lock` or `threading.RLock`."""

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...


def acquire_or_hand_over(lock: Acquirable) -> None:
    """Acquire `lock`; if another thread holds it, call `before_blocking` first.

    The uncontended case costs one non-blocking acquire. A contended one will wait
    where the kernel cannot see it, so a pool worker first wakes the servers it readied
    and owes, which would otherwise wait in the ready queue until the lock is free.
    """
    if not lock.acquire(False):
        before_blocking()
        lock.acquire()


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
