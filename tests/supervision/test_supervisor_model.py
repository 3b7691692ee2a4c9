"""`Supervisor` against a small reference model of OTP's restart rules.

A hypothesis state machine starts supervisors of every strategy with children of every
restart type, then crashes, stops and kills children at random. After each step it checks
what the model predicts: whether the supervisor is still alive, which children it lists and
which of them run, which children were started again and in which order, which running
siblings it stopped and in which order (reverse start order), and that restarted children
have new pids while the others keep theirs. Plain tests below pin a few cases by hand.

Synchronisation relies on the kernel's ordering guarantee: a dying process sends its exit
signal to linked processes (the supervisor) before it notifies monitors and failing
callers, so once `call` raised, `exit(pid, "kill")` returned or a `Down` arrived, the
supervisor already holds the exit signal and handles it before the next `which_children`.
A supervisor stops a child and waits for it to die before it stops the next, and a child
notifies its monitors as it dies, so the test thread's `Down`s arrive in stop order. (A
trapping child dies on its own thread, so in theory its `Down` to us could be overtaken by
the next one's; that takes two forced GIL switches within microseconds and was never seen.)

Both dispatchers are covered: the machine and the plain tests run once with every server
on the shared pool and once with a pykka thread per server (whose threads must all end).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from supervision import (
    ChildSpec,
    Crash,
    Down,
    ExitSignal,
    GenServer,
    Pid,
    ProcessExit,
    Ref,
    Reply,
    Stop,
    Supervisor,
    call,
    cast,
    exit,
    monitor,
    receive,
    send,
    stop,
    trap_exit,
)

WAIT = 10.0
"""Seconds to wait for anything that must happen; only reached when the kernel misbehaves."""

PERIOD = 3600.0
"""A restart window long enough that time never forgets a restart during a test."""

STRATEGIES = ("one_for_one", "one_for_all", "rest_for_one")
RESTARTS = ("permanent", "transient", "temporary")
SHUTDOWNS: tuple[Any, ...] = ("brutal_kill", 5.0, "infinity")
NORMAL_REASONS: tuple[Any, ...] = ("normal", "shutdown", ("shutdown", "done"))


# -- the children ----------------------------------------------------------------------------


class Journal:
    """Which children started, in order, written from the children's own threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._starts: list[str] = []
        self.threads: list[threading.Thread] = []

    def started(self, child_id: str, thread: threading.Thread | None) -> None:
        with self._lock:
            self._starts.append(child_id)
            if thread is not None:
                self.threads.append(thread)

    def mark(self) -> int:
        with self._lock:
            return len(self._starts)

    def since(self, mark: int) -> list[str]:
        with self._lock:
            return self._starts[mark:]


class Worker(GenServer):
    """A child: logs its start; ``call "crash"`` raises, ``cast ("stop", reason)`` stops.

    A trapping worker turns an exit signal from anyone but its supervisor into a stop with
    that reason (its supervisor's ``shutdown`` is handled by the kernel: `terminate`, exit).
    """

    def init(self, args: tuple[str, bool, Journal]) -> str:
        child_id, trap, journal = args
        if trap:
            trap_exit(True)
        # a "thread" server runs init on its own thread; a pooled one has no thread of its own
        own_thread = type(self).dispatcher == "thread"
        journal.started(child_id, threading.current_thread() if own_thread else None)
        return child_id

    def handle_call(self, request: Any, from_: Any, state: str) -> Any:
        if request == "crash":
            raise RuntimeError(f"{state} crashes on request")
        return Reply(state, state)

    def handle_cast(self, msg: Any, state: str) -> Any:
        return Stop(msg[1], state)

    def handle_info(self, msg: Any, state: str) -> Any:
        if type(msg) is ExitSignal:
            return Stop(msg.reason, state)
        return state


def worker_spec(
    child_id: str,
    journal: Journal,
    restart: str = "permanent",
    *,
    trap: bool = False,
    shutdown: Any = 5.0,
) -> ChildSpec:
    def start() -> Pid:
        return Worker.start_link((child_id, trap, journal))

    return ChildSpec(child_id, start, restart=restart, shutdown=shutdown)  # type: ignore[arg-type]


