"""Restart reports (`sv.on_restart`): one `RestartReport` per restarted child.

The restart cases follow Erlang/OTP's ``lib/stdlib/test/supervisor_SUITE.erl``
(``one_for_all``, ``rest_for_one``, ``temporary_normal``/``temporary_abnormal``,
``permanent_abnormal``, ``transient_normal``, ``restart_intensity`` and the
``simple_one_for_one`` cases): where the suite checks which children were restarted,
these check that exactly those children were reported, each once, with the kind of
the exit reason. Listeners are process-wide, so each test names its supervisor and
keeps only that supervisor's reports. A listener sends every report to the test
thread; a call to the supervisor after the child's `Down` is answered after the
supervisor handled the exit, so every report of that exit has been sent by then.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

import supervision as sv
from tests.helpers import wait_dead, wait_until

WAIT = 10.0
_names = itertools.count(1)


class Worker(sv.GenServer):
    """``cast ("raise", text)`` raises RuntimeError(text); ``cast reason`` stops with it."""

    def init(self, args: Any) -> None:
        return None

    def handle_call(self, request: Any, from_: Any, state: None) -> Any:
        return sv.Reply("ok", state)

    def handle_cast(self, msg: Any, state: None) -> Any:
        if isinstance(msg, tuple) and msg[0] == "raise":
            raise RuntimeError(msg[1])
        return sv.Stop(msg, state)


def spec(child_id: Hashable, **options: Any) -> sv.ChildSpec:
    return sv.ChildSpec(child_id, lambda: Worker.start_link(None), **options)


@pytest.fixture
def sup_name() -> str:
    return f"restart-reports-{next(_names)}"


@pytest.fixture
def reports(sup_name: str) -> Iterator[Callable[[], list[sv.RestartReport]]]:
    """Subscribe for the test; returns a function that drains this supervisor's reports."""
    owner = sv.self_pid()

    def listener(report: sv.RestartReport) -> None:
        if report.supervisor == sup_name:
            sv.send(owner, report)

    unsubscribe = sv.on_restart(listener)

    def drain() -> list[sv.RestartReport]:
        got = []
        while True:
            try:
                got.append(sv.receive(0, match=lambda m: isinstance(m, sv.RestartReport)))
            except TimeoutError:
                return got

    yield drain
    unsubscribe()


_STARTED: list[sv.Pid] = []


@pytest.fixture(autouse=True)
def stop_supervisors() -> Iterator[None]:
    yield
    while _STARTED:
        sup = _STARTED.pop()
        if sup.is_alive():
            sv.stop(sup, "shutdown", timeout=WAIT)


def new_sup(children: list[sv.ChildSpec], name: str, **options: Any) -> sv.Pid:
    sup = sv.Supervisor.start(children, name=name, **options)
    _STARTED.append(sup)
    return sup


def new_dyn(name: str | None, **options: Any) -> sv.Pid:
    dyn = sv.DynamicSupervisor.start(name=name, **options)
    _STARTED.append(dyn)
    return dyn


def pids(sup: sv.Pid) -> dict[Hashable, sv.Pid | None]:
    return {row.id: row.pid for row in sv.Supervisor.which_children(sup, WAIT)}


def exit_child(sup: sv.Pid, pid: sv.Pid, how: Any) -> None:
    """Make `pid` exit (``"kill"``, a ``("raise", text)`` crash or a stop reason), wait
    for it to be gone, then for the supervisor to have handled its exit."""
    if how == "kill":
        sv.exit(pid, "kill")
    else:
        sv.cast(pid, how)
    wait_dead(pid, WAIT)
    sv.Supervisor.count_children(sup, WAIT)


def test_one_for_one_reports_the_restarted_child(sup_name: str, reports: Any) -> None:
    """supervisor_SUITE ``permanent_abnormal``: the killed child restarts, reported once."""
    sup = new_sup([spec("a"), spec("b")], sup_name)
    exit_child(sup, pids(sup)["a"], "kill")  # type: ignore[arg-type]
    assert reports() == [sv.RestartReport(sup_name, "a", "killed")]


