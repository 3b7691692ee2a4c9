"""A pid whose process has exited: the same answers whatever the timing.

Follows review K2 of commit a0e4804 (session 27), which made a finished process's pid
point to an `Exited(reason)` record:

* F1: credit-stream calls naming a dead subscriber pid raised `not_subscribed` on the
  client; `unsubscribe` must say False ("was it subscribed"), `subscribe` is accepted
  as before (a dead subscriber is gone at once, as an Erlang monitor of a dead pid
  fires at once), `ack` is refused `not_subscribed`; sync and async forms alike.
* F2: `call`/`stop`/`get_state` on a dead Task, Inbox or thread pid gave
  `not_a_server` or `noproc` depending on timing; a dead pid is `noproc`.
* F4: the swap to `Exited` came after watchers were told, so a `Down`, `stop()` or
  `Task.wait` could return while the pid still resolved to the dead process.
* F8: `copy.copy(pid)` made a second `Pid` that the exit never swapped; `deepcopy` of a
  live pid failed on the process's lock.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Hashable
from typing import Any

import pytest

import supervision as sv
from supervision.credit_stream import CreditStream, StreamError
from supervision.pid import Exited
from supervision.process import resolve
from tests.helpers import wait_until
from tests.supervision.test_credit_stream_async import Busy


class _Echo(sv.GenServer):
    dispatcher = "pooled"

    def init(self, args: Any) -> int:
        return 0

    def handle_call(self, request: Any, from_: Any, state: int) -> sv.Reply:
        return sv.Reply(request, state)


class _Watch:
    """A monitor's watcher that records, at the moment it is told of the exit, what
    the dead pid resolves to and what `fn(pid)` does."""

    def __init__(self, fn: Any = None) -> None:
        self.fn = fn
        self.seen: list[tuple[object, bool, object]] = []

    def notify_down(self, ref: Hashable, pid: sv.Pid, reason: Any) -> None:
        outcome: object = None
        if self.fn is not None:
            try:
                outcome = self.fn(pid)
            except (sv.ProcessExit, sv.KernelError) as exc:
                outcome = (type(exc).__name__, exc.reason)
        self.seen.append((resolve(pid), pid.is_alive(), outcome))


def _dead_inbox_pid() -> sv.Pid:
    inbox = sv.Inbox(label="k2 subscriber")
    pid = inbox.pid
    inbox.close()
    assert not pid.is_alive()
    return pid


# -- F1: credit streams and a dead subscriber --------------------------------------------------


def test_f1_a_dead_subscriber_is_not_subscribed_and_is_accepted_as_before():
    stream = CreditStream.start_link()
    try:
        inbox = sv.Inbox(label="k2 subscriber")
        dead = inbox.pid
        CreditStream.subscribe(stream, subscriber=dead, mode="credit", credit=1)
        assert CreditStream.status(stream)["subscribers"] == 1
        inbox.close()

        assert CreditStream.unsubscribe(stream, subscriber=dead) is False
        window = CreditStream.subscribe(stream, subscriber=dead)
        assert window == {
            "after_sequence": 0,
            "oldest_available_sequence": 1,
            "latest_sequence": 0,
            "terminal": False,
        }
        with pytest.raises(StreamError) as info:
            CreditStream.ack(stream, 0, subscriber=dead)
        assert info.value.reason == "not_subscribed"
        # A dead subscriber's cursor is still checked like a live one's.
        with pytest.raises(StreamError) as ahead:
            CreditStream.subscribe(stream, subscriber=dead, after=5)
        assert ahead.value.reason == "cursor_ahead"
        assert CreditStream.status(stream)["subscribers"] == 0
    finally:
        sv.stop(stream)


def test_f1_the_async_forms_answer_the_same_for_a_dead_subscriber():
    stream = CreditStream.start_link()
    dead = _dead_inbox_pid()

    async def main() -> tuple[bool, dict[str, Any], str]:
        unsubscribed = await CreditStream.unsubscribe_async(stream, subscriber=dead)
        window = await CreditStream.subscribe_async(stream, subscriber=dead)
        try:
            await CreditStream.ack_async(stream, 0, subscriber=dead)
        except StreamError as exc:
            return unsubscribed, window, exc.reason
        return unsubscribed, window, "acked"

    try:
        unsubscribed, window, ack = asyncio.run(main())
        assert unsubscribed is False
        assert window["latest_sequence"] == 0
        assert ack == "not_subscribed"
        assert CreditStream.status(stream)["subscribers"] == 0
    finally:
        sv.stop(stream)


def test_f1_a_subscriber_that_dies_before_the_stream_sees_its_down_is_not_subscribed():
    """The answer does not depend on whether the stream handled the subscriber's Down:
    here the `Unsubscribe` and the `Ack` are queued before the subscriber dies."""
    stream = CreditStream.start_link()
    inbox = sv.Inbox(label="k2 subscriber")
    dead = inbox.pid
    CreditStream.subscribe(stream, subscriber=dead, mode="credit", credit=1)
    CreditStream.publish(stream, "one")
    answers: dict[str, object] = {}

    def unsubscribe() -> None:
        answers["unsubscribe"] = CreditStream.unsubscribe(stream, subscriber=dead)

    def ack() -> None:
        try:
            CreditStream.ack(stream, 1, subscriber=dead)
            answers["ack"] = "acked"
        except StreamError as exc:
            answers["ack"] = exc.reason

    try:
        with Busy(stream):
            threads = [threading.Thread(target=ack), threading.Thread(target=unsubscribe)]
            for thread in threads:
                thread.start()
            wait_until(lambda: resolve(stream).mailbox_size() >= 2)  # type: ignore[union-attr]
            inbox.close()  # its Down is queued behind both requests
        for thread in threads:
            thread.join(5)
        assert answers == {"ack": "not_subscribed", "unsubscribe": False}
        assert CreditStream.status(stream)["subscribers"] == 0
    finally:
        sv.stop(stream)


# -- F2: call / stop / get_state on a dead non-server pid -------------------------------------


def _errors(pid: sv.Pid) -> list[tuple[str, object]]:
    found = []
    for request in (
        lambda: sv.call(pid, "ping"),
        lambda: sv.stop(pid),
        lambda: sv.get_state(pid),
    ):
        try:
            request()
        except (sv.ProcessExit, sv.KernelError) as exc:
            found.append((type(exc).__name__, exc.reason))
    return found


def test_f2_a_dead_pid_is_noproc_whatever_it_ran():
    task = sv.Task.start(lambda: "done")
    assert task.wait(5.0) == "done"
    pid_holder: list[sv.Pid] = []
    thread = threading.Thread(target=lambda: pid_holder.append(sv.self_pid()))
    thread.start()
    thread.join(5)
    wait_until(lambda: not pid_holder[0].is_alive())
    noproc = [("ProcessExit", "noproc")] * 3
    for dead in (task.pid, _dead_inbox_pid(), pid_holder[0]):
        assert _errors(dead) == noproc, dead
    live = sv.Task.start(lambda: threading.Event().wait(0.5))
    try:
        assert _errors(live.pid) == [("KernelError", "not_a_server")] * 3
    finally:
        live.kill()


def test_f2_noproc_also_while_the_exit_is_being_propagated():
    """Asked from a monitor's watcher, that is before the exit has been propagated."""
    gate = threading.Event()
    task = sv.Task.start(lambda: gate.wait(5.0))
    watch = _Watch(lambda pid: sv.call(pid, "ping"))
    process = resolve(task.pid)
    assert process is not None and process.add_watcher(watch, watch)
    gate.set()
    task.wait(5.0)
    assert watch.seen == [(None, False, ("ProcessExit", "noproc"))]


