"""The generic server loop body shared by every dispatcher.

`ServerProcess.handle` runs one mailbox message through a `GenServer`'s callbacks:
replies, explicit state, `Stop`, `Exit`, crashes, ``continue_`` instructions (run
before the next message) and idle ``timeout``s. A dispatcher (a pykka thread per
server, or the shared pool) owns the mailbox and calls `handle` one message at a time.
What the mailbox holds is in `envelopes.py`, what callbacks return in
`server_returns.py`, a call's reply slot in `reply_slot.py`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, cast

from supervision import crash_report
from supervision.carried_context import Context, capture
from supervision.envelopes import (
    CALL,
    CAST,
    CONTINUE,
    INFO,
    INIT,
    STOP,
    SYSTEM,
    TIMEOUT,
    GetState,
    ReplaceState,
    Tag,
)
from supervision.errors import KernelError, NameTaken
from supervision.names import lookup, register_process
from supervision.process import Process
from supervision.protocol import Ok, Refused
from supervision.reply_slot import From
from supervision.server_returns import (
    IGNORED,
    NO_REPLY,
    TIMEOUT_MESSAGE,
    Exit,
    Ignore,
    NoReply,
    Reply,
    Stop,
)
from supervision.signals import Crash, Down, ExitSignal, Reason, Ref, is_normal_exit
from supervision.timer_service import TimerRef, service

if TYPE_CHECKING:
    from supervision.gen_server import GenServer


class _IdleTimer:
    """A callback's ``timeout=``: the timer service's target for it. When the timer
    fires, the server gets a ``(TIMEOUT, self)`` envelope rather than a plain message,
    so nobody can forge one and a stale one (a message came first) is recognised."""

    __slots__ = ("process", "timer")

    def __init__(self, process: ServerProcess) -> None:
        self.process = process
        self.timer: TimerRef | None = None

    # What the timer service calls on a timer's target (see `timer_service.py`).
    @property
    def alive(self) -> bool:
        return self.process.alive

    def add_timer(self, timer: Any) -> bool:
        return self.process.add_timer(timer)  # the process's exit cancels the timer

    def discard_timer(self, timer: Any) -> None:
        self.process.discard_timer(timer)

    def deliver(self, message: Any) -> None:
        self.process.tell((TIMEOUT, self))


def _valid_timeout(timeout: Any) -> bool:
    return (
        isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout >= 0
    )  # NaN fails `>= 0`


class ServerProcess(Process):
    """A process running a `GenServer`'s callbacks; a dispatcher subclass owns the mailbox.

    Subclasses implement `tell` (enqueue an envelope, never raise), `on_exit` and
    `mailbox_size`. `demonitor(flush=True)` needs no mailbox search: a `Down` that is
    queued but not yet handled is remembered, and dropped when its turn comes.
    """

    __slots__ = ("_context", "_idle", "_queued_downs", "server", "state")

    accepts_calls = True

    def __init__(self, server: GenServer, parent: Process | None) -> None:
        super().__init__()
        self.server = server
        self.state: Any = None
        self.parent = parent
        self.label = type(server).__qualname__
        # Down refs in the mailbox, not yet handled -> dropped by demonitor(flush)?
        self._queued_downs: dict[Hashable, bool] | None = None
        # The armed idle timeout (a callback returned `timeout=`); None almost always.
        self._idle: _IdleTimer | None = None
        # A copy of the spawner's contextvars: init and every callback run in it. An
        # empty one is not kept until needed (`run_in_context`, `handle`): an idle
        # process holds one object less, and many thousand agents sit idle.
        context = capture()
        self._context: Context | None = context if len(context) else None

    @property
    def context(self) -> Context:
        """The process's own context (a copy of its spawner's); empty if none is kept."""
        context = self._context
        return Context() if context is None else context

    def run_in_context(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in the process's context (for `init`). Without one kept, in a fresh
        empty context, kept only if `fn` set a variable in it: an empty context is the
        same as none."""
        context = self._context
        if context is not None:
            return context.run(fn, *args)
        context = Context()
        try:
            return context.run(fn, *args)
        finally:
            if len(context):
                self._context = context

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
        """Run one mailbox envelope through the server's callbacks, in the process's
        context (see `carried_context`), created by the first message if none is kept."""
        context = self._context
        if context is None:
            context = self._context = Context()
        context.run(self._handle, message)
        if not self.alive:  # `_fence_state`, inline: this is every message's path
            self.state = None

    def _fence_state(self) -> None:
        """Drop the state of a process killed while a callback ran. The kill's exit drops
        the state, but a callback that passed its liveness check just before the kill
        stores its result after that: a dead process must hold no state (what the state
        holds is freed, and its finalizers run, when the process exits)."""
        if not self.alive:
            self.state = None

    def _handle(self, message: tuple[Any, ...]) -> None:
        if not self.alive:
            return  # dead: the rest of the mailbox is dropped
        tag = message[0]
        if tag is INFO and type(message[1]) is Down and self._forget_down(message[1].ref):
            return  # flushed by demonitor: as if it never arrived (an idle timeout stays on)
        if self._idle is not None and tag is not SYSTEM and tag is not TIMEOUT:
            self._disarm()  # a message came first: the idle timeout is off
        server = self.server
        try:
            if tag is CALL:
                result = server.handle_call(message[1], message[2], self.state)
                if not self.alive:
                    return  # killed while the handler ran: fenced, result discarded
                kind = type(result)
                if kind is Reply:
                    self.state = result.state
                    if result.timeout is None and result.continue_ is None:
                        message[2].settle(result.value, False)
                    else:
                        self._reply_then(result, message[2])
                elif kind is NoReply:
                    self.state = result.state
                    if result.timeout is not None or result.continue_ is not None:
                        self._then(result.timeout, result.continue_, "call")
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
                result = server.handle_info(info, self.state)
            elif tag is TIMEOUT:
                if message[1] is not self._idle:
                    return  # stale: a message came first
                self._idle = None
                result = server.handle_info(TIMEOUT_MESSAGE, self.state)
            elif tag is INIT:
                after = self._init(message[1], message[2], message[3])
                if after is not None:
                    self._then(after.timeout, after.continue_, "init")
                return
            elif tag is STOP:
                self._stop(Stop(message[1], self.state), None, "stop")
                return
            elif tag is CONTINUE:
                self._continue(message[1])
                return
            elif tag is SYSTEM:
                self._system(message[1], message[2])
                return
            else:
                raise KernelError("invalid_envelope", f"unknown mailbox tag {tag!r}")
            if not self.alive:
                return
            kind = type(result)
            if kind is Stop:
                self._stop(result, None, tag.callback)
            elif kind is NoReply:
                self.state = result.state
                if result.timeout is not None or result.continue_ is not None:
                    self._then(result.timeout, result.continue_, tag.callback)
            else:
                self.state = result
        except Exit as exc:
            self._stop(Stop(exc.reason, self.state), None, tag.callback)
        except BaseException as exc:  # OTP semantics: any exception crashes the process
            during = tag.callback if isinstance(tag, Tag) else "envelope"
            self._crash(Crash.from_exception(exc), during)

    def _forget_down(self, ref: Hashable) -> bool:
        """A queued Down reaches the handler: True if demonitor(flush) dropped it."""
        with self._lock:
            return self._queued_downs is not None and self._queued_downs.pop(ref, False)

    # -- what comes after a callback: continue_ and timeout ---------------------------------

    def _reply_then(self, result: Reply, caller: From) -> None:
        """A `Reply` with a `timeout` or `continue_`: checked before the caller is
        answered, so a bad return value is a crash the caller sees, not a reply."""
        timeout = result.timeout
        if result.continue_ is not None and timeout is not None:
            self._bad_action("call", "returned both timeout and continue_ (OTP allows one)")
        elif timeout is not None and not _valid_timeout(timeout):
            self._bad_action("call", f"returned an invalid timeout ({type(timeout).__name__})")
        else:
            caller.settle(result.value, False)
            self._then(timeout, result.continue_, "call")

    def _then(self, timeout: Any, payload: Any, during: str) -> None:
        """A callback returned `timeout` and/or `continue_` (its state is committed)."""
        if payload is None:
            self._arm(timeout, during)
        elif timeout is None:
            self._continue(payload)
        else:
            self._bad_action(during, "returned both timeout and continue_ (OTP allows one)")

    def _continue(self, payload: Any) -> None:
        """Run `handle_continue` now, before any other message; it may continue again."""
        server = self.server
        try:
            while True:
                result = server.handle_continue(payload, self.state)
                if not self.alive:
                    return
                kind = type(result)
                if kind is Stop:
                    self._stop(result, None, "continue")
                    return
                if kind is not NoReply:
                    self.state = result
                    return
                self.state = result.state
                if result.continue_ is None:
                    self._arm(result.timeout, "continue")
                    return
                if result.timeout is not None:
                    self._bad_action(
                        "continue", "returned both timeout and continue_ (OTP allows one)"
                    )
                    return
                payload = result.continue_
        except Exit as exc:
            self._stop(Stop(exc.reason, self.state), None, "continue")
        except BaseException as exc:
            self._crash(Crash.from_exception(exc), "continue")

    def _arm(self, timeout: Any, during: str) -> None:
        """Start the idle timeout a callback returned; any message but a system
        request cancels it (`handle`), and `handle_info(Timeout())` runs if none comes."""
        if timeout is None or timeout == math.inf:
            return
        if not _valid_timeout(timeout):
            self._bad_action(during, f"returned an invalid timeout ({type(timeout).__name__})")
            return
        idle = self._idle = _IdleTimer(self)
        if timeout == 0:
            self.tell((TIMEOUT, idle))  # behind whatever is in the mailbox already
            return
        # The timer service only calls alive/add_timer/discard_timer/deliver on a target.
        idle.timer = TimerRef(self.pid, cast(Process, idle), None, time.monotonic() + timeout)
        service.schedule(idle.timer)

    def _disarm(self) -> None:
        idle, self._idle = self._idle, None
        if idle is not None and idle.timer is not None:
            service.cancel(idle.timer)

    # -- system requests: get_state / replace_state -------------------------------------------

    def _system(self, request: Any, caller: From) -> None:
        """Answer a debugging request without running a callback or touching the idle
        timeout (as OTP's system messages leave a server's timeout running)."""
        if type(request) is GetState:
            caller.settle(Ok(self.state), False)
        elif type(request) is ReplaceState:
            try:
                state = request.fn(self.state)
            except BaseException as exc:
                crash = Crash.from_exception(exc)
                error = KernelError(
                    ("callback_failed", crash),
                    f"replace_state: the function raised {crash.kind}; the state is unchanged",
                )
                caller.settle(Refused(error), False)
                return
            if self.alive:  # not killed while fn ran
                self.state = state
                caller.settle(Ok(state), False)
        else:
            caller.settle(Refused(KernelError("invalid_request", "unknown system request")), False)

    # -- init ------------------------------------------------------------------------------

    def _init(self, args: Any, name: Hashable | None, started: From) -> NoReply | None:
        """Register `name`, run `init` and settle `started`. Returns the `NoReply` if
        init asked for a `timeout` or a `continue_` (the caller runs or defers it)."""
        if name is not None:
            try:
                register_process(name, self)  # check and register in one step
            except NameTaken:
                holder = lookup(name)
                self._fail_start(started, ("already_started", holder.pid if holder else None))
                return None
            except KernelError:
                return None  # killed before init ran (the start timed out)
        try:
            result = self.server.init(args)
        except Exit as exc:
            self._fail_start(started, exc.reason)
            return None
        except BaseException as exc:
            reason = exc.reason if isinstance(exc, KernelError) else Crash.from_exception(exc)
            self._fail_start(started, reason)
            return None
        if not self.alive:
            return None  # killed while init ran: `started` already holds the reason
        kind = type(result)
        if kind is Stop:
            self._fail_start(started, result.reason)
            return None
        if kind is Ignore:
            self._end_start(started, "normal", IGNORED, False)
            return None
        if kind is NoReply:
            self.state = result.state
            self._fence_state()
            started.settle(self.pid, False)
            if result.timeout is None and result.continue_ is None:
                return None
            return cast(NoReply, result)
        self.state = result
        self._fence_state()
        started.settle(self.pid, False)
        return None

    def _fail_start(self, started: From, reason: Reason) -> None:
        if not self.alive:
            return  # killed while init ran: fenced, `started` already holds the reason
        if not is_normal_exit(reason) and not (
            isinstance(reason, tuple) and reason[:1] == ("already_started",)
        ):
            crash_report.process_crashed(self.pid, self.label, self.name, reason, "init")
        self._end_start(started, reason, reason, True)

    def _end_start(self, started: From, reason: Reason, outcome: Any, failed: bool) -> None:
        """Exit without having started. The caller learns through `started` only: it is
        unlinked first (so no exit signal reaches it, as in current OTP), and settled
        last, once the exit is done and the name is free again (OTP 26: a failed start
        returns after the process is gone), so a retry cannot find the name taken."""
        if self.parent is not None:
            self.unlink(self.parent)
        self.remove_watcher(started)
        self.exit(reason)
        started.settle(outcome, failed)

    # -- stopping ----------------------------------------------------------------------------

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
        """Call `terminate`; if it raises, that crash (or an `Exit`'s reason) becomes
        the exit reason."""
        self.state = state
        try:
            self.server.terminate(reason, state)
        except Exit as exc:
            return exc.reason
        except BaseException as exc:
            return Crash.from_exception(exc)
        return reason

    def _bad_return(self, callback: str, result: Any) -> None:
        self._bad_action(callback, f"returned {type(result).__name__}")

    def _bad_action(self, callback: str, what: str) -> None:
        self._crash(Crash("bad_return_value", f"{callback} {what}"), callback)
