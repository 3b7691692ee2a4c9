"""The ``"pooled"`` dispatcher: many servers share a few threads.

Each pooled server has its own FIFO mailbox. A server with mail is *ready*; ready
servers wait in one queue, and pool threads take them in turn, run at most
`QUANTUM` messages, then put the server at the back of the queue if it still has
mail. So a server never runs on two threads at once, its messages stay in order,
and a busy server cannot starve the others.

A worker that readies a server (a message sent from a handler) does not wake an
idle thread for it: it takes that server itself once its handler returns (the
`wakeups` module's deferred wake-up). On a GIL a second thread would only take turns
with it, at the price of a futex wake, a GIL hand-over and, as often as not, a thread
that wakes to find the work taken. The worker wakes the threads it owes as soon as it
is not about to come back to the ready queue: before it runs its server's next message,
and before a kernel wait blocks its handler (a `call`, a `receive`, `wait_dead`).

A watchdog notices a handler that has run longer than `block_warning` seconds,
logs ``supervision.dispatch.handler_blocked`` once for it, and adds a spare thread
(up to `max_threads`) so the other servers keep moving. Spare threads leave again
when they have been idle for a while. Every `block_warning / 2` it also wakes the
threads owed by workers still in a handler (one blocked in user code, `time.sleep`
or sync I/O), so a deferred server waits at most that long; code that knows it is
about to block calls `supervision.before_blocking` (`wakeups`) and pays at once. A look
that fails is logged (``supervision.dispatch.watchdog_failed``) and the watchdog goes
on. `Pool.stop` ends a private pool's threads (its tests'); the shared pool runs for
the life of the process.
"""

from __future__ import annotations

import os
import threading
import time
from _thread import LockType
from collections import deque
from collections.abc import Hashable
from time import monotonic
from typing import Any

from supervision.envelopes import CONTINUE
from supervision.logs import get_logger
from supervision.process import Process, _current
from supervision.reply_slot import From
from supervision.server_process import ServerProcess
from supervision.wakeups import Owing, held_lock, on_blocking, sleep, wake_all, wake_one

_log = get_logger("supervision")

QUANTUM = 32
"""Messages a server may handle before it yields its thread to the next ready server."""

_QUANTUM_TURNS = range(QUANTUM)  # made once: not a `range` call per turn of a server

SPARE_IDLE_SECONDS = 2.0

WORKER_PREFIX = "supervision-pool-"
"""A pool worker thread's name, before its index."""


class _Worker(Owing):
    __slots__ = ("current", "index", "pool", "started", "wake", "warned")

    def __init__(self, pool: Pool, index: int) -> None:
        super().__init__()
        # `owed`: wake-ups this worker deferred, servers it readied that wait in the
        # ready queue for it (changed under the pool's `_wake_lock` only).
        self.pool = pool
        self.index = index
        self.current: PooledServerProcess | None = None
        self.started = 0.0
        self.warned = False
        # Held while the worker is idle: `schedule` releases it to wake this one worker
        # (a one-shot wake-up, cheaper than a `threading.Condition`'s notify).
        self.wake = held_lock()

    def hand_over(self) -> None:
        """`before_blocking` on this worker's thread: wake whom it owes."""
        self.pool._hand_over(self)


class _ThisWorker(threading.local):
    """The pool worker running on this thread; a class-level None on any other thread
    (no AttributeError raised and caught per look)."""

    worker: _Worker | None = None


