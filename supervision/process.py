"""The process core: identity, links, monitors and exit signals.

`Process` is what every kind of process shares; a subclass supplies the mailbox
(`deliver`). Exit-signal propagation is iterative, so a long chain of links does not
recurse through the Python stack, and signals are handled at once, as in Erlang:
a process that does not trap exits dies as soon as the signal arrives, even while a
handler of it is still running (that handler is then fenced, see `is_fenced_thread`).
"""

from __future__ import annotations

import threading
from _thread import LockType
from collections import deque
from collections.abc import Callable, Hashable
from contextvars import ContextVar
from threading import TIMEOUT_MAX, Lock
from time import monotonic
from typing import Any, Protocol

from supervision.errors import KernelError, ProcessExit
from supervision.names import lookup, release
from supervision.pid import Exited, Pid
from supervision.signals import Down, ExitSignal, Reason, Ref
from supervision.timer_service import cancel_for_exit
from supervision.wakeups import before_blocking, sleep, wake_all

_table: dict[int, Process] = {}
"""Every live process by pid number (dict operations are atomic under the GIL)."""

_current = threading.local()
"""`_current.process`: the process that owns this thread (a server or a pseudo-process)."""

_context_process: ContextVar[Process | None] = ContextVar("supervision_process", default=None)
"""On a thread bound to a `LoopProcess`: the process of the coroutine that is running."""

_propagation = threading.local()
"""`_propagation.queue`: exits waiting to be propagated by the outermost `_exit` on this thread."""


class Watcher(Protocol):
    """Anything a monitor can notify: a process, or a pending call's reply slot."""

    def notify_down(self, ref: Hashable, pid: Pid, reason: Reason) -> None: ...