# -- the reference model -------------------------------------------------------------------


def is_normal(reason: Any) -> bool:
    """OTP's normal exits: a transient child is not restarted after one of these."""
    if isinstance(reason, str):
        return reason in ("normal", "shutdown")
    return type(reason) is tuple and len(reason) == 2 and reason[0] == "shutdown"


def stop_reason(child: ModelChild) -> str:
    """The exit reason of a child its supervisor stops."""
    return "killed" if child.shutdown == "brutal_kill" else "shutdown"


@dataclass(eq=False)
class ModelChild:
    id: str
    restart: str
    trap: bool
    shutdown: Any
    pid: Pid | None = None


@dataclass
class Outcome:
    """What the supervisor does about one exit."""

    gives_up: bool = False
    starts: list[str] = field(default_factory=list)
    """Ids started again, in start order."""
    stops: list[tuple[str, Any]] = field(default_factory=list)
    """(id, reason) of the running siblings the supervisor stops, in stop order."""


class Model:
    """A supervisor as OTP defines it: children in start order, a restart count."""

    def __init__(self, strategy: str, intensity: int, children: list[ModelChild]) -> None:
        self.strategy = strategy
        self.intensity = intensity
        self.children = children
        self.restarts = 0
        self.alive = True

    def running(self) -> list[ModelChild]:
        return [c for c in self.children if c.pid is not None]

    def child_exited(self, child: ModelChild, reason: Any) -> Outcome:
        child.pid = None
        if child.restart == "temporary":
            self.children.remove(child)
            return Outcome()
        if child.restart == "transient" and is_normal(reason):
            return Outcome()
        self.restarts += 1  # once per restart event, however many children it restarts
        if self.restarts > self.intensity:
            stops = [(c.id, stop_reason(c)) for c in reversed(self.running())]
            for c in self.children:
                c.pid = None
            self.alive = False
            return Outcome(gives_up=True, stops=stops)
        if self.strategy == "one_for_one":
            return Outcome(starts=[child.id])
        index = self.children.index(child)
        affected = self.children if self.strategy == "one_for_all" else self.children[index:]
        affected_ids = {c.id for c in affected}
        stops = [(c.id, stop_reason(c)) for c in reversed(affected) if c.pid is not None]
        for c in affected:
            c.pid = None
        # temporary siblings are stopped, not restarted; every other affected child starts
        # again in order, also one that was not running (a transient that exited normally)
        self.children = [
            c for c in self.children if c.id not in affected_ids or c.restart != "temporary"
        ]
        return Outcome(starts=[c.id for c in self.children if c.id in affected_ids], stops=stops)


# -- helpers for the test thread -----------------------------------------------------------


def flush_mailbox() -> None:
    while True:
        try:
            receive(0)
        except TimeoutError:
            return


def wait_down(ref: Ref, timeout: float = WAIT) -> Down:
    message: Down = receive(timeout, match=lambda m: type(m) is Down and m.ref == ref)
    return message


def downs(refs: dict[Ref, tuple[str, Pid]], count: int | None = None) -> list[tuple[str, Any]]:
    """(id, reason) of `count` `Down`s for `refs`, in arrival order (waiting for each), or
    with no `count` of those already in the mailbox. Each one found leaves `refs`."""
    found = []
    while count is None or len(found) < count:
        try:
            down = receive(
                0 if count is None else WAIT, match=lambda m: type(m) is Down and m.ref in refs
            )
        except TimeoutError:
            if count is None:
                return found
            raise
        child_id, pid = refs.pop(down.ref)
        assert down.pid == pid
        found.append((child_id, down.reason))
    return found


def join_threads(journal: Journal) -> None:
    for thread in journal.threads:
        thread.join(WAIT)
    survivors = [t.name for t in journal.threads if t.is_alive()]
    assert not survivors, f"child threads still running: {survivors}"


# -- the state machine -----------------------------------------------------------------------

child_configs = st.lists(
    st.tuples(st.sampled_from(RESTARTS), st.booleans(), st.sampled_from(SHUTDOWNS)),
    min_size=2,
    max_size=4,
)
supervisor_configs = st.tuples(st.sampled_from(STRATEGIES), st.integers(0, 4), child_configs)
child_picks = st.integers(0, 3)