# -- F4: nobody told of an exit finds the pid still resolving ---------------------------------


def test_f4_the_pid_is_swapped_before_watchers_are_told():
    pid = _Echo.start()
    watch = _Watch()
    process = resolve(pid)
    assert process is not None and process.add_watcher(watch, watch)
    del process
    sv.stop(pid)
    assert resolve(pid) is None  # right after stop() returned
    assert watch.seen == [(None, False, None)]


def test_f4_after_stop_task_wait_and_a_down_the_pid_resolves_to_nothing():
    for _ in range(50):
        pid = _Echo.start()
        inbox = sv.Inbox(label="k2 watcher")
        ref = inbox.monitor(pid)
        sv.stop(pid)
        assert resolve(pid) is None and isinstance(pid._process, Exited)
        down = inbox.receive(5.0, match=lambda m: isinstance(m, sv.Down))
        assert down.ref == ref and resolve(down.pid) is None
        inbox.close()
        task = sv.Task.start(lambda: 1)
        assert task.wait(5.0) == 1
        assert resolve(task.pid) is None


class _Trapping(sv.GenServer):
    """A child that traps exits: it stops on its own thread, after a short terminate."""

    dispatcher = "thread"

    def init(self, args: Any) -> int:
        sv.trap_exit(True)
        return 0

    def terminate(self, reason: Any, state: int) -> None:
        threading.Event().wait(0.02)


def test_f4_terminate_child_still_waits_for_the_whole_exit_of_the_child():
    """`finish_shutdown` finds the pid swapped while the child's exit is still being
    propagated: it waits for the end of it (its monitors told) before returning."""
    sup = sv.DynamicSupervisor.start_link()
    try:
        for _ in range(10):
            spec = sv.ChildSpec("k2", lambda: _Trapping.start_link(None), restart="temporary")
            child = sv.DynamicSupervisor.start_child(sup, spec)
            assert child is not None
            inbox = sv.Inbox(label="k2 watcher")
            ref = inbox.monitor(child)
            sv.DynamicSupervisor.terminate_child(sup, child)
            down = inbox.receive(0, match=lambda m: isinstance(m, sv.Down))
            assert down.ref == ref and down.reason == "shutdown"
            inbox.close()
    finally:
        sv.stop(sup)


# -- F8: a pid is an identity -----------------------------------------------------------------


def test_f8_a_copied_pid_is_the_pid_itself():
    pid = _Echo.start()
    assert copy.copy(pid) is pid
    assert copy.deepcopy(pid) is pid
    held = copy.deepcopy({"server": [pid]})  # failed on the live process's lock
    assert held["server"][0] is pid
    sv.stop(pid)
    assert resolve(copy.copy(pid)) is None
