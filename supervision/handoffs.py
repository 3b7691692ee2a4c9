"""One-shot handoffs: how a starter gives a new process what its child spec must not hold.

A supervisor keeps every child spec, shows it in reports and may start it again, so a
spec whose start function closed over a request (a runner, a plan's adapters, anything
holding credentials) would leak it into reports and could replay it on a restart.
Instead the starter `put`s the arguments into a `OneShotHandoffs` table and gives the
spec only the opaque reference it gets back; the child `take`s them exactly once in its
`init` (a restarted or duplicate child finds nothing and should stop); and the starter
`discard`s the reference once `start_child` has returned, whatever happened, so an
entry no child took (a failed start) never stays behind.

The table is bounded: `put` refuses with `HandoffsFull` beyond `max_pending` entries
waiting to be taken. A second `take` of a reference says `HandoffTaken` until the
starter discards it (the table remembers at most `max_pending` taken references, the
oldest forgotten first); any other reference says `UnknownHandoff`. Every method is
thread-safe: starters and the children they start run in different threads.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

from supervision.entropy import random_bytes
from supervision.errors import KernelError

T = TypeVar("T")

DEFAULT_MAX_PENDING = 10_000
"""How many entries a table holds untaken unless told otherwise."""


class HandoffError(KernelError):
    """A handoff table refused; the subclass (and `reason`) says why."""


class HandoffsFull(HandoffError):
    """`put` found `max_pending` entries waiting to be taken (reason ``busy``)."""

    def __init__(self, max_pending: int) -> None:
        super().__init__("busy", f"{max_pending} handoffs are waiting to be taken")
        self.max_pending = max_pending


class HandoffTaken(HandoffError):
    """`take` of a reference that was taken already (reason ``handoff_taken``)."""

    def __init__(self) -> None:
        super().__init__("handoff_taken", "this handoff was already taken")


class UnknownHandoff(HandoffError):
    """`take` of a reference this table never handed out, or one its starter withdrew
    (reason ``unknown_handoff``)."""

    def __init__(self) -> None:
        super().__init__("unknown_handoff", "no handoff under this reference")


class OneShotHandoffs(Generic[T]):
    """A bounded, locked table of values waiting for the process they were put for;
    each is taken at most once (see the module doc).

    `prefix` starts every reference (``"<prefix>-<32 hex digits>"``), so a reference
    in a report says which table it belongs to and nothing else.
    """

    def __init__(self, max_pending: int = DEFAULT_MAX_PENDING, *, prefix: str = "handoff") -> None:
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
            raise ValueError("max_pending is an int >= 1")
        self._lock = threading.Lock()
        self._pending: dict[str, T] = {}
        self._taken: dict[str, None] = {}
        self._max_pending = max_pending
        self._prefix = prefix

    @property
    def max_pending(self) -> int:
        return self._max_pending

    def put(self, value: T) -> str:
        """Store `value`; returns the fresh, opaque reference a child spec may carry.
        Raises `HandoffsFull` when `max_pending` entries are waiting already."""
        ref = f"{self._prefix}-{random_bytes(16).hex()}"  # unguessable; no UUID object made
        with self._lock:
            if len(self._pending) >= self._max_pending:
                raise HandoffsFull(self._max_pending)
            self._pending[ref] = value
        return ref

    def take(self, ref: object) -> T:
        """The value under `ref`, removed: this succeeds once per reference. Raises
        `HandoffTaken` if it was taken already (and not yet discarded), else
        `UnknownHandoff` (never handed out, withdrawn, or not a string)."""
        with self._lock:
            if isinstance(ref, str) and ref in self._pending:
                value = self._pending.pop(ref)
                if len(self._taken) >= self._max_pending:
                    del self._taken[next(iter(self._taken))]
                self._taken[ref] = None
                return value
            taken = isinstance(ref, str) and ref in self._taken
        if taken:
            raise HandoffTaken()
        raise UnknownHandoff()

    def discard(self, ref: object) -> bool:
        """Withdraw `ref` once its start has returned: an untaken value is dropped (True)
        and a taken reference is forgotten (False). Safe to call in any case."""
        if not isinstance(ref, str):
            return False
        with self._lock:
            self._taken.pop(ref, None)
            return self._pending.pop(ref, None) is not None

    def pending(self) -> int:
        """How many values wait to be taken (a leak check: 0 when no start is in flight)."""
        with self._lock:
            return len(self._pending)
