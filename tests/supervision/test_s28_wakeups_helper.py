"""`supervision.wakeups`, the one-shot lock wake-up that mailboxes and both thread pools
share (review of d415031, finding 5: the protocol was written out three times, and
findings 1 and 2 were the same missing clean-up made in two of the copies).

What it must keep: no wake-up is lost or given twice, even with threads switching
every microsecond and timeouts of 0, a fraction of a millisecond or none; and whatever
ends a wait (a wake-up, the timeout, an exception raised while waiting) the sleeper
holds the guard and its wake lock again, and is no longer registered."""

from __future__ import annotations

import ctypes
import random
import signal
import sys
import threading
from _thread import LockType
from collections.abc import Callable, Iterator

import pytest

from supervision.wakeups import held_lock, sleep, wake_all, wake_one
from tests.helpers import wait_until


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Threads switch every microsecond: races that need an unlucky switch show up."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _room() -> tuple[LockType, list[LockType], LockType]:
    """A guard, its (empty) list of sleepers, and a wake lock, held."""
    return threading.Lock(), [], held_lock()


class _Semaphore:
    """A counting semaphore built on the helper: `take` sleeps while there is no token,
    `give` adds one and wakes one sleeper (or, now and then, all of them). Counts the
    wake-ups given (locks popped by a waker) and received (`sleep` returned True)."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.sleepers: list[LockType] = []
        self.tokens = 0
        self.given = 0
        self.received = 0
        self.wakes: list[LockType] = []

    def take(self, wake: LockType, timeout: float) -> None:
        with self.guard:
            while not self.tokens:
                if sleep(self.guard, self.sleepers, wake, timeout):
                    self.received += 1
                assert wake not in self.sleepers and self.guard.locked()
            self.tokens -= 1

    def give(self, rng: random.Random) -> None:
        with self.guard:
            self.tokens += 1
            if self.sleepers:
                if rng.random() < 0.2:
                    self.given += len(self.sleepers)
                    wake_all(self.sleepers)
                else:
                    self.given += 1
                    wake_one(self.sleepers)


@pytest.mark.parametrize("seed", range(3))
def test_racing_sleepers_and_wakers_lose_no_wake_up_and_leave_every_lock_held(
    fast_switching: None, seed: int
) -> None:
    semaphore = _Semaphore()
    takes, takers, givers = 300, 6, 3
    timeouts: list[float] = [0.0, 1e-4, 1e-3, -1]  # -1: no limit
    failures: list[BaseException] = []
    wakes = [held_lock() for _ in range(takers)]

    def taker(index: int) -> None:
        rng = random.Random(seed * 100 + index)
        try:
            for _ in range(takes):
                semaphore.take(wakes[index], rng.choice(timeouts))
        except BaseException as exc:
            failures.append(exc)

    def giver(index: int) -> None:
        rng = random.Random(seed * 100 + 50 + index)
        for _ in range(takes * takers // givers):
            semaphore.give(rng)

    threads = [threading.Thread(target=taker, args=(i,)) for i in range(takers)]
    threads += [threading.Thread(target=giver, args=(i,)) for i in range(givers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a sleeper missed its wake-up"
    assert failures == []
    assert semaphore.tokens == 0 and semaphore.sleepers == []
    # every wake-up a waker gave was received by exactly one sleeper, none twice
    assert semaphore.given == semaphore.received
    assert all(wake.locked() for wake in wakes)  # each reusable for its next sleep
    assert not semaphore.guard.locked()


@pytest.mark.parametrize("timeout", [0.0, 1e-4])
def test_a_timeout_of_zero_or_a_short_one_returns_false_and_unregisters(timeout: float) -> None:
    guard, sleepers, wake = _room()
    with guard:
        assert sleep(guard, sleepers, wake, timeout) is False
        assert guard.locked()
    assert sleepers == [] and wake.locked()


@pytest.mark.parametrize("timeout", [float("inf"), 1e10, -0.5, float("nan")])
def test_a_timeout_a_lock_cannot_wait_raises_and_leaves_nothing_behind(timeout: float) -> None:
    # (callers bound their timeouts: `receive` waits for ever past TIMEOUT_MAX)
    guard, sleepers, wake = _room()
    with guard:
        with pytest.raises((OverflowError, ValueError)):
            sleep(guard, sleepers, wake, timeout)
        assert guard.locked()
    assert sleepers == [] and wake.locked()


def test_no_timeout_waits_until_woken() -> None:
    guard, sleepers, wake = _room()
    threading.Timer(0.05, lambda: _wake_when_asleep(guard, sleepers)).start()
    with guard:
        assert sleep(guard, sleepers, wake, -1) is True
    assert sleepers == [] and wake.locked()


def _wake_when_asleep(guard: LockType, sleepers: list[LockType]) -> None:
    while True:
        with guard:
            if sleepers:
                wake_one(sleepers)
                return


def _ctrl_c_main_thread_when(registered: Callable[[], bool]) -> None:
    """Ctrl-C for the main thread once it is registered as a sleeper (blocked in its
    wait, or about to block): a real SIGINT, which interrupts a blocked lock wait
    (`_thread.interrupt_main` only flags it for the next bytecode)."""
    wait_until(registered)
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


@pytest.mark.parametrize("timeout", [-1, 30.0])
def test_an_interrupted_wait_leaves_no_sleeper_and_holds_guard_and_wake(
    timeout: float,
) -> None:
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT does not raise KeyboardInterrupt here")
    # (review finding 1: the mailbox's copy left its sleeper registered on Ctrl-C)
    assert threading.current_thread() is threading.main_thread()
    guard, sleepers, wake = _room()
    for _ in range(5):
        interrupter = threading.Thread(
            target=_ctrl_c_main_thread_when, args=(lambda: bool(sleepers),)
        )
        interrupter.start()
        with guard:
            with pytest.raises(KeyboardInterrupt):
                sleep(guard, sleepers, wake, timeout)
            assert guard.locked()  # re-taken before the exception left `sleep`
            assert sleepers == []
        interrupter.join(5)
        assert wake.locked()
    # and the next sleep is woken as usual
    threading.Thread(target=_wake_when_asleep, args=(guard, sleepers)).start()
    with guard:
        assert sleep(guard, sleepers, wake, -1) is True


def _raise_in(thread: threading.Thread, exc_type: type[BaseException]) -> None:
    ident = thread.ident
    assert ident is not None
    set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    assert set_async_exc(ctypes.c_ulong(ident), ctypes.py_object(exc_type)) == 1


def _blocked_in_sleep(thread: threading.Thread) -> bool:
    """True once `thread` waits inside `sleep`'s own wait (its frame is at that line)."""
    frame = sys._current_frames().get(thread.ident or -1)
    return (
        frame is not None
        and frame.f_code is sleep.__code__
        and "wake.acquire(True" in _line(frame.f_code.co_filename, frame.f_lineno)
    )


