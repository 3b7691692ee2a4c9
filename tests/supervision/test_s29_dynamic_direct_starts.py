"""`DynamicSupervisor.start_child` run on the caller's thread (issue 20 §3/§4: agents
that spawn like processes).

A start without a timeout no longer goes through the supervisor's thread: the caller
runs the child's start as the supervisor and records the child. Each test below pins
one hazard of that (named in its docstring), or ports a case of Erlang/OTP's
``lib/stdlib/test/supervisor_SUITE.erl`` for ``simple_one_for_one`` (our
`DynamicSupervisor`) with the start on a starter thread. Races are made deterministic
with `threading.Event`s in a child's `init` or start function, never with sleeps that
a slow machine could outrun.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
from typing import Any

import pytest

import supervision as sv
from supervision.process import resolve
from tests.helpers import in_thread, wait_dead, wait_until

pytestmark = pytest.mark.usefixtures("each_dispatcher")

WAIT = 10.0


class Worker(sv.GenServer):
    """``init(args)``: args is a dict; ``gate`` (an Event) is waited for, ``entered``
    set first; ``trap`` traps exits; ``seen`` gets the init's thread and parent."""

    def init(self, args: dict[str, Any]) -> Any:
        seen = args.get("seen")
        if seen is not None:
            seen.append((threading.get_ident(), sv.self_pid()))
        if args.get("trap"):
            sv.trap_exit(True)
        entered = args.get("entered")
        if entered is not None:
            entered.set()
        gate = args.get("gate")
        if gate is not None:
            assert gate.wait(WAIT)
        if args.get("fail"):
            raise RuntimeError("init failed")
        if args.get("ignore"):
            return sv.Ignore()
        return args.get("value")

    def handle_call(self, request: Any, from_: Any, state: Any) -> Any:
        return sv.Reply(state, state)

    def handle_cast(self, msg: Any, state: Any) -> Any:
        return sv.Stop(msg, state)

    def terminate(self, reason: Any, state: Any) -> None:
        if state == "slow_stop":
            time.sleep(0.3)


def spec(
    restart: str = "temporary",
    child_id: str = "w",
    started_on: list[int] | None = None,
    **args: Any,
) -> sv.ChildSpec:
    """A `Worker` child; `started_on` gets the thread that ran each start (the start
    function runs on the thread that runs the start, whatever the child's dispatcher:
    a thread-dispatched child's init runs on its own thread, a pooled one's there)."""

    def start() -> sv.Pid:
        if started_on is not None:
            started_on.append(threading.get_ident())
        return Worker.start_link(args)

    return sv.ChildSpec(child_id, start, restart=restart)  # type: ignore[arg-type]


def top_function(thread_ident: int) -> str | None:
    """The function the thread `thread_ident` is running now (its innermost Python frame)."""
    frame = sys._current_frames().get(thread_ident)
    return None if frame is None else frame.f_code.co_name


def start_child(sup: sv.Pid, child: Any) -> Any:
    """`start_child` from a fresh thread (a direct start with no signal handling)."""
    return in_thread(lambda: sv.DynamicSupervisor.start_child(sup, child))


def start_in_thread(sup: sv.Pid, child: sv.ChildSpec) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["pid"] = sv.DynamicSupervisor.start_child(sup, child)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def pids(sup: sv.Pid) -> list[sv.Pid | None]:
    return [row.pid for row in sv.DynamicSupervisor.which_children(sup)]


# -- where and as whom the start runs ------------------------------------------------------


def test_a_direct_start_runs_on_the_callers_thread_as_the_supervisor() -> None:
    """Issue 20 §4: the caller runs the start; the child is linked to the supervisor
    (not to the caller), has it as parent, and is in the table when start_child returns."""
    sup = sv.DynamicSupervisor.start()
    seen: list[Any] = []
    idents: list[int] = []
    started_on: list[int] = []

    def start() -> Any:
        idents.append(threading.get_ident())
        return sv.DynamicSupervisor.start_child(sup, spec(started_on=started_on, seen=seen))

    child = in_thread(start)
    assert child is not None
    assert started_on == idents  # the start function ran on the caller's thread
    if sv.GenServer.dispatcher == "pooled":  # a pooled init runs where its start runs
        assert seen[0][0] == idents[0]
    assert pids(sup) == [child]  # at once: no wait
    process, supervisor = resolve(child), resolve(sup)
    assert process is not None and supervisor is not None
    assert process.parent is supervisor
    assert process.linked_to(supervisor)
    assert process.counts()[0] == 1  # its one link: the supervisor, not the caller
    sv.exit(sup, "kill")
    assert wait_dead(child) == "killed"


