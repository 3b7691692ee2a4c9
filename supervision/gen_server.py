"""`GenServer`: the OTP server behaviour on a pykka actor, and `call`/`cast`/`reply`/`stop`.

The generic part lives here: the receive loop, replies, state threading, crash
semantics. A server class only writes callbacks. Unlike plain pykka, an exception in
a callback crashes the process with a bounded `Crash(kind, message)` reason (links and
monitors fire, a caller blocked in `call` gets `ProcessExit`), as in OTP.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any, ClassVar, NamedTuple, TypeVar

import pykka
import structlog

from supervision import crash_report
from supervision.errors import AlreadyStarted, CallTimeout, KernelError, ProcessExit, StartError
from supervision.pid import Pid
from supervision.process import (
    Process,
    _current,
    bind_thread,
    current_process,
    is_fenced_thread,
    require_alive,
    resolve,
)
from supervision.registry import lookup, register_process
from supervision.signals import Crash, Down, ExitSignal, Reason, Ref, is_normal_exit

_log = structlog.get_logger("supervision")

# Envelope tags in a server's mailbox.
_CALL, _CAST, _INFO, _INIT, _STOP = range(5)
_TAG_NAMES = ("call", "cast", "info", "init", "stop")


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

    def settle(self, value: Any, failed: bool) -> bool:
        try:
            self._claim.pop()
        except IndexError:
            return False
        self._value = value
        self._failed = failed
        self._wake()
        return True

    def claim_for_timeout(self) -> bool:
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
        if self._lock.acquire(True, -1 if timeout is None else timeout):
            return True
        if self.claim_for_timeout():
            return False
        self._lock.acquire()  # settled right at the deadline: the value is on its way
        return True

    def result(self) -> Any:
        if self._failed:
            raise ProcessExit(
                self._value, f"the server exited: {crash_report.format_reason(self._value)}"
            )
        return self._value


class _ServerActor(pykka.ThreadingActor):
    """The pykka actor that owns a server's thread and mailbox."""

    use_daemon_thread = True

    def __init__(self, process: ServerProcess) -> None:
        super().__init__()
        self._process = process

    def on_start(self) -> None:
        bind_thread(self._process)

    def on_receive(self, message: Any) -> None:
        self._process.handle(message)


class ServerProcess(Process):
    """A process running a `GenServer`'s callbacks on its own pykka actor thread."""

    accepts_calls = True

    def __init__(self, server: GenServer, parent: Process | None) -> None:
        super().__init__()
        self.server = server
        self.state: Any = None
        self.parent = parent
        self.label = type(server).__qualname__
        self._actor_ref = _ServerActor.start(self)
        self._tell = self._actor_ref.tell

    def tell(self, envelope: tuple[Any, ...]) -> None:
        try:
            self._tell(envelope)
        except pykka.ActorDeadError:
            pass  # the process died meanwhile: like any message to a dead pid, dropped

    def deliver(self, message: Any) -> None:
        self.tell((_INFO, message))

    def cast(self, message: Any) -> None:
        self.tell((_CAST, message))

    def on_exit(self) -> None:
        self._actor_ref.stop(block=False)

    def remove_down_message(self, ref: Ref) -> None:
        inbox = self._actor_ref.actor_inbox
        with inbox.mutex:  # type: ignore[attr-defined]
            for envelope in inbox.queue:  # type: ignore[attr-defined]
                message = envelope.message
                if (
                    type(message) is tuple
                    and message[0] == _INFO
                    and type(message[1]) is Down
                    and message[1].ref == ref
                ):
                    inbox.queue.remove(envelope)  # type: ignore[attr-defined]
                    return

    # -- the receive loop body ---------------------------------------------------------

    def handle(self, message: tuple[Any, ...]) -> None:
        """Run one mailbox message through the server's callbacks."""
        if not self.alive:
            return  # dead: the rest of the mailbox is dropped
        tag = message[0]
        server = self.server
        try:
            if tag == _CALL:
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
            if tag == _CAST:
                result = server.handle_cast(message[1], self.state)
            elif tag == _INFO:
                info = message[1]
                parent = self.parent
                if type(info) is ExitSignal and parent is not None and info.pid == parent.pid:
                    self._stop(Stop(info.reason, self.state), None, "parent exit")
                    return
                result = server.handle_info(info, self.state)
            elif tag == _INIT:
                self._init(message[1], message[2], message[3])
                return
            else:  # _STOP
                self._stop(Stop(message[1], self.state), None, "stop")
                return
            if not self.alive:
                return
            if type(result) is Stop:
                self._stop(result, None, _TAG_NAMES[tag])
            else:
                self.state = result
        except BaseException as exc:  # OTP semantics: any exception crashes the process
            self._crash(Crash.from_exception(exc), _TAG_NAMES[tag])

    def _init(self, args: Any, name: Hashable | None, started: From) -> None:
        if name is not None:
            holder = lookup(name)
            if holder is not None:
                self._fail_start(started, AlreadyStarted(name, holder.pid).reason)
                return
            register_process(name, self)
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


S = TypeVar("S", bound="GenServer")