def _line(filename: str, lineno: int) -> str:
    with open(filename, encoding="utf-8") as source:
        return source.read().splitlines()[lineno - 1]


class _Stop(Exception):
    """Raised in a sleeping thread from outside."""


def test_an_exception_raised_as_a_wake_up_lands_leaves_the_wake_lock_held_not_deadlocked() -> None:
    # The exception arrives just after the wait succeeded (the waker popped and released
    # the lock, and this thread took it): the clean-up must not block re-taking it.
    guard, sleepers, wake = _room()
    outcome: list[object] = []

    def sleeper() -> None:
        try:
            with guard:
                sleep(guard, sleepers, wake, -1)
        except _Stop as exc:
            outcome.append(exc)

    thread = threading.Thread(target=sleeper)
    thread.start()
    wait_until(lambda: _blocked_in_sleep(thread))
    _raise_in(thread, _Stop)  # delivered when the thread runs Python code again
    with guard:
        wake_one(sleepers)
    thread.join(5)
    assert not thread.is_alive() and len(outcome) == 1
    assert sleepers == [] and wake.locked() and not guard.locked()


def test_an_exception_raised_as_the_timeout_ends_the_wait_unregisters_the_sleeper() -> None:
    guard, sleepers, wake = _room()
    outcome: list[object] = []

    def sleeper() -> None:
        try:
            with guard:
                sleep(guard, sleepers, wake, 0.2)
        except _Stop as exc:
            outcome.append(exc)

    thread = threading.Thread(target=sleeper)
    thread.start()
    wait_until(lambda: _blocked_in_sleep(thread))
    _raise_in(thread, _Stop)
    thread.join(5)
    assert not thread.is_alive() and len(outcome) == 1
    assert sleepers == [] and wake.locked() and not guard.locked()


def test_wake_all_wakes_every_sleeper_once_and_empties_the_list() -> None:
    guard, sleepers, _ = _room()
    woken: list[bool] = []

    def sleeper() -> None:
        wake = held_lock()
        with guard:
            woken.append(sleep(guard, sleepers, wake, 10))

    threads = [threading.Thread(target=sleeper) for _ in range(4)]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(sleepers) == 4)
    with guard:
        wake_all(sleepers)
        assert sleepers == []
    for thread in threads:
        thread.join(5)
    assert woken == [True] * 4
