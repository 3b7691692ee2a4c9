"""`Pid`: the opaque, hashable, printable handle of a process."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from supervision.process import Process

_pid_numbers = itertools.count(1)


class Pid:
    """A process identifier, printed like Erlang's ``<0.42>``.

    Equality and hashing use the number only. The handle never keeps a process
    alive; `is_alive()` tells whether the process still runs.
    """

    __slots__ = ("_number", "_process")

    def __init__(self, process: Process) -> None:
        self._number = next(_pid_numbers)
        self._process = process

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