class GenServer:
    """Base class for servers. Override the callbacks you need; state is explicit.

    * ``init(args) -> state`` (or `Stop(reason)` to refuse to start)
    * ``handle_call(request, from_, state) -> Reply | NoReply | Stop``
    * ``handle_cast(msg, state) -> state | Stop``
    * ``handle_info(msg, state) -> state | Stop`` (`Down`, `ExitSignal`, timers, `send`)
    * ``terminate(reason, state)``: on `Stop`, a crash, `stop()`, or a trapped exit from the parent
    """

    dispatcher: ClassVar[str] = "thread"

    def init(self, args: Any) -> Any:
        return args

    def handle_call(self, request: Any, from_: From, state: Any) -> Any:
        raise KernelError("unexpected_call", f"{type(self).__qualname__} does not handle calls")

    def handle_cast(self, msg: Any, state: Any) -> Any:
        raise KernelError("unexpected_cast", f"{type(self).__qualname__} does not handle casts")

    def handle_info(self, msg: Any, state: Any) -> Any:
        _log.debug(
            "supervision.server.unhandled_info",
            server=type(self).__qualname__,
            kind=type(msg).__name__,
        )
        return state

    def terminate(self, reason: Reason, state: Any) -> None:
        return None

    @classmethod
    def start_link(
        cls, args: Any = None, *, name: Hashable | None = None, timeout: float | None = None
    ) -> Pid:
        """Start a server linked to the calling process; returns once `init` has returned.

        Raises `StartError` (its `reason` says why) if `init` fails or the name is taken.
        """
        return _spawn(cls(), args, name, link=True, timeout=timeout)

    @classmethod
    def start(
        cls, args: Any = None, *, name: Hashable | None = None, timeout: float | None = None
    ) -> Pid:
        """Start a server with no link to the caller (see `start_link`)."""
        return _spawn(cls(), args, name, link=False, timeout=timeout)


def _spawn(
    server: GenServer, args: Any, name: Hashable | None, link: bool, timeout: float | None
) -> Pid:
    caller = current_process()
    assert caller is not None
    if link:
        require_alive(caller)
    elif is_fenced_thread():
        raise ProcessExit(caller.exit_reason, "a killed process cannot start processes")
    process = ServerProcess(server, caller if link else None)
    started = From()
    process.tell((_INIT, args, name, started))
    if link:
        caller.link(process)
    if not started.wait(timeout):
        process.exit("killed")
        raise StartError("timeout", f"init did not return within {timeout} s")
    if started._failed:
        reason = started._value
        if isinstance(reason, tuple) and reason[:1] == ("already_started",):
            raise AlreadyStarted(name, reason[1])
        raise StartError(reason, f"init failed: {crash_report.format_reason(reason)}")
    return process.pid


def _server(dest: Pid | Hashable) -> ServerProcess | None:
    process = resolve(dest)
    if process is None or isinstance(process, ServerProcess):
        return process
    raise KernelError("not_a_server", f"{dest!r} is not a GenServer")


def call(dest: Pid | Hashable, request: Any, timeout: float | None = 5.0) -> Any:
    """Send `request` to a server (pid or name) and wait for its reply.

    Raises `CallTimeout` after `timeout` seconds, or `ProcessExit(reason)` at once if the
    server is not alive (``"noproc"``) or exits before it replies.
    """
    process = _server(dest)
    if process is None:
        raise ProcessExit("noproc", f"no process {dest!r}")
    me = getattr(_current, "process", None)
    if me is process:
        raise KernelError("calling_self", "a server cannot call itself; it would wait forever")
    if me is not None and not me.alive and not me.is_pseudo:
        raise ProcessExit(me.exit_reason, "this thread's process was killed")
    slot = From()
    if not process.add_watcher(slot, slot):
        raise ProcessExit("noproc", f"{dest!r} is not alive")
    process.tell((_CALL, request, slot))
    settled = slot.wait(timeout)
    process.remove_watcher(slot)
    if not settled:
        raise CallTimeout(timeout)
    return slot.result()


def cast(dest: Pid | Hashable, msg: Any) -> None:
    """Send `msg` to a server's `handle_cast`; never fails, even if nobody is there."""
    process = resolve(dest)
    if process is not None and not is_fenced_thread():
        process.cast(msg)


def reply(from_: From, value: Any) -> None:
    """Answer a call that `handle_call` deferred with `NoReply`; callable from any thread."""
    if not is_fenced_thread():
        from_.settle(value, False)


def stop(dest: Pid | Hashable, reason: Reason = "normal", timeout: float | None = 5.0) -> None:
    """Stop a server in order: it runs `terminate(reason, state)` and exits with `reason`.

    Returns once it is dead. Raises `ProcessExit` if it was not alive or exited with
    another reason, `CallTimeout` if it did not stop in time.
    """
    process = _server(dest)
    if process is None:
        raise ProcessExit("noproc", f"no process {dest!r}")
    slot = From()
    if not process.add_watcher(slot, slot):
        raise ProcessExit("noproc", f"{dest!r} is not alive")
    process.tell((_STOP, reason))
    settled = slot.wait(timeout)
    process.remove_watcher(slot)
    if not settled:
        raise CallTimeout(timeout)
    if slot._value != reason:
        raise ProcessExit(
            slot._value, f"the server exited with {crash_report.format_reason(slot._value)}"
        )
