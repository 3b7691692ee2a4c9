"""Registered names: unique, resolved at call time, removed atomically at exit.

A name maps to one live process. When the process exits, the name is removed before
its links and monitors fire, so a lookup never returns a dead process and, after a
supervisor restart, finds the replacement as soon as it has registered. The table
itself lives in `names.py`, which the process core frees names through.
"""

from __future__ import annotations

from collections.abc import Hashable

from supervision.errors import KernelError
from supervision.names import lookup, register_process, registered_names, unregister_name
from supervision.pid import Pid
from supervision.process import resolve


def register(name: Hashable, pid: Pid) -> None:
    """Register `pid` under `name` (one name per process, one process per name)."""
    process = resolve(pid)
    if process is None:
        raise KernelError("noproc", f"{pid} is not alive")
    register_process(name, process)


def unregister(name: Hashable) -> None:
    """Remove `name`; raises `KernelError("not_registered")` if nobody holds it."""
    unregister_name(name)


def whereis(name: Hashable) -> Pid | None:
    """The pid registered under `name`, or None. Never a dead process."""
    process = lookup(name)
    return process.pid if process is not None else None


def registered() -> list[Hashable]:
    """Every registered name."""
    return registered_names()
