"""Tasks: sync and coroutine work, deadlines, kill, owner death, fencing, bounds."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import supervision as sv
from supervision.leases import LeaseError, MemoryLeases
from supervision.protocol import Ok
from supervision.reactor import REACTOR_NAME, GetLoop
from supervision.runtime import default_task_supervisor, reactor_loop
from supervision.sync_pool import SyncPool, TaskBusy
from supervision.task_supervisor import start_task_supervisor
from supervision.tasks import Task, TaskFailed, TaskResult, TaskTimeout
from tests.helpers import Recorder, in_thread, wait_dead, wait_until


async def add_later(x, delay=0.01):
    await asyncio.sleep(delay)
    return x + 1


def test_sync_and_coroutine_results():
    assert Task.start(lambda a, b: a * b, 6, 7).wait(2) == 42
    assert Task.start(add_later, 1).wait(2) == 2
    coroutine = add_later(10)
    assert Task.start(coroutine).wait(2) == 11


def test_failures_are_bounded_crashes():
    def boom():
        raise ValueError("token=abc123 is wrong")

    async def aboom():
        raise KeyError("missing")

    with pytest.raises(TaskFailed) as info:
        Task.start(boom).wait(2)
    assert info.value.reason == sv.Crash("ValueError", "token=[redacted] is wrong")
    with pytest.raises(TaskFailed) as info:
        Task.start(aboom).wait(2)
    assert info.value.reason.kind == "KeyError"


def test_a_task_is_a_real_process():
    release = threading.Event()
    task = Task.start(release.wait, 5)
    ref = sv.monitor(task.pid)
    assert task.pid.is_alive() and not task.done()
    release.set()
    assert sv.receive(2, match=lambda m: isinstance(m, sv.Down)) == sv.Down(ref, task.pid, "normal")

    sv.trap_exit(True)
    blocker = threading.Event()
    linked = Task.start(blocker.wait, 5)
    sv.link(linked.pid)
    linked.kill()
    assert sv.receive(2, match=lambda m: isinstance(m, sv.ExitSignal)) == sv.ExitSignal(
        linked.pid, "killed"
    )
    blocker.set()


def test_wait_timeout_leaves_the_task_running():
    release = threading.Event()
    task = Task.start(release.wait, 5)
    with pytest.raises(TaskTimeout) as info:
        task.wait(0.05)
    assert info.value.reason == "wait_timeout" and not task.done()
    release.set()
    assert task.wait(2) is True


def test_coroutine_is_cancelled_at_its_deadline():
    log = Recorder()

    async def slow():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            log.add("cancelled")
            raise

    started = time.monotonic()
    task = Task.start(slow, deadline=time.monotonic() + 0.1)
    with pytest.raises(TaskTimeout) as info:
        task.wait(5)
    assert info.value.reason == "deadline_exceeded"
    assert time.monotonic() - started < 2
    wait_until(lambda: log.snapshot() == ["cancelled"])


def test_sync_task_at_deadline_is_fenced():
    release, running = threading.Event(), threading.Event()
    me = sv.self_pid()
    log = Recorder()

    def slow():
        running.set()
        release.wait(5)  # the deadline passes while it waits
        sv.send(me, "late message")  # dropped: the task is dead
        log.add("returned")
        return "late result"

    task = Task.start(slow, deadline=time.monotonic() + 0.3)
    assert running.wait(5)
    with pytest.raises(TaskTimeout):
        task.wait(5)
    release.set()
    wait_until(lambda: log.snapshot() == ["returned"])
    with pytest.raises(TimeoutError):
        sv.receive(0.1)
    with pytest.raises(TaskTimeout):
        task.wait(0)  # the late result never replaces the outcome


def test_killed_sync_task_cannot_commit_through_the_kernel():
    leases = MemoryLeases()
    lease = leases.acquire("job", "task", 60)
    release, running = threading.Event(), threading.Event()
    outcome = Recorder()

    def worker():
        running.set()
        release.wait(5)
        try:
            leases.fenced_commit("job", lease.token, lambda: outcome.add("committed"))
        except LeaseError as error:
            outcome.add(error.reason)

    task = Task.start(worker)
    running.wait(5)
    task.kill()
    release.set()
    wait_until(lambda: outcome.snapshot() == ["fenced"])


def test_past_deadline_starts_nothing():
    called = []
    task = Task.start(lambda: called.append(1), deadline=time.monotonic() - 1)
    with pytest.raises(TaskTimeout):
        task.wait(1)
    time.sleep(0.05)
    assert called == []


def test_owner_death_stops_its_tasks():
    log = Recorder()

    running = threading.Event()

    async def forever():
        running.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            log.add("cancelled")
            raise

    holder = {}

    def owner_thread():
        holder["task"] = Task.start(forever)
        running.wait(5)

    in_thread(owner_thread)  # the thread ends: its pseudo-process exits normally
    task = holder["task"]
    with pytest.raises(TaskFailed) as info:
        task.wait(5)
    assert info.value.reason == ("shutdown", "owner_exited")
    wait_until(lambda: log.snapshot() == ["cancelled"])

    class Owner(sv.GenServer):
        def handle_call(self, request, from_, state):
            return sv.Reply(Task.start(forever), state)

    owner = Owner.start()
    owned = sv.call(owner, "start")
    sv.exit(owner, "kill")
    with pytest.raises(TaskFailed):
        owned.wait(5)


def test_notify_sends_the_result_to_the_owner():
    task = Task.start(lambda: "hi", notify=True)
    assert sv.receive(2) == TaskResult(task.pid, True, "hi")

    class Owner(sv.GenServer):
        def init(self, args):
            return []

        def handle_call(self, request, from_, state):
            if request == "start":
                Task.start(lambda: 1 / 0, notify=True)
                return sv.Reply("ok", state)
            return sv.Reply(list(state), state)

        def handle_info(self, msg, state):
            return [*state, msg]

    owner = Owner.start_link()
    sv.call(owner, "start")
    (result,) = wait_until(lambda: sv.call(owner, "get"))
    assert result.ok is False and result.value.kind == "ZeroDivisionError"


def test_full_pool_is_a_typed_busy_error():
    pool = SyncPool(max_threads=1, max_queue=1)
    release = threading.Event()
    first = Task.start(release.wait, 5, pool=pool)
    wait_until(lambda: pool.stats()["queued"] == 0)
    second = Task.start(release.wait, 5, pool=pool)
    with pytest.raises(TaskBusy) as info:
        Task.start(release.wait, 5, pool=pool)
    assert info.value.reason == "busy"
    release.set()
    assert first.wait(2) is True and second.wait(2) is True


def test_task_supervisor_counts_and_takes_tasks_down_with_it():
    baseline = default_task_supervisor().count()
    release = threading.Event()
    tasks = [Task.start(release.wait, 5) for _ in range(20)]
    assert default_task_supervisor().count() == baseline + 20
    release.set()
    for task in tasks:
        task.wait(2)
    wait_until(lambda: default_task_supervisor().count() == baseline)

    own = start_task_supervisor(max_children=2)
    hold = threading.Event()
    mine = [Task.start(hold.wait, 5, supervisor=own) for _ in range(2)]
    with pytest.raises(sv.MaxChildrenReached):
        Task.start(hold.wait, 5, supervisor=own)
    sv.exit(own, "shutdown")
    for task in mine:
        with pytest.raises(TaskFailed) as info:
            task.wait(2)
        assert info.value.reason == "shutdown"
    hold.set()


def test_reactor_is_supervised_and_its_restart_cancels_old_coroutines():
    log = Recorder()

    async def forever():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            log.add("cancelled")
            raise

    old_loop = reactor_loop()
    task = Task.start(forever)
    old = sv.whereis(REACTOR_NAME)
    sv.exit(old, "boom")  # from a stranger: the reactor traps exits and ignores it
    assert sv.call(REACTOR_NAME, GetLoop()) == Ok(old_loop)
    sv.exit(old, "kill")  # terminate cannot run, yet its loop still shuts down
    assert wait_dead(old) == "killed"
    with pytest.raises(TaskFailed) as info:
        task.wait(5)
    assert info.value.reason == ("shutdown", "cancelled")
    wait_until(lambda: log.snapshot() == ["cancelled"])
    wait_until(lambda: old_loop.is_closed())
    new = wait_until(lambda: sv.whereis(REACTOR_NAME))
    assert new != old
    assert Task.start(add_later, 1).wait(2) == 2
    assert reactor_loop() is not old_loop


def test_stopping_the_runtime_leaves_no_reactor_thread_behind():
    from supervision.runtime import ensure_runtime, stop_runtime

    def reactor_threads():
        return sum(1 for t in threading.enumerate() if t.name == "supervision-reactor")

    reactor_loop()
    for _ in range(3):
        loop = reactor_loop()
        pending = Task.start(add_later, 1, 10)
        stop_runtime()
        with pytest.raises(TaskFailed):
            pending.wait(5)
        assert loop.is_closed()
        wait_until(lambda: reactor_threads() == 0)
        ensure_runtime()
        assert Task.start(add_later, 1).wait(5) == 2
    assert reactor_threads() == 1


def test_coroutine_tasks_run_as_their_own_process():
    seen = {}

    async def child():
        await asyncio.sleep(30)

    async def parent():
        seen["self"] = sv.self_pid()
        seen["child"] = Task.start(child)
        await asyncio.sleep(30)

    parent_task = Task.start(parent)
    wait_until(lambda: "child" in seen)
    assert seen["self"] == parent_task.pid
    parent_task.kill()
    with pytest.raises(TaskFailed) as info:
        seen["child"].wait(5)  # owned by the parent task: stopped with it
    assert info.value.reason == ("shutdown", "owner_exited")


def test_a_coroutine_task_that_fails_to_start_leaves_nothing():
    async def needs_one(x):
        return x

    baseline = default_task_supervisor().count()
    before = sv.kernel_stats()
    for _ in range(5):
        with pytest.raises(TypeError):
            Task.start(needs_one)  # wrong arguments
    assert default_task_supervisor().count() == baseline
    after = sv.kernel_stats()
    assert after["processes"] == before["processes"] and after["timers"] == before["timers"]


def test_coroutine_stopped_before_its_first_step_never_runs_and_is_closed():
    import gc
    import warnings

    ran = []

    async def never():
        ran.append(1)
        await asyncio.sleep(10)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reactor_loop().call_soon_threadsafe(time.sleep, 0.3)  # hold the loop: nothing starts
        tasks = [Task.start(never) for _ in range(50)]
        for task in tasks:
            task.kill()
        for task in tasks:
            with pytest.raises(TaskFailed):
                task.wait(2)
        time.sleep(0.1)
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert ran == []  # all were killed before the loop took them


def test_wait_all_keeps_order_reports_failures_and_kills_stragglers():
    from supervision.tasks import wait_all

    def boom():
        raise ValueError("bad")

    release = threading.Event()
    deadline = time.monotonic() + 0.3
    tasks = [Task.start(lambda: "first"), Task.start(boom), Task.start(release.wait, 10)]
    started = time.monotonic()
    first, failed, late = wait_all(tasks, deadline)
    assert time.monotonic() - started < 2
    assert first == "first"
    assert isinstance(failed, TaskFailed) and failed.reason.kind == "ValueError"
    assert isinstance(late, TaskTimeout) and tasks[2].done()  # killed at the deadline
    release.set()


def test_the_reactor_refuses_requests_it_does_not_take():
    """Typed requests: the old ``"loop"`` string and a stray cast are refused or
    dropped, and the reactor keeps serving its loop."""
    from supervision.protocol import Refused

    loop = reactor_loop()
    for request in ("loop", ("reactor_loop_exited",), None):
        answer = sv.call(REACTOR_NAME, request)
        assert type(answer) is Refused and answer.error.reason == "invalid_request"
    sv.cast(REACTOR_NAME, "loop")
    sv.send(REACTOR_NAME, ("reactor_loop_exited",))  # the old exit message: ignored
    assert sv.call(REACTOR_NAME, GetLoop()) == Ok(loop)