class Process:
    """What every process has: a pid, links, monitors, `trap_exit` and an exit reason."""

    __slots__ = (
        "_dead",
        "_exit_finished",
        "_links",
        "_lock",
        "_monitoring",
        "_timers",
        "_watchers",
        "alive",
        "exit_reason",
        "label",
        "name",
        "parent",
        "pid",
        "trap_exit",
    )

    is_pseudo = False
    uses_context = False  # True for the reactor thread: ask `_context_process` first

    def __init__(self) -> None:
        self.pid = Pid(self)
        self.alive = True
        self.exit_reason: Reason = None
        self.trap_exit = False
        self.parent: Process | None = None
        self.name: Hashable | None = None
        self.label = ""
        """A short description for logs (the server class, the supervisor kind)."""
        self._lock = threading.Lock()
        # Created on first use: most processes never link, monitor or set a timer, and
        # every container is one more object for the cyclic garbage collector to walk.
        # Links: None, the one linked process (a supervised child's usual case), or a set.
        self._links: Process | set[Process] | None = None
        self._watchers: dict[Hashable, Watcher] | None = None
        self._monitoring: dict[Hashable, Process] | None = None
        self._timers: set[Any] | None = None
        self._dead: threading.Event | None = None
        self._exit_finished = False  # links, monitors and on_exit have all been handled
        _table[self.pid._number] = self

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.pid}{' ' + self.label if self.label else ''}>"

    # -- mailbox: supplied by subclasses -------------------------------------------

    def deliver(self, message: Any) -> None:
        """Put a plain message (as from `send`) into the mailbox; never raises."""
        raise NotImplementedError

    def cast(self, message: Any) -> None:
        """Deliver a `cast`; a process without `handle_cast` gets it as a plain message."""
        self.deliver(message)

    def on_exit(self) -> None:
        """Release the mailbox and any thread once the process is dead."""

    def remove_down_message(self, ref: Ref) -> None:
        """Drop an already delivered `Down` carrying `ref` (for `demonitor(flush=True)`)."""

    # -- monitors --------------------------------------------------------------------

    def add_watcher(self, key: Hashable, watcher: Watcher) -> bool:
        """Register a monitor on this process; False if it is already dead."""
        with self._lock:
            if not self.alive:
                return False
            if self._watchers is None:
                self._watchers = {}
            self._watchers[key] = watcher
            return True

    def remove_watcher(self, key: Hashable) -> bool:
        """Remove a monitor; False if it already fired (or never existed)."""
        with self._lock:
            watchers = self._watchers
            if watchers is None or watchers.pop(key, None) is None:
                return False
            if not watchers:
                self._watchers = None  # a start or a call leaves no empty dict behind
            return True

    def notify_down(self, ref: Hashable, pid: Pid, reason: Reason) -> None:
        with self._lock:
            if self._monitoring is None or self._monitoring.pop(ref, None) is None:
                return  # demonitored meanwhile
            self.deliver(Down(ref, pid, reason))  # type: ignore[arg-type]

    def monitor(self, target: Process) -> Ref:
        ref = Ref()
        with self._lock:
            if self._monitoring is None:
                self._monitoring = {}
            self._monitoring[ref] = target
        if not target.add_watcher(ref, self):
            self.notify_down(ref, target.pid, "noproc")
        elif not self.alive:
            target.remove_watcher(ref)  # we died meanwhile: leave nothing on the target
        return ref

    def demonitor(self, ref: Ref, flush: bool) -> bool:
        """Stop monitoring; True if the monitor was still active (no `Down` was sent)."""
        with self._lock:
            target = None if self._monitoring is None else self._monitoring.pop(ref, None)
        if target is not None and target.remove_watcher(ref):
            return True
        if flush:
            with self._lock:
                self.remove_down_message(ref)
        return False

    # -- links -----------------------------------------------------------------------

    def link(self, other: Process) -> bool:
        """Link both ways; False if `other` is already dead."""
        if other is self:
            return True
        first, second = (self, other) if self.pid.number < other.pid.number else (other, self)
        with first._lock, second._lock:
            if not other.alive:
                return False
            if not self.alive:
                return True  # a dead caller links to nothing; its thread is fenced
            _add_link(self, other)
            _add_link(other, self)
            return True

    def linked_to(self, other: Process) -> bool:
        """True if this process is linked to `other` now (lock-free: a set lookup is
        atomic, and a link that goes away meanwhile is announced by its exit signal)."""
        links = self._links
        return links is other or (isinstance(links, set) and other in links)

    def unlink(self, other: Process) -> None:
        if other is self:  # as `link`: a process is never linked to itself (and the
            return  # one lock taken twice would hang)
        first, second = (self, other) if self.pid.number < other.pid.number else (other, self)
        with first._lock, second._lock:
            _drop_link(self, other)
            _drop_link(other, self)

    # -- exit signals ----------------------------------------------------------------

    def exit_signal(self, sender: Process | None, reason: Reason, *, from_link: bool) -> None:
        """Receive an exit signal from `sender` (a link, or an explicit `exit`)."""
        if reason == "kill" and not from_link:
            self.exit("killed")  # untrappable
        elif self.trap_exit:
            self.deliver(ExitSignal(sender.pid if sender is not None else None, reason))
        elif reason == "normal":
            if sender is self:
                self.exit("normal")
        else:
            self.exit(reason)

    def exit(self, reason: Reason) -> bool:
        """Die now with `reason`: notify links and monitors, free the name and timers.

        Returns False if the process was already dead. Safe from any thread.
        """
        with self._lock:
            if not self.alive:
                return False
            self.alive = False
            self.exit_reason = reason
            links, self._links = self._links, None
            watchers, self._watchers = self._watchers, None
            monitoring, self._monitoring = self._monitoring, None
            timers, self._timers = self._timers, None
        _table.pop(self.pid._number, None)
        if self.name is not None:
            release(self)
        if timers:
            for timer in timers:
                cancel_for_exit(timer)
        if monitoring:
            for ref, target in monitoring.items():
                target.remove_watcher(ref)
        queue: deque[Any] | None = getattr(_propagation, "queue", None)
        if queue is not None:  # an outer exit on this thread is propagating: join its loop
            queue.append((self, reason, links, watchers))
        elif links is None and not watchers:
            # Nobody to signal (an inbox, a task, an unlinked server): no exit can follow
            # from this one through a link or a monitor, so there is no order to keep and
            # no queue to set up. One that `on_exit` causes runs its own propagation.
            _propagate(self, reason, None, None)
        else:
            _propagation.queue = queue = deque()
            try:
                _propagate(self, reason, links, watchers)
                while queue:
                    _propagate(*queue.popleft())
            finally:
                _propagation.queue = None
        return True

    def wait_dead(self, timeout: float | None) -> bool:
        """Block until the process is dead and its exit fully propagated (links and
        monitors notified); False on timeout."""
        with self._lock:
            if self._exit_finished:
                return True
            if self._dead is None:
                self._dead = threading.Event()
            dead = self._dead
        before_blocking()  # on a pool worker: hand what it readied to other threads first
        return dead.wait(timeout)

    # -- introspection -----------------------------------------------------------------

    def counts(self) -> tuple[int, int, int]:
        """(links, monitors on this process, timers aimed at it)."""
        with self._lock:
            return len(_each(self._links)), len(self._watchers or ()), len(self._timers or ())

    def add_timer(self, timer: Any) -> bool:
        with self._lock:
            if not self.alive:
                return False
            if self._timers is None:
                self._timers = set()
            self._timers.add(timer)
            return True

    def discard_timer(self, timer: Any) -> None:
        with self._lock:
            if self._timers is not None:
                self._timers.discard(timer)


