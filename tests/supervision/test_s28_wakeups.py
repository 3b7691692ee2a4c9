"""Issue 20 §4 (session 28): the kernel's hand-offs wake their waiter with a lock used as
a one-shot wake-up instead of a `threading.Condition`. These pin what that must keep:
every blocked reader of a mailbox re-checks its own `match` after a delivery, timed out
waits leave nothing behind, idle pool threads wake for work and retire when idle, and a
child's routine normal exit costs no log formatting when nothing records DEBUG."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from structlog.testing import capture_logs

import supervision as sv
from supervision.dispatch_pool import SPARE_IDLE_SECONDS, get_pool
from supervision.sync_pool import SyncPool
from tests.helpers import wait_until


def _blocked_in_receive(inbox: sv.Inbox, readers: int) -> bool:
    """True once `readers` threads sleep in the inbox's `receive` (white box: the list
    of their wake-up locks)."""
    return len(inbox._process._sleepers or ()) == readers


def test_two_readers_of_one_inbox_each_get_the_message_their_match_accepts():
    # With a notify-one condition, the delivery of "b" woke the first sleeper ("a"'s
    # reader), which did not match and slept again: "b"'s reader was never woken.
    inbox = sv.Inbox()
    got: dict[str, Any] = {}

    def reader(wanted: str) -> None:
        try:
            got[wanted] = inbox.receive(5, match=lambda m: m == wanted)
        except BaseException as exc:  # a timeout is the failure under test
            got[wanted] = exc

    first = threading.Thread(target=reader, args=("a",))
    first.start()
    wait_until(lambda: _blocked_in_receive(inbox, 1))
    second = threading.Thread(target=reader, args=("b",))
    second.start()
    wait_until(lambda: _blocked_in_receive(inbox, 2))
    sv.send(inbox.pid, "b")
    second.join(10)
    sv.send(inbox.pid, "a")
    first.join(10)
    assert got == {"a": "a", "b": "b"}
    inbox.close()


def test_a_timed_out_receive_leaves_no_sleeper_and_the_next_message_still_arrives():
    inbox = sv.Inbox()
    for _ in range(3):
        try:
            inbox.receive(0.01)
        except TimeoutError:
            pass
        else:
            raise AssertionError("nothing was sent")
    assert not inbox._process._sleepers
    sv.send(inbox.pid, "late")
    assert inbox.receive(1) == "late"
    inbox.close()


def test_close_wakes_every_blocked_reader_with_process_exit():
    inbox = sv.Inbox()
    outcomes: list[BaseException] = []

    def reader() -> None:
        try:
            inbox.receive(10)
        except BaseException as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    wait_until(lambda: _blocked_in_receive(inbox, 3))
    inbox.close()
    for thread in threads:
        thread.join(10)
    assert len(outcomes) == 3 and all(isinstance(e, sv.ProcessExit) for e in outcomes)


def test_a_spare_pool_thread_retires_once_idle_and_the_pool_still_serves():
    pool = get_pool()
    release = threading.Event()

    class Blocker(sv.GenServer):
        dispatcher = "pooled"

        def handle_cast(self, msg: Any, state: Any) -> Any:
            release.wait(10)
            return state

    class Echo(sv.GenServer):
        dispatcher = "pooled"

        def handle_call(self, request: Any, from_: Any, state: Any) -> Any:
            return sv.Reply(request, state)

    blockers = [Blocker.start_link() for _ in range(pool.threads)]
    echo = Echo.start_link()
    try:
        for pid in blockers:
            sv.cast(pid, "block")
        with capture_logs():  # the watchdog's handler_blocked warnings
            assert sv.call(echo, "served by a spare", timeout=10) == "served by a spare"
            assert pool.thread_count() > pool.threads
            release.set()
            wait_until(lambda: pool.thread_count() == pool.threads, timeout=SPARE_IDLE_SECONDS * 5)
        assert sv.call(echo, "after", timeout=5) == "after"  # a sleeping base thread woke
    finally:
        # (review of d415031, finding 4) even when an assertion fails: blocked handlers
        # would hold every base thread of the process-wide pool for the next tests
        release.set()
        for pid in [*blockers, echo]:
            sv.stop(pid)


def test_sync_pool_threads_wake_for_work_and_retire_when_idle():
    pool = SyncPool(max_threads=2, idle_seconds=0.05)
    for round_ in range(3):
        tasks = [sv.Task.start(lambda r=round_: r, pool=pool) for _ in range(4)]
        assert [task.wait(5) for task in tasks] == [round_] * 4
        wait_until(lambda: pool.stats()["threads"] == 0)  # idle: every thread left
    stats = pool.stats()
    assert stats["idle"] == 0 and stats["busy"] == 0 and stats["queued"] == 0


class _CountedId:
    """A child id whose `repr` counts: building a `child_exited` event formats it."""

    def __init__(self) -> None:
        self.reprs = 0

    def __repr__(self) -> str:
        self.reprs += 1
        return "<counted id>"


def test_a_normal_child_exit_builds_no_log_event_unless_debug_is_recorded(
    caplog: pytest.LogCaptureFixture,
):
    # (review of d415031, finding 3) "nothing records DEBUG" made explicit, so the test
    # holds under `pytest --log-level=DEBUG` or an ini `log_level` too
    caplog.set_level(logging.INFO, logger="supervision")
    child_id = _CountedId()
    sup = sv.DynamicSupervisor.start()

    class Quick(sv.GenServer):
        dispatcher = "pooled"

    def one_exit() -> None:
        spec = sv.ChildSpec(child_id, lambda: Quick.start_link(), restart="temporary")
        pid = sv.DynamicSupervisor.start_child(sup, spec)
        ref = sv.monitor(pid)
        sv.stop(pid)
        sv.receive(5, match=lambda m: isinstance(m, sv.Down) and m.ref == ref)
        sv.DynamicSupervisor.count_children(sup)  # the supervisor has handled the exit

    one_exit()
    assert child_id.reprs == 0  # nothing records DEBUG: the event was not even built
    with capture_logs() as logs:
        one_exit()
    exited = [e for e in logs if e["event"] == "supervision.supervisor.child_exited"]
    assert len(exited) == 1 and exited[0]["decision"] == "no_restart"
    assert exited[0]["log_level"] == "debug" and child_id.reprs >= 1
    sv.stop(sup, "shutdown")
