"""The generic server loop body shared by every dispatcher.

`ServerProcess.handle` runs one mailbox message through a `GenServer`'s callbacks:
replies, explicit state, `Stop`, crashes. A dispatcher (a pykka thread per server,
or the shared pool) owns the mailbox and calls `handle` one message at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from supervision import crash_report
from supervision.errors import KernelError, NameTaken, ProcessExit
from supervision.names import lookup, register_process
from supervision.pid import Pid
from supervision.process import Process
from supervision.signals import Crash, Down, ExitSignal, Reason, Ref, is_normal_exit

if TYPE_CHECKING:
    from supervision.gen_server import GenServer


class Tag(IntEnum):
    """What an envelope in a server's mailbox is; its first item.

    Envelopes are plain tuples, ``(tag, *fields)``, because they are the kernel's hot
    path: ``(CALL, request, from_)``, ``(CAST, msg)``, ``(INFO, msg)``,
    ``(INIT, args, name, started)``, ``(STOP, reason)``.
    """

    CALL = 0
    CAST = 1
    INFO = 2
    INIT = 3
    STOP = 4

    @property
    def callback(self) -> str:
        """The name crash reports give the callback this envelope runs (``"call"``, ...)."""
        return self.name.lower()


# Module-level aliases: the loop compares with `is`, and a global lookup is cheaper
# than an attribute lookup on the enum class.
CALL, CAST, INFO, INIT, STOP = Tag.CALL, Tag.CAST, Tag.INFO, Tag.INIT, Tag.STOP


class _NoReplyValue:
    def __repr__(self) -> str:
        return "NO_REPLY"


NO_REPLY: Any = _NoReplyValue()
"""`Stop(reason, state)` without `reply=` sends no reply to the caller."""


class Reply(NamedTuple):
    """From `handle_call`: answer the caller with `value`, continue with `state`."""

    value: Any
    state: Any


class NoReply(NamedTuple):
    """From `handle_call`: answer later with `reply(from_, value)`; continue with `state`."""

    state: Any


class Stop(NamedTuple):
    """From any callback (or `init`): run `terminate`, optionally reply, exit with `reason`."""

    reason: Any
    state: Any = None
    reply: Any = NO_REPLY


class From:
    """A pending call's reply slot, handed to `handle_call` as `from_`.

    Exactly one of reply, callee death (it is also the caller's monitor on the
    callee) or the caller's timeout settles it; whichever comes later is ignored.
    """

    __slots__ = ("_claim", "_failed", "_lock", "_value")

    def __init__(self) -> None:
        self._claim = [True]  # list.pop is atomic: whoever pops first settles the slot
        self._value: Any = None
        self._failed = False
        self._lock = threading.Lock()
        self._lock.acquire()

    def __repr__(self) -> str:
        return f"<From {id(self):#x}>"

    @property
    def failed(self) -> bool:
        """True when the callee's exit (not a reply) settled the slot; `value` is then
        its exit reason. Meaningful once `wait` returned True."""
        return self._failed

    @property
    def value(self) -> Any:
        """The reply, or the callee's exit reason when `failed`."""
        return self._value

    def settle(self, value: Any, failed: bool) -> bool:
        """Settle the slot with a reply (or, `failed`, an exit reason); False if it
        already was settled or timed out."""
        try:
            self._claim.pop()
        except IndexError:
            return False
        self._value = value
        self._failed = failed
        self._wake()
        return True

    def claim_for_timeout(self) -> bool:
        """Close the slot unsettled (a timeout, a cancelled request); False if it
        was settled first."""
        try:
            self._claim.pop()
        except IndexError:
            return False
        return True

    def _wake(self) -> None:
        self._lock.release()

    def notify_down(self, ref: Hashable, pid: Pid, reason: Reason) -> None:
        self.settle(reason, True)

    def wait(self, timeout: float | None) -> bool:
        """Block until settled; False on timeout (and the slot is then closed)."""
        if self._lock.acquire(True, -1 if timeout is None else max(0.0, timeout)):
            return True
        if self.claim_for_timeout():
            return False
        self._lock.acquire()  # settled right at the deadline: the value is on its way
        return True

    def result(self) -> Any:
        """The reply; raises `ProcessExit` with the exit reason when `failed`."""
        if self._failed:
            raise ProcessExit(
                self._value, f"the server exited: {crash_report.format_reason(self._value)}"
            )
        return self._value


