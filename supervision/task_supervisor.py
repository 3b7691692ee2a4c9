"""The task supervisor: a dynamic supervisor of temporary task processes.

It is a native kernel process rather than a GenServer: a task joins it without a
message round trip, and a task that ends leaves its set directly instead of queueing
an exit signal in a mailbox; that keeps task spawn rates in the tens of thousands
per second. It behaves as a DynamicSupervisor of temporary children whose links it
traps: it never restarts a task, bounds them with `max_children`, and when it exits,
every task still running exits with the same reason. `count()` is the live count
that tests compare with a baseline.
"""

from __future__ import annotations

import threading
from typing import Any

from supervision.errors import MaxChildrenReached
from supervision.process import Process, current_process
from supervision.signals import Reason

DEFAULT_MAX_TASKS = 100_000
TASK_SUPERVISOR_NAME = "supervision.tasks"


class TaskSupervisorProcess(Process):
    __slots__ = ("_children", "_children_lock", "_closing", "max_children")

    def __init__(self, parent: Process | None, max_children: int | None) -> None:
        super().__init__()
        self.label = "task supervisor"
        self.parent = parent
        self.max_children = max_children
        self._children: set[Process] = set()
        self._children_lock = threading.Lock()
        self._closing = False

    def adopt(self, task: Any) -> None:
        """Take `task` (a `TaskProcess`) as a child; it calls `forget` when it ends."""
        with self._children_lock:
            if self._closing:
                task.exit(("shutdown", "not_started"))
                return
            if self.max_children is not None and len(self._children) >= self.max_children:
                task.exit(("shutdown", "not_started"))
                raise MaxChildrenReached(self.max_children)
            self._children.add(task)
            task.supervisor = self

    def forget(self, task: Process) -> None:
        with self._children_lock:
            self._children.discard(task)

    def count(self) -> int:
        with self._children_lock:
            return len(self._children)

    def deliver(self, message: Any) -> None:
        pass  # no mailbox

    def exit(self, reason: Reason) -> bool:
        # Children go first, with the supervisor's reason (as if linked: a task does not
        # trap exits), before anything watching the supervisor hears of its exit.
        with self._children_lock:
            self._closing = True
            children, self._children = self._children, set()
        for task in children:
            task.exit(reason)
        return super().exit(reason)


def start_task_supervisor(
    max_children: int | None = DEFAULT_MAX_TASKS, *, link: bool = True
) -> Any:
    """Start a task supervisor (linked to the caller) and return its pid."""
    parent = current_process()
    assert parent is not None
    process = TaskSupervisorProcess(parent if link else None, max_children)
    if link:
        parent.link(process)
    return process.pid