def _add_link(holder: Process, other: Process) -> None:
    """Record `other` among `holder`'s links (the caller holds `holder._lock`)."""
    links = holder._links
    if links is None:
        holder._links = other
    elif isinstance(links, set):
        links.add(other)
    elif links is not other:
        holder._links = {links, other}


def _drop_link(holder: Process, other: Process) -> None:
    """Forget `other` among `holder`'s links (the caller holds `holder._lock`)."""
    links = holder._links
    if links is other:
        holder._links = None
    elif isinstance(links, set):
        links.discard(other)


def _each(links: Process | set[Process] | None) -> tuple[Process, ...] | set[Process]:
    """The linked processes, whichever form `_links` has."""
    if links is None:
        return ()
    return links if isinstance(links, set) else (links,)


def _propagate(
    dead: Process,
    reason: Reason,
    links: Process | set[Process] | None,
    watchers: dict[Hashable, Watcher] | None,
) -> None:
    # First the pid lets go of the process (an `Exited` record breaks the pid <-> process
    # cycle), so nobody told of this exit below finds the pid still resolving; the record
    # keeps the process only until the end of this propagation (`finish_shutdown`).
    exited = Exited(reason, dead)
    dead.pid._process = exited
    # Links first, then monitors: by the time a caller's call fails or a Down arrives,
    # every linked supervisor already holds the exit signal in its mailbox.
    if links is not None:
        for linked in _each(links):
            with linked._lock:
                _drop_link(linked, dead)
            linked.exit_signal(dead, reason, from_link=True)
    if watchers:
        for key, watcher in watchers.items():
            watcher.notify_down(key, dead.pid, reason)
    dead.on_exit()
    with dead._lock:
        # The process goes as soon as its last holder (a dispatcher, a `Task`) lets go.
        exited.propagating = None
        dead._exit_finished = True
        event = dead._dead
    if event is not None:
        event.set()


# -- plain threads: pseudo-processes ---------------------------------------------------------


class PseudoProcess(Process):
    """The process of a plain thread: a mailbox read with `receive`, no handler loop.

    It exits with ``"normal"`` when its thread ends. An exit signal cannot stop a plain
    thread, so one that kills the pseudo-process marks it dead (links and monitors fire)
    and the thread's next `receive` raises `ProcessExit(reason)`; after that the thread
    gets a fresh pseudo-process, as the Erlang shell does. The same one-time
    `ProcessExit` comes from `link`, `monitor`, `trap_exit` or `start_link` if the
    thread calls one of those first.
    """

    __slots__ = ("_arrived_lock", "_mailbox", "_sleepers", "_spare_wake", "exit_reported")

    is_pseudo = True

    def __init__(self, thread: threading.Thread, label: str | None = None) -> None:
        super().__init__()
        self.label = f"thread {thread.name}" if label is None else label
        self._mailbox: deque[Any] = deque()
        self._arrived_lock = threading.Lock()
        # The wake locks of the threads blocked in `receive` (see `supervision.wakeups`):
        # a delivery releases them all. Nearly always none or one, so no
        # `threading.Condition` (made per mailbox, and a Python-level `notify` with an
        # ownership check on every delivery) is needed. None until a first `receive`
        # blocks; an empty list after, which a delivery skips as it skips None.
        self._sleepers: list[LockType] | None = None
        self._spare_wake: LockType | None = None
        self.exit_reported = False

    def deliver(self, message: Any) -> None:
        with self._arrived_lock:
            if self.alive:
                self._mailbox.append(message)
                if self._sleepers:  # all of them, not one: each may wait for another `match`
                    wake_all(self._sleepers)

    def on_exit(self) -> None:
        with self._arrived_lock:
            if self._sleepers:
                wake_all(self._sleepers)

    def remove_down_message(self, ref: Ref) -> None:
        with self._arrived_lock:
            for message in self._mailbox:
                if type(message) is Down and message.ref == ref:
                    self._mailbox.remove(message)
                    return

    def receive(self, timeout: float | None, match: Callable[[Any], bool] | None) -> Any:
        deadline = None if timeout is None else monotonic() + timeout
        with self._arrived_lock:
            while True:
                if not self.alive:
                    self.exit_reported = True
                    raise ProcessExit(
                        self.exit_reason, f"this thread's process exited: {self.exit_reason!r}"
                    )
                if match is None:
                    if self._mailbox:
                        return self._mailbox.popleft()
                else:
                    for message in self._mailbox:
                        if match(message):
                            self._mailbox.remove(message)
                            return message
                if deadline is None:
                    remaining = -1.0  # no limit (`Lock.acquire`'s -1)
                else:
                    remaining = deadline - monotonic()
                    if remaining <= 0:
                        raise TimeoutError("receive: no matching message in time")
                    if remaining >= TIMEOUT_MAX:  # `inf`, 1e10: more than a lock can wait
                        remaining = -1.0  # for ever, as OTP's `after infinity`
                sleepers = self._sleepers
                if sleepers is None:
                    sleepers = self._sleepers = []
                wake = self._spare_wake  # a wake lock a past sleep left (held)
                if wake is None:  # or a new one: several threads may wait on one mailbox
                    wake = Lock()
                    wake.acquire()
                else:
                    self._spare_wake = None
                before_blocking()  # a pool worker wakes the threads it owes first
                sleep(self._arrived_lock, sleepers, wake, remaining)
                self._spare_wake = wake  # held again: `sleep` promises it

    def pending(self) -> int:
        with self._arrived_lock:
            return len(self._mailbox)


