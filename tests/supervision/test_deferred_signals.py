"""`signals_deferred`: the main thread's SIGINT and SIGTERM handlers held back during a
step and run once it is left; other signals untouched; a no-op elsewhere (real
signals, raised on this process; the fixture installs handlers first, so neither
signal ever reaches its default action)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from supervision import deferred_signals
from supervision.deferred_signals import interruptible, signals_deferred


class Interrupted(Exception):
    pass


@pytest.fixture
def handlers() -> Iterator[list[int]]:
    """SIGINT raises `Interrupted`, SIGTERM and SIGUSR1 only record; all put back after."""
    seen: list[int] = []

    def raising(signum, frame):
        seen.append(signum)
        raise Interrupted

    def recording(signum, frame):
        seen.append(signum)

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers run on the main thread only")
    previous = {
        signal.SIGINT: signal.signal(signal.SIGINT, raising),
        signal.SIGTERM: signal.signal(signal.SIGTERM, recording),
        signal.SIGUSR1: signal.signal(signal.SIGUSR1, recording),
    }
    try:
        yield seen
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        assert deferred_signals._active is None


def test_a_signal_in_the_block_reaches_its_handler_once_the_block_is_left(handlers):
    original = signal.getsignal(signal.SIGINT)
    finished = []
    with pytest.raises(Interrupted), signals_deferred():
        signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) != original  # swapped meanwhile
        finished.append("block")  # not interrupted halfway
        assert handlers == []
    assert finished == ["block"]
    assert handlers == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) == original


def test_other_signals_are_not_held(handlers):
    """An application's own signal (or an alarm: pytest-timeout's SIGALRM must still
    stop a start that hangs) keeps its handler and lands at once."""
    usr1 = signal.getsignal(signal.SIGUSR1)
    with signals_deferred():
        assert signal.getsignal(signal.SIGUSR1) is usr1
        signal.raise_signal(signal.SIGUSR1)
        assert handlers == [signal.SIGUSR1]


def test_every_noted_signal_is_delivered_even_when_the_first_handler_raises(handlers):
    with pytest.raises(Interrupted), signals_deferred():
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGTERM)
    assert handlers == [signal.SIGINT, signal.SIGTERM]  # in the order noted


def test_outside_an_interruptible_part_a_signal_twice_is_still_held_once(handlers):
    """The supervisor's own bookkeeping never stops halfway: a second Ctrl-C there is
    held like the first, and both are one delivery when the block ends."""
    with pytest.raises(Interrupted), signals_deferred():
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)
        assert handlers == []
    assert handlers == [signal.SIGINT]


def test_in_an_interruptible_part_the_same_signal_again_is_delivered_at_once(handlers):
    """A second Ctrl-C on a child's start that hangs: the sender insists, the start
    stops there, and the handler runs once for both."""
    reached = []
    with pytest.raises(Interrupted), signals_deferred():
        signal.raise_signal(signal.SIGTERM)
        with interruptible():
            signal.raise_signal(signal.SIGTERM)  # insisting: delivered now
            assert handlers == [signal.SIGTERM]
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)  # its handler raises here
            reached.append("after")
    assert reached == []
    assert handlers == [signal.SIGTERM, signal.SIGINT]  # each once
    assert signal.getsignal(signal.SIGTERM) is not None


def test_when_several_handlers_raise_every_one_runs_and_the_first_error_wins(handlers):
    def other(signum, frame):
        handlers.append(signum)
        raise KeyError("second")

    signal.signal(signal.SIGTERM, other)
    with pytest.raises(Interrupted), signals_deferred():
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGTERM)
    assert handlers == [signal.SIGINT, signal.SIGTERM]


def test_a_block_that_raises_still_delivers_and_puts_handlers_back(handlers):
    original = signal.getsignal(signal.SIGINT)
    with pytest.raises(ValueError), signals_deferred():
        signal.raise_signal(signal.SIGTERM)
        raise ValueError("the step failed")
    assert handlers == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGINT) is original


def test_a_handler_the_block_installs_is_kept_and_gets_its_signal(handlers):
    def mine(signum, frame):
        handlers.append(-signum)

    with signals_deferred():
        signal.signal(signal.SIGTERM, mine)
        signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is mine
    assert handlers == [-signal.SIGTERM]


def test_a_noting_handler_saved_and_put_back_by_the_block_forwards_afterwards(handlers):
    """An init that saves the handler it replaces and restores it later (the daemon's
    pattern) puts the noting handler back: it hands every later signal to the handler
    it stood in for, so none is lost."""
    with signals_deferred():
        saved = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    signal.signal(signal.SIGTERM, saved)  # the block's noting handler, put back late
    signal.raise_signal(signal.SIGTERM)
    signal.raise_signal(signal.SIGTERM)
    assert handlers == [signal.SIGTERM, signal.SIGTERM]


def test_nested_blocks_deliver_when_the_outer_one_is_left(handlers):
    with signals_deferred():
        with signals_deferred():
            signal.raise_signal(signal.SIGTERM)
        assert handlers == []
    assert handlers == [signal.SIGTERM]


def test_ignored_and_default_dispositions_are_left_alone(handlers):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with signals_deferred():
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        signal.raise_signal(signal.SIGTERM)  # ignored, as without the block
    assert handlers == []


def test_an_insisted_signals_error_reaches_the_caller_even_if_the_block_caught_it(handlers):
    """A second Ctrl-C landing in a child's init: the init crashes with it and the start
    is refused, but the caller gets the interrupt, with the refusal as its context."""
    with pytest.raises(Interrupted) as raised, signals_deferred():
        signal.raise_signal(signal.SIGINT)
        try:
            with interruptible():
                signal.raise_signal(signal.SIGINT)
        except Interrupted:
            raise RuntimeError("init crashed") from None
    assert isinstance(raised.value.__context__, RuntimeError)
    assert handlers == [signal.SIGINT]


def test_a_process_forked_in_the_block_gets_its_handlers_back_and_nothing_held(handlers):
    with signals_deferred():
        signal.raise_signal(signal.SIGTERM)  # held in the parent
        child = os.fork()
        if child == 0:  # the child: its own handler at once, nothing of the parent's
            ok = signal.getsignal(signal.SIGTERM) is not None and handlers == []
            signal.raise_signal(signal.SIGTERM)
            os._exit(0 if ok and handlers == [signal.SIGTERM] else 3)
        _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert handlers == [signal.SIGTERM]  # the parent's, once


def test_off_the_main_thread_it_changes_nothing(handlers):
    seen = []

    def other() -> None:
        with signals_deferred():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(10)
    assert seen == [signal.getsignal(signal.SIGTERM)]
