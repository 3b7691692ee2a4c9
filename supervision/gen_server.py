"""`GenServer`: the OTP server behaviour, `call`/`cast`/`reply`/`stop`, and
`get_state`/`replace_state` for debugging (OTP's ``sys:get_state/replace_state``).

A server class writes callbacks only; the generic part (the loop body, replies,
state threading, crash semantics) is in `server_process.py`, and a dispatcher runs
it: ``dispatcher = "thread"`` gives the server its own pykka actor thread,
``dispatcher = "pooled"`` shares a small pool of threads among many servers.
Unlike plain pykka, an exception in a callback crashes the process with a bounded
`Crash(kind, message)` (links and monitors fire, a caller blocked in `call` gets
`ProcessExit`), as in OTP.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import Any, ClassVar, Literal

from supervision import crash_report
from supervision.dispatch_pool import PooledServerProcess
from supervision.dispatch_thread import ThreadServerProcess
from supervision.envelopes import CALL, INIT, STOP, SYSTEM, GetState, ReplaceState, Tag
from supervision.errors import AlreadyStarted, CallTimeout, KernelError, ProcessExit, StartError
from supervision.logs import get_logger
from supervision.pid import Exited, Pid
from supervision.process import (
    _current,
    bind_thread,
    current_process,
    is_fenced_thread,
    require_alive,
    resolve,
)
from supervision.protocol import unwrap
from supervision.reply_slot import From
from supervision.server_process import ServerProcess
from supervision.server_returns import (
    IGNORED,
    NO_REPLY,
    Exit,
    Ignore,
    NoReply,
    Reply,
    Stop,
    Timeout,
)
from supervision.signals import Reason

__all__ = [
    "NO_REPLY",
    "Exit",
    "From",
    "GenServer",
    "Ignore",
    "NoReply",
    "Reply",
    "Stop",
    "Timeout",
    "call",
    "cast",
    "get_state",
    "replace_state",
    "reply",
    "stop",
]

_log = get_logger("supervision")

Dispatcher = Literal["thread", "pooled"]


class GenServer:
    """Base class for servers. Override the callbacks you need; state is explicit.

    * ``init(args) -> state | NoReply | Stop | Ignore`` (`Stop(reason)` refuses to
      start, `Ignore()` makes the start return None)
    * ``handle_call(request, from_, state) -> Reply | NoReply | Stop``
    * ``handle_cast(msg, state) -> state | NoReply | Stop``
    * ``handle_info(msg, state) -> state | NoReply | Stop`` (`Down`, `ExitSignal`,
      timers, `send`, `Timeout()`)
    * ``handle_continue(payload, state) -> state | NoReply | Stop``: after any callback
      that returned ``continue_=payload``, before the next message
    * ``terminate(reason, state)``: on `Stop`, `Exit`, a crash, `stop()`, or a trapped
      exit from the parent

    `Reply` and `NoReply` take ``timeout=seconds`` (no message within it:
    ``handle_info(Timeout())``) or ``continue_=payload``. Any callback may
    ``raise Exit(reason)`` to end the server with exactly that reason.
    """

    dispatcher: ClassVar[Dispatcher] = "pooled"
    """``"pooled"`` (default): share the pool's threads; ``"thread"``: own a pykka thread."""

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

    def handle_continue(self, payload: Any, state: Any) -> Any:
        raise KernelError(
            "unexpected_continue", f"{type(self).__qualname__} does not handle continue_"
        )

    def terminate(self, reason: Reason, state: Any) -> None:
        return None

    @classmethod
    def start_link(
        cls, args: Any = None, *, name: Hashable | None = None, timeout: float | None = None
    ) -> Pid:
        """Start a server linked to the calling process; returns once `init` has returned.

        Raises `StartError` (its `reason` says why) if `init` fails, raises, or runs past
        `timeout` seconds (``"timeout"``; the process is killed), or the name is taken
        (`AlreadyStarted`). A failed start returns once the process is gone and its name
        is free; the caller gets no exit signal. If `init` returns `Ignore()`, the
        process exits ``"normal"`` and this returns None.
        """
        # Typed `Pid`: None comes only from a server whose init returns Ignore(), and
        # the wrappers built on this (supervisors, streams, upper layers) never do.
        return _spawn(cls(), args, name, link=True, timeout=timeout)  # type: ignore[return-value]

    @classmethod
    def start(
        cls, args: Any = None, *, name: Hashable | None = None, timeout: float | None = None
    ) -> Pid:
        """Start a server with no link to the caller (see `start_link`)."""
        return _spawn(cls(), args, name, link=False, timeout=timeout)  # type: ignore[return-value]