def test_one_for_all_reports_every_child_once(sup_name: str, reports: Any) -> None:
    """supervisor_SUITE ``one_for_all``: every child restarts; each is reported once with
    the crash's kind, never its text."""
    sup = new_sup([spec("a"), spec("b"), spec("c")], sup_name, strategy="one_for_all")
    before = pids(sup)
    exit_child(sup, before["b"], ("raise", "token sk-secret-text"))  # type: ignore[arg-type]
    got = reports()
    assert sorted(r.child_id for r in got) == ["a", "b", "c"]
    assert {r.reason for r in got} == {"RuntimeError"}
    assert all(pid != before[cid] for cid, pid in pids(sup).items())


def test_rest_for_one_reports_the_child_and_those_after_it(sup_name: str, reports: Any) -> None:
    """supervisor_SUITE ``rest_for_one``: the crashed child and the ones after it."""
    sup = new_sup([spec("a"), spec("b"), spec("c")], sup_name, strategy="rest_for_one")
    exit_child(sup, pids(sup)["b"], "kill")  # type: ignore[arg-type]
    assert sorted(r.child_id for r in reports()) == ["b", "c"]


def test_temporary_children_are_not_restarted_so_not_reported(sup_name: str, reports: Any) -> None:
    """supervisor_SUITE ``temporary_abnormal`` and ``one_for_all`` with a temporary
    sibling: a temporary child is never restarted, so never reported."""
    sup = new_sup(
        [spec("a"), spec("t", restart="temporary"), spec("b")], sup_name, strategy="one_for_all"
    )
    exit_child(sup, pids(sup)["t"], "kill")  # type: ignore[arg-type]
    assert reports() == []
    sup_pids = pids(sup)
    assert "t" not in sup_pids
    exit_child(sup, sup_pids["a"], "kill")  # type: ignore[arg-type]
    assert sorted(r.child_id for r in reports()) == ["a", "b"]


def test_normal_exit_of_a_transient_child_is_not_reported(sup_name: str, reports: Any) -> None:
    """supervisor_SUITE ``transient_normal`` / ``transient_abnormal``."""
    sup = new_sup([spec("t", restart="transient")], sup_name)
    exit_child(sup, pids(sup)["t"], "normal")  # type: ignore[arg-type]
    assert reports() == []
    sv.Supervisor.restart_child(sup, "t", WAIT)
    exit_child(sup, pids(sup)["t"], ("shutdown", "detail"))  # type: ignore[arg-type]
    assert reports() == []
    sv.Supervisor.restart_child(sup, "t", WAIT)
    exit_child(sup, pids(sup)["t"], "boom")  # type: ignore[arg-type]
    assert reports() == [sv.RestartReport(sup_name, "t", "boom")]


def test_max_intensity_reports_the_restarts_that_happened(sup_name: str, reports: Any) -> None:
    """supervisor_SUITE ``restart_intensity``: two restarts are allowed and reported; the
    third exit ends the supervisor with ``shutdown`` and restarts nothing."""
    sup = new_sup([spec("a")], sup_name, intensity=2, period=3600.0)
    for _ in range(2):
        exit_child(sup, pids(sup)["a"], "kill")  # type: ignore[arg-type]
    last = pids(sup)["a"]
    assert last is not None
    sv.exit(last, "kill")
    assert wait_dead(sup, WAIT) == "shutdown"
    assert reports() == [sv.RestartReport(sup_name, "a", "killed")] * 2


def test_a_failed_restart_is_reported_once_it_succeeds(sup_name: str, reports: Any) -> None:
    """supervisor_SUITE ``restart_infinitely`` shape: a restart that fails is retried;
    only the start that succeeds is reported, with the exit reason that began it."""
    failures = threading.Semaphore(0)
    first = [True]

    def start() -> sv.Pid:
        if not first[0] and failures.acquire(blocking=False):
            raise RuntimeError("cannot start now")
        first[0] = False
        return Worker.start_link(None)

    sup = new_sup([sv.ChildSpec("a", start)], sup_name, intensity=100, period=3600.0)
    failures.release()
    failures.release()
    exit_child(sup, pids(sup)["a"], "kill")  # type: ignore[arg-type]
    # restarting meanwhile: the queued retries run in the supervisor
    wait_until(lambda: sv.Supervisor.which_child(sup, "a", WAIT).pid is not None, WAIT)
    assert reports() == [sv.RestartReport(sup_name, "a", "killed")]