class Pool:
    """The shared threads that run pooled servers."""

    def __init__(
        self, threads: int, max_threads: int, block_warning: float, prefix: str = WORKER_PREFIX
    ) -> None:
        """`prefix` names the threads; another than `WORKER_PREFIX` keeps a private
        pool's threads (the pool's own tests') out of `thread_pools`' count."""
        if threads < 1 or max_threads < threads:
            raise ValueError("need 1 <= threads <= max_threads")
        self.prefix = prefix
        self.threads = threads
        self.max_threads = max_threads
        self.block_warning = block_warning
        self._ready: deque[PooledServerProcess] = deque()
        self._wake_lock = threading.Lock()
        self._workers: list[_Worker] = []
        # The `wake` locks of the idle workers (see `supervision.wakeups`); the last one
        # to go idle is woken first, so a spare at the bottom can time out and retire.
        self._sleeping: list[LockType] = []
        self._this_worker = _ThisWorker()  # `worker`: set on this pool's threads
        self._stopping = threading.Event()  # set by `stop`: the watchdog's sleep too
        self._threads: list[threading.Thread] = []  # every thread started, for `stop`
        for _ in range(threads):
            self._add_worker(spare=False)
        watchdog = threading.Thread(target=self._watch, name=f"{prefix}watchdog", daemon=True)
        self._threads.append(watchdog)
        watchdog.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop the pool's threads (a private pool's: its tests'; never the shared
        one): the watchdog at once, each worker once it finishes its handler and finds
        no ready server. Servers still on the pool are not run any more. True if every
        thread left within `timeout` seconds."""
        self._stopping.set()
        with self._wake_lock:
            wake_all(self._sleeping)
        deadline = monotonic() + timeout
        me = threading.current_thread()
        for thread in list(self._threads):
            if thread is not me:
                thread.join(max(0.0, deadline - monotonic()))
        return not any(thread.is_alive() for thread in self._threads if thread is not me)

    def _add_worker(self, spare: bool) -> None:
        worker = _Worker(self, len(self._workers))
        thread = threading.Thread(
            target=self._run_worker,
            args=(worker, spare),
            name=f"{self.prefix}{worker.index}",
            daemon=True,
        )
        thread.start()  # first: a thread that cannot start (RuntimeError) is not counted
        self._workers.append(worker)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]

    def schedule(self, process: PooledServerProcess) -> None:
        with self._wake_lock:
            self._ready.append(process)
            if self._sleeping:
                worker = self._this_worker.worker
                if worker is not None:  # this worker comes back for it: defer the wake-up
                    worker.owed += 1
                else:  # `wakeups.wake_one`, inline: once per hand-off
                    self._sleeping.pop().release()

    def _pay(self, worker: _Worker, keep: int) -> None:
        """Wake the threads `worker` owes, but `keep` (the servers it takes itself), and
        none for servers other threads took meanwhile (hold `_wake_lock`)."""
        sleeping = self._sleeping
        wakes = min(worker.owed, len(self._ready)) - keep
        worker.owed = 0
        while wakes > 0 and sleeping:
            sleeping.pop().release()
            wakes -= 1

    def _hand_over(self, worker: _Worker) -> None:
        """`worker` is not coming back to the ready queue yet: wake whom it owes."""
        if worker.owed:
            with self._wake_lock:
                self._pay(worker, 0)

    def thread_count(self) -> int:
        with self._wake_lock:
            return len(self._workers)

    def _run_worker(self, worker: _Worker, spare: bool) -> None:
        ready, sleeping, wake_lock, wake = self._ready, self._sleeping, self._wake_lock, worker.wake
        idle_timeout = SPARE_IDLE_SECONDS if spare else -1
        self._this_worker.worker = worker
        on_blocking(worker)
        while True:
            wake_lock.acquire()  # not `with`: two special-method calls fewer per turn
            try:
                if worker.owed:  # this worker takes one of them itself, now
                    if worker.owed > 1:
                        self._pay(worker, 1)
                    else:
                        worker.owed = 0
                while not ready:
                    if self._stopping.is_set():  # `stop`: leave instead of sleeping
                        self._workers.remove(worker)
                        return
                    try:
                        woken = sleep(wake_lock, sleeping, wake, idle_timeout)
                    except BaseException:  # no thread to count on: hand its work over
                        self._workers.remove(worker)
                        if ready and sleeping:
                            wake_one(sleeping)
                        raise
                    if not woken and spare and not ready:  # idle SPARE_IDLE_SECONDS: retire
                        self._workers.remove(worker)
                        return
                process = ready.popleft()
            finally:
                wake_lock.release()
            self._run(worker, process)
            del process  # an idle worker keeps no finished server in memory

    def _run(self, worker: _Worker, process: PooledServerProcess) -> None:
        _current.process = process  # `bind_thread`, inline: once per turn of a server
        mailbox, lock, handle = process._mailbox, process._mailbox_lock, process.handle
        try:
            for _ in _QUANTUM_TURNS:
                with lock:
                    if not mailbox:
                        process._scheduled = False
                        return
                    envelope = mailbox.popleft()
                if worker.owed:  # staying with this server: others run what it readied
                    self._hand_over(worker)
                worker.started = monotonic()
                worker.current = process
                handle(envelope)
                worker.current = None
                worker.warned = False
            self.schedule(process)  # more mail: to the back of the line
        finally:
            worker.current = None
            _current.process = None

    def _watch(self) -> None:
        """Look every `block_warning / 2` seconds until `stop`. A look that raises (a
        spare thread that cannot start, a log write that fails) is logged and the next
        look comes as usual: the watchdog is what pays the wake-ups owed by a handler
        blocked in user code, so it must outlive any one failure."""
        interval = max(0.01, self.block_warning / 2)
        failed = ""  # the last failure logged: a failure that repeats is logged once
        while not self._stopping.wait(interval):
            try:
                self._look()
                failed = ""
            except BaseException as error:  # the loop must go on
                if repr(error) != failed:
                    failed = repr(error)
                    try:
                        _log.error(
                            "supervision.dispatch.watchdog_failed",
                            error=failed[:300],
                            pool=self.prefix,
                        )
                    except BaseException:  # a log that fails too: nothing more to do
                        pass

    def _look(self) -> None:
        """One look of the watchdog: pay what the workers still in a handler owe (first:
        the rest may fail), warn once per handler blocked past `block_warning`, and add a
        spare thread (last) if the ready servers have no idle thread."""
        now = time.monotonic()
        blocked = 0
        with self._wake_lock:
            workers = list(self._workers)
            for worker in workers:  # still in a handler since the last look
                if worker.owed:
                    self._pay(worker, 0)
        for worker in workers:
            process = worker.current
            if process is None or now - worker.started < self.block_warning:
                continue
            blocked += 1
            if not worker.warned:
                worker.warned = True
                _log.warning(
                    "supervision.dispatch.handler_blocked",
                    pid=str(process.pid),
                    server=process.label,
                    seconds=round(now - worker.started, 3),
                    threshold=self.block_warning,
                )
        with self._wake_lock:
            if (
                blocked
                and self._ready
                and not self._sleeping
                and len(self._workers) < self.max_threads
            ):
                self._add_worker(spare=True)


_pool: Pool | None = None
_pool_lock = threading.Lock()


def _default_threads() -> int:
    configured = os.environ.get("SUPERVISION_POOL_THREADS")
    if configured:
        return max(1, int(configured))
    return max(4, os.cpu_count() or 1)


def pool_bound() -> int:
    """The most worker threads the process-wide pool may have (0 before it starts)."""
    pool = _pool
    return 0 if pool is None else pool.max_threads


def get_pool() -> Pool:
    """The process-wide pool, started on first use (`SUPERVISION_POOL_THREADS` sets its size)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                threads = _default_threads()
                _pool = Pool(threads, max_threads=threads * 8, block_warning=0.1)
    return _pool


