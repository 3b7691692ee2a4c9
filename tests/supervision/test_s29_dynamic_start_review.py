"""Review of the direct `DynamicSupervisor.start_child` (session 29, /tmp/s29/REVIEW_KSUP.md):
one test per finding, each failing without its fix.

- M1: a pool worker that waits for a supervisor's start lock first pays the wake-ups
  it deferred (28b5589), as every kernel wait does.
- M2: `max_children` counts the starts under way: a pooled child's init that starts a
  sibling (re-entering the start lock) cannot exceed it.
- L1: a plain `start()` child whose link to a supervisor killed during the start
  failed is stopped on every path (direct, call, restart, static `Supervisor`).
- L2: that stop is the link's own signal: trappable, so a trapping orphan gets an
  `ExitSignal` message and lives on, as it would had the link been made.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import supervision as sv
from supervision.dispatch_pool import Pool
from tests.helpers import in_thread, wait_dead, wait_until
from tests.supervision.private_pools import Driver, all_idle, private_pool, start_on

WAIT = 10.0


class Worker(sv.GenServer):
    """``init(args)``: ``entered`` is set, then ``gate`` waited for (the init fails if
    it is not set within `WAIT`); ``trap`` traps exits; info messages go to the list
    ``infos``."""

    def init(self, args: dict[str, Any]) -> Any:
        if args.get("trap"):
            sv.trap_exit(True)
        if args.get("entered") is not None:
            args["entered"].set()
        if args.get("gate") is not None and not args["gate"].wait(WAIT):
            raise RuntimeError("the gate never opened")
        return args

    def handle_info(self, msg: Any, state: dict[str, Any]) -> Any:
        state["infos"].append(msg)
        return sv.NoReply(state)


class ThreadWorker(Worker):
    dispatcher = "thread"


# -- M1: the start lock is a kernel wait -------------------------------------------------------


@pytest.fixture
def quiet_pool() -> Iterator[Pool]:
    """A pool of two threads with no watchdog: it must not be what rescues the readied
    server. Stopped after the test."""
    with private_pool() as pool:
        yield pool


class Setter(sv.GenServer):
    """Sets the `threading.Event` it is cast."""

    def handle_cast(self, msg: threading.Event, state: Any) -> Any:
        msg.set()
        return state


def test_m1_a_pool_worker_waiting_for_the_start_lock_first_wakes_whom_it_owes(
    quiet_pool: Pool,
) -> None:
    """Review M1. A start holds the lock in its child's init until a pooled server runs
    a cast; a pooled handler casts to that server (its wake-up deferred: the worker
    owes it), then starts a child and waits for the lock. The waiting worker must hand
    the server to the pool's idle thread first, or nothing runs it (no watchdog here):
    the first start's gate never opens and its init fails."""
    sup = sv.DynamicSupervisor.start()
    setter = start_on(quiet_pool, Setter())
    runner = Driver()
    driver = start_on(quiet_pool, runner)
    all_idle(quiet_pool)
    gate, entered = threading.Event(), threading.Event()
    holder: dict[str, Any] = {}

    def hold_the_lock() -> None:
        child = sv.ChildSpec(
            "h", lambda: ThreadWorker.start_link({"gate": gate, "entered": entered})
        )
        try:
            holder["pid"] = sv.DynamicSupervisor.start_child(sup, child)
        except BaseException as exc:
            holder["error"] = exc

    thread = threading.Thread(target=hold_the_lock, daemon=True)
    thread.start()
    assert entered.wait(WAIT)  # the holder's start is in its child's init: it has the lock

    def cast_then_start() -> Any:
        setter.cast(gate)  # readies the setter: this worker owes its wake-up
        return sv.DynamicSupervisor.start_child(
            sup, sv.ChildSpec("d", lambda: Worker.start_link({}))
        )

    driver.cast(cast_then_start)
    assert runner.done.wait(2 * WAIT)
    thread.join(WAIT)
    assert "error" not in holder, holder
    assert isinstance(holder["pid"], sv.Pid)
    assert isinstance(runner.outcomes[0], sv.Pid)
    sv.stop(sup)


# -- M2: max_children counts the starts under way ------------------------------------------------


class Parent(sv.GenServer):
    """A pooled child whose init starts a sibling under `sup` (on its starter's thread,
    which holds the start lock), keeping the answer (a pid or the refusal)."""

    dispatcher = "pooled"

    def init(self, args: tuple[sv.Pid, list[Any]]) -> Any:
        sup, answers = args
        try:
            answers.append(
                sv.DynamicSupervisor.start_child(
                    sup, sv.ChildSpec("s", lambda: Worker.start_link({}))
                )
            )
        except sv.MaxChildrenReached as refused:
            answers.append(refused)
        return "parent"