def test_dynamic_supervisor_reports_permanent_and_transient_restarts(
    sup_name: str, reports: Any
) -> None:
    """supervisor_SUITE ``simple_one_for_one``: a permanent child's restart is reported;
    a temporary child and a transient one that exits normally are not restarted."""
    dyn = new_dyn(sup_name)
    permanent = sv.DynamicSupervisor.start_child(dyn, spec("p"), WAIT)
    temporary = sv.DynamicSupervisor.start_child(dyn, spec("t", restart="temporary"), WAIT)
    transient = sv.DynamicSupervisor.start_child(dyn, spec("r", restart="transient"), WAIT)
    assert permanent and temporary and transient

    def settle(pid: sv.Pid) -> None:
        wait_dead(pid, WAIT)
        sv.DynamicSupervisor.count_children(dyn, WAIT)

    sv.exit(temporary, "kill")
    settle(temporary)
    sv.cast(transient, "normal")
    settle(transient)
    assert reports() == []
    sv.cast(permanent, ("raise", "hidden"))
    settle(permanent)
    assert reports() == [sv.RestartReport(sup_name, "p", "RuntimeError")]


def test_unnamed_supervisor_is_reported_by_pid(reports: Any) -> None:
    owner = sv.self_pid()
    dyn = new_dyn(None)
    unsubscribe = sv.on_restart(lambda r: sv.send(owner, ("unnamed", r)))
    try:
        child = sv.DynamicSupervisor.start_child(dyn, spec(7), WAIT)
        assert child is not None
        sv.exit(child, "kill")
        wait_dead(child, WAIT)
        sv.DynamicSupervisor.count_children(dyn, WAIT)
        tagged = sv.receive(
            WAIT,
            match=lambda m: (
                isinstance(m, tuple) and m[0] == "unnamed" and m[1].supervisor == str(dyn)
            ),
        )
        assert tagged[1] == sv.RestartReport(str(dyn), "7", "killed")
    finally:
        unsubscribe()


def test_a_raising_listener_is_logged_and_ignored(sup_name: str, reports: Any) -> None:
    calls: list[sv.RestartReport] = []

    def broken(report: sv.RestartReport) -> None:
        if report.supervisor == sup_name:
            calls.append(report)
            raise ValueError("listener bug")

    unsubscribe = sv.on_restart(broken)
    try:
        sup = new_sup([spec("a")], sup_name)
        with capture_logs() as logs:
            exit_child(sup, pids(sup)["a"], "kill")  # type: ignore[arg-type]
        assert len(calls) == 1
        assert reports() == [sv.RestartReport(sup_name, "a", "killed")]  # the others still ran
        failed = [e for e in logs if e["event"] == "supervision.supervisor.restart_listener_failed"]
        assert failed and failed[0]["error_type"] == "ValueError"
        assert "listener bug" not in repr(failed)
        assert sv.Supervisor.count_children(sup, WAIT)["active"] == 1  # the supervisor lives on
    finally:
        unsubscribe()


def test_unsubscribe_stops_the_reports_and_is_idempotent(sup_name: str) -> None:
    calls: list[sv.RestartReport] = []
    unsubscribe = sv.on_restart(lambda r: calls.append(r) if r.supervisor == sup_name else None)
    sup = new_sup([spec("a")], sup_name)
    exit_child(sup, pids(sup)["a"], "kill")  # type: ignore[arg-type]
    assert len(calls) == 1
    unsubscribe()
    unsubscribe()
    exit_child(sup, pids(sup)["a"], "kill")  # type: ignore[arg-type]
    assert len(calls) == 1


def test_restart_report_is_a_frozen_value() -> None:
    report = sv.RestartReport("sup", "child", "killed")
    assert report == sv.RestartReport("sup", "child", "killed")
    with pytest.raises(AttributeError):
        report.reason = "other"  # type: ignore[misc]
