"""The generic server loop body shared by every dispatcher.

`ServerProcess.handle` runs one mailbox message through a `GenServer`'s callbacks:
replies, explicit state, `Stop`, `Exit`, crashes, ``continue_`` instructions (run
before the next message) and idle ``timeout``s. A dispatcher (a pykka thread per
server, or the shared pool) owns the mailbox and calls `handle` one message at a time.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Hashable
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from supervision import crash_report
from supervision.carried_context import Context, capture
from supervision.errors import KernelError, NameTaken, ProcessExit
from supervision.names import lookup, register_process
from supervision.pid import Pid
from supervision.process import Process
from supervision.protocol import Ok, Refused
from supervision.signals import Crash, Down, ExitSignal, Reason, Ref, is_normal_exit
from supervision.timer_service import TimerRef, service

if TYPE_CHECKING:
    from supervision.gen_server import GenServer


class Tag(IntEnum):
    """What an envelope in a server's mailbox is; its first item.

    Envelopes are plain tuples, ``(tag, *fields)``, because they are the kernel's hot
    path: ``(CALL, request, from_)``, ``(CAST, msg)``, ``(INFO, msg)``,
    ``(INIT, args, name, started)``, ``(STOP, reason)``, and the kernel's own
    ``(CONTINUE, payload)``, ``(TIMEOUT, idle_timer)``, ``(SYSTEM, request, from_)``.
    """

    CALL = 0
    CAST = 1
    INFO = 2
    INIT = 3
    STOP = 4
    CONTINUE = 5
    TIMEOUT = 6
    SYSTEM = 7

    @property
    def callback(self) -> str:
        """The name crash reports give the callback this envelope runs (``"call"``, ...)."""
        return "info" if self is Tag.TIMEOUT else self.name.lower()


# Module-level aliases: the loop compares with `is`, and a global lookup is cheaper
# than an attribute lookup on the enum class.
CALL, CAST, INFO, INIT, STOP = Tag.CALL, Tag.CAST, Tag.INFO, Tag.INIT, Tag.STOP
CONTINUE, TIMEOUT, SYSTEM = Tag.CONTINUE, Tag.TIMEOUT, Tag.SYSTEM


class _NoReplyValue:
    def __repr__(self) -> str:
        return "NO_REPLY"


NO_REPLY: Any = _NoReplyValue()
"""`Stop(reason, state)` without `reply=` sends no reply to the caller."""


# -- what callbacks return ------------------------------------------------------------------


class Reply(NamedTuple):
    """From `handle_call`: answer the caller with `value`, continue with `state`.

    ``timeout=seconds``: if no message arrives within it, `handle_info(Timeout())` runs.
    ``continue_=payload``: `handle_continue(payload, state)` runs before any other
    message. At most one of the two (as in OTP); a payload is never None.
    """

    value: Any
    state: Any
    timeout: float | None = None
    continue_: Any = None


class NoReply(NamedTuple):
    """From any callback: continue with `state`, no reply now (`handle_call` answers
    later with `reply(from_, value)`). `timeout`, `continue_`: as for `Reply`. Elsewhere
    than `handle_call`, a bare state is the same as ``NoReply(state)``."""

    state: Any
    timeout: float | None = None
    continue_: Any = None


class Stop(NamedTuple):
    """From any callback (or `init`): run `terminate`, optionally reply, exit with `reason`."""

    reason: Any
    state: Any = None
    reply: Any = NO_REPLY


class _Marker:
    """A value without fields, equal to the instances of its own class only."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self).__name__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Ignore(_Marker):
    """From `init`: do not start. `start`/`start_link` return None (a supervisor skips
    the child), the process exits ``"normal"`` and its name is free again."""

    __slots__ = ()


class Timeout(_Marker):
    """The message `handle_info` gets when a callback's ``timeout=`` ran out with no
    other message (OTP's ``timeout``)."""

    __slots__ = ()


TIMEOUT_MESSAGE = Timeout()
IGNORED = Ignore()  # what a start slot holds when init returned Ignore()


class Exit(Exception):
    """Raise in a callback to end the server with exactly `reason` (``erlang:exit/1``).

    `terminate(reason, state)` runs, links and monitors see `reason`, a pending `call`
    gets `ProcessExit(reason)`; ``Exit("normal")`` and the shutdown family are normal
    exits (no crash report; a transient child is not restarted). Raised in `init`, the
    start fails with `StartError(reason)`; in `terminate`, `reason` becomes the exit reason.
    """

    def __init__(self, reason: Reason) -> None:
        super().__init__(crash_report.format_reason(reason))
        self.reason = reason


# -- debugging requests (OTP's sys:get_state / sys:replace_state) --------------------------


class GetState(NamedTuple):
    """A system request: answer `Ok(state)`."""


class ReplaceState(NamedTuple):
    """A system request: state = fn(state), answer `Ok(new state)`; if fn raises, keep
    the state and answer `Refused(KernelError(("callback_failed", crash)))`."""

    fn: Callable[[Any], Any]


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
            started.settle(self.pid, False)
            if result.timeout is None and result.continue_ is None:
                return None
            return cast(NoReply, result)
        self.state = result
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