class PooledServerProcess(ServerProcess):
    """A server whose mailbox is run by the shared pool."""

    __slots__ = ("_mailbox", "_mailbox_lock", "_pool", "_scheduled")

    def __init__(self, server: Any, parent: Process | None, pool: Pool | None = None) -> None:
        super().__init__(server, parent)
        self._mailbox: deque[tuple[Any, ...]] | None = None  # until the first message
        self._mailbox_lock = threading.Lock()
        self._scheduled = True  # held until `release` so nothing runs before init returns
        self._pool = get_pool() if pool is None else pool  # another: the pool's own tests

    def run_init(self, args: Any, name: Hashable | None, started: From) -> None:
        """Run `init` on the calling thread (bound to this process), then let the pool
        run the server. A ``continue_`` from init goes to the front of the mailbox, so
        `handle_continue` runs before any message that came in meanwhile."""
        after = self.run_in_context(self._init, args, name, started)
        if after is not None and self.alive:
            if after.continue_ is not None and after.timeout is None:
                with self._mailbox_lock:
                    self._queue().appendleft((CONTINUE, after.continue_))
            else:  # in the process's context, as every callback (terminate included)
                self.run_in_context(self._then, after.timeout, after.continue_, "init")
        self.release()

    def release(self) -> None:
        """Let the pool run this server (called once `init` has returned)."""
        with self._mailbox_lock:
            if not self._mailbox:
                self._scheduled = False
                return
        self._pool.schedule(self)

    def _queue(self) -> deque[tuple[Any, ...]]:
        """The mailbox, created by the first message (hold `_mailbox_lock`): an idle
        server holds no queue."""
        mailbox = self._mailbox
        if mailbox is None:
            mailbox = self._mailbox = deque()
        return mailbox

    def tell(self, envelope: tuple[Any, ...]) -> None:
        with self._mailbox_lock:
            if not self.alive:
                return
            mailbox = self._mailbox
            if mailbox is None:  # `_queue`, inline: this is every message's path
                mailbox = self._mailbox = deque()
            mailbox.append(envelope)
            if self._scheduled:
                return
            self._scheduled = True
        self._pool.schedule(self)

    def mailbox_size(self) -> int:
        return len(self._mailbox or ())

    def on_exit(self) -> None:
        self.state = None
        self._idle = None
        with self._mailbox_lock:
            if self._mailbox is not None:
                self._mailbox.clear()
