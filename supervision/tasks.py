"""`Task`: a monitored lightweight worker that is a real process.

`Task.start(fn, *args, deadline=None)` runs `fn(*args)`: a plain callable on the
bounded sync pool (a full pool raises `TaskBusy`, it never queues without bound), a
coroutine function on the reactor's event loop; either runs in a copy of the
starter's `contextvars` (`carried_context`). The task has a pid; it can be
linked, monitored and killed. It watches the process that started it (its owner):
when the owner dies, the task is stopped.

Stopping a task (kill, its absolute `deadline`, its owner's death, its supervisor's
exit): a coroutine is cancelled at its next ``await``; a sync callable cannot be
pre-empted, so it is abandoned and fenced: it runs to the end on its pool thread, but
its result is discarded and whatever it sends, replies or commits through the kernel
afterwards is dropped (see `docs/supervision.md`). The pool counts such abandoned
threads (`SyncPool.stats`, `kernel_stats`).

A sync task may belong to a `SyncPool.Share` (a bounded part of the pool, e.g. one
agent's tools): `Task.start(..., share=share)`. A task can carry a share for the work
it and its sub-tasks start (`Task.bind_share`, found again by `Task.current_share`).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple

from supervision.carried_context import capture
from supervision.errors import KernelError, ProcessExit
from supervision.pid import Pid
from supervision.process import Process, bind_context, current_process, resolve
from supervision.reactor import Submitter
from supervision.runtime import default_task_supervisor, submitter
from supervision.signals import Crash, Reason
from supervision.sync_pool import SyncPool, default_sync_pool
from supervision.task_supervisor import TaskSupervisorProcess
from supervision.timers import send_after

DEADLINE_REASON = "deadline_exceeded"
OWNER_EXITED = ("shutdown", "owner_exited")


class TaskFailed(KernelError):
    """The task raised (reason: its `Crash`) or was stopped (``killed``, owner exit, ...)."""


class TaskTimeout(KernelError):
    """``deadline_exceeded``: the task was stopped at its deadline; ``wait_timeout``: `wait`
    gave up, the task still runs."""


class TaskResult(NamedTuple):
    """Sent to the owner when a task started with ``notify=True`` ends."""

    pid: Pid
    ok: bool
    value: Any  # the result, or the exit reason when not ok


class _Deadline:
    """Timer message: the task's deadline has come."""


_DEADLINE = _Deadline()


class TaskProcess(Process):
    """The process behind a `Task`. It has no mailbox: messages to it are dropped."""

    __slots__ = (
        "coroutine_finished",
        "coroutine_running",
        "coroutine_task",
        "loop",
        "notify",
        "outcome",
        "owner",
        "share",
        "supervisor",
    )

    def __init__(self, owner: Process, notify: bool, share: SyncPool.Share | None = None) -> None:
        super().__init__()
        self.label = "task"
        self.owner = owner
        self.notify = notify
        self.share = share
        self.outcome: tuple[bool, Any] | None = None
        self.supervisor: TaskSupervisorProcess | None = None
        self.coroutine_task: asyncio.Task[Any] | None = None
        self.coroutine_running = False
        self.coroutine_finished = False  # ended on its own: nothing to cancel
        self.loop: asyncio.AbstractEventLoop | None = None

    def deliver(self, message: Any) -> None:
        if message is _DEADLINE:
            self.exit(DEADLINE_REASON)

    def notify_down(self, ref: Hashable, pid: Pid, reason: Reason) -> None:
        if ref is self:  # the owner's monitor is keyed by the task itself
            self.exit(OWNER_EXITED)

    def watch_owner(self) -> None:
        if not self.owner.add_watcher(self, self):
            self.exit(OWNER_EXITED)

    def exit(self, reason: Reason) -> bool:
        with self._lock:
            if self.outcome is None:
                self.outcome = (False, reason)
            elif self.outcome[0]:
                reason = "normal"  # it had already finished: a late kill changes nothing
        return super().exit(reason)

    def complete(self, value: Any) -> None:
        """The work returned `value`; dropped if the task was stopped first (fenced)."""
        with self._lock:
            if self.outcome is not None:
                return
            self.outcome = (True, value)
        super().exit("normal")

    def fail(self, exc: BaseException) -> None:
        self.exit(Crash.from_exception(exc))

    def started_on_loop(self, task: asyncio.Task[Any]) -> None:
        """Runs on the reactor once the coroutine's asyncio task exists."""
        self.coroutine_task = task

    def _cancel_on_loop(self) -> None:
        # Runs on the reactor. A task that has not taken its first step is left alone:
        # `_run_coroutine` sees the process is dead and closes the coroutine unrun.
        task = self.coroutine_task
        if task is not None and self.coroutine_running and not task.done():
            task.cancel()

    def on_exit(self) -> None:
        self.owner.remove_watcher(self)
        if self.supervisor is not None:
            self.supervisor.forget(self)
        loop = self.loop
        if loop is not None and not self.coroutine_finished:
            try:
                loop.call_soon_threadsafe(self._cancel_on_loop)
            except RuntimeError:
                pass  # the loop is closed: its tasks are gone already
        else:
            self.coroutine_task = self.loop = None  # let the finished asyncio task go
        if self.notify and self.outcome is not None:
            ok, value = self.outcome
            self.owner.deliver(TaskResult(self.pid, ok, value))


