"""Regression cases from the review of the restart-report and spawn-footprint change
(issue 20 §3). OTP: `unlink(self())` is a no-op returning true; a restart report never
carries an exit reason's text; a broken listener never stops a supervisor."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest

import supervision as sv
from supervision.crash_report import reason_kind


class _Unlinker(sv.GenServer):
    def init(self, args: object) -> None:
        return None

    def handle_cast(self, msg: object, state: None) -> None:
        sv.unlink(sv.self_pid())  # generic code whose From turns out to be itself
        return state


def test_unlink_of_self_is_a_no_op_and_the_process_still_takes_signals() -> None:
    sup = sv.Supervisor.start([sv.ChildSpec("u", lambda: _Unlinker.start_link(None))])
    worker = sv.Supervisor.which_child(sup, "u").pid
    sv.cast(worker, "go")
    sv.get_state(worker)  # the cast was handled (a call queues behind it)
    killed, stopped = threading.Event(), threading.Event()

    def kill() -> None:
        sv.exit(worker, "kill")  # hung on the process's own lock, taken twice
        killed.set()

    def stop() -> None:
        sv.stop(sup, "shutdown", 10)
        stopped.set()

    threading.Thread(target=kill, daemon=True).start()
    assert killed.wait(5), "a signal to the process hung"
    threading.Thread(target=stop, daemon=True).start()
    assert stopped.wait(5), "the supervisor's shutdown hung"


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("normal", "normal"),
        ("agent_stopped", "agent_stopped"),
        (("shutdown", "token sk-secret"), "shutdown"),
        ("password=hunter2 leaked", "str"),
        (("user text with spaces", 1), "str"),
        ("x" * 65, "str"),
        ("sk-abcdefghijklmnopqrstuvwxyz012345", "str"),  # second review: key-shaped
        (42, "int"),
    ],
)
def test_a_restart_report_names_the_kind_of_exit_never_its_text(reason: object, kind: str) -> None:
    assert reason_kind(reason) == kind


class _Crasher(sv.GenServer):
    def init(self, args: object) -> None:
        return None

    def handle_cast(self, msg: object, state: None) -> sv.Stop:
        return sv.Stop("crash", state)


def _restart_once(sup_name: str) -> None:
    sup = sv.Supervisor.start([sv.ChildSpec("c", lambda: _Crasher.start_link(None))])
    try:
        first = sv.Supervisor.which_child(sup, "c").pid
        sv.cast(first, "die")
        deadline = time.monotonic() + 5
        while sv.Supervisor.which_child(sup, "c").pid in (first, None):
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        sv.stop(sup, "shutdown", 10)


def test_a_listener_raising_system_exit_is_ignored_and_others_still_hear() -> None:
    heard: list[sv.RestartReport] = []

    def exits(report: sv.RestartReport) -> None:
        raise SystemExit(1)

    drop_bad = sv.on_restart(exits)
    drop_good = sv.on_restart(heard.append)
    try:
        _restart_once("exits")
    finally:
        drop_bad()
        drop_good()
    assert [report.reason for report in heard] == ["crash"]


def test_unsubscribing_one_of_two_equal_subscriptions_keeps_the_other() -> None:
    heard: list[sv.RestartReport] = []
    first = sv.on_restart(heard.append)
    second = sv.on_restart(heard.append)
    first()
    first()  # idempotent: it must not remove the second subscription
    try:
        _restart_once("twice")
    finally:
        second()
    assert len(heard) == 1


_SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("_SEEN", default="unset")


@pytest.mark.parametrize("dispatcher", ["pooled", "thread"])
def test_terminate_after_an_invalid_init_result_runs_in_the_process_context(
    dispatcher: str,
) -> None:
    seen: list[str] = []

    class _BadInit(sv.GenServer):
        def init(self, args: object) -> sv.NoReply:
            _SEEN.set("the child's")
            return sv.NoReply(None, timeout=-1)  # refused after init returned

        def terminate(self, reason: object, state: object) -> None:
            seen.append(_SEEN.get())
            _SEEN.set("set by terminate")

    _BadInit.dispatcher = dispatcher
    _SEEN.set("the spawner's")
    try:
        _BadInit.start(None)
    except Exception:
        pass
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == ["the child's"]
    assert _SEEN.get() == "the spawner's"
