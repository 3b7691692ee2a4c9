"""`Pid`: the opaque, hashable, printable handle of a process."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from supervision.process import Process

_pid_numbers = itertools.count(1)


class Exited:
    """What a `Pid` points to once its process has exited: only the exit reason.

    A process and its pid point at each other; swapping the process for this small
    record at exit breaks that cycle, so reference counting frees a finished process
    (and its server object, state, mailbox and context) at once instead of leaving it
    to the cyclic garbage collector. A pid held by anyone still answers `is_alive()`
    (False) and still tells its exit reason; `resolve` gives None for it.

    The swap comes first in the exit's propagation, before links, monitors, `on_exit`
    and `wait_dead` hear of it: whoever learns that a process died (an exit signal, a
    `Down`, `stop()` or `Task.wait` returning) finds its pid resolving to nothing, so
    the answers that depend on it (`call` gives ``noproc`` ...) never vary with timing.
    """

    __slots__ = ("exit_reason", "propagating")

    alive = False

    def __init__(self, exit_reason: Any, propagating: Process | None = None) -> None:
        self.exit_reason = exit_reason
        self.propagating = propagating
        """The process while its exit is still being propagated (links, monitors and
        `on_exit` under way), so that `finish_shutdown` can wait for it; None once done."""

    def __repr__(self) -> str:
        return f"<Exited {self.exit_reason!r}>"


class Pid:
    """A process identifier, printed like Erlang's ``<0.42>``.

    Equality and hashing use the number only. `is_alive()` tells whether the process
    still runs. While it runs, the pid refers to its process; from its exit on, only to
    an `Exited` record, so a pid kept anywhere never keeps a dead process (nor anything
    it held) in memory. A pid is an identity: copying it gives the pid itself.
    """

    __slots__ = ("_number", "_process")

    def __init__(self, process: Process) -> None:
        self._number = next(_pid_numbers)
        self._process: Process | Exited = process

    @property
    def number(self) -> int:
        return self._number

    def is_alive(self) -> bool:
        return self._process.alive

    def __repr__(self) -> str:
        return f"<0.{self._number}>"

    def __hash__(self) -> int:
        return self._number

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pid) and other._number == self._number

    def __lt__(self, other: Pid) -> bool:
        return self._number < other._number

    def __copy__(self) -> Pid:
        """A pid is an identity: a copy is the pid itself (a second `Pid` object would
        keep pointing to the process after its exit swapped the original)."""
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Pid:
        return self
