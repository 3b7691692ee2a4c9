"""DynamicSupervisor: on-demand children, max_children, restarts, concurrent shutdown."""

from __future__ import annotations

import time

import pytest

import supervision as sv
from tests.helpers import wait_dead, wait_until
from tests.supervision.dynamic_start_paths import each_start_path  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("each_dispatcher", "each_start_path")


class Job(sv.GenServer):
    def init(self, args):
        if args == "trap_slow":
            sv.trap_exit(True)
        return args

    def handle_call(self, request, from_, state):
        return sv.Reply(state, state)

    def handle_cast(self, msg, state):
        return sv.Stop(msg, state)

    def terminate(self, reason, state):
        if state == "trap_slow":
            time.sleep(0.2)


def job(arg, restart="temporary", **kw):
    return sv.ChildSpec("job", lambda: Job.start_link(arg), restart=restart, **kw)


def test_start_and_terminate_children():
    dyn = sv.DynamicSupervisor.start_link()
    pids = [sv.DynamicSupervisor.start_child(dyn, job(i)) for i in range(3)]
    assert [sv.call(p, "get") for p in pids] == [0, 1, 2]
    assert [c.pid for c in sv.DynamicSupervisor.which_children(dyn)] == pids
    sv.DynamicSupervisor.terminate_child(dyn, pids[1])
    assert not pids[1].is_alive()
    assert sv.DynamicSupervisor.count_children(dyn)["active"] == 2
    sv.DynamicSupervisor.terminate_child(dyn, pids[1])  # already gone: ok, as OTP
    stranger = Job.start_link("stranger")
    with pytest.raises(sv.SupervisorError) as info:
        sv.DynamicSupervisor.terminate_child(dyn, stranger)
    assert info.value.reason == "not_found"
    assert stranger.is_alive()


def test_max_children_is_a_typed_error_and_frees_up():
    dyn = sv.DynamicSupervisor.start_link(max_children=2)
    first = sv.DynamicSupervisor.start_child(dyn, job(1))
    sv.DynamicSupervisor.start_child(dyn, job(2))
    with pytest.raises(sv.MaxChildrenReached) as info:
        sv.DynamicSupervisor.start_child(dyn, job(3))
    assert info.value.reason == "max_children" and info.value.max_children == 2
    sv.cast(first, "normal")  # a temporary child leaving frees its slot
    wait_until(lambda: sv.DynamicSupervisor.count_children(dyn)["specs"] == 1)
    assert sv.DynamicSupervisor.start_child(dyn, job(3)).is_alive()


def test_restart_types():
    dyn = sv.DynamicSupervisor.start_link(intensity=10, period=60)
    temporary = sv.DynamicSupervisor.start_child(dyn, job("t"))
    transient = sv.DynamicSupervisor.start_child(dyn, job("tr", restart="transient"))
    permanent = sv.DynamicSupervisor.start_child(dyn, job("p", restart="permanent"))
    sv.exit(temporary, "kill")
    sv.cast(transient, "normal")
    sv.exit(permanent, "kill")
    wait_until(lambda: len(sv.DynamicSupervisor.which_children(dyn)) == 1)
    (row,) = sv.DynamicSupervisor.which_children(dyn)
    assert row.pid != permanent and sv.call(row.pid, "get") == "p"
    transient2 = sv.DynamicSupervisor.start_child(dyn, job("tr2", restart="transient"))
    sv.exit(transient2, "boom")
    wait_until(
        lambda: (
            sorted(sv.call(c.pid, "get") for c in sv.DynamicSupervisor.which_children(dyn))
            == ["p", "tr2"]
        )
    )


def test_intensity_exceeded_shuts_down_with_all_children():
    dyn = sv.DynamicSupervisor.start(intensity=2, period=60)
    ref = sv.monitor(dyn)
    pids = [sv.DynamicSupervisor.start_child(dyn, job(i, restart="permanent")) for i in range(3)]
    for _ in range(3):
        target = sv.DynamicSupervisor.which_children(dyn)[0].pid
        sv.exit(target, "kill")
    down = sv.receive(5, match=lambda m: isinstance(m, sv.Down) and m.ref == ref)
    assert down.reason == "shutdown"
    assert all(not p.is_alive() for p in pids)


def test_child_start_failure_is_returned_not_raised_inside_the_supervisor():
    class Fails(sv.GenServer):
        def init(self, args):
            raise ValueError("nope")

    dyn = sv.DynamicSupervisor.start_link()
    with pytest.raises(sv.SupervisorError) as info:
        sv.DynamicSupervisor.start_child(dyn, sv.ChildSpec("f", lambda: Fails.start_link()))
    assert info.value.reason == sv.Crash("ValueError", "nope")
    assert dyn.is_alive()


def test_shutdown_stops_children_concurrently(leak_check):
    dyn = sv.DynamicSupervisor.start()
    pids = [
        sv.DynamicSupervisor.start_child(dyn, job("trap_slow", shutdown=5.0)) for _ in range(10)
    ]
    started = time.monotonic()
    sv.stop(dyn, "shutdown")
    elapsed = time.monotonic() - started
    assert all(wait_dead(p) == "shutdown" for p in pids)
    assert elapsed < 1.5  # ten 0.2 s shutdowns overlapped instead of taking 2 s


def test_invalid_max_children():
    with pytest.raises(sv.SupervisorError):
        sv.DynamicSupervisor.start_link(max_children=-1)
