"""`signals_deferred`: the main thread's Python signal handlers held back during a step
and run once it is left; a no-op elsewhere (real signals, raised on this process)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest

from supervision.deferred_signals import signals_deferred


class Interrupted(Exception):
    pass


@pytest.fixture
def handlers() -> Iterator[list[int]]:
    """SIGUSR1 raises `Interrupted`, SIGUSR2 only records; both put back afterwards."""
    seen: list[int] = []

    def raising(signum, frame):
        seen.append(signum)
        raise Interrupted

    def recording(signum, frame):
        seen.append(signum)

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers run on the main thread only")
    previous = signal.signal(signal.SIGUSR1, raising), signal.signal(signal.SIGUSR2, recording)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGUSR1, previous[0])
        signal.signal(signal.SIGUSR2, previous[1])


def test_a_signal_in_the_block_reaches_its_handler_once_the_block_is_left(handlers):
    original = signal.getsignal(signal.SIGUSR1)
    finished = []
    with pytest.raises(Interrupted), signals_deferred():
        signal.raise_signal(signal.SIGUSR1)
        assert signal.getsignal(signal.SIGUSR1) != original  # swapped meanwhile
        finished.append("block")  # not interrupted halfway
        assert handlers == []
    assert finished == ["block"]
    assert handlers == [signal.SIGUSR1]
    assert signal.getsignal(signal.SIGUSR1) == original


def test_every_noted_signal_is_delivered_even_when_the_first_handler_raises(handlers):
    with pytest.raises(Interrupted), signals_deferred():
        signal.raise_signal(signal.SIGUSR1)
        signal.raise_signal(signal.SIGUSR2)
    assert handlers == [signal.SIGUSR1, signal.SIGUSR2]  # in the order noted


def test_the_same_signal_again_while_held_is_delivered_at_once_and_only_then(handlers):
    """A second Ctrl-C on a step that hangs: the sender insists, the step stops."""
    reached = []
    with pytest.raises(Interrupted), signals_deferred():
        signal.raise_signal(signal.SIGUSR2)
        signal.raise_signal(signal.SIGUSR2)  # insisting: delivered now
        assert handlers == [signal.SIGUSR2]
        signal.raise_signal(signal.SIGUSR1)
        signal.raise_signal(signal.SIGUSR1)  # its handler raises here
        reached.append("after")
    assert reached == []
    assert handlers == [signal.SIGUSR2, signal.SIGUSR1]  # each once
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_when_several_handlers_raise_every_one_runs_and_the_first_error_wins(handlers):
    def other(signum, frame):
        handlers.append(signum)
        raise KeyError("second")

    signal.signal(signal.SIGUSR2, other)
    with pytest.raises(Interrupted), signals_deferred():
        signal.raise_signal(signal.SIGUSR1)
        signal.raise_signal(signal.SIGUSR2)
    assert handlers == [signal.SIGUSR1, signal.SIGUSR2]


def test_a_block_that_raises_still_delivers_and_puts_handlers_back(handlers):
    with pytest.raises(ValueError), signals_deferred():
        signal.raise_signal(signal.SIGUSR2)
        raise ValueError("the step failed")
    assert handlers == [signal.SIGUSR2]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_handler_the_block_installs_is_kept_and_gets_its_signal(handlers):
    def mine(signum, frame):
        handlers.append(-signum)

    try:
        with signals_deferred():
            signal.signal(signal.SIGUSR2, mine)
            signal.raise_signal(signal.SIGUSR2)
        assert signal.getsignal(signal.SIGUSR2) is mine
        assert handlers == [-signal.SIGUSR2]
    finally:
        signal.signal(signal.SIGUSR2, signal.SIG_DFL)


def test_nested_blocks_deliver_when_the_outer_one_is_left(handlers):
    with signals_deferred():
        with signals_deferred():
            signal.raise_signal(signal.SIGUSR2)
        assert handlers == []
    assert handlers == [signal.SIGUSR2]


def test_ignored_and_default_dispositions_are_left_alone(handlers):
    previous = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        with signals_deferred():
            assert signal.getsignal(signal.SIGUSR2) == signal.SIG_IGN
            signal.raise_signal(signal.SIGUSR2)  # ignored, as without the block
        assert handlers == []
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_off_the_main_thread_it_changes_nothing(handlers):
    seen = []

    def other() -> None:
        with signals_deferred():
            seen.append(signal.getsignal(signal.SIGUSR2))

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(10)
    assert seen and seen[0] is not None and seen[0] == signal.getsignal(signal.SIGUSR2)


def test_an_insisted_signals_error_reaches_the_caller_even_if_the_block_caught_it(handlers):
    """A second Ctrl-C landing in a child's init: the init crashes with it and the start
    is refused, but the caller gets the interrupt, with the refusal as its context."""
    with pytest.raises(Interrupted) as raised, signals_deferred():
        signal.raise_signal(signal.SIGUSR1)
        try:
            signal.raise_signal(signal.SIGUSR1)
        except Interrupted:
            raise RuntimeError("init crashed") from None
    assert isinstance(raised.value.__context__, RuntimeError)
    assert handlers == [signal.SIGUSR1]
