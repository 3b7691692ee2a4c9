"""Review of d415031 (the one-shot lock wake-ups), findings 1 and 2: every way out of a
wait in `receive` or in an idle `SyncPool` thread must leave nothing behind, and a wait
without a practical limit must not fail.

Finding 1: a `receive` that Ctrl-C (or an OverflowError from a huge timeout) ended
left its wake-up lock registered in the mailbox; `receive(inf)` and `receive(1e10)`
raised OverflowError instead of waiting. Finding 2: `SyncPool(idle_seconds=None)` (a
thread never retires, as with the old `Condition.wait(None)`) or a negative value
killed each idle thread while it was still counted, so the pool stopped running tasks;
and a thread whose idle wait raised stayed counted as a thread and as idle."""

from __future__ import annotations

import ctypes
import linecache
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest

import supervision as sv
from supervision.errors import KernelError
from supervision.process import PseudoProcess, current_process
from supervision.sync_pool import SyncPool
from tests.helpers import wait_until


def _ctrl_c_main_thread_once_asleep(process: Any) -> None:
    wait_until(lambda: bool(process._sleepers))
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


def test_a_receive_interrupted_by_ctrl_c_leaves_no_sleeper_and_the_next_one_works() -> None:
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT does not raise KeyboardInterrupt here")
    assert threading.current_thread() is threading.main_thread()
    me = current_process()
    assert isinstance(me, PseudoProcess)
    for _ in range(3):
        interrupter = threading.Thread(target=_ctrl_c_main_thread_once_asleep, args=(me,))
        interrupter.start()
        with pytest.raises(KeyboardInterrupt):
            sv.receive(30)
        interrupter.join(5)
        assert not me._sleepers  # d415031: one locked, dead sleeper per interrupted receive
    sv.send(me.pid, "after")
    assert sv.receive(1) == "after"


@pytest.mark.parametrize("timeout", [float("inf"), 1e10])
def test_a_receive_with_a_huge_or_infinite_timeout_waits_for_its_message(timeout: float) -> None:
    inbox = sv.Inbox()

    def send_once_asleep() -> None:
        wait_until(lambda: bool(inbox._process._sleepers))
        sv.send(inbox.pid, "hello")

    threading.Thread(target=send_once_asleep).start()
    assert inbox.receive(timeout) == "hello"  # d415031: OverflowError
    assert not inbox._process._sleepers
    inbox.close()


def test_a_sync_pool_whose_idle_threads_never_retire_keeps_running_tasks() -> None:
    pool = SyncPool(max_threads=2, idle_seconds=None)
    assert sv.Task.start(lambda: 1, pool=pool).wait(5) == 1
    wait_until(lambda: pool.stats()["idle"] == 1)
    time.sleep(0.05)  # d415031: the idle thread died here (TypeError), still counted
    assert sv.Task.start(lambda: 2, pool=pool).wait(5) == 2
    wait_until(lambda: pool.stats()["idle"] == 1)
    assert pool.stats()["threads"] == 1


def test_an_infinite_idle_time_means_never_retire() -> None:
    pool = SyncPool(max_threads=1, idle_seconds=float("inf"))
    assert sv.Task.start(lambda: 1, pool=pool).wait(5) == 1
    wait_until(lambda: pool.stats()["idle"] == 1)
    assert sv.Task.start(lambda: 2, pool=pool).wait(5) == 2


@pytest.mark.parametrize("idle_seconds", [-0.5, -1.0, float("nan")])
def test_a_negative_or_nan_idle_time_is_refused_with_invalid_pool(idle_seconds: float) -> None:
    with pytest.raises(KernelError) as refused:
        SyncPool(idle_seconds=idle_seconds)
    assert refused.value.reason == "invalid_pool"


class _Stop(Exception):
    """Raised inside an idle pool thread from outside (`PyThreadState_SetAsyncExc`)."""


@pytest.fixture
def thread_errors(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[BaseException]]:
    errors: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    yield errors


def _pool_thread_waiting_for_work(pool: SyncPool) -> threading.Thread | None:
    """The thread of `pool` blocked in its idle wait (its innermost frame is at a
    ``.acquire(True, ...)`` line, called from `SyncPool._run` for this pool), if any."""
    frames = sys._current_frames()
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        if frame is None or "acquire(True" not in _source_line(frame):
            continue
        caller: FrameType | None = frame
        while caller is not None and caller.f_code is not SyncPool._run.__code__:
            caller = caller.f_back
        if caller is not None and caller.f_locals.get("self") is pool:
            return thread
    return None


def _source_line(frame: FrameType) -> str:
    return linecache.getline(frame.f_code.co_filename, frame.f_lineno)


def test_an_idle_pool_thread_whose_wait_raises_is_no_longer_counted(
    thread_errors: list[BaseException],
) -> None:
    pool = SyncPool(max_threads=1, idle_seconds=0.3)
    assert sv.Task.start(lambda: 1, pool=pool).wait(5) == 1
    thread = wait_until(lambda: _pool_thread_waiting_for_work(pool))
    raised = ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread.ident), ctypes.py_object(_Stop)
    )
    assert raised == 1
    thread.join(5)  # the exception lands as the wait ends
    assert not thread.is_alive() and [type(e) for e in thread_errors] == [_Stop]
    stats = pool.stats()
    assert stats["threads"] == 0 and stats["idle"] == 0 and not pool._sleeping
    # d415031: counted as idle still, the next task was queued for the dead thread
    assert sv.Task.start(lambda: 2, pool=pool).wait(5) == 2
