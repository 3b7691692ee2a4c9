"""The kernel runtime: a supervisor for the services the kernel itself needs.

``supervision.runtime`` (one_for_one) holds the reactor (``supervision.reactor``)
and the default task supervisor (``supervision.tasks``). It starts on first use,
unlinked from whoever used it first, and `stop_runtime()` shuts it down.

The accessors that start it when needed live here too (`reactor_loop`, `submitter`,
`default_task_supervisor`): they know the runtime, and the runtime knows its children,
so the reactor and the task supervisor never import this module.
"""

from __future__ import annotations

import asyncio
import threading
import time

from supervision.child_spec import ChildSpec
from supervision.errors import AlreadyStarted, KernelError, ProcessExit
from supervision.gen_server import call, stop
from supervision.names import lookup
from supervision.pid import Pid
from supervision.protocol import unwrap
from supervision.reactor import (
    REACTOR_NAME,
    GetLoop,
    Submitter,
    _ReactorServer,
    running_loop,
    submitter_for,
)
from supervision.registry import register, whereis
from supervision.supervisor import Supervisor
from supervision.task_supervisor import (
    TASK_SUPERVISOR_NAME,
    TaskSupervisorProcess,
    start_task_supervisor,
)
from supervision.wakeups import before_blocking

RUNTIME_NAME = "supervision.runtime"
_lock = threading.Lock()


def _start_task_supervisor() -> Pid:
    pid = start_task_supervisor()
    register(TASK_SUPERVISOR_NAME, pid)
    return pid  # type: ignore[no-any-return]


def ensure_runtime() -> Pid:
    """The runtime supervisor's pid, starting it if it is not running."""
    pid = whereis(RUNTIME_NAME)
    if pid is not None:
        return pid
    with _lock:
        pid = whereis(RUNTIME_NAME)
        if pid is not None:
            return pid
        try:
            return Supervisor.start(
                [
                    ChildSpec("reactor", lambda: _ReactorServer.start_link(name=REACTOR_NAME)),
                    ChildSpec(
                        "tasks", _start_task_supervisor, shutdown="brutal_kill", type="supervisor"
                    ),
                ],
                strategy="one_for_one",
                intensity=10,
                period=5.0,
                name=RUNTIME_NAME,
            )
        except AlreadyStarted as started:
            return started.pid  # type: ignore[no-any-return]


def stop_runtime() -> None:
    """Stop the reactor and the default task supervisor (and every task under it)."""
    pid = whereis(RUNTIME_NAME)
    if pid is not None:
        stop(pid, "shutdown", timeout=30.0)


def reactor_loop() -> asyncio.AbstractEventLoop:
    """The running reactor's event loop, starting the kernel runtime if needed (and
    waiting out a reactor restart, up to 5 s)."""
    loop = running_loop()
    if loop is not None:
        return loop
    deadline = time.monotonic() + 5.0
    while True:
        ensure_runtime()
        try:
            found = unwrap(call(REACTOR_NAME, GetLoop(), timeout=10.0))
        except ProcessExit:
            if time.monotonic() > deadline:
                raise
            before_blocking()  # a pooled caller hands over what it readied, then waits
            time.sleep(0.001)  # the runtime supervisor is restarting the reactor
            continue
        assert isinstance(found, asyncio.AbstractEventLoop)
        return found


def submitter() -> Submitter:
    """The batching submitter of the running reactor's loop."""
    return submitter_for(reactor_loop())


_default: TaskSupervisorProcess | None = None


def default_task_supervisor() -> TaskSupervisorProcess:
    """The runtime's task supervisor, starting the kernel runtime if needed."""
    global _default
    found = _default
    if found is not None and found.alive:
        return found
    deadline = time.monotonic() + 5.0
    while True:
        process = lookup(TASK_SUPERVISOR_NAME)
        if isinstance(process, TaskSupervisorProcess):
            _default = process
            return process
        if time.monotonic() > deadline:
            raise KernelError("noproc", "the task supervisor is not running")
        ensure_runtime()
        before_blocking()
        time.sleep(0.001)  # the runtime supervisor is restarting it