def _spawn(
    server: GenServer, args: Any, name: Hashable | None, link: bool, timeout: float | None
) -> Pid | None:
    timeout = check_timeout(timeout)
    caller = current_process()
    assert caller is not None
    if link:
        require_alive(caller)
    elif is_fenced_thread():
        raise ProcessExit(caller.exit_reason, "a killed process cannot start processes")
    parent = caller if link else None
    started = From()
    process: ServerProcess
    dispatcher = type(server).dispatcher
    if dispatcher not in ("pooled", "thread"):
        raise KernelError(
            "invalid_dispatcher", f"dispatcher must be 'thread' or 'pooled', not {dispatcher!r}"
        )
    process = (
        PooledServerProcess(server, parent)
        if dispatcher == "pooled"
        else ThreadServerProcess(server, parent)
    )
    process.add_watcher(started, started)  # any death before init returns settles `started`
    if link:
        caller.link(process)  # linked before init runs, as in OTP
    if isinstance(process, PooledServerProcess):
        if timeout is None:
            # init runs as the new process, on the caller's thread: no handoff, and the
            # pool does not run the server before init returns (it is held until then).
            bind_thread(process)
            try:
                process.run_init(args, name, started)
            finally:
                bind_thread(caller)
        else:
            # A deadline needs init off the caller's thread: first in the mailbox.
            process.tell((INIT, args, name, started))
            process.release()
    else:
        process.tell((INIT, args, name, started))
    settled = started.wait(timeout)
    process.remove_watcher(started)
    if not settled:
        caller.unlink(process)  # the caller hears of it through the exception only
        process.exit("killed")  # frees the name now; a running init is fenced
        raise StartError("timeout", f"init did not return within {timeout} s")
    if started.failed:
        reason = started.value
        if isinstance(reason, tuple) and reason[:1] == ("already_started",):
            raise AlreadyStarted(name, reason[1])
        raise StartError(reason, f"init failed: {crash_report.format_reason(reason)}")
    if started.value is IGNORED:
        return None
    return process.pid


def check_timeout(timeout: Any) -> float | None:
    """A valid timeout in seconds (None or ``math.inf``: wait forever); raises
    `KernelError("invalid_timeout")` for a negative, NaN, boolean or non-number one."""
    if timeout is None:
        return None
    if (
        not isinstance(timeout, int | float)
        or isinstance(timeout, bool)
        or math.isnan(timeout)
        or timeout < 0
    ):
        raise KernelError(
            "invalid_timeout",
            f"timeout must be None or a number of seconds >= 0, not {type(timeout).__name__}",
        )
    return None if timeout == math.inf else float(timeout)


def _server(dest: Pid | Hashable) -> ServerProcess | None:
    """The server behind `dest`; None if nothing lives there. A dead pid is ``noproc``
    whatever it ran (as in OTP), so only a live Task, Inbox or thread is
    ``not_a_server``."""
    process = resolve(dest)
    if process is None or isinstance(process, ServerProcess):
        return process
    if not process.alive:  # dead, its exit not yet propagated: as once it is
        return None
    raise KernelError("not_a_server", f"{dest!r} is not a GenServer")


def call(dest: Pid | Hashable, request: Any, timeout: float | None = 5.0) -> Any:
    """Send `request` to a server (pid or name) and wait for its reply.

    Raises `CallTimeout` after `timeout` seconds, or `ProcessExit(reason)` at once if the
    server is not alive (``"noproc"``) or exits before it replies.
    """
    return _exchange(dest, CALL, request, timeout)