class SupervisorMachine(RuleBasedStateMachine):
    """Supervisors and workers on the shared pool (the default dispatcher)."""

    dispatcher: ClassVar[str] = "pooled"

    def __init__(self) -> None:
        super().__init__()
        # hypothesis calls teardown() whenever __init__ returned: it restores the default
        self._saved_dispatcher = GenServer.__dict__["dispatcher"]
        GenServer.dispatcher = self.dispatcher  # type: ignore[assignment]
        flush_mailbox()
        self.journal = Journal()
        self.model: Model | None = None
        self.sup: Pid | None = None
        self.sup_ref: Ref | None = None
        self.refs: dict[Ref, tuple[str, Pid]] = {}  # our monitors on children
        self.pids: set[Pid] = set()  # every child pid this example has seen

    # -- starting supervisors --------------------------------------------------------------

    @initialize(config=supervisor_configs)
    def start_first(self, config: tuple[str, int, list[tuple[str, bool, Any]]]) -> None:
        self._start_supervisor(config)

    @precondition(lambda self: self.sup is None)
    @rule(config=supervisor_configs)
    def start_another(self, config: tuple[str, int, list[tuple[str, bool, Any]]]) -> None:
        self._start_supervisor(config)

    def _start_supervisor(self, config: tuple[str, int, list[tuple[str, bool, Any]]]) -> None:
        strategy, intensity, children = config
        model_children = [
            ModelChild(f"c{i}", restart, trap, shutdown)
            for i, (restart, trap, shutdown) in enumerate(children)
        ]
        specs = [
            worker_spec(c.id, self.journal, c.restart, trap=c.trap, shutdown=c.shutdown)
            for c in model_children
        ]
        mark = self.journal.mark()
        self.sup = Supervisor.start(specs, strategy=strategy, intensity=intensity, period=PERIOD)  # type: ignore[arg-type]
        self.sup_ref = monitor(self.sup)
        self.model = Model(strategy, intensity, model_children)
        assert self.journal.since(mark) == [c.id for c in model_children]
        rows = Supervisor.which_children(self.sup, timeout=WAIT)
        assert [r.id for r in rows] == [c.id for c in model_children]
        for row, child in zip(rows, model_children, strict=True):
            assert row.pid is not None and row.pid.is_alive()
            self._adopt(child, row.pid)

    def _adopt(self, child: ModelChild, pid: Pid) -> None:
        assert pid not in self.pids, f"{child.id} was restarted with an old pid {pid}"
        self.pids.add(pid)
        child.pid = pid
        self.refs[monitor(pid)] = (child.id, pid)

    # -- what happens to children ------------------------------------------------------------

    def _pick(self, index: int) -> ModelChild:
        assert self.model is not None
        running = self.model.running()
        return running[index % len(running)]

    def _has_running_child(self) -> bool:
        return self.model is not None and bool(self.model.running())

    def _ref_of(self, pid: Pid) -> Ref:
        return next(ref for ref, (_, p) in self.refs.items() if p == pid)

    @precondition(_has_running_child)
    @rule(index=child_picks)
    def crash(self, index: int) -> None:
        """A callback raises: `call` fails only after the supervisor has the exit signal."""
        child = self._pick(index)
        assert child.pid is not None
        ref = self._ref_of(child.pid)
        mark = self.journal.mark()
        with pytest.raises(ProcessExit) as raised:
            call(child.pid, "crash", timeout=WAIT)
        reason = raised.value.reason
        assert type(reason) is Crash and reason.kind == "RuntimeError"
        self._check_exit(child, reason, ref, mark, down_first=False)

    @precondition(_has_running_child)
    @rule(index=child_picks, reason=st.sampled_from((*NORMAL_REASONS, ("error", "bad"))))
    def stop_itself(self, index: int, reason: Any) -> None:
        """The child returns `Stop(reason)`: asynchronous, so wait for its `Down` first."""
        child = self._pick(index)
        assert child.pid is not None
        ref = self._ref_of(child.pid)
        mark = self.journal.mark()
        cast(child.pid, ("stop", reason))
        self._check_exit(child, reason, ref, mark, down_first=True)

    @precondition(_has_running_child)
    @rule(index=child_picks)
    def kill(self, index: int) -> None:
        """`exit(pid, "kill")` is untrappable and synchronous."""
        child = self._pick(index)
        assert child.pid is not None
        ref = self._ref_of(child.pid)
        mark = self.journal.mark()
        exit(child.pid, "kill")
        assert not child.pid.is_alive()
        self._check_exit(child, "killed", ref, mark, down_first=False)

    @precondition(_has_running_child)
    @rule(index=child_picks, reason=st.sampled_from(("boom", *NORMAL_REASONS)))
    def exit_signal(self, index: int, reason: Any) -> None:
        """An exit signal from the test thread: kills a plain child at once (but "normal"
        does nothing to it); a trapping child gets it as a message and stops with it."""
        child = self._pick(index)
        assert child.pid is not None
        ref = self._ref_of(child.pid)
        mark = self.journal.mark()
        exit(child.pid, reason)
        if child.trap:
            self._check_exit(child, reason, ref, mark, down_first=True)
        elif reason == "normal":
            assert child.pid.is_alive()
            self._check(Outcome(), mark)
        else:
            assert not child.pid.is_alive()
            self._check_exit(child, reason, ref, mark, down_first=False)

    @precondition(lambda self: self.sup is not None)
    @rule(reason=st.sampled_from(("normal", "boom", "shutdown", ("shutdown", "x"), None, "kill")))
    def stray_signal(self, reason: Any) -> None:
        """An exit signal from a process that is neither its parent nor a child, or a stray
        message (None): a supervisor ignores both. Only ``kill`` ends it (rarely drawn)."""
        assert self.sup is not None and self.sup_ref is not None
        mark = self.journal.mark()
        if reason is None:
            send(self.sup, "junk")
        else:
            exit(self.sup, reason)
        if reason != "kill":
            self._check(Outcome(), mark)
            return
        # killed, the supervisor stops nothing itself: its links take every child down
        event("supervisor killed")
        assert wait_down(self.sup_ref).reason == "killed"
        for ref in list(self.refs):
            assert wait_down(ref).reason == "killed"
            del self.refs[ref]
        assert self.journal.since(mark) == []
        for pid in self.pids:
            assert not pid.is_alive(), f"{pid} outlived its supervisor"
        self.sup = self.sup_ref = self.model = None

    # -- checking a step against the model ---------------------------------------------------

    def _check_exit(
        self, child: ModelChild, reason: Any, ref: Ref, mark: int, *, down_first: bool
    ) -> None:
        """Check one child's exit; `mark` is the journal's length from before the action."""
        assert self.model is not None
        old_pid = child.pid
        del self.refs[ref]  # the dying child's own Down is awaited here, not in _check
        if down_first:
            down = wait_down(ref)
            assert down.reason == reason
        restart, strategy = child.restart, self.model.strategy
        outcome = self.model.child_exited(child, reason)
        if outcome.gives_up:
            event(f"{strategy}: gives up")
        elif outcome.starts:
            event(f"{strategy}: restarts {len(outcome.starts)}, stops {len(outcome.stops)}")
        else:
            event(f"{restart} exit, no restart")
        self._check(outcome, mark)
        if not down_first:
            down = wait_down(ref)  # arrives after the exit signal reached the supervisor
            assert down.reason == reason
        assert down.pid == old_pid

    def _check(self, outcome: Outcome, mark: int) -> None:
        assert self.model is not None and self.sup is not None and self.sup_ref is not None
        try:
            rows = Supervisor.which_children(self.sup, timeout=WAIT)
        except ProcessExit:
            rows = None
        assert (rows is not None) == self.model.alive, (
            "the supervisor gave up" if rows is None else "the supervisor should have given up"
        )
        if rows is None:
            sup_down = wait_down(self.sup_ref)
            assert sup_down.reason == "shutdown"
        # the supervisor stopped these siblings, in this order; no other child died
        stopped = downs(self.refs, len(outcome.stops))
        assert stopped == outcome.stops, "siblings stopped, in reverse start order"
        assert downs(self.refs) == [], "a child died that the supervisor should not stop"
        assert self.journal.since(mark) == outcome.starts, "children started again, in order"
        if rows is None:
            for pid in self.pids:
                assert not pid.is_alive(), f"{pid} outlived its supervisor"
            self.sup = self.sup_ref = self.model = None
            return
        assert [r.id for r in rows] == [c.id for c in self.model.children]
        for row, child in zip(rows, self.model.children, strict=True):
            assert row.type == "worker"
            if child.id in outcome.starts:
                assert row.pid is not None and row.pid.is_alive(), f"{child.id} not restarted"
                self._adopt(child, row.pid)
            else:
                assert row.pid == child.pid, f"{child.id} should be untouched"
                assert child.pid is None or child.pid.is_alive()
        counts = Supervisor.count_children(self.sup, timeout=WAIT)
        specs = len(self.model.children)
        active = len(self.model.running())
        assert counts == {"specs": specs, "active": active, "supervisors": 0, "workers": specs}

    # -- cleaning up ---------------------------------------------------------------------------

    def teardown(self) -> None:
        try:
            if self.sup is not None and self.sup.is_alive() and self.model is not None:
                assert self.sup_ref is not None
                expected = [(c.id, stop_reason(c)) for c in reversed(self.model.running())]
                stop(self.sup, "shutdown", timeout=WAIT)
                assert wait_down(self.sup_ref).reason == "shutdown"
                assert downs(self.refs, len(expected)) == expected, "stopped in reverse order"
            for pid in self.pids:
                assert not pid.is_alive(), f"{pid} outlived its supervisor"
            join_threads(self.journal)
        finally:
            flush_mailbox()
            GenServer.dispatcher = self._saved_dispatcher


