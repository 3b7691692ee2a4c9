"""Links, monitors, exit signals, trap_exit and plain-thread pseudo-processes."""

from __future__ import annotations

import itertools
import threading

import pytest

import supervision as sv
from tests.helpers import in_thread, wait_dead, wait_until

pytestmark = pytest.mark.usefixtures("each_dispatcher")


class Idle(sv.GenServer):
    def init(self, args):
        if args == "trap":
            sv.trap_exit(True)
        return []

    def handle_call(self, request, from_, state):
        if request == "messages":
            return sv.Reply(list(state), state)
        if isinstance(request, tuple) and request[0] == "link":
            sv.link(request[1])
            return sv.Reply("ok", state)
        if isinstance(request, tuple) and request[0] == "monitor":
            return sv.Reply(sv.monitor(request[1]), state)
        if isinstance(request, tuple) and request[0] == "monitor_kill_flush":
            ref = sv.monitor(request[1])
            sv.exit(request[1], "kill")
            return sv.Reply(sv.demonitor(ref, flush=True), state)
        if isinstance(request, tuple) and request[0] == "demonitor":
            return sv.Reply(sv.demonitor(request[1], flush=True), state)
        raise AssertionError(request)

    def handle_info(self, msg, state):
        return [*state, msg]


def test_pid_is_opaque_hashable_and_printable():
    a, b = Idle.start_link(), Idle.start_link()
    assert a != b and len({a, b, a}) == 2
    assert repr(a) == f"<0.{a.number}>"
    assert sorted([b, a]) == [a, b]


def test_abnormal_exit_propagates_over_links_and_normal_does_not():
    a, b, c = Idle.start(), Idle.start(), Idle.start()
    sv.call(a, ("link", b))
    sv.call(b, ("link", c))
    sv.exit(a, "boom")
    assert wait_dead(c) == "boom" and not b.is_alive()

    d, e = Idle.start(), Idle.start()
    sv.call(d, ("link", e))
    sv.stop(d, "normal")
    assert e.is_alive()
    sv.stop(e)


def test_trapping_process_receives_exit_signal_instead_of_dying():
    trapper, worker = Idle.start("trap"), Idle.start()
    sv.call(trapper, ("link", worker))
    sv.exit(worker, "boom")
    wait_until(lambda: sv.call(trapper, "messages"))
    assert sv.call(trapper, "messages") == [sv.ExitSignal(worker, "boom")]
    sv.exit(trapper, "normal")  # an explicit normal exit is delivered too
    assert sv.call(trapper, "messages")[-1] == sv.ExitSignal(sv.self_pid(), "normal")
    sv.stop(trapper)


def test_kill_is_untrappable_and_propagates_as_killed_which_is_trappable():
    trapper, victim = Idle.start("trap"), Idle.start("trap")
    sv.call(trapper, ("link", victim))
    sv.exit(victim, "kill")
    assert wait_dead(victim) == "killed"
    wait_until(lambda: sv.call(trapper, "messages") == [sv.ExitSignal(victim, "killed")])
    sv.stop(trapper)


def test_monitor_delivers_down_once_and_noproc_for_dead_targets():
    pid = Idle.start()
    ref = sv.monitor(pid)
    sv.exit(pid, "bye")
    assert sv.receive(1) == sv.Down(ref, pid, "bye")
    with pytest.raises(TimeoutError):
        sv.receive(0.05)
    ref2 = sv.monitor(pid)
    assert sv.receive(1) == sv.Down(ref2, pid, "noproc")
    ref3 = sv.monitor("no-such-name")
    assert sv.receive(1) == sv.Down(ref3, "no-such-name", "noproc")


def test_monitors_are_independent_and_demonitor_flush_drops_delivered_down():
    pid = Idle.start()
    first, second = sv.monitor(pid), sv.monitor(pid)
    assert sv.demonitor(first) is True
    sv.exit(pid, "x")
    assert sv.receive(1) == sv.Down(second, pid, "x")
    with pytest.raises(TimeoutError):
        sv.receive(0.05)

    pid = Idle.start()
    ref = sv.monitor(pid)
    sv.exit(pid, "x")
    wait_until(lambda: sv.self_pid()._process.pending() == 1)
    assert sv.demonitor(ref, flush=True) is False
    with pytest.raises(TimeoutError):
        sv.receive(0.05)


