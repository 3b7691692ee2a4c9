"""`Pid`: the opaque, hashable, printable handle of a process."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from supervision.process import Process

_pid_numbers = itertools.count(1)


class Exited:
    """What a `Pid` points to once its process has exited and the exit has been fully
    propagated (links, monitors and `on_exit` done): only the exit reason.

    A process and its pid point at each other; swapping the process for this small
    record at exit breaks that cycle, so reference counting frees a finished process
    (and its server object, state, mailbox and context) at once instead of leaving it
    to the cyclic garbage collector. A pid held by anyone still answers `is_alive()`
    (False) and still tells its exit reason; `resolve` gives None for it.
    """

    __slots__ = ("exit_reason",)

    alive = False

    def __init__(self, exit_reason: Any) -> None:
        self.exit_reason = exit_reason

    def __repr__(self) -> str:
        return f"<Exited {self.exit_reason!r}>"


class Pid:
    """A process identifier, printed like Erlang's ``<0.42>``.

    Equality and hashing use the number only. `is_alive()` tells whether the process
    still runs. While it runs, the pid refers to its process; once its exit has been
    propagated, only to an `Exited` record, so a pid kept anywhere never keeps a dead
    process (nor anything it held) in memory.
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