class ThreadedSupervisorMachine(SupervisorMachine):
    """The same with a pykka thread per server: child threads must end with the child."""

    dispatcher: ClassVar[str] = "thread"


MACHINE_SETTINGS = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
SupervisorMachine.TestCase.settings = MACHINE_SETTINGS
ThreadedSupervisorMachine.TestCase.settings = MACHINE_SETTINGS
TestSupervisorModelPooled = SupervisorMachine.TestCase
TestSupervisorModelThreaded = ThreadedSupervisorMachine.TestCase


# -- plain tests for specific rules ----------------------------------------------------------


@dataclass
class Tree:
    sup: Pid
    sup_ref: Ref
    journal: Journal
    size: int

    def pids(self) -> dict[Hashable, Pid | None]:
        return {row.id: row.pid for row in Supervisor.which_children(self.sup, timeout=WAIT)}

    def crash(self, child_id: str) -> None:
        """Crash a child. Once `call` raised, the supervisor holds the exit signal, so the
        next `which_children` (or the supervisor's `Down`) comes after its reaction."""
        pid = self.pids()[child_id]
        assert pid is not None
        with pytest.raises(ProcessExit):
            call(pid, "crash", timeout=WAIT)

    def stop_normally(self, child_id: str) -> None:
        pid = self.pids()[child_id]
        assert pid is not None
        ref = monitor(pid)
        cast(pid, ("stop", "normal"))
        assert wait_down(ref).reason == "normal"

    def restarted(self) -> list[str]:
        """Ids started since the supervisor's own start, in order."""
        return self.journal.since(self.size)

    def close(self) -> None:
        if self.sup.is_alive():
            try:
                stop(self.sup, "shutdown", timeout=WAIT)
            except ProcessExit:
                pass  # it gave up meanwhile
        assert not self.sup.is_alive()
        join_threads(self.journal)
        flush_mailbox()