async def _run_coroutine(process: TaskProcess, coroutine: Any, reactor: Submitter) -> None:
    try:
        await _run_as_task(process, coroutine)
    finally:
        reactor.finish(process)


async def _run_as_task(process: TaskProcess, coroutine: Any) -> None:
    if not process.alive:
        coroutine.close()  # stopped before it began: it never runs
        return
    bind_context(process)  # inside this asyncio task, self_pid() is the task's pid
    process.coroutine_running = True
    try:
        value = await coroutine
    except asyncio.CancelledError:
        process.exit(("shutdown", "cancelled"))  # a no-op when the task was stopped first
        raise
    except BaseException as exc:
        process.coroutine_finished = True
        process.fail(exc)
    else:
        process.coroutine_finished = True
        process.complete(value)


class Task:
    """A handle on a running task: `pid`, `wait`, `kill`."""

    __slots__ = ("_process",)

    def __init__(self, process: TaskProcess) -> None:
        self._process = process

    @property
    def pid(self) -> Pid:
        return self._process.pid

    def __repr__(self) -> str:
        return f"<Task {self._process.pid}>"

    @classmethod
    def start(
        cls,
        fn: Callable[..., Any],
        *args: Any,
        deadline: float | None = None,
        notify: bool = False,
        supervisor: Pid | Hashable | None = None,
        pool: SyncPool | None = None,
        share: SyncPool.Share | None = None,
    ) -> Task:
        """Run `fn(*args)` as a task owned by the calling process.

        `deadline` is an absolute `time.monotonic()` instant; a deadline already past
        starts nothing (the task ends with ``deadline_exceeded``). With `notify`, the
        owner also gets a `TaskResult` message. `share` (a sync task's) bounds its part
        of the pool, it may then wait there before it gets into the pool. Raises
        `TaskBusy` when the sync pool is full (`ShareFull`, reason
        ``capacity_exhausted``, when the share is) and `MaxChildrenReached` when the
        task supervisor is.
        """
        owner = current_process()
        assert owner is not None
        if not owner.alive and not owner.is_pseudo:
            raise ProcessExit(owner.exit_reason, "a killed process cannot start tasks")
        task_supervisor = _task_supervisor(supervisor)
        context = capture()  # the task runs in a copy of its starter's contextvars
        process = TaskProcess(owner, notify, share)
        task_supervisor.adopt(process)
        process.watch_owner()
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                process.exit(DEADLINE_REASON)
                return cls(process)
            send_after(process.pid, _DEADLINE, remaining)
        if _is_coroutine(fn):
            coroutine = None
            try:
                coroutine = fn if inspect.iscoroutine(fn) else fn(*args)
                reactor = submitter()
                process.loop = reactor.loop
                reactor.submit(
                    process,
                    _run_coroutine(process, coroutine, reactor),
                    process.started_on_loop,
                    lambda: process.exit(("shutdown", "reactor_stopped")),
                    context,
                )
            except BaseException:
                if coroutine is not None and process.loop is None:
                    coroutine.close()
                process.exit(("shutdown", "not_started"))
                raise
        else:
            try:
                (pool or default_sync_pool()).submit(process, context.run, (fn, *args))
            except BaseException:
                process.exit(("shutdown", "not_started"))
                raise
        return cls(process)

    def wait(self, timeout: float | None = None) -> Any:
        """The task's result; `TaskFailed(reason)` if it failed or was stopped,
        `TaskTimeout` at its deadline or when `timeout` runs out first."""
        if not self._process.wait_dead(timeout):
            raise TaskTimeout("wait_timeout", f"the task did not finish within {timeout} s")
        return self.result()

    def result(self) -> Any:
        """The result of a task that has ended (see `wait`); a running one is an error."""
        outcome = self._process.outcome
        if outcome is None:
            raise TaskTimeout("wait_timeout", "the task is still running")
        ok, value = outcome
        if ok:
            return value
        if value == DEADLINE_REASON:
            raise TaskTimeout(DEADLINE_REASON, "the task was stopped at its deadline")
        raise TaskFailed(value, f"the task ended with {value!r}")

    @staticmethod
    def bind_share(share: SyncPool.Share | None) -> bool:
        """Make `share` the calling task's share, for `current_share` in it and in the
        tasks it starts (False, and nothing changes, when the caller is not a task).
        Nothing joins it implicitly: a sync task joins a share only when started with
        ``share=``."""
        process = current_process(create=False)
        if type(process) is not TaskProcess:
            return False
        process.share = share
        return True

    @staticmethod
    def current_share() -> SyncPool.Share | None:
        """The share of the calling task, else of the task that started it, and so on
        up (a few levels); None outside a task or when none has one."""
        process = current_process(create=False)
        for _ in range(_SHARE_DEPTH):
            if type(process) is not TaskProcess:
                return None
            if process.share is not None:
                return process.share
            process = process.owner
        return None

    def kill(self) -> None:
        """Stop the task now (untrappable): cancelled if a coroutine, fenced if sync."""
        self._process.exit("killed")

    def done(self) -> bool:
        return not self._process.alive


_CO_COROUTINE = inspect.CO_COROUTINE
_SHARE_DEPTH = 8


def _is_coroutine(fn: Any) -> bool:
    code = getattr(fn, "__code__", None)
    if code is not None:  # a plain function: one flag test instead of inspect's walk
        return bool(code.co_flags & _CO_COROUTINE)
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutine(fn)


def wait_all(tasks: Sequence[Task], deadline: float, grace: float = 0.0) -> list[Any]:
    """Each task's result in order, or the `TaskFailed`/`TaskTimeout` it ended with.

    One absolute `deadline` (plus `grace`) covers them all; a task still running then
    is killed and reported as `TaskTimeout`.
    """
    results: list[Any] = []
    for task in tasks:
        try:
            results.append(task.wait(max(0.0, deadline + grace - time.monotonic())))
        except (TaskFailed, TaskTimeout) as error:
            task.kill()
            results.append(error)
    return results


def _task_supervisor(supervisor: Pid | Hashable | None) -> TaskSupervisorProcess:
    if supervisor is None:
        return default_task_supervisor()
    process = resolve(supervisor)
    if not isinstance(process, TaskSupervisorProcess) or not process.alive:
        raise KernelError("noproc", f"{supervisor!r} is not a running task supervisor")
    return process