class ServerProcess(Process):
    """A process running a `GenServer`'s callbacks; a dispatcher subclass owns the mailbox.

    Subclasses implement `tell` (enqueue an envelope, never raise), `on_exit` and
    `mailbox_size`. `demonitor(flush=True)` needs no mailbox search: a `Down` that is
    queued but not yet handled is remembered, and dropped when its turn comes.
    """

    __slots__ = ("_queued_downs", "server", "state")

    accepts_calls = True

    def __init__(self, server: GenServer, parent: Process | None) -> None:
        super().__init__()
        self.server = server
        self.state: Any = None
        self.parent = parent
        self.label = type(server).__qualname__
        # Down refs in the mailbox, not yet handled -> dropped by demonitor(flush)?
        self._queued_downs: dict[Hashable, bool] | None = None

    def tell(self, envelope: tuple[Any, ...]) -> None:
        raise NotImplementedError

    def mailbox_size(self) -> int:
        raise NotImplementedError

    def deliver(self, message: Any) -> None:
        if type(message) is Down:
            if self._queued_downs is None:  # notify_down holds our lock here
                self._queued_downs = {}
            self._queued_downs[message.ref] = False
        self.tell((INFO, message))

    def remove_down_message(self, ref: Ref) -> None:
        if self._queued_downs is not None and ref in self._queued_downs:
            self._queued_downs[ref] = True

    def cast(self, message: Any) -> None:
        self.tell((CAST, message))

    # -- the receive loop body ---------------------------------------------------------

    def handle(self, message: tuple[Any, ...]) -> None:
        """Run one mailbox envelope through the server's callbacks."""
        if not self.alive:
            return  # dead: the rest of the mailbox is dropped
        tag = message[0]
        server = self.server
        try:
            if tag is CALL:
                result = server.handle_call(message[1], message[2], self.state)
                if not self.alive:
                    return  # killed while the handler ran: fenced, result discarded
                kind = type(result)
                if kind is Reply:
                    self.state = result.state
                    message[2].settle(result.value, False)
                elif kind is NoReply:
                    self.state = result.state
                elif kind is Stop:
                    self._stop(result, message[2], "call")
                else:
                    self._bad_return("handle_call", result)
                return
            if tag is CAST:
                result = server.handle_cast(message[1], self.state)
            elif tag is INFO:
                info = message[1]
                parent = self.parent
                if type(info) is ExitSignal and parent is not None and info.pid == parent.pid:
                    self._stop(Stop(info.reason, self.state), None, "parent exit")
                    return
                if type(info) is Down and self._forget_down(info.ref):
                    return  # flushed by demonitor
                result = server.handle_info(info, self.state)
            elif tag is INIT:
                self._init(message[1], message[2], message[3])
                return
            elif tag is STOP:
                self._stop(Stop(message[1], self.state), None, "stop")
                return
            else:
                raise KernelError("invalid_envelope", f"unknown mailbox tag {tag!r}")
            if not self.alive:
                return
            if type(result) is Stop:
                self._stop(result, None, tag.callback)
            else:
                self.state = result
        except BaseException as exc:  # OTP semantics: any exception crashes the process
            during = tag.callback if isinstance(tag, Tag) else "envelope"
            self._crash(Crash.from_exception(exc), during)

    def _forget_down(self, ref: Hashable) -> bool:
        """A queued Down reaches the handler: True if demonitor(flush) dropped it."""
        with self._lock:
            return self._queued_downs is not None and self._queued_downs.pop(ref, False)

    def _init(self, args: Any, name: Hashable | None, started: From) -> None:
        if name is not None:
            try:
                register_process(name, self)  # check and register in one step
            except NameTaken:
                holder = lookup(name)
                self._fail_start(started, ("already_started", holder.pid if holder else None))
                return
        try:
            result = self.server.init(args)
        except BaseException as exc:
            reason = exc.reason if isinstance(exc, KernelError) else Crash.from_exception(exc)
            self._fail_start(started, reason)
            return
        if type(result) is Stop:
            self._fail_start(started, result.reason)
            return
        self.state = result
        started.settle(self.pid, False)

    def _fail_start(self, started: From, reason: Reason) -> None:
        # The caller learns through StartError; unlink first so it is not also killed.
        if self.parent is not None:
            self.unlink(self.parent)
        started.settle(reason, True)
        if not is_normal_exit(reason) and not (
            isinstance(reason, tuple) and reason[:1] == ("already_started",)
        ):
            crash_report.process_crashed(self.pid, self.label, self.name, reason, "init")
        self.exit(reason)

    def _stop(self, stop: Stop, caller: From | None, during: str) -> None:
        if not self.alive:
            return  # killed meanwhile: fenced, terminate does not run
        reason = self._run_terminate(stop.reason, stop.state)
        if caller is not None and stop.reply is not NO_REPLY:
            caller.settle(stop.reply, False)
        if not is_normal_exit(reason):
            crash_report.process_crashed(self.pid, self.label, self.name, reason, during)
        self.exit(reason)

    def _crash(self, reason: Crash, during: str) -> None:
        if not self.alive:
            return
        reason = self._run_terminate(reason, self.state)
        crash_report.process_crashed(self.pid, self.label, self.name, reason, during)
        self.exit(reason)

    def _run_terminate(self, reason: Reason, state: Any) -> Reason:
        """Call `terminate`; if it raises, that crash becomes the exit reason."""
        self.state = state
        try:
            self.server.terminate(reason, state)
        except BaseException as exc:
            return Crash.from_exception(exc)
        return reason

    def _bad_return(self, callback: str, result: Any) -> None:
        self._crash(
            Crash("bad_return_value", f"{callback} returned {type(result).__name__}"), callback
        )
