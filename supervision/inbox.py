"""`Inbox`: a mailbox-only process that belongs to the process that made it.

A plain thread already has a mailbox (its pseudo-process, read with `receive`), but
only one. An `Inbox` is a second, private one: a subscription, a pending reply or a
set of monitors whose messages must not mix with the owner's own. It has a pid
(send to it, subscribe it to a stream, let a server reply to it), it can monitor
other processes (their `Down` arrives in it), and it exits with ``"normal"`` when
its owner exits or when it is closed, so whoever it subscribed to or monitored sees
it go. Many inboxes can be read by one thread, or awaited by one event loop with
`areceive`, which parks no thread.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from supervision.errors import ProcessExit
from supervision.pid import Pid
from supervision.process import Process, PseudoProcess, current_process, resolve
from supervision.signals import Down, Reason, Ref
from supervision.wakeups import wake_all

Match = Callable[[Any], bool]
"""Selects the message to take; the others stay in the inbox, in order."""

_NOTHING: Any = object()


class _InboxProcess(PseudoProcess):
    """The process behind an `Inbox`: a pseudo-process that no thread is bound to."""

    __slots__ = ("_owner", "_waiters", "_waker")

    def __init__(self, owner: Process, label: str) -> None:
        super().__init__(threading.current_thread(), label)
        self._owner = owner
        self._waker: Callable[[], object] | None = None
        # `areceive` calls waiting for mail; None (the usual case) until one waits
        self._waiters: set[Callable[[], object]] | None = None
        if not owner.add_watcher(self, self):  # keyed by the inbox: see notify_down
            self.exit("normal")

    def deliver(self, message: Any) -> None:
        with self._arrived_lock:
            if not self.alive:
                return
            self._mailbox.append(message)
            if self._sleepers:
                wake_all(self._sleepers)
            waiters = list(self._waiters) if self._waiters else None
        if waiters is not None or self._waker is not None:
            self._wake(waiters)

    def notify_down(self, ref: Hashable, pid: Pid, reason: Reason) -> None:
        if ref is self:  # the owner exited: so does its inbox
            self.exit("normal")
        else:
            super().notify_down(ref, pid, reason)

    def on_exit(self) -> None:
        with self._arrived_lock:
            self._mailbox.clear()
            if self._sleepers:
                wake_all(self._sleepers)
            waiters = list(self._waiters) if self._waiters else None
        if waiters is not None or self._waker is not None:
            self._wake(waiters)  # a waiting `areceive` wakes up to raise ProcessExit

    def close(self) -> None:
        self._owner.remove_watcher(self)
        self.exit("normal")

    def set_waker(self, waker: Callable[[], object] | None) -> None:
        self._waker = waker

    def take(self, match: Match | None) -> Any:
        """The next (matching) message, or `_NOTHING`; `ProcessExit` once closed."""
        with self._arrived_lock:
            if not self.alive:
                raise ProcessExit(self.exit_reason, "the inbox is closed")
            if match is None:
                return self._mailbox.popleft() if self._mailbox else _NOTHING
            for message in self._mailbox:
                if match(message):
                    self._mailbox.remove(message)
                    return message
            return _NOTHING

    def add_waiter(self, waiter: Callable[[], object]) -> None:
        with self._arrived_lock:
            if self._waiters is None:
                self._waiters = set()
            self._waiters.add(waiter)

    def discard_waiter(self, waiter: Callable[[], object]) -> None:
        with self._arrived_lock:
            if self._waiters is not None:
                self._waiters.discard(waiter)
                if not self._waiters:
                    self._waiters = None

    def _wake(self, waiters: list[Callable[[], object]] | None) -> None:
        if waiters:
            for waiter in waiters:
                waiter()
        waker = self._waker
        if waker is not None:
            waker()


class Inbox:
    """A private mailbox process owned by the calling process.

    * `pid`: where messages, replies and stream items for it are sent;
    * `receive(timeout, match)` / ``await areceive(timeout, match)``: take the next
      message (or the first one `match` accepts); `TimeoutError` when none comes;
    * `monitor(pid)`: its `Down` arrives in this inbox;
    * `close()`: the inbox exits with ``"normal"`` (also when its owner exits); after
      that `receive`, `areceive` and `monitor` raise `ProcessExit`.

    `set_waker(fn)` installs a callback run after every delivery, on the delivering
    thread, so an event loop or a selector can learn that mail arrived.
    """

    __slots__ = ("_process",)

    def __init__(self, label: str = "inbox") -> None:
        owner = current_process()
        assert owner is not None
        self._process = _InboxProcess(owner, label)

    def __repr__(self) -> str:
        return f"<Inbox {self._process.pid} {self._process.label}>"

    def __enter__(self) -> Inbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def pid(self) -> Pid:
        return self._process.pid

    @property
    def closed(self) -> bool:
        """True once the inbox has exited (closed, or its owner exited)."""
        return not self._process.alive

    def close(self) -> None:
        """Exit with ``"normal"``; idempotent. Messages not yet taken are dropped."""
        self._process.close()

    def set_waker(self, waker: Callable[[], object] | None) -> None:
        """Run `waker()` after each delivery (and once when the inbox exits); None
        removes it. It runs on the sender's thread, so it must be quick and must not
        block: ``loop.call_soon_threadsafe(...)`` is the intended use."""
        self._process.set_waker(waker)

    def receive(self, timeout: float | None = None, match: Match | None = None) -> Any:
        """Block until a (matching) message is in the inbox and take it.

        Raises `TimeoutError` after `timeout` seconds (None: wait for ever), and
        `ProcessExit` once the inbox is closed.
        """
        return self._process.receive(timeout, match)

    async def areceive(self, timeout: float | None = None, match: Match | None = None) -> Any:
        """`receive` for asyncio code: awaits a future the delivering thread resolves,
        so the event loop keeps running and no thread waits on the inbox's behalf."""
        process = self._process
        message = process.take(match)
        if message is not _NOTHING:
            return message
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            arrived: asyncio.Future[None] = loop.create_future()
            waiter = functools.partial(_resolve_soon, loop, arrived)
            process.add_waiter(waiter)
            try:
                message = process.take(match)  # it may have come before the waiter was in
                if message is not _NOTHING:
                    return message
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError("receive: no matching message in time")
                try:
                    await asyncio.wait_for(arrived, remaining)
                except TimeoutError:
                    raise TimeoutError("receive: no matching message in time") from None
            finally:
                process.discard_waiter(waiter)
            message = process.take(match)
            if message is not _NOTHING:
                return message

    def monitor(self, dest: Pid | Hashable) -> Ref:
        """Monitor `dest` (a pid or a registered name) on the inbox's behalf: one
        `Down(ref, pid, reason)` arrives in the inbox; at once, with ``"noproc"``, if
        `dest` is not alive."""
        process = self._process
        if not process.alive:
            raise ProcessExit(process.exit_reason, "the inbox is closed")
        target = resolve(dest)
        if target is None:
            ref = Ref()
            process.deliver(Down(ref, dest, "noproc"))
            return ref
        return process.monitor(target)

    def demonitor(self, ref: Ref, flush: bool = False) -> bool:
        """Stop a monitor; with `flush`, also drop its `Down` if it already arrived.
        True if the monitor was still active."""
        return self._process.demonitor(ref, flush)


def _resolve_soon(loop: asyncio.AbstractEventLoop, arrived: asyncio.Future[None]) -> None:
    """Called on the delivering thread: resolve `arrived` on its own loop."""

    def resolve_future() -> None:
        if not arrived.done():
            arrived.set_result(None)

    try:
        loop.call_soon_threadsafe(resolve_future)
    except RuntimeError:
        pass  # the loop is closed: nobody waits any more