def test_server_demonitor_flush_removes_down_from_its_mailbox():
    watcher = Idle.start()
    target = Idle.start()
    # monitor, kill and demonitor(flush) inside one handler: the Down is queued, never handled
    assert sv.call(watcher, ("monitor_kill_flush", target)) is False
    assert not target.is_alive()
    assert sv.call(watcher, "messages") == []
    other = Idle.start()
    ref = sv.call(watcher, ("monitor", other))
    assert sv.call(watcher, ("demonitor", ref)) is True  # still active: nothing to flush
    sv.exit(other, "gone")
    assert sv.call(watcher, "messages") == []
    sv.stop(watcher)


def test_link_to_dead_process_raises_noproc_or_delivers_when_trapping():
    pid = Idle.start()
    sv.stop(pid)
    with pytest.raises(sv.ProcessExit) as info:
        sv.link(pid)
    assert info.value.reason == "noproc"
    sv.trap_exit(True)
    sv.link(pid)
    assert sv.receive(1) == sv.ExitSignal(pid, "noproc")


def test_unlink_stops_propagation():
    a, b = Idle.start(), Idle.start()
    sv.call(a, ("link", b))
    sv.call(a, ("link", b))  # linking twice is one link
    sv.link(a)
    sv.unlink(a)
    sv.exit(a, "boom")
    assert wait_dead(b) == "boom"
    assert sv.self_pid().is_alive()


def test_plain_thread_pseudo_process_exits_normally_when_thread_ends():
    holder = {}

    def body():
        holder["pid"] = sv.self_pid()
        holder["ref"] = None

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    pid = holder["pid"]
    wait_until(lambda: not pid.is_alive())
    assert pid._process.exit_reason == "normal"


def test_monitor_on_plain_thread_fires_when_thread_ends():
    ready, finish = threading.Event(), threading.Event()
    holder = {}

    def body():
        holder["pid"] = sv.self_pid()
        ready.set()
        finish.wait(5)

    thread = threading.Thread(target=body)
    thread.start()
    ready.wait(5)
    ref = sv.monitor(holder["pid"])
    finish.set()
    thread.join()
    assert sv.receive(2) == sv.Down(ref, holder["pid"], "normal")


def test_exit_signal_to_pseudo_process_is_reported_once_then_thread_gets_new_pid():
    def body():
        first = sv.self_pid()
        sv.exit(first, "boom")
        assert not first.is_alive()
        with pytest.raises(sv.ProcessExit) as info:
            sv.receive(0.1)
        second = sv.self_pid()
        assert second != first and second.is_alive()
        return info.value.reason

    assert in_thread(body) == "boom"


def test_pseudo_process_linked_to_crashing_server_learns_on_link_or_monitor():
    def body():
        pid = Idle.start_link()
        sv.exit(pid, "boom")
        with pytest.raises(sv.ProcessExit) as info:
            sv.monitor(pid)
        sv.monitor(pid)  # reported once; the thread now has a fresh process
        return info.value.reason

    assert in_thread(body) == "boom"


def test_receive_with_match_is_selective_and_keeps_order():
    me = sv.self_pid()
    for message in ("a", 1, "b", 2):
        sv.send(me, message)
    assert sv.receive(1, match=lambda m: isinstance(m, int)) == 1
    assert [sv.receive(1) for _ in range(3)] == ["a", "b", 2]


def test_receive_in_a_server_is_refused():
    class Receiver(sv.GenServer):
        def handle_call(self, request, from_, state):
            return sv.Reply(sv.receive(0.01), state)

    pid = Receiver.start()
    with pytest.raises(sv.ProcessExit) as info:
        sv.call(pid, "go")
    assert "receive() is for plain threads" in info.value.reason.message


def test_send_to_unknown_name_raises_and_to_dead_pid_is_silent():
    pid = Idle.start()
    sv.stop(pid)
    sv.send(pid, "hello")
    with pytest.raises(sv.ProcessExit):
        sv.send("never-registered", "hello")


def test_long_link_chain_propagates_without_recursion(leak_check):
    pids = [Idle.start() for _ in range(2000)]
    for left, right in itertools.pairwise(pids):
        left._process.link(right._process)
    sv.exit(pids[0], "cascade")
    assert wait_dead(pids[-1]) == "cascade"
    assert all(not pid.is_alive() for pid in pids)