@pytest.fixture(params=["pooled", "thread"])
def tree(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`tree(children, strategy, intensity=3)`: a supervisor of workers, stopped afterwards,
    once with every server on the pool and once with a thread per server.

    A child is an id (permanent) or ``(id, restart)``."""
    monkeypatch.setattr(GenServer, "dispatcher", request.param)
    trees: list[Tree] = []

    def make(children: list[Any], strategy: str, intensity: int = 3) -> Tree:
        flush_mailbox()
        journal = Journal()
        specs = [
            worker_spec(c, journal) if isinstance(c, str) else worker_spec(c[0], journal, c[1])
            for c in children
        ]
        sup = Supervisor.start(specs, strategy=strategy, intensity=intensity, period=PERIOD)  # type: ignore[arg-type]
        made = Tree(sup, monitor(sup), journal, len(specs))
        trees.append(made)
        return made

    yield make
    for made in trees:
        made.close()


def test_intensity_zero_gives_up_at_the_first_restart(tree: Callable[..., Tree]) -> None:
    t = tree(["a", "b", "c"], "one_for_one", intensity=0)
    before = t.pids()
    t.crash("b")
    assert wait_down(t.sup_ref).reason == "shutdown"
    assert all(pid is not None and not pid.is_alive() for pid in before.values())
    with pytest.raises(ProcessExit):
        Supervisor.which_children(t.sup, timeout=WAIT)
    assert t.restarted() == []


def test_intensity_counts_restart_events_not_restarted_children(
    tree: Callable[..., Tree],
) -> None:
    t = tree(["a", "b", "c"], "one_for_all", intensity=1)
    t.crash("a")  # one restart event restarting three children: within intensity 1
    assert all(pid is not None for pid in t.pids().values())
    assert t.restarted() == ["a", "b", "c"]
    t.crash("c")  # the second event is one too many
    assert wait_down(t.sup_ref).reason == "shutdown"
    assert t.restarted() == ["a", "b", "c"]


def test_one_for_all_stops_in_reverse_and_restarts_in_start_order(
    tree: Callable[..., Tree],
) -> None:
    t = tree(["a", "b", "c", "d"], "one_for_all")
    before = t.pids()
    refs = {monitor(pid): child_id for child_id, pid in before.items() if child_id != "b"}
    t.crash("b")
    after = t.pids()
    assert t.restarted() == ["a", "b", "c", "d"]
    assert all(after[c] is not None and after[c] != before[c] for c in "abcd")
    stopped = downs({ref: (cid, before[cid]) for ref, cid in refs.items()}, 3)  # type: ignore[misc]
    assert stopped == [("d", "shutdown"), ("c", "shutdown"), ("a", "shutdown")]


def test_one_for_all_also_restarts_a_transient_that_exited_normally(
    tree: Callable[..., Tree],
) -> None:
    # OTP: one_for_all terminates, then starts every child spec it keeps, running or not
    t = tree([("a", "permanent"), ("b", "transient"), ("c", "permanent")], "one_for_all")
    t.stop_normally("b")
    assert t.pids()["b"] is None
    assert t.restarted() == []
    t.crash("c")
    assert all(pid is not None for pid in t.pids().values())
    assert t.restarted() == ["a", "b", "c"]


def test_one_for_all_drops_temporary_siblings(tree: Callable[..., Tree]) -> None:
    t = tree([("a", "permanent"), ("b", "temporary"), ("c", "transient")], "one_for_all")
    t.crash("c")
    assert list(t.pids()) == ["a", "c"]
    assert t.restarted() == ["a", "c"]


def test_rest_for_one_leaves_earlier_children_untouched(tree: Callable[..., Tree]) -> None:
    t = tree(["a", "b", "c", "d"], "rest_for_one")
    before = t.pids()
    t.crash("b")
    after = t.pids()
    assert t.restarted() == ["b", "c", "d"]
    assert after["a"] == before["a"] and after["a"] is not None and after["a"].is_alive()
    assert all(after[c] is not None and after[c] != before[c] for c in "bcd")


def test_transient_and_temporary_exits_restart_nothing(tree: Callable[..., Tree]) -> None:
    t = tree([("a", "transient"), ("b", "temporary"), ("c", "permanent")], "one_for_all", 0)
    before = t.pids()
    t.stop_normally("a")
    t.crash("b")  # a temporary child is never restarted, whatever the reason
    assert t.pids() == {"a": None, "c": before["c"]}
    assert t.restarted() == []
    assert t.sup.is_alive()