def test_a_start_with_a_timeout_is_still_a_call() -> None:
    """A timeout needs the supervisor's thread (CallTimeout as before): the child's
    init runs there, not on the caller's thread."""
    sup = sv.DynamicSupervisor.start()
    started_on: list[int] = []
    idents: list[int] = []
    in_thread(
        lambda: (
            idents.append(threading.get_ident()),
            sv.DynamicSupervisor.start_child(sup, spec(started_on=started_on), timeout=WAIT),
        )
    )
    assert len(started_on) == 1 and started_on[0] != idents[0]
    sv.stop(sup)


def test_a_start_from_the_main_thread_is_direct() -> None:
    """Session 31: the main thread runs its starts too (its signal handlers held back:
    see the tests below), so a script that spawns from it pays no call."""
    assert threading.current_thread() is threading.main_thread()
    sup = sv.DynamicSupervisor.start()
    started_on: list[int] = []
    assert sv.DynamicSupervisor.start_child(sup, spec(started_on=started_on)) is not None
    assert started_on == [threading.get_ident()]
    sv.stop(sup)


class Interrupted(Exception):
    pass


@pytest.fixture
def raising_sigint() -> Any:
    """SIGINT's handler raises `Interrupted` (as Ctrl-C's raises KeyboardInterrupt), once:
    the event it returns is set then, and later ones are ignored."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers run on the main thread only")
    raised = threading.Event()

    def interrupted(signum: int, frame: Any) -> None:
        if not raised.is_set():
            raised.set()
            raise Interrupted

    previous = signal.signal(signal.SIGINT, interrupted)
    yield raised
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("raising_sigint")
def test_a_ctrl_c_during_a_main_thread_start_lands_once_the_child_is_recorded() -> None:
    """The hazard that kept the main thread's starts calls until session 31: a handler
    that raises between two bytecodes of the start (here: in the child's start
    function, as the child starts). It raises once the start is over instead: the child
    is started, linked and recorded, as when a Ctrl-C interrupted a call's wait while
    the supervisor's thread went on with the start."""
    sup = sv.DynamicSupervisor.start()
    pids: list[sv.Pid] = []

    def start() -> sv.Pid:
        signal.raise_signal(signal.SIGINT)
        pids.append(Worker.start_link({"value": "up"}))
        return pids[0]

    with pytest.raises(Interrupted):
        sv.DynamicSupervisor.start_child(sup, sv.ChildSpec("w", start, restart="temporary"))
    assert len(pids) == 1 and pids[0].is_alive()
    assert [child.pid for child in sv.DynamicSupervisor.which_children(sup)] == pids
    assert sv.call(pids[0], "state") == "up"
    assert sv.DynamicSupervisor.start_child(sup, spec(value="next")) is not None  # lock free
    sv.stop(sup)
    assert not pids[0].is_alive()  # it was the supervisor's: stopped with it


def test_a_ctrl_c_pressed_again_stops_a_main_thread_start_that_hangs(
    raising_sigint: threading.Event,
) -> None:
    """A child's init that hangs: the first Ctrl-C is held; pressing again (every 20 ms
    here: a signal that lands just before a wait blocks is only handled when the wait
    ends, so one press may not be seen at once) lands in the child's start and stops it,
    long before the init would have ended; the supervisor takes other starts after."""
    sup = sv.DynamicSupervisor.start()
    entered, gate = threading.Event(), threading.Event()

    def press() -> None:
        if not entered.wait(WAIT):
            return
        deadline = time.monotonic() + WAIT / 2
        while not raising_sigint.is_set() and time.monotonic() < deadline:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            raising_sigint.wait(0.02)

    presser = threading.Thread(target=press)
    presser.start()
    began = time.monotonic()
    try:
        with pytest.raises(Interrupted):
            sv.DynamicSupervisor.start_child(sup, spec(entered=entered, gate=gate))
        assert not gate.is_set() and time.monotonic() - began < WAIT / 2  # not the init's end
    finally:
        gate.set()
        presser.join(WAIT)
    assert sv.DynamicSupervisor.start_child(sup, spec(value="after")) is not None
    wait_until(lambda: sv.DynamicSupervisor.count_children(sup)["active"] >= 1)
    sv.stop(sup)


