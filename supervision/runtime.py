"""The kernel runtime: a supervisor for the services the kernel itself needs.

``supervision.runtime`` (one_for_one) holds the reactor (``supervision.reactor``)
and the default task supervisor (``supervision.tasks``). It starts on first use,
unlinked from whoever used it first, and `stop_runtime()` shuts it down.
"""

from __future__ import annotations

import threading

from supervision.child_spec import ChildSpec
from supervision.errors import AlreadyStarted
from supervision.gen_server import stop
from supervision.pid import Pid
from supervision.reactor import REACTOR_NAME, _ReactorServer
from supervision.registry import register, whereis
from supervision.supervisor import Supervisor
from supervision.task_supervisor import TASK_SUPERVISOR_NAME, start_task_supervisor

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
