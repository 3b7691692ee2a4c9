"""Supervisor: ordered start and stop, shutdown policies, child management, escalation."""

from __future__ import annotations

import time

import pytest
from structlog.testing import capture_logs

import supervision as sv
from tests.helpers import Recorder, wait_dead, wait_until

pytestmark = pytest.mark.usefixtures("each_dispatcher")


class Worker(sv.GenServer):
    """A child that records its start and stop in a shared log."""

    def init(self, args):
        log, name, options = args
        if options.get("trap"):
            sv.trap_exit(True)
        if options.get("fail_init"):
            raise RuntimeError(f"{name} cannot start")
        log.add(("start", name))
        return args

    def handle_call(self, request, from_, state):
        if request == "crash":
            raise RuntimeError("crash")
        return sv.Reply(state[1], state)

    def terminate(self, reason, state):
        log, name, options = state
        time.sleep(options.get("slow_stop", 0))
        log.add(("stop", name, reason))


def spec(log, name, **options):
    restart = options.pop("restart", "permanent")
    shutdown = options.pop("shutdown", None)
    return sv.ChildSpec(
        name,
        lambda: Worker.start_link((log, name, options)),
        restart=restart,
        shutdown=shutdown,
    )


def child_pid(sup, child_id):
    return {c.id: c.pid for c in sv.Supervisor.which_children(sup)}[child_id]


def test_children_start_in_order_and_stop_in_reverse_order():
    log = Recorder()
    sup = sv.Supervisor.start([spec(log, n, trap=True) for n in "abc"])
    assert log.snapshot() == [("start", "a"), ("start", "b"), ("start", "c")]
    assert [c.id for c in sv.Supervisor.which_children(sup)] == ["a", "b", "c"]
    sv.stop(sup, "shutdown")
    assert log.snapshot()[3:] == [("stop", n, "shutdown") for n in "cba"]


def test_which_and_count_children():
    log = Recorder()
    inner = sv.ChildSpec("inner", lambda: sv.Supervisor.start_link([]), type="supervisor")
    sup = sv.Supervisor.start_link([spec(log, "a"), inner])
    rows = sv.Supervisor.which_children(sup)
    assert [(r.id, r.type) for r in rows] == [("a", "worker"), ("inner", "supervisor")]
    assert all(isinstance(r, sv.ChildInfo) and r.pid.is_alive() for r in rows)
    assert sv.Supervisor.count_children(sup) == {
        "specs": 2,
        "active": 2,
        "supervisors": 1,
        "workers": 1,
    }


def test_shutdown_timeout_then_kill():
    log = Recorder()
    sup = sv.Supervisor.start([spec(log, "slow", trap=True, slow_stop=2.0, shutdown=0.1)])
    pid = child_pid(sup, "slow")
    started = time.monotonic()
    sv.Supervisor.terminate_child(sup, "slow")
    assert time.monotonic() - started < 1.5
    assert pid._process.exit_reason == "killed"
    assert child_pid(sup, "slow") is None


def test_brutal_kill_skips_terminate_and_infinity_waits():
    log = Recorder()
    sup = sv.Supervisor.start(
        [
            spec(log, "brutal", trap=True, shutdown="brutal_kill"),
            spec(log, "patient", trap=True, slow_stop=0.3, shutdown="infinity"),
        ]
    )
    brutal = child_pid(sup, "brutal")
    sv.Supervisor.terminate_child(sup, "brutal")
    assert brutal._process.exit_reason == "killed"
    sv.Supervisor.terminate_child(sup, "patient")
    assert ("stop", "patient", "shutdown") in log.snapshot()
    assert not any(e[:2] == ("stop", "brutal") for e in log.snapshot())


def test_terminate_restart_delete_child_and_their_errors():
    log = Recorder()
    sup = sv.Supervisor.start_link([spec(log, "a"), spec(log, "b")])
    old = child_pid(sup, "a")
    with pytest.raises(sv.SupervisorError) as info:
        sv.Supervisor.restart_child(sup, "a")
    assert info.value.reason == "running"
    with pytest.raises(sv.SupervisorError) as info:
        sv.Supervisor.delete_child(sup, "a")
    assert info.value.reason == "running"
    sv.Supervisor.terminate_child(sup, "a")
    assert not old.is_alive() and child_pid(sup, "a") is None
    new = sv.Supervisor.restart_child(sup, "a")
    assert new != old and new.is_alive()
    sv.Supervisor.terminate_child(sup, "a")
    sv.Supervisor.delete_child(sup, "a")
    assert [c.id for c in sv.Supervisor.which_children(sup)] == ["b"]
    for op in (
        sv.Supervisor.terminate_child,
        sv.Supervisor.restart_child,
        sv.Supervisor.delete_child,
    ):
        with pytest.raises(sv.SupervisorError) as info:
            op(sup, "zzz")
        assert info.value.reason == "not_found"


def test_start_child_adds_and_rejects_duplicates_and_failures():
    log = Recorder()
    sup = sv.Supervisor.start_link([spec(log, "a")])
    pid = sv.Supervisor.start_child(sup, spec(log, "b"))
    assert child_pid(sup, "b") == pid
    with pytest.raises(sv.SupervisorError) as info:
        sv.Supervisor.start_child(sup, spec(log, "b"))
    assert info.value.reason == ("already_started", pid)
    sv.Supervisor.terminate_child(sup, "b")
    with pytest.raises(sv.SupervisorError) as info:
        sv.Supervisor.start_child(sup, spec(log, "b"))
    assert info.value.reason == "already_present"
    with pytest.raises(sv.SupervisorError) as info:
        sv.Supervisor.start_child(sup, spec(log, "c", fail_init=True))
    assert info.value.reason == sv.Crash("RuntimeError", "c cannot start")
    assert [c.id for c in sv.Supervisor.which_children(sup)] == ["a", "b"]