def test_a_start_from_an_event_loops_thread_is_still_a_call() -> None:
    """A coroutine that starts a child (blocking its loop, as before): the child's start
    (and so a pooled child's init) runs on the supervisor's thread, never on the
    running loop. The start function checks, so both dispatchers test it."""
    sup = sv.DynamicSupervisor.start()
    loops: list[bool] = []

    def start_checking_for_a_loop() -> sv.Pid:
        try:
            asyncio.get_running_loop()
            loops.append(True)
        except RuntimeError:
            loops.append(False)
        return Worker.start_link({})

    async def start() -> Any:
        return sv.DynamicSupervisor.start_child(sup, sv.ChildSpec("l", start_checking_for_a_loop))

    assert in_thread(lambda: asyncio.run(start())) is not None
    assert loops == [False]
    sv.stop(sup)


def test_direct_starts_can_be_turned_off() -> None:
    """``direct_starts=False``: every start is a call, as before session 29."""
    sup = sv.DynamicSupervisor.start(direct_starts=False)
    started_on: list[int] = []
    idents: list[int] = []
    in_thread(
        lambda: (
            idents.append(threading.get_ident()),
            sv.DynamicSupervisor.start_child(sup, spec(started_on=started_on)),
        )
    )
    assert len(started_on) == 1 and started_on[0] != idents[0]
    sv.stop(sup)
    with pytest.raises(sv.SupervisorError) as info:
        sv.DynamicSupervisor.start(direct_starts="yes")  # type: ignore[arg-type]
    assert info.value.reason == ("invalid_direct_starts", "yes")


def test_restarts_still_run_on_the_supervisors_thread() -> None:
    """Issue 20 §4: a restart is the supervisor's own work, on its own thread (the
    thread a call-path start runs on), not the thread that started the child first."""
    sup = sv.DynamicSupervisor.start(intensity=5, period=60)
    started_on: list[int] = []
    starter: list[int] = []
    child = in_thread(
        lambda: (
            starter.append(threading.get_ident()),
            sv.DynamicSupervisor.start_child(sup, spec("permanent", started_on=started_on)),
        )[1]
    )
    assert started_on == starter  # a direct start: on the starter's thread
    probe = sv.DynamicSupervisor.start_child(sup, spec(started_on=started_on), timeout=WAIT)
    supervisors_thread = started_on[1]  # a call: the supervisor's thread ran it
    assert supervisors_thread != starter[0]
    sv.DynamicSupervisor.terminate_child(sup, probe)  # type: ignore[arg-type]
    sv.exit(child, "boom")
    wait_until(lambda: len(started_on) == 3 and pids(sup) not in ([child], []))
    assert started_on[2] == supervisors_thread
    (restarted,) = pids(sup)
    assert restarted is not None and resolve(restarted).parent is resolve(sup)  # type: ignore[union-attr]
    sv.stop(sup)


def test_the_same_errors_as_a_call() -> None:
    """start_child returns/raises what the call did: a failing init's reason, ignore
    -> None, invalid and significant specs, a dead supervisor -> ProcessExit noproc."""
    sup = sv.DynamicSupervisor.start()
    with pytest.raises(sv.SupervisorError) as info:
        start_child(sup, spec(fail=True))
    assert isinstance(info.value.reason, sv.Crash) and info.value.reason.kind == "RuntimeError"
    assert start_child(sup, spec(ignore=True)) is None
    with pytest.raises(sv.SupervisorError) as info:
        start_child(sup, "not a spec")  # type: ignore[arg-type]
    assert info.value.reason == ("invalid_child_spec", "spec")
    significant = sv.ChildSpec("s", lambda: Worker.start_link({}), "transient", significant=True)
    with pytest.raises(sv.SupervisorError) as info:
        start_child(sup, significant)
    assert info.value.reason == ("invalid_child_spec", "significant")
    assert pids(sup) == []
    sv.stop(sup)
    with pytest.raises(sv.ProcessExit) as exit_info:
        start_child(sup, spec())
    assert exit_info.value.reason == "noproc"


