"""Holding Ctrl-C back while the main thread runs a step that must not stop halfway (a
supervisor's direct start: its bookkeeping and the child's start).

Python runs a signal handler on the main thread between any two bytecodes, and the
default SIGINT handler raises `KeyboardInterrupt` there. `signals_deferred` swaps the
Python-level handlers of `DEFERRED` (SIGINT, SIGTERM) for one that only notes the
signal, and on leaving puts them back and runs each noted signal's handler, as a
delivery that came just then. Other signals are left alone: an alarm (pytest-timeout's
SIGALRM, a watchdog) still interrupts a start that hangs, as any handler the
application installed for its own signals does.

While the block marks a part of it `interruptible` (the child's own start function, not
the supervisor's bookkeeping around it), the same signal a second time is delivered at
once, where it lands: a second Ctrl-C still stops a child whose start hangs (its error
reaches the block's caller even if the child's start caught it). Handlers that are not
Python callables (``SIG_DFL``, ``SIG_IGN``) are left alone. A handler that the step
installs is kept; one it saved and puts back later (the noting one) forwards to the
handler it replaced once the block is over. Elsewhere than on the main thread, or inside
another `signals_deferred`, it does nothing.
"""

from __future__ import annotations

# `signal.getsignal` and `signal.signal` wrap these C functions to map ints to enums,
# failing over to the handler with a caught ValueError: 20x slower on a callable. The
# C functions take and return ints and handlers alike, which is all this module needs.
import _signal  # type: ignore[import-not-found]  # CPython's C module: no stubs
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from threading import get_ident, main_thread
from types import FrameType
from typing import Any

DEFERRED = (int(signal.SIGINT), int(signal.SIGTERM))
"""The signals held back: those that stop a program (Ctrl-C, a service manager's stop)."""

Handler = Callable[[int, FrameType | None], Any]

_getsignal: Callable[[int], object] = _signal.getsignal
_set_handler: Callable[[int, object], object] = _signal.signal


class _Deferral:
    """The handlers swapped out by one `signals_deferred`, and the signals noted."""

    __slots__ = ("done", "insisted", "interruptible", "noted", "saved")

    def __init__(self) -> None:
        self.saved: dict[int, Handler] = {}
        self.noted: list[int] = []
        self.interruptible = False
        self.insisted: BaseException | None = None
        """What a handler run at once raised: the block's caller gets it in the end."""
        self.done = False

    def note(self, signum: int, frame: FrameType | None) -> None:
        handler = self.saved[signum]  # installed only in place of a saved handler
        if self.done:
            handler(signum, frame)  # a noting handler put back after its block: forward
            return
        if signum not in self.noted:
            self.noted.append(signum)
            return
        if not self.interruptible:
            return  # held once already: one delivery at the end serves both
        # A second one while the first waits, in a part that may stop: the sender insists
        # (a second Ctrl-C on a start that hangs). Its handler runs now, once for both.
        self.noted.remove(signum)
        try:
            handler(signum, frame)
        except BaseException as error:
            self.insisted = self.insisted or error
            raise


_active: _Deferral | None = None


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Run the block with the main thread's SIGINT and SIGTERM handlers deferred (see
    the module doc); a no-op elsewhere. A signal noted meanwhile reaches its handler when
    the block is left, whether it returned or raised."""
    global _active
    if _active is not None or get_ident() != main_thread().ident:
        yield
        return
    deferral = _Deferral()
    _active = deferral
    try:
        _swap(deferral)
        yield
    finally:
        _active = None
        deferral.done = True
        try:
            try:
                _restore(deferral)
            finally:
                _deliver(deferral.noted)
        finally:
            # An insisted signal's error may have been caught inside the block (a
            # child's init that crashed with it): its caller gets it all the same.
            if deferral.insisted is not None:
                raise deferral.insisted


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside `signals_deferred`, mark the part of the step that a signal sent twice may
    stop (the child's own start function); elsewhere, nothing."""
    deferral = _active
    if deferral is None or get_ident() != main_thread().ident:
        yield
        return
    outer, deferral.interruptible = deferral.interruptible, True
    try:
        yield
    finally:
        deferral.interruptible = outer  # a grandchild's start inside a child's: still in it


def _swap(deferral: _Deferral) -> None:
    """Put `deferral.note` in place of each deferred Python-level handler, recorded
    before it is swapped. `signal.signal` runs handlers of signals already pending
    before it swaps, so one may raise here: the block then never starts, and whatever
    was swapped is put back."""
    note = deferral.note
    for signum in DEFERRED:
        handler = _getsignal(signum)
        if callable(handler):
            deferral.saved[signum] = handler
            _set_handler(signum, note)


def _restore(deferral: _Deferral) -> None:
    """Put every swapped handler back, unless the block set another one meanwhile. A
    pending signal whose handler raises as `signal.signal` runs it leaves that handler
    unchanged: it is tried again, and the first such error is raised once all are back."""
    error: BaseException | None = None
    note = deferral.note
    for signum, handler in deferral.saved.items():
        while True:
            try:
                if _getsignal(signum) == note:
                    _set_handler(signum, handler)
                break
            except BaseException as raised:  # a pending handler ran first, and raised
                error = error or raised
    if error is not None:
        raise error


def _deliver(noted: list[int]) -> None:
    """Run each noted signal's handler now, in the order first noted: the handler in
    place (the one put back, or the block's own), called directly (raising the signal
    again would also write an asyncio loop's wake-up fd a second time); under ``SIG_DFL``
    the signal is raised again for its default action, under ``SIG_IGN`` dropped. Every
    handler runs even if an earlier one raised; the first error is raised then."""
    error: BaseException | None = None
    for signum in noted:
        try:
            handler = _getsignal(signum)
            if callable(handler):
                handler(signum, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)
        except BaseException as raised:
            error = error or raised
    if error is not None:
        raise error


def _forget_in_child() -> None:
    """A process forked inside a block (a child's start that forks a worker) gets its
    handlers back at once and delivers nothing of its parent's."""
    deferral = _active
    if deferral is None:
        return
    deferral.noted.clear()
    deferral.done = True
    note = deferral.note
    for signum, handler in deferral.saved.items():
        if _getsignal(signum) == note:
            _set_handler(signum, handler)


os.register_at_fork(after_in_child=_forget_in_child)
