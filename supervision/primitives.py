"""Process primitives for the calling process: send, exit, link, monitor, trap_exit.

Each acts on behalf of the calling thread's process (a plain thread gets a
pseudo-process on first use). A thread whose process was killed is fenced: what it
sends is dropped, and what it would link or monitor raises `ProcessExit`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from supervision.errors import ProcessExit
from supervision.pid import Exited, Pid
from supervision.process import (
    Process,
    _current,
    current_process,
    is_fenced_thread,
    require_alive,
    resolve,
)
from supervision.signals import Down, ExitSignal, Reason, Ref


def _me() -> Process:
    process = current_process()
    assert process is not None
    return require_alive(process)


def send(dest: Pid | Hashable, message: Any) -> None:
    """Deliver a plain message (a server sees it in `handle_info`).

    Sending to a dead pid does nothing, as in Erlang; sending to a name nobody holds
    raises `ProcessExit("noproc")`.
    """
    process: Process | Exited | None
    if type(dest) is Pid:
        process = dest._process
        if isinstance(process, Exited):
            return
    else:
        process = resolve(dest)
        if process is None:
            raise ProcessExit("noproc", f"no process is registered as {dest!r}")
    me = getattr(_current, "process", None)
    # A live server or plain thread sends at once (every message's path); the rest ask
    # `is_fenced_thread` (the reactor's coroutines, a killed process's thread).
    if me is None or (me.alive and not me.uses_context) or not is_fenced_thread():
        process.deliver(message)


def exit(dest: Pid | Hashable, reason: Reason) -> None:
    """Send an exit signal. ``"kill"`` cannot be trapped and shows as ``"killed"``.

    A process that traps exits gets `ExitSignal(sender, reason)` instead; ``"normal"``
    does nothing to a process that does not trap exits (unless it is the caller).
    """
    process = resolve(dest)
    if process is None or is_fenced_thread():
        return
    process.exit_signal(current_process(), reason, from_link=False)


def link(dest: Pid) -> None:
    """Link the calling process with `dest`: an abnormal exit of either reaches the other.

    Linking to a dead process raises `ProcessExit("noproc")`, or, when the caller traps
    exits, delivers `ExitSignal(dest, "noproc")`.
    """
    me = _me()
    process = resolve(dest)
    if process is None or not me.link(process):
        if me.trap_exit:
            me.deliver(ExitSignal(dest if type(dest) is Pid else None, "noproc"))
            return
        raise ProcessExit("noproc", f"cannot link to {dest!r}: not alive")


def unlink(dest: Pid) -> None:
    """Remove the link between the calling process and `dest`, if any."""
    process = resolve(dest)
    if process is not None:
        _me().unlink(process)


def monitor(dest: Pid | Hashable) -> Ref:
    """Watch `dest`: one `Down(ref, pid, reason)` arrives when it exits.

    A dead or unknown process yields `Down(ref, pid, "noproc")` at once.
    """
    me = _me()
    process = resolve(dest)
    if process is None:
        ref = Ref()
        me.deliver(Down(ref, dest, "noproc"))
        return ref
    return me.monitor(process)


def demonitor(ref: Ref, flush: bool = False) -> bool:
    """Stop a monitor. With `flush`, also drop its `Down` if it was already delivered.

    Returns True if the monitor was still active.
    """
    return _me().demonitor(ref, flush)


def trap_exit(flag: bool) -> bool:
    """Make the calling process receive exit signals as `ExitSignal` messages.

    Returns the previous setting. ``"kill"`` is never trapped.
    """
    me = _me()
    previous = me.trap_exit
    me.trap_exit = flag
    return previous