def test_a_start_function_calling_its_own_supervisor_is_calling_self() -> None:
    """A start runs as the supervisor: a start_child from inside it is a call to
    itself, refused with ``calling_self`` as when the supervisor's thread ran it."""
    sup = sv.DynamicSupervisor.start()

    def nested_start() -> sv.Pid | None:
        return sv.DynamicSupervisor.start_child(sup, spec())

    with pytest.raises(sv.SupervisorError) as info:
        start_child(sup, sv.ChildSpec("n", nested_start))
    assert info.value.reason == "calling_self"
    assert pids(sup) == []
    sv.stop(sup)


def test_a_childs_init_may_start_a_sibling() -> None:
    """A pooled child's init starting a sibling under the same supervisor (it deadlocked
    when the supervisor's thread ran the init, as it does in OTP): the init runs on the
    starter's thread, which holds the (reentrant) start lock, so both children are
    recorded, the sibling first (its start ended first). A thread-dispatched child's
    init runs on its own thread and still waits for the start lock, as in OTP."""
    sup = sv.DynamicSupervisor.start()
    sibling: list[sv.Pid | None] = []

    class Parent(sv.GenServer):
        dispatcher = "pooled"

        def init(self, args: Any) -> Any:
            sibling.append(sv.DynamicSupervisor.start_child(sup, spec(value="sibling")))
            return "parent"

    child = start_child(sup, sv.ChildSpec("p", lambda: Parent.start_link()))
    assert pids(sup) == [sibling[0], child]
    sv.stop(sup)


# -- races -------------------------------------------------------------------------------------


def test_a_child_that_crashes_during_init() -> None:
    """A crash in init (the caller's thread): the caller gets the reason, nothing is
    recorded, nothing restarts, the supervisor lives on."""
    sup = sv.DynamicSupervisor.start(intensity=0)
    gate, entered = threading.Event(), threading.Event()
    thread, box = start_in_thread(sup, spec("permanent", gate=gate, entered=entered, fail=True))
    assert entered.wait(WAIT)
    gate.set()
    thread.join(WAIT)
    assert isinstance(box["error"], sv.SupervisorError)
    assert box["error"].reason.kind == "RuntimeError"
    assert pids(sup) == [] and sup.is_alive()
    sv.stop(sup)


@pytest.mark.parametrize("restart", ["permanent", "temporary"])
def test_a_child_that_dies_before_it_is_recorded_is_not_lost(restart: str) -> None:
    """The hazard of issue 20 §4: the child exits right after init, its EXIT reaches the
    supervisor before the starter recorded it. The supervisor waits for the start and
    treats it as any running child that exited: a permanent one is restarted (the
    restart counted: intensity 1 then ends the supervisor at the second), a temporary
    one forgotten. The restart's reason is the child's own (``boom``), not the
    ``noproc`` of the link the start makes to a child that is already dead."""
    sup = sv.DynamicSupervisor.start(intensity=1, period=60)
    supervisor = resolve(sup)
    assert supervisor is not None
    probe_on: list[int] = []  # the supervisor's thread, learned from a call-path start
    probe = sv.DynamicSupervisor.start_child(sup, spec(started_on=probe_on), timeout=WAIT)
    sv.DynamicSupervisor.terminate_child(sup, probe)  # type: ignore[arg-type]
    seen: list[Any] = []
    exits: list[sv.Pid] = []

    def start_then_die() -> sv.Pid:
        pid = Worker.start_link({"seen": seen})
        if exits:
            return pid  # the restart: stays up
        sv.exit(pid, "boom")  # its EXIT is now in the supervisor's mailbox
        # The supervisor takes it and, not knowing the pid, waits in `handle_info`
        # for this start (the start lock) before the start records the child.
        wait_until(lambda: top_function(probe_on[0]) == "handle_info")
        exits.append(pid)
        return pid

    reports: list[sv.RestartReport] = []
    unsubscribe = sv.on_restart(reports.append)
    try:
        child = start_child(sup, sv.ChildSpec("d", start_then_die, restart))  # type: ignore[arg-type]
        assert child == exits[0] and not child.is_alive()
        if restart == "permanent":
            wait_until(lambda: len(seen) == 2)  # restarted by the supervisor
            wait_until(lambda: reports)
    finally:
        unsubscribe()
    assert [r.reason for r in reports if r.child_id == "'d'" or r.child_id == "d"] == (
        ["boom"] if restart == "permanent" else []
    )
    if restart == "temporary":
        wait_until(lambda: pids(sup) == [])
        assert sup.is_alive()
    else:
        (row,) = sv.DynamicSupervisor.which_children(sup)
        assert row.pid is not None and row.pid != child
        sv.exit(row.pid, "boom")  # the second restart within the period: too many
        assert wait_dead(sup) == "shutdown"


