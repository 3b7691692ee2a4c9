"""Exceptions raised by the kernel; every one carries a bounded `reason`."""

from __future__ import annotations

from typing import Any


class KernelError(Exception):
    """Base class for kernel errors. `reason` is a short, stable, secret-free value."""

    def __init__(self, reason: Any, detail: str | None = None) -> None:
        self.reason = reason
        super().__init__(detail if detail is not None else f"{reason!r}")


class ProcessExit(KernelError):
    """The process you talked to is gone: `reason` is its exit reason or ``"noproc"``.

    Raised by `call` when the callee is not alive or dies before replying, and by
    `receive` in a plain thread whose pseudo-process was killed by an exit signal.
    """


class CallTimeout(KernelError):
    """`call` got no reply within its timeout. The callee may still be working."""

    def __init__(self, timeout: float | None) -> None:
        super().__init__("timeout", f"no reply within {timeout} s")
        self.timeout = timeout


class StartError(KernelError):
    """A process did not start: its `init` raised or returned `Stop`, or its name is taken."""


class AlreadyStarted(StartError):
    """`start(..., name=)` found the name registered to a live process (`pid`)."""

    def __init__(self, name: Any, pid: Any) -> None:
        super().__init__(("already_started", pid), f"name {name!r} is registered to {pid}")
        self.pid = pid


class NameTaken(KernelError):
    """`register` found the name already registered to a live process."""


class SupervisorError(KernelError):
    """A supervisor refused a request: ``not_found``, ``running``, ``already_present``, ..."""


class MaxChildrenReached(SupervisorError):
    """A `DynamicSupervisor` already runs `max_children` children; stop one or raise the bound."""

    def __init__(self, max_children: int) -> None:
        super().__init__("max_children", f"the supervisor already runs {max_children} children")
        self.max_children = max_children