class _ThreadEnd:
    """Kept in the thread's local storage; CPython drops it when the thread ends."""

    __slots__ = ("process",)

    def __init__(self, process: PseudoProcess) -> None:
        self.process = process

    def __del__(self) -> None:
        try:
            self.process.exit("normal")
        except Exception:  # interpreter shutdown: modules may be half torn down
            pass


class LoopProcess(PseudoProcess):
    """The reactor thread's own process. A coroutine task running on it sets its process
    in a context variable, so inside the coroutine `self_pid()` is the task's pid."""

    __slots__ = ()

    uses_context = True


def bind_context(process: Process) -> None:
    """Make `process` the calling coroutine's process (for the rest of its asyncio task)."""
    _context_process.set(process)


def current_process(create: bool = True) -> Process | None:
    """The calling thread's process; a plain thread gets a pseudo-process on first use."""
    process: Process | None = getattr(_current, "process", None)
    if process is not None and process.uses_context:
        inner = _context_process.get()
        if inner is not None:
            return inner
    if process is not None and (
        process.alive or not isinstance(process, PseudoProcess) or not process.exit_reported
    ):
        return process  # a killed pseudo-process stays until the thread has been told
    if not create:
        return None
    pseudo = PseudoProcess(threading.current_thread())
    _current.process = pseudo
    _current.end = _ThreadEnd(pseudo)
    return pseudo


def bind_thread(process: Process | None) -> None:
    """Make `process` the owner of the calling thread (dispatchers call this)."""
    _current.process = process


def is_fenced_thread() -> bool:
    """True when the calling thread runs a handler of a process that has since died.

    Such a thread was abandoned by a kill or exit signal: whatever it sends, replies or
    commits through the kernel is discarded.
    """
    process: Process | None = getattr(_current, "process", None)
    if process is not None and process.uses_context:
        process = _context_process.get() or process
    return process is not None and not process.alive and not process.is_pseudo


def require_alive(process: Process) -> Process:
    """Raise `ProcessExit` if `process` was killed (a plain thread hears of it once)."""
    if not process.alive:
        if isinstance(process, PseudoProcess):
            process.exit_reported = True
        raise ProcessExit(
            process.exit_reason, f"this thread's process exited: {process.exit_reason!r}"
        )
    return process


def self_pid() -> Pid:
    """The pid of the calling process (a plain thread gets a pseudo-process)."""
    process = current_process()
    assert process is not None
    return process.pid


def resolve(dest: Pid | Hashable) -> Process | None:
    """The process behind a pid or a registered name, or None (a name nobody holds,
    or a pid whose exit has been propagated)."""
    if type(dest) is Pid:
        process = dest._process
        return None if isinstance(process, Exited) else process
    return lookup(dest)


def receive(timeout: float | None = None, match: Callable[[Any], bool] | None = None) -> Any:
    """Take the next message (or the first one `match` accepts) from this thread's mailbox.

    Only plain threads have a mailbox to read; a GenServer gets its messages through
    `handle_info`. Raises `TimeoutError` when nothing arrives in time.
    """
    process = current_process()
    if not isinstance(process, PseudoProcess):
        raise KernelError(
            "not_a_plain_thread", "receive() is for plain threads; a GenServer uses handle_info"
        )
    return process.receive(timeout, match)


def process_count() -> int:
    """Live processes, pseudo-processes of plain threads included."""
    return len(_table)


def live_processes() -> list[Process]:
    return list(_table.values())
