"""Checks that a direct `DynamicSupervisor.start_child` makes after waiting for the
supervisor's start lock (session 29 final review, finding 7).

The caller's liveness (the kernel's fence: a killed process starts nothing) was checked
only before the wait; once bound to the supervisor, a thread whose process was killed
while it waited still started and recorded a child. Races are ordered with events and
by watching where the waiting thread is, never with sleeps.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import supervision as sv
from tests.helpers import wait_dead, wait_until

WAIT = 10.0


class Gated(sv.GenServer):
    """A child whose `init` sets `entered`, then waits for `gate`: while it waits, the
    direct start that runs it holds the supervisor's start lock."""

    def init(self, args: tuple[threading.Event, threading.Event]) -> None:
        entered, gate = args
        entered.set()
        assert gate.wait(WAIT)


class Starter(sv.GenServer):
    """The caller: a cast makes its handler start a child under a dynamic supervisor
    (a direct start, on the server's own thread) and put the outcome in a box."""

    dispatcher = "thread"

    def init(self, args: None) -> None:
        return None

    def handle_cast(self, msg: Any, state: None) -> Any:
        sup, child, box, done = msg
        box["thread"] = threading.get_ident()
        try:
            box["pid"] = sv.DynamicSupervisor.start_child(sup, child)
        except BaseException as error:  # the outcome is what the test checks
            box["error"] = error
        finally:
            done.set()
        return sv.NoReply(state)


def top_function(thread_ident: int) -> str | None:
    """The function the thread `thread_ident` is running now (its innermost Python frame)."""
    frame = sys._current_frames().get(thread_ident)
    return None if frame is None else frame.f_code.co_name


def test_a_caller_killed_while_it_waits_for_the_start_lock_starts_nothing() -> None:
    """Finding 7: a caller's process killed while its direct start waits for the start
    lock gets ProcessExit with its exit reason once it has the lock, as the check before
    the wait raises; its child's start never runs and nothing is recorded."""
    sup = sv.DynamicSupervisor.start()
    entered, gate = threading.Event(), threading.Event()
    holder_box: dict[str, Any] = {}

    def hold_the_lock() -> None:
        child = sv.ChildSpec("gated", lambda: Gated.start_link((entered, gate)))
        holder_box["pid"] = sv.DynamicSupervisor.start_child(sup, child)

    holder = threading.Thread(target=hold_the_lock, daemon=True)
    holder.start()
    assert entered.wait(WAIT)  # the start lock is held until `gate` is set

    started: list[int] = []

    def start() -> sv.Pid:
        started.append(threading.get_ident())
        opened = threading.Event()
        opened.set()  # were it started, it would not wait
        return Gated.start_link((threading.Event(), opened))

    caller = Starter.start(None)
    box: dict[str, Any] = {}
    done = threading.Event()
    sv.cast(caller, (sup, sv.ChildSpec("late", start), box, done))
    wait_until(lambda: "thread" in box)
    wait_until(lambda: top_function(box["thread"]) == "acquire_or_hand_over")  # waiting
    sv.exit(caller, "kill")
    assert wait_dead(caller) == "killed"
    gate.set()
    holder.join(WAIT)
    assert done.wait(WAIT)

    error = box.get("error")
    assert isinstance(error, sv.ProcessExit), box
    assert error.reason == "killed"
    assert started == []  # the late child's start never ran
    rows = [row.pid for row in sv.DynamicSupervisor.which_children(sup)]
    assert rows == [holder_box["pid"]]
    sv.stop(sup)
