"""`From`: a pending call's reply slot, handed to `handle_call` as `from_`.

Exactly one of a reply, the callee's death or the caller's timeout settles a slot: a
one-item list whose atomic `pop` decides, and a lock the waiting caller blocks on.
`aio` and `requests` subclass it to wake an event loop or to send a message instead.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any

from supervision import crash_report
from supervision.errors import ProcessExit
from supervision.pid import Pid
from supervision.signals import Reason
from supervision.wakeups import blocking_hook


class From:
    """A pending call's reply slot, handed to `handle_call` as `from_`.

    Exactly one of reply, callee death (it is also the caller's monitor on the
    callee) or the caller's timeout settles it; whichever comes later is ignored.
    """

    __slots__ = ("_claim", "_failed", "_lock", "_value")

    def __init__(self) -> None:
        self._claim = [True]  # list.pop is atomic: whoever pops first settles the slot
        self._value: Any = None
        self._failed = False
        self._lock = threading.Lock()
        self._lock.acquire()

    def __repr__(self) -> str:
        return f"<From {id(self):#x}>"

    @property
    def failed(self) -> bool:
        """True when the callee's exit (not a reply) settled the slot; `value` is then
        its exit reason. Meaningful once `wait` returned True."""
        return self._failed

    @property
    def value(self) -> Any:
        """The reply, or the callee's exit reason when `failed`."""
        return self._value

    def settle(self, value: Any, failed: bool) -> bool:
        """Settle the slot with a reply (or, `failed`, an exit reason); False if it
        already was settled or timed out."""
        try:
            self._claim.pop()
        except IndexError:
            return False
        self._value = value
        self._failed = failed
        self._wake()
        return True

    def claim_for_timeout(self) -> bool:
        """Close the slot unsettled (a timeout, a cancelled request); False if it
        was settled first."""
        try:
            self._claim.pop()
        except IndexError:
            return False
        return True

    def _wake(self) -> None:
        self._lock.release()

    def notify_down(self, ref: Hashable, pid: Pid, reason: Reason) -> None:
        self.settle(reason, True)

    def wait(self, timeout: float | None) -> bool:
        """Block until settled; False on timeout (and the slot is then closed). A pool
        worker that is about to block first wakes the threads it owes (`wakeups`): the
        server it called may be waiting for exactly that. Not when it will not block: a
        slot already settled, or a poll (`timeout` <= 0), keeps its deferred wake-ups."""
        lock = self._lock
        if lock.acquire(False):  # settled already: nothing blocks, nothing to hand over
            return True
        if timeout is None or timeout > 0:
            owing = blocking_hook.owing  # `wakeups.before_blocking`, inline
            if owing is not None and owing.owed:
                owing.hand_over()
            if lock.acquire(True, -1 if timeout is None else timeout):
                return True
        if self.claim_for_timeout():
            return False
        self._lock.acquire()  # settled right at the deadline: the value is on its way
        return True

    def result(self) -> Any:
        """The reply; raises `ProcessExit` with the exit reason when `failed`."""
        if self._failed:
            raise ProcessExit(
                self._value, f"the server exited: {crash_report.format_reason(self._value)}"
            )
        return self._value