@pytest.mark.parametrize("path", ["direct", "call"])
@pytest.mark.parametrize("max_children", [1, 2])
def test_m2_a_childs_init_cannot_start_a_sibling_past_max_children(
    path: str, max_children: int
) -> None:
    """Review M2: with room for one child, the parent's nested sibling start is refused
    (MaxChildrenReached, as any start past the bound) and only the parent is recorded;
    with room for two, both are. Direct (a worker thread's start) and call (the main
    thread's: the parent's init runs on the supervisor's thread, whose sibling start is
    then a direct, nested one)."""
    sup = sv.DynamicSupervisor.start(max_children=max_children)
    answers: list[Any] = []
    child = sv.ChildSpec("p", lambda: Parent.start_link((sup, answers)))
    parent = (in_thread if path == "direct" else (lambda f: f()))(
        lambda: sv.DynamicSupervisor.start_child(sup, child)
    )
    rows = [row.pid for row in sv.DynamicSupervisor.which_children(sup)]
    if max_children == 1:
        assert isinstance(answers[0], sv.MaxChildrenReached)
        assert answers[0].reason == "max_children"
        assert rows == [parent]
    else:
        assert rows == [answers[0], parent]
    assert len(rows) <= max_children
    sv.stop(sup)


def test_m2_a_restarted_childs_init_cannot_start_a_sibling_past_max_children() -> None:
    """Review M2, restart: the restarting child left the table before its start; its
    init's nested sibling start must still count it."""
    sup = sv.DynamicSupervisor.start(max_children=1, intensity=5, period=60)
    answers: list[Any] = []
    starts: Iterator[Callable[[], sv.Pid]] = iter(
        [lambda: Worker.start_link({}), lambda: Parent.start_link((sup, answers))]
    )
    child = sv.ChildSpec("p", lambda: next(starts)(), restart="permanent")
    first = in_thread(lambda: sv.DynamicSupervisor.start_child(sup, child))
    sv.exit(first, "boom")
    wait_until(lambda: answers and len(sv.DynamicSupervisor.which_children(sup)) == 1)
    assert isinstance(answers[0], sv.MaxChildrenReached)
    assert sv.DynamicSupervisor.count_children(sup)["specs"] == 1
    sv.stop(sup)


# -- L1/L2: an orphan the start could not link ------------------------------------------------


def orphan_making_start(
    sup: list[sv.Pid], created: list[sv.Pid], trap: bool, infos: list[Any]
) -> Callable[[], sv.Pid]:
    """A start that creates a plain `start()` (unlinked) child, then kills its own
    supervisor (it runs as the supervisor, so its link to the child then fails)."""

    def start() -> sv.Pid:
        pid = Worker.start({"trap": trap, "infos": infos})
        created.append(pid)
        sv.exit(sup[0], "kill")
        return pid

    return start


START_PATHS = [
    "direct",
    "main_thread_call",
    "timeout_call",
    "direct_starts_off",
    "restart",
    "static",
]


def start_an_orphan(path: str, trap: bool, infos: list[Any]) -> tuple[sv.Pid, sv.Pid]:
    """The killed supervisor and the orphan (its info messages into `infos`), made by
    a start on `path`."""
    created: list[sv.Pid] = []
    sup: list[sv.Pid] = []
    start = orphan_making_start(sup, created, trap, infos)
    if path == "static":  # a `Supervisor`: its start_child is a call
        sup.append(sv.Supervisor.start([]))
        with pytest.raises(sv.ProcessExit):
            sv.Supervisor.start_child(sup[0], sv.ChildSpec("o", start))
    elif path == "restart":  # the supervisor's own thread, restarting a child
        sup.append(sv.DynamicSupervisor.start(intensity=5, period=60))
        starts = iter([lambda: Worker.start_link({}), start])
        child = sv.ChildSpec("o", lambda: next(starts)(), "permanent")
        first = in_thread(lambda: sv.DynamicSupervisor.start_child(sup[0], child))
        sv.exit(first, "boom")
        wait_until(lambda: created)
    else:
        sup.append(sv.DynamicSupervisor.start(direct_starts=path != "direct_starts_off"))
        timeout = WAIT if path == "timeout_call" else None

        def call() -> Any:
            return sv.DynamicSupervisor.start_child(sup[0], sv.ChildSpec("o", start), timeout)

        with pytest.raises(sv.ProcessExit) as info:
            call() if path == "main_thread_call" else in_thread(call)
        assert info.value.reason == "killed"
    assert wait_dead(sup[0]) == "killed"
    return sup[0], created[0]


@pytest.mark.parametrize("path", START_PATHS)
def test_l1_an_orphan_the_start_could_not_link_is_stopped_on_every_path(path: str) -> None:
    """Review L1: the start returned a plain `start()` child, then its supervisor was
    killed before the link was made (a dead process links to nothing). Whichever
    thread ran the start, the child gets the link's exit signal and dies with the
    supervisor's reason (before the fix it lived on except on the direct path)."""
    _, orphan = start_an_orphan(path, trap=False, infos=[])
    assert wait_dead(orphan) == "killed"


@pytest.mark.parametrize("path", ["direct", "main_thread_call", "static"])
def test_l2_a_trapping_orphan_gets_the_links_signal_as_a_message(path: str) -> None:
    """Review L2, decided: the signal is the one the link would have given, trappable
    as in OTP. The orphan, started with `start` (no parent to stop for), traps exits:
    it gets ``ExitSignal(supervisor, "killed")`` as a message and lives on, exactly as
    had the link been made an instant before the kill. (Whoever starts plain `start()`
    children that trap exits owns their lifetime; a `start_link` child has the
    supervisor as parent and stops with it, trapping or not.)"""
    infos: list[Any] = []
    sup, orphan = start_an_orphan(path, trap=True, infos=infos)
    wait_until(lambda: infos)
    assert infos == [sv.ExitSignal(sup, "killed")]
    assert orphan.is_alive()
    sv.stop(orphan)