def test_which_count_and_terminate_during_direct_starts() -> None:
    """terminate_child / which_children / count_children while other threads start
    children: every started child is in the table unless terminated, counts agree."""
    sup = sv.DynamicSupervisor.start()
    started: list[sv.Pid] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def starter() -> None:
        try:
            for _ in range(40):
                pid = sv.DynamicSupervisor.start_child(sup, spec())
                assert pid is not None and pid in pids(sup)  # in the table once returned
                with lock:
                    started.append(pid)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=starter, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    terminated: set[sv.Pid] = set()
    while any(thread.is_alive() for thread in threads):
        rows = sv.DynamicSupervisor.which_children(sup)
        counts = sv.DynamicSupervisor.count_children(sup)
        # Only this thread terminates, and nothing restarts: every row is a running
        # child, and every counted spec is an alive worker (a terminated child leaves
        # the table before it is stopped, a started one enters it after its init).
        assert all(row.pid is not None and not row.restarting for row in rows)
        assert counts["specs"] == counts["active"] == counts["workers"]
        assert counts["supervisors"] == 0
        with lock:
            victim = started[len(started) // 2] if started else None
        if victim is not None and victim not in terminated:
            sv.DynamicSupervisor.terminate_child(sup, victim)
            terminated.add(victim)
    for thread in threads:
        thread.join(WAIT)
    assert errors == []
    rows = pids(sup)
    assert set(rows) == set(started) - terminated
    assert len(rows) == len(started) - len(terminated)
    assert sv.DynamicSupervisor.count_children(sup)["active"] == len(rows)
    sv.stop(sup)


def test_queries_wait_for_a_start_under_way() -> None:
    """A query answered while a direct start is in its child's init waits for the start
    to record the child, as a call queued behind a StartChild did (test_legacy_graph:
    a coordinator's node runs before its start returned, and which_children must list
    the coordinator)."""
    sup = sv.DynamicSupervisor.start()
    gate, entered = threading.Event(), threading.Event()
    seen: list[Any] = []
    thread, box = start_in_thread(sup, spec(gate=gate, entered=entered, seen=seen))
    assert entered.wait(WAIT)
    answers: dict[str, Any] = {}
    query = threading.Thread(
        target=lambda: answers.update(
            rows=pids(sup), counts=sv.DynamicSupervisor.count_children(sup)
        ),
        daemon=True,
    )
    query.start()
    query.join(0.2)
    gate.set()
    thread.join(WAIT)
    query.join(WAIT)
    assert answers["rows"] == [box["pid"]] == [seen[0][1]]
    assert answers["counts"]["specs"] == 1
    sv.stop(sup)


def test_max_children_is_never_exceeded_by_concurrent_starts() -> None:
    """Many threads start at once against max_children: never more children than the
    bound, and exactly the bound once they are done (every refusal is
    MaxChildrenReached)."""
    sup = sv.DynamicSupervisor.start(max_children=10)
    results: list[Any] = []
    over: list[int] = []
    go = threading.Event()

    def starter() -> None:
        go.wait(WAIT)
        for _ in range(10):
            try:
                results.append(sv.DynamicSupervisor.start_child(sup, spec()))
            except sv.MaxChildrenReached as refused:
                results.append(refused)

    def watcher() -> None:
        while len(results) < 80:
            specs = sv.DynamicSupervisor.count_children(sup)["specs"]
            if specs > 10:
                over.append(specs)

    threads = [threading.Thread(target=starter, daemon=True) for _ in range(8)]
    threads.append(threading.Thread(target=watcher, daemon=True))
    for thread in threads:
        thread.start()
    go.set()
    for thread in threads:
        thread.join(WAIT)
    assert over == []
    assert sum(isinstance(r, sv.Pid) for r in results) == 10
    assert all(isinstance(r, sv.Pid | sv.MaxChildrenReached) for r in results)
    assert sv.DynamicSupervisor.count_children(sup)["specs"] == 10
    sv.stop(sup)


def test_shutdown_waits_for_a_start_under_way() -> None:
    """The supervisor is stopped while a direct start is in its child's init: as in OTP,
    where the shutdown waits behind the start_child, the start completes (the caller
    gets its pid), then the child is shut down with the others before the supervisor
    is gone; a start after that is refused as a call to a dead process."""
    sup = sv.DynamicSupervisor.start(intensity=0)
    supervisors_thread: list[int] = []  # a call-path start runs on it
    first = sv.DynamicSupervisor.start_child(sup, spec(started_on=supervisors_thread), timeout=WAIT)
    assert first is not None
    gate, entered = threading.Event(), threading.Event()
    thread, box = start_in_thread(sup, spec(gate=gate, entered=entered, trap=True))
    assert entered.wait(WAIT)
    stopper = threading.Thread(target=sv.stop, args=(sup, "shutdown", WAIT), daemon=True)
    stopper.start()
    wait_until(lambda: top_function(supervisors_thread[0]) == "terminate")  # waits for the lock
    assert sup.is_alive() and first.is_alive()  # terminate waits for the start
    gate.set()
    thread.join(WAIT)
    stopper.join(WAIT)
    assert not sup.is_alive()
    child = box["pid"]
    assert isinstance(child, sv.Pid) and not child.is_alive() and not first.is_alive()
    assert child._process.exit_reason == "shutdown"  # type: ignore[union-attr]
    with pytest.raises(sv.ProcessExit) as info:
        start_child(sup, spec())
    assert info.value.reason == "noproc"


def test_a_start_that_comes_while_the_supervisor_shuts_down_is_refused() -> None:
    """A start that reaches the supervisor once its shutdown began gets ProcessExit with
    the supervisor's exit reason, as a call queued behind the shutdown did."""
    sup = sv.DynamicSupervisor.start()
    slow = start_child(sup, spec(value="slow_stop", trap=True))
    supervisor = resolve(sup)
    stopper = threading.Thread(target=sv.stop, args=(sup, "shutdown", WAIT), daemon=True)
    stopper.start()
    wait_until(lambda: supervisor.server.shared.stopping)  # type: ignore[union-attr]
    with pytest.raises(sv.ProcessExit) as info:
        start_child(sup, spec())
    assert info.value.reason == "shutdown"
    stopper.join(WAIT)
    assert not slow.is_alive()


@pytest.mark.parametrize("trap", [False, True])
def test_a_supervisor_killed_during_a_direct_start(trap: bool) -> None:
    """The supervisor is killed while a child's init runs on a caller's thread: the
    caller gets ProcessExit ``killed`` (as a pending call did) and the child does not
    outlive its supervisor, whether it traps exits or not."""
    sup = sv.DynamicSupervisor.start()
    gate, entered = threading.Event(), threading.Event()
    seen: list[Any] = []
    thread, box = start_in_thread(sup, spec(gate=gate, entered=entered, trap=trap, seen=seen))
    assert entered.wait(WAIT)
    sv.exit(sup, "kill")
    gate.set()
    thread.join(WAIT)
    assert isinstance(box.get("error"), sv.ProcessExit), box
    assert box["error"].reason == "killed"
    child = seen[0][1]
    wait_until(lambda: not child.is_alive())


def test_a_child_the_start_could_not_link_to_a_killed_supervisor_is_stopped() -> None:
    """The supervisor is killed after the start created its (unlinked) child but
    before the supervisor linked to it: the link fails (a dead process links to
    nothing), so the starter gives the orphan the exit signal the link would have."""
    sup = sv.DynamicSupervisor.start()
    created: list[sv.Pid] = []

    def start_then_kill_the_supervisor() -> sv.Pid:
        pid = Worker.start({})
        created.append(pid)
        sv.exit(sup, "kill")  # this thread runs as the supervisor: it is now fenced
        return pid

    with pytest.raises(sv.ProcessExit) as info:
        start_child(sup, sv.ChildSpec("o", start_then_kill_the_supervisor))
    assert info.value.reason == "killed"
    assert wait_dead(created[0]) == "killed"


# -- Erlang/OTP supervisor_SUITE.erl, simple_one_for_one, with starts on other threads ------


@pytest.mark.parametrize("restart", ["transient", "permanent"])
def test_simple_one_for_one_restart_ignore(restart: str) -> None:
    """OTP ``simple_one_for_one_restart_ignore``: a starter process starts the child;
    which_children shows it once start_child returned; killed, it is restarted; a
    restart that returns ignore drops it."""
    sup = sv.DynamicSupervisor.start(intensity=10, period=3600)
    answers = iter([{}, {}, {"ignore": True}])
    entered: list[sv.Pid] = []

    class Scripted(sv.GenServer):
        def init(self, args: Any) -> Any:
            entered.append(sv.self_pid())
            return sv.Ignore() if next(answers).get("ignore") else "up"

    child_spec = sv.ChildSpec("c", lambda: Scripted.start_link(), restart)  # type: ignore[arg-type]
    thread, box = start_in_thread(sup, child_spec)
    thread.join(WAIT)
    assert pids(sup) == [box["pid"]] == [entered[0]]
    sv.exit(entered[0], "kill")
    wait_until(lambda: len(entered) == 2 and pids(sup) == [entered[1]])
    sv.exit(entered[1], "kill")
    wait_until(lambda: len(entered) == 3 and pids(sup) == [])
    sv.stop(sup, "shutdown")


def test_simple_one_for_one() -> None:
    """OTP ``simple_one_for_one``: two children; the first crashes and is restarted,
    the second is still there; counts [specs 2, active 2]; too many restarts end the
    supervisor with ``shutdown``."""
    sup = sv.DynamicSupervisor.start(intensity=2, period=3600)
    first = start_child(sup, spec("permanent", value=1))
    second = start_child(sup, spec("permanent", value=2))
    sv.cast(first, "abnormal")
    wait_until(lambda: first not in pids(sup) and len(pids(sup)) == 2)
    assert second in pids(sup)
    counts = sv.DynamicSupervisor.count_children(sup)
    assert (counts["specs"], counts["active"], counts["supervisors"], counts["workers"]) == (
        2,
        2,
        0,
        2,
    )
    sv.cast(second, "abnormal")
    wait_until(lambda: second not in pids(sup) and len(pids(sup)) == 2)
    victim = pids(sup)[0]
    sv.cast(victim, "abnormal")
    assert wait_dead(sup) == "shutdown"


def test_simple_one_for_one_shutdown() -> None:
    """OTP ``simple_one_for_one_shutdown``: children started directly are shut down
    by the supervisor's shutdown (their `terminate` runs: ``shutdown``); one that
    overruns its shutdown is killed."""
    sup = sv.DynamicSupervisor.start()
    graceful = [start_child(sup, spec(value="slow_stop", trap=True)) for _ in range(2)]
    stuck = sv.ChildSpec(
        "stuck", lambda: Worker.start_link({"value": "slow_stop", "trap": True}), shutdown=0.1
    )
    killed = start_child(sup, stuck)
    sv.stop(sup, "shutdown")
    assert [wait_dead(p) for p in graceful] == ["shutdown", "shutdown"]  # type: ignore[arg-type]
    assert wait_dead(killed) == "killed"  # type: ignore[arg-type]


def test_simple_one_for_one_scale_many_temporary_children() -> None:
    """OTP ``simple_one_for_one_scale_many_temporary_children``: many temporary children
    started and terminated; the table ends empty, which_children in start order."""
    sup = sv.DynamicSupervisor.start()
    started = [start_child(sup, spec(value=i)) for i in range(500)]
    assert pids(sup) == started
    for pid in started:
        sv.DynamicSupervisor.terminate_child(sup, pid)  # type: ignore[arg-type]
    assert sv.DynamicSupervisor.count_children(sup) == {
        "specs": 0,
        "active": 0,
        "supervisors": 0,
        "workers": 0,
    }
    sv.stop(sup)
