"""Registered names: unique, resolved at call time, removed atomically at exit.

A name maps to one live process. When the process exits, the name is removed before
its links and monitors fire, so a lookup never returns a dead process and, after a
supervisor restart, finds the replacement as soon as it has registered.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

from supervision.errors import KernelError, NameTaken
from supervision.pid import Pid
from supervision.process import Process, _hooks, resolve

_names: dict[Hashable, Process] = {}
_lock = threading.Lock()


def register_process(name: Hashable, process: Process) -> None:
    """Register `process` under `name`; raises `NameTaken` if a live process holds it."""
    with _lock:
        holder = _names.get(name)
        if holder is not None and holder.alive:
            raise NameTaken(
                ("already_registered", holder.pid), f"name {name!r} is registered to {holder.pid}"
            )
        if not process.alive:
            raise KernelError("noproc", f"{process.pid} is not alive")
        if process.name is not None:
            raise KernelError(
                "already_named", f"{process.pid} is already registered as {process.name!r}"
            )
        _names[name] = process
        process.name = name


def register(name: Hashable, pid: Pid) -> None:
    """Register `pid` under `name` (one name per process, one process per name)."""
    process = resolve(pid)
    if process is None:
        raise KernelError("noproc", f"{pid} is not alive")
    register_process(name, process)


def unregister(name: Hashable) -> None:
    """Remove `name`; raises `KernelError("not_registered")` if nobody holds it."""
    with _lock:
        process = _names.pop(name, None)
        if process is None:
            raise KernelError("not_registered", f"no process is registered as {name!r}")
        process.name = None


def lookup(name: Hashable) -> Process | None:
    process = _names.get(name)
    return process if process is not None and process.alive else None


def whereis(name: Hashable) -> Pid | None:
    """The pid registered under `name`, or None. Never a dead process."""
    process = lookup(name)
    return process.pid if process is not None else None


def registered() -> list[Hashable]:
    """Every registered name."""
    with _lock:
        return [name for name, process in _names.items() if process.alive]


def _unregister_process(process: Process) -> None:
    with _lock:
        if process.name is not None and _names.get(process.name) is process:
            del _names[process.name]


_hooks.unregister_process = _unregister_process