def test_failing_child_stops_supervisor_start_with_clear_error():
    log = Recorder()
    with capture_logs() as logs, pytest.raises(sv.StartError) as info:
        sv.Supervisor.start_link(
            [spec(log, "a", trap=True), spec(log, "b", fail_init=True), spec(log, "c")]
        )
    assert info.value.reason == (
        "failed_to_start_child",
        "b",
        sv.Crash("RuntimeError", "b cannot start"),
    )
    assert log.snapshot() == [("start", "a"), ("stop", "a", "shutdown")]  # c never started
    assert any(e["event"] == "supervision.supervisor.child_start_failed" for e in logs)


def test_invalid_specs_and_options_are_rejected_before_start():
    log = Recorder()
    with pytest.raises(sv.SupervisorError) as info:
        sv.Supervisor.start_link([spec(log, "a"), spec(log, "a")])
    assert info.value.reason == ("duplicate_child_id", "a")
    with pytest.raises(sv.SupervisorError):
        sv.Supervisor.start_link([], strategy="one_for_some")
    with pytest.raises(sv.SupervisorError):
        sv.Supervisor.start_link([sv.ChildSpec("x", lambda: None, restart="sometimes")])
    with pytest.raises(sv.SupervisorError):
        sv.Supervisor.start_link([sv.ChildSpec("x", lambda: None, shutdown=-1)])
    with pytest.raises(sv.SupervisorError):
        sv.Supervisor.start_link([], intensity=-1)
    assert log.snapshot() == []


def test_ignored_child_is_kept_without_pid():
    sup = sv.Supervisor.start_link([sv.ChildSpec("ignored", lambda: None)])
    assert sv.Supervisor.which_children(sup) == [sv.ChildInfo("ignored", None, "worker")]


def test_bad_start_return_fails_start():
    with pytest.raises(sv.StartError) as info:
        sv.Supervisor.start_link([sv.ChildSpec("bad", lambda: "not a pid")])
    assert info.value.reason[2].kind == "bad_start_return"


def test_restart_is_logged_with_reason_and_decision():
    log = Recorder()
    sup = sv.Supervisor.start_link([spec(log, "a")])
    with capture_logs() as logs:
        with pytest.raises(sv.ProcessExit):
            sv.call(child_pid(sup, "a"), "crash")
        wait_until(lambda: child_pid(sup, "a") is not None)
    exited = [e for e in logs if e["event"] == "supervision.supervisor.child_exited"]
    restarted = [e for e in logs if e["event"] == "supervision.supervisor.child_restarted"]
    assert exited[0]["decision"] == "restart" and exited[0]["reason"] == "RuntimeError: crash"
    assert len(restarted) == 1 and restarted[0]["child_id"] == "a"


def test_escalation_restarts_the_failing_subtree_from_its_parent():
    log = Recorder()

    def inner():
        return sv.Supervisor.start_link(
            [spec(log, "leaf")], intensity=1, period=60, name="inner-sup"
        )

    # Not linked to the test thread, and stopped before the test returns: the teardown's
    # exit signal to a linked tree is asynchronous, so the [pooled] variant's tree could
    # still hold "inner-sup" when the [thread] variant registered it (flaky, ~1 in 30
    # under load; issue 20's last stop note).
    top = sv.Supervisor.start(
        [sv.ChildSpec("inner", inner, type="supervisor")], intensity=5, period=60
    )
    try:
        first_inner = sv.whereis("inner-sup")
        ref = sv.monitor(first_inner)
        with capture_logs() as logs:
            for _ in range(2):  # the second restart within the period exceeds intensity 1
                leaf = wait_until(lambda: child_pid("inner-sup", "leaf"))
                sv.exit(leaf, "kill")
            down = sv.receive(5, match=lambda m: isinstance(m, sv.Down) and m.ref == ref)
        assert down.reason == "shutdown"
        assert any(e["event"] == "supervision.supervisor.max_intensity_reached" for e in logs)
        second_inner = wait_until(lambda: sv.whereis("inner-sup"))
        assert second_inner != first_inner
        assert child_pid(top, "inner") == second_inner
        assert child_pid("inner-sup", "leaf").is_alive()
    finally:
        sv.stop(top, "shutdown")
    assert sv.whereis("inner-sup") is None  # the whole tree is gone, its names free


def test_supervisor_exit_kills_children_and_leaves_nothing(leak_check):
    log = Recorder()
    sup = sv.Supervisor.start([spec(log, n) for n in "abcd"], name="leaky-sup")
    children = [c.pid for c in sv.Supervisor.which_children(sup)]
    sv.exit(sup, "kill")
    for pid in children:
        assert wait_dead(pid) == "killed"


def test_many_trees_stopping_at_once_run_every_terminate_promptly(leak_check):
    log = Recorder()

    def tree(n):
        return sv.ChildSpec(
            f"tree-{n}",
            lambda: sv.Supervisor.start_link([spec(log, f"w{n}", trap=True)]),
            type="supervisor",
        )

    top = sv.Supervisor.start([tree(n) for n in range(40)])
    started = time.monotonic()
    sv.stop(top, "shutdown", timeout=30)
    assert time.monotonic() - started < 5
    stops = [e for e in log.snapshot() if e[0] == "stop"]
    assert sorted(e[1] for e in stops) == sorted(f"w{n}" for n in range(40))
    assert all(e[2] == "shutdown" for e in stops)  # terminated, not killed
