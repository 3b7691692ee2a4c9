"""Registered names and timers."""

from __future__ import annotations

import threading
import time

import pytest

import supervision as sv
from tests.helpers import wait_dead, wait_until

pytestmark = pytest.mark.usefixtures("each_dispatcher")


class Box(sv.GenServer):
    def init(self, args):
        return []

    def handle_call(self, request, from_, state):
        return sv.Reply(list(state), state)

    def handle_info(self, msg, state):
        return [*state, msg]


def test_register_whereis_unregister():
    pid = Box.start_link()
    sv.register("box-1", pid)
    assert sv.whereis("box-1") == pid and "box-1" in sv.registered()
    with pytest.raises(sv.NameTaken):
        sv.register("box-1", Box.start_link())
    with pytest.raises(sv.KernelError) as info:
        sv.register("box-2", pid)  # one name per process
    assert info.value.reason == "already_named"
    sv.unregister("box-1")
    assert sv.whereis("box-1") is None
    with pytest.raises(sv.KernelError):
        sv.unregister("box-1")


def test_name_is_removed_when_the_process_exits_and_can_be_reused():
    pid = Box.start(name="box-exit")
    sv.exit(pid, "kill")
    assert sv.whereis("box-exit") is None  # removed before the exit is even observable
    assert "box-exit" not in sv.registered()
    again = Box.start_link(name="box-exit")
    assert sv.whereis("box-exit") == again != pid


def test_registering_a_dead_pid_fails():
    pid = Box.start()
    sv.stop(pid)
    with pytest.raises(sv.KernelError) as info:
        sv.register("ghost", pid)
    assert info.value.reason == "noproc"


def test_lookup_after_supervised_restart_is_never_stale():
    sup = sv.Supervisor.start_link(
        [sv.ChildSpec("box", lambda: Box.start_link(name="box-sup"))], intensity=100, period=1
    )
    seen: list[sv.Pid] = []
    for _ in range(20):
        old = sv.whereis("box-sup") or wait_until(lambda: sv.whereis("box-sup"))
        seen.append(old)
        sv.exit(old, "kill")
        found = sv.whereis("box-sup")
        assert found is None or (found != old and found.is_alive())
        new = wait_until(lambda: sv.whereis("box-sup"))
        assert new != old and sv.call("box-sup", "get") == []
    assert len(set(seen)) == 20
    sv.stop(sup)


def test_concurrent_registration_of_one_name_has_one_winner():
    pids = [Box.start_link() for _ in range(8)]
    winners, barrier = [], threading.Barrier(8)

    def attempt(pid):
        barrier.wait()
        try:
            sv.register("contended", pid)
            winners.append(pid)
        except sv.NameTaken:
            pass

    threads = [threading.Thread(target=attempt, args=(p,)) for p in pids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1 and sv.whereis("contended") == winners[0]


def test_send_after_delivers_and_cancel_returns_remaining_time():
    pid = Box.start_link()
    sv.send_after(pid, "late", 0.05)
    ref = sv.send_after(pid, "never", 10)
    remaining = sv.cancel_timer(ref)
    assert remaining is not None and 9 < remaining <= 10
    assert sv.cancel_timer(ref) is None
    wait_until(lambda: sv.call(pid, "get") == ["late"])
    time.sleep(0.05)
    assert sv.call(pid, "get") == ["late"]


def test_timers_fire_in_due_order_on_one_thread(leak_check):
    me = sv.self_pid()
    for delay in (0.09, 0.03, 0.06, 0.0):
        sv.send_after(me, delay, delay)
    assert [sv.receive(2) for _ in range(4)] == [0.0, 0.03, 0.06, 0.09]
    assert sum(1 for t in threading.enumerate() if t.name == "supervision-timers") == 1


def test_many_timers_share_one_thread_and_cancelled_ones_do_not_leak():
    threads_before = threading.active_count()
    me = sv.self_pid()
    refs = [sv.send_after(me, i, 30 + i / 1000) for i in range(5000)]
    assert threading.active_count() <= threads_before + 1
    assert sv.kernel_stats()["timers"] >= 5000
    for ref in refs:
        sv.cancel_timer(ref)
    assert sv.kernel_stats()["timers"] == 0


def test_timers_aimed_at_a_dead_process_are_cancelled():
    pid = Box.start()
    before = sv.kernel_stats()["timers"]
    refs = [sv.send_after(pid, "x", 60) for _ in range(10)]
    assert sv.kernel_stats()["timers"] == before + 10
    sv.stop(pid)
    assert sv.kernel_stats()["timers"] == before
    assert all(sv.cancel_timer(ref) is None for ref in refs)
    dead_ref = sv.send_after(pid, "x", 60)  # a timer to a dead pid never fires
    assert sv.kernel_stats()["timers"] == before and sv.cancel_timer(dead_ref) is None


def test_timer_to_a_name_resolves_when_it_fires():
    sv.send_after("box-later", "hello", 0.1)
    pid = Box.start_link(name="box-later")
    wait_until(lambda: sv.call(pid, "get") == ["hello"])


def test_send_after_rejects_negative_delay():
    with pytest.raises(ValueError):
        sv.send_after(sv.self_pid(), "x", -1)
    assert wait_dead is not None


def test_a_killed_handler_cannot_set_timers():
    release = threading.Event()
    me = sv.self_pid()

    class Busy(sv.GenServer):
        def handle_cast(self, msg, state):
            release.wait(5)
            sv.send_after(me, "from a dead process", 0)
            return state

    pid = Busy.start()
    sv.cast(pid, "go")
    time.sleep(0.05)
    sv.exit(pid, "kill")
    release.set()
    with pytest.raises(TimeoutError):
        sv.receive(0.2)
