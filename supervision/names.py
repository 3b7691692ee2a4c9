"""The name table behind the registry: names to live processes.

A leaf module, so that the process core (which frees a dead process's name before its
links and monitors fire) and the registry (which registers names) share one table
without importing each other. `registry.py` builds the public functions on it.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import TYPE_CHECKING

from supervision.errors import KernelError, NameTaken

if TYPE_CHECKING:
    from supervision.process import Process

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


def unregister_name(name: Hashable) -> None:
    """Remove `name`; raises `KernelError("not_registered")` if nobody holds it."""
    with _lock:
        process = _names.pop(name, None)
        if process is None:
            raise KernelError("not_registered", f"no process is registered as {name!r}")
        process.name = None


def lookup(name: Hashable) -> Process | None:
    """The live process registered under `name`, or None."""
    process = _names.get(name)
    return process if process is not None and process.alive else None


def registered_names() -> list[Hashable]:
    """Every name held by a live process."""
    with _lock:
        return [name for name, process in _names.items() if process.alive]


def release(process: Process) -> None:
    """Free the name of `process` (it is exiting), unless another process holds it now."""
    with _lock:
        if process.name is not None and _names.get(process.name) is process:
            del _names[process.name]