def _exchange(dest: Pid | Hashable, tag: Tag, request: Any, timeout: float | None) -> Any:
    """Send ``(tag, request, slot)`` to a server and wait for the slot: one call's
    round trip, shared by `call` and the debugging requests."""
    process = _server(dest)
    if process is None:
        raise ProcessExit("noproc", f"no process {dest!r}")
    me = getattr(_current, "process", None)
    if me is not None and me.uses_context:
        me = current_process()
    if me is process:
        raise KernelError("calling_self", "a server cannot call itself; it would wait forever")
    if me is not None and not me.alive and not me.is_pseudo:
        raise ProcessExit(me.exit_reason, "this thread's process was killed")
    slot = From()
    if not process.add_watcher(slot, slot):
        raise ProcessExit("noproc", f"{dest!r} is not alive")
    try:
        process.tell((tag, request, slot))
        settled = slot.wait(timeout)
    finally:
        process.remove_watcher(slot)
    if not settled:
        raise CallTimeout(timeout)
    return slot.result()


def cast(dest: Pid | Hashable, msg: Any) -> None:
    """Send `msg` to a server's `handle_cast`; never fails, even if nobody is there."""
    process = dest._process if type(dest) is Pid else resolve(dest)
    if process is None or isinstance(process, Exited):
        return
    me = getattr(_current, "process", None)
    if me is not None and me.uses_context:
        me = current_process()
    if me is None or me.alive or me.is_pseudo:  # a killed process's thread is fenced
        process.cast(msg)


def reply(from_: From, value: Any) -> None:
    """Answer a call that `handle_call` deferred with `NoReply`; callable from any thread."""
    if not is_fenced_thread():
        from_.settle(value, False)


def stop(dest: Pid | Hashable, reason: Reason = "normal", timeout: float | None = 5.0) -> None:
    """Stop a server in order: it runs `terminate(reason, state)` and exits with `reason`.

    Returns once it is dead. Raises `ProcessExit` if it was not alive or exited with
    another reason, `CallTimeout` if it did not stop in time, and
    `KernelError("invalid_timeout")` (sending nothing) for a timeout that is not None
    or a number >= 0.
    """
    timeout = check_timeout(timeout)
    process = _server(dest)
    if process is None:
        raise ProcessExit("noproc", f"no process {dest!r}")
    if getattr(_current, "process", None) is process:
        raise KernelError(
            "calling_self", "a server cannot stop itself with stop(); return Stop(...)"
        )
    slot = From()
    if not process.add_watcher(slot, slot):
        raise ProcessExit("noproc", f"{dest!r} is not alive")
    try:
        process.tell((STOP, reason))
        settled = slot.wait(timeout)
    finally:
        process.remove_watcher(slot)
    if not settled:
        raise CallTimeout(timeout)
    if slot.value != reason:
        raise ProcessExit(
            slot.value, f"the server exited with {crash_report.format_reason(slot.value)}"
        )


def get_state(dest: Pid | Hashable, timeout: float | None = 5.0) -> Any:
    """A server's current state, for debugging (OTP's ``sys:get_state``).

    Answered between two messages, without running a callback and without cancelling
    an idle ``timeout``. Raises `ProcessExit` (``"noproc"``, or the reason it exited
    with meanwhile), `CallTimeout`, or `KernelError("invalid_timeout")`.
    """
    return _system_call(dest, GetState(), timeout)


def replace_state(
    dest: Pid | Hashable, fn: Callable[[Any], Any], timeout: float | None = 5.0
) -> Any:
    """Set a server's state to ``fn(state)`` and return it, for debugging (OTP's
    ``sys:replace_state``). `fn` runs in the server, between two messages.

    If `fn` raises, the state is unchanged and this raises `KernelError` with reason
    ``("callback_failed", Crash(...))``; otherwise as `get_state`.
    """
    if not callable(fn):
        raise KernelError("invalid_request", "replace_state needs a callable")
    return _system_call(dest, ReplaceState(fn), timeout)


def _system_call(dest: Pid | Hashable, request: GetState | ReplaceState, timeout: Any) -> Any:
    return unwrap(_exchange(dest, SYSTEM, request, check_timeout(timeout)))
