"""Holding the main thread's signal handlers back while it runs a step that must not
stop halfway (a supervisor's direct start: its bookkeeping and the child's init).

Python runs a signal handler on the main thread between any two bytecodes, and the
default SIGINT handler raises `KeyboardInterrupt` there. `signals_deferred` swaps each
Python-level handler for one that only notes the signal, and on leaving puts the
handlers back and raises each noted signal again (`signal.raise_signal`), so its own
handler runs at once, as a delivery that came just then. The same signal again while
the first is held is delivered at once, where it lands: a second Ctrl-C still stops a
step that hangs (and may leave it halfway, as without the deferral); what its handler
raises reaches the block's caller even if the step caught it. Handlers that are not
Python callables (``SIG_DFL``, ``SIG_IGN``) are left alone: they never run Python
code. A handler that the step itself installs is kept. Elsewhere than on the main
thread, or inside another `signals_deferred`, it does nothing: no handler runs there
anyway.
"""

from __future__ import annotations

# `signal.getsignal` and `signal.signal` wrap these C functions to map ints to enums,
# failing over to the handler with a caught ValueError: 20x slower on a callable. The
# C functions take and return ints and handlers alike, which is all this module needs.
import _signal  # type: ignore[import-not-found]  # CPython's C module: no stubs
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from threading import get_ident, main_thread
from types import FrameType
from typing import Any

_CATCHABLE = tuple(
    int(signum) for signum in sorted(signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP})
)
"""The signals a handler can be set for (a fixed set, read once)."""

Handler = Callable[[int, FrameType | None], Any]

_getsignal: Callable[[int], object] = _signal.getsignal
_set_handler: Callable[[int, object], object] = _signal.signal


class _Deferral:
    """The handlers swapped out by one `signals_deferred`, and the signals noted."""

    __slots__ = ("insisted", "noted", "saved")

    def __init__(self) -> None:
        self.saved: list[tuple[int, Handler]] = []
        self.noted: list[int] = []
        self.insisted: BaseException | None = None
        """What a handler run at once raised: the block's caller gets it in the end."""

    def note(self, signum: int, frame: FrameType | None) -> None:
        if signum not in self.noted:
            self.noted.append(signum)
            return
        # A second one while the first waits: the sender insists (a second Ctrl-C on a
        # start that hangs). Its handler runs now, where it lands, and only this once.
        self.noted.remove(signum)
        for saved, handler in self.saved:
            if saved == signum:
                try:
                    handler(signum, frame)
                except BaseException as error:
                    self.insisted = self.insisted or error
                    raise


_active: _Deferral | None = None


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Run the block with the main thread's Python signal handlers deferred (see the
    module doc); a no-op elsewhere. A signal noted meanwhile reaches its handler when
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


def _swap(deferral: _Deferral) -> None:
    """Put `deferral.note` in place of each Python-level handler. `signal.signal` runs
    handlers of signals already pending before it swaps, so one may raise here: the
    block then never starts, and the handlers swapped so far are put back."""
    note = deferral.note
    for signum, handler in zip(_CATCHABLE, map(_getsignal, _CATCHABLE), strict=True):
        if callable(handler):
            _set_handler(signum, note)
            deferral.saved.append((signum, handler))


def _restore(deferral: _Deferral) -> None:
    """Put every swapped handler back, unless the block set another one meanwhile. A
    pending signal whose handler raises as `signal.signal` runs it leaves that handler
    unchanged: it is tried again, and the first such error is raised once all are back."""
    error: BaseException | None = None
    note = deferral.note
    for signum, handler in deferral.saved:
        while _getsignal(signum) == note:
            try:
                _set_handler(signum, handler)
            except BaseException as raised:  # a pending handler ran first, and raised
                error = error or raised
    if error is not None:
        raise error


def _deliver(noted: list[int]) -> None:
    """Raise each noted signal again, in the order first noted: its handler runs as the
    raise returns. Every handler runs even if an earlier one raised; the first error is
    raised once all have run."""
    error: BaseException | None = None
    for signum in noted:
        try:
            signal.raise_signal(signum)
        except BaseException as raised:
            error = error or raised
    if error is not None:
        raise error
