"""Supervisors against Erlang/OTP's own ``lib/stdlib/test/supervisor_SUITE.erl``.

Each test ports one case of the suite (named in its docstring). OTP's ``{error, What}``
is a `SupervisorError` whose ``reason`` is ``What``; ``undefined`` in place of a pid is
None, and ``restarting`` in place of a pid is a `ChildInfo` with ``pid=None,
restarting=True``. OTP's ``simple_one_for_one`` is our `DynamicSupervisor`.

Children are started by a script (`Starts`) that tells the test thread about every start
(`Started`, `FailedStart`, `Ignored`), in the order the supervisor made them, so a test
waits with `receive` for what the supervisor did instead of sleeping. A check that the
supervisor is still alive after a child exited is a call to it: the kernel delivers a
dying child's exit signal to its supervisor before the `Down` the test waits for, so
the call is answered after the supervisor has dealt with the exit.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Hashable
from typing import Any, NamedTuple

import pytest

import supervision as sv
from supervision.child_spec import GetChildSpec, TerminateChild, WhichChild
from supervision.protocol import Refused
from tests.helpers import wait_dead
from tests.supervision.dynamic_start_paths import each_start_path  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("each_dispatcher", "each_start_path")

WAIT = 10.0
"""Seconds to wait for something that must happen; reached only if the kernel misbehaves."""

LOOP = {"intensity": 1_000_000, "period": 3600.0}
"""Supervisor flags for a restart loop that must not hit the intensity during a test."""


# -- the children and the script that starts them ----------------------------------------


class Child(sv.GenServer):
    """A child: ``call`` answers its id; ``cast reason`` stops it with that reason."""

    def init(self, args: tuple[Hashable, bool]) -> Hashable:
        child_id, trap = args
        if trap:
            sv.trap_exit(True)
        return child_id

    def handle_call(self, request: Any, from_: Any, state: Hashable) -> Any:
        return sv.Reply(state, state)

    def handle_cast(self, msg: Any, state: Hashable) -> Any:
        return sv.Stop(msg, state)


class Started(NamedTuple):
    child_id: Hashable
    pid: sv.Pid


class FailedStart(NamedTuple):
    child_id: Hashable


class Ignored(NamedTuple):
    child_id: Hashable


class Starts:
    """Scripted starts. `plan` queues outcomes for a child id (``"ok"``, ``"fail"``,
    ``"ignore"``); with none queued a start succeeds, or fails while `failing` holds the
    id (a restart loop: it tells the test thread once, and sleeps a millisecond per
    attempt so the loop does not flood the supervisor's log)."""

    def __init__(self) -> None:
        self.owner = sv.self_pid()
        self._lock = threading.Lock()
        self._plans: defaultdict[Hashable, deque[str]] = defaultdict(deque)
        self._failing: set[Hashable] = set()
        self._told: set[Hashable] = set()
        self._attempts: Counter[Hashable] = Counter()
        self._gates: dict[Hashable, threading.Event] = {}

    def plan(self, child_id: Hashable, *outcomes: str) -> None:
        with self._lock:
            self._plans[child_id].extend(outcomes)

    def fail(self, child_id: Hashable) -> None:
        with self._lock:
            self._failing.add(child_id)
            self._told.discard(child_id)

    def succeed(self, child_id: Hashable) -> None:
        with self._lock:
            self._failing.discard(child_id)

    def gate(self, child_id: Hashable) -> threading.Event:
        """From now on a failing start of `child_id` tells the test thread, then waits
        for the returned event before it fails: the supervisor is held mid-restart."""
        gate = threading.Event()
        with self._lock:
            self._gates[child_id] = gate
        return gate

    def attempts(self, child_id: Hashable) -> int:
        with self._lock:
            return self._attempts[child_id]

    def spec(self, child_id: Hashable, *, trap: bool = False, **options: Any) -> sv.ChildSpec:
        return sv.ChildSpec(child_id, lambda: self._start(child_id, trap), **options)

    def _start(self, child_id: Hashable, trap: bool) -> sv.Pid | None:
        with self._lock:
            self._attempts[child_id] += 1
            plan = self._plans[child_id]
            looping = not plan and child_id in self._failing
            outcome = plan.popleft() if plan else "fail" if looping else "ok"
            tell = not looping or child_id not in self._told
            if looping:
                self._told.add(child_id)
        if outcome == "ignore":
            sv.send(self.owner, Ignored(child_id))
            return None
        if outcome == "fail":
            if looping:
                time.sleep(0.001)
            if tell:
                sv.send(self.owner, FailedStart(child_id))
            gate = self._gates.get(child_id)
            if gate is not None:
                gate.wait(WAIT)
            raise RuntimeError(f"{child_id} cannot start")
        pid = Child.start_link((child_id, trap))
        sv.send(self.owner, Started(child_id, pid))
        return pid


_SUPERVISORS: list[sv.Pid] = []


@pytest.fixture(autouse=True)
def stop_supervisors() -> Any:
    """Supervisors here are started unlinked (a test stops them, or they stop on their
    own, with ``shutdown``, which a link would carry to the test thread); any left
    running is stopped after the test."""
    yield
    while _SUPERVISORS:
        sup = _SUPERVISORS.pop()
        if sup.is_alive():
            try:
                sv.stop(sup, "shutdown", timeout=WAIT)
            except sv.ProcessExit:
                pass


def new_sup(children: list[sv.ChildSpec], **options: Any) -> sv.Pid:
    sup = sv.Supervisor.start(children, **options)
    _SUPERVISORS.append(sup)
    return sup


def new_dyn(**options: Any) -> sv.Pid:
    dyn = sv.DynamicSupervisor.start(**options)
    _SUPERVISORS.append(dyn)
    return dyn


def next_start() -> Any:
    return sv.receive(WAIT, match=lambda m: isinstance(m, Started | FailedStart | Ignored))


def started(*child_ids: Hashable) -> list[sv.Pid]:
    """Wait for these children to start, in this order; their pids."""
    pids = []
    for child_id in child_ids:
        event = next_start()
        assert event == Started(child_id, event.pid), event
        pids.append(event.pid)
    return pids


def failed(child_id: Hashable) -> None:
    assert next_start() == FailedStart(child_id)


def stop_child(pid: sv.Pid, reason: Any) -> None:
    """Make a child exit with `reason` and wait until it is gone (OTP's ``terminate/4``)."""
    ref = sv.monitor(pid)
    if reason == "kill":
        sv.exit(pid, "kill")
        reason = "killed"
    else:
        sv.cast(pid, reason)
    down = sv.receive(WAIT, match=lambda m: isinstance(m, sv.Down) and m.ref == ref)
    assert down.reason == reason


def rows(sup: sv.Pid) -> list[tuple[Hashable, sv.Pid | None, bool]]:
    return [(r.id, r.pid, r.restarting) for r in sv.Supervisor.which_children(sup)]


def counts(sup: sv.Pid, dynamic: bool = False) -> list[int]:
    """OTP's ``get_child_counts``: [specs, active, supervisors, workers]."""
    kind = sv.DynamicSupervisor if dynamic else sv.Supervisor
    c = kind.count_children(sup)
    return [c["specs"], c["active"], c["supervisors"], c["workers"]]


def reason_of(fn: Any, *args: Any) -> Any:
    with pytest.raises(sv.SupervisorError) as info:
        fn(*args)
    return info.value.reason


def watch(sup: sv.Pid) -> sv.Ref:
    return sv.monitor(sup)


def wait_exit(ref: sv.Ref) -> Any:
    down = sv.receive(WAIT, match=lambda m: isinstance(m, sv.Down) and m.ref == ref)
    return down.reason


# -- 1. a malformed request is a typed error, never a crash -----------------------------------


class BadHash:
    def __hash__(self) -> int:
        raise ValueError("no hash")


class BadEq(str):
    def __eq__(self, other: object) -> bool:
        raise ValueError("no eq")

    __hash__ = str.__hash__


def _exits_the_interpreter() -> sv.Pid:
    raise SystemExit(3)


def hostile_specs(sup: sv.Pid, sibling: sv.Pid) -> list[tuple[Any, Any]]:
    """Specs that used to crash a supervisor (and with it its subtree), and the reason
    each must be refused with now."""
    bad_start = sv.Crash("bad_start_return", "start returned the supervisor or one of its children")
    return [
        (sv.ChildSpec("c", _exits_the_interpreter), sv.Crash("SystemExit", "3")),
        (sv.ChildSpec(BadHash(), Child.start_link), ("invalid_child_spec", "id")),
        (
            sv.ChildSpec("c", Child.start_link, restart=BadEq("x")),
            ("invalid_child_spec", "restart"),
        ),
        (sv.ChildSpec("c", Child.start_link, type=BadEq("x")), ("invalid_child_spec", "type")),
        (
            sv.ChildSpec("c", Child.start_link, shutdown=BadEq("x")),
            ("invalid_child_spec", "shutdown"),
        ),
        (
            sv.ChildSpec("c", Child.start_link, shutdown=math.nan),
            ("invalid_child_spec", "shutdown"),
        ),
        (
            sv.ChildSpec("c", Child.start_link, significant="maybe"),
            ("invalid_child_spec", "significant"),
        ),
        (sv.ChildSpec("c", lambda: sup), bad_start),  # its own pid: it would stop itself
        (sv.ChildSpec("c", lambda: sibling), bad_start),  # a child's pid: two children, one pid
    ]


def test_hostile_specs_are_refused_and_the_subtree_lives_on() -> None:
    """Follows supervisor_SUITE:child_specs (``start_child(sup_test, hej)`` and the bad
    specs get ``{error, _}``; the supervisor lives on). Each spec here crashed the
    supervisor, and so every child, before: a start raising ``SystemExit``, an id whose
    ``__hash__`` raises, fields whose ``__eq__`` raises, a NaN shutdown, or a start
    returning the supervisor itself or a sibling (that one hung the next terminate)."""
    starts = Starts()
    sup = new_sup([starts.spec("a"), starts.spec("b")])
    pids = started("a", "b")
    before = sv.Supervisor.which_children(sup), sv.Supervisor.count_children(sup)
    for spec, reason in hostile_specs(sup, pids[0]):
        assert reason_of(sv.Supervisor.start_child, sup, spec) == reason, spec
        assert (sv.Supervisor.which_children(sup), sv.Supervisor.count_children(sup)) == before
    for request in (TerminateChild(BadHash()), WhichChild(BadHash()), GetChildSpec([1])):
        answer = sv.call(sup, request)
        assert type(answer) is Refused and answer.error.reason == "invalid_request"
    assert all(pid.is_alive() for pid in pids)
    sv.stop(sup, "shutdown")


def test_hostile_specs_are_refused_by_a_dynamic_supervisor() -> None:
    """Follows supervisor_SUITE:child_specs on a simple_one_for_one supervisor (and
    sup_start_child_returns_error_simple: a failed start adds no child)."""
    starts = Starts()
    dyn = new_dyn(max_children=3)
    sibling = sv.DynamicSupervisor.start_child(dyn, starts.spec("a"))
    assert sibling is not None
    before = sv.DynamicSupervisor.which_children(dyn), sv.DynamicSupervisor.count_children(dyn)
    for spec, reason in hostile_specs(dyn, sibling):
        assert reason_of(sv.DynamicSupervisor.start_child, dyn, spec) == reason, spec
        assert sv.DynamicSupervisor.which_children(dyn) == before[0]
        assert sv.DynamicSupervisor.count_children(dyn) == before[1]
    for request in (TerminateChild(BadHash()), WhichChild("a"), GetChildSpec("a")):
        answer = sv.call(dyn, request)
        assert type(answer) is Refused and answer.error.reason == "invalid_request"
    assert sibling.is_alive()
    sv.stop(dyn, "shutdown")


def test_a_shutdown_longer_than_a_thread_can_wait_is_infinity() -> None:
    """Follows supervisor_SUITE:sup_stop_infinity and child_specs (shutdown ``infinity``
    is accepted for workers): ``math.inf`` or an astronomically long shutdown is
    ``"infinity"``. Before, stopping a trapping child with one raised `OverflowError`
    inside the supervisor."""
    starts = Starts()
    sup = new_sup(
        [
            starts.spec("inf", trap=True, shutdown=math.inf),
            starts.spec("huge", trap=True, shutdown=1e300),
        ]
    )
    pids = started("inf", "huge")
    assert sv.Supervisor.get_childspec(sup, "inf").shutdown == "infinity"
    assert sv.Supervisor.get_childspec(sup, "huge").shutdown == "infinity"
    sv.Supervisor.terminate_child(sup, "inf")
    assert wait_dead(pids[0]) == "shutdown"
    sv.stop(sup, "shutdown")
    assert wait_dead(pids[1]) == "shutdown"


# -- 2. a child in a restart loop -------------------------------------------------------------


def test_hanging_restart_loop() -> None:
    """Follows supervisor_SUITE:hanging_restart_loop: while a child's restart keeps
    failing, ``start_child`` is ``already_present``, ``restart_child`` and
    ``delete_child`` are ``restarting``, ``which_children`` lists it as restarting and
    ``count_children`` counts it (not as active); ``terminate_child`` ends the loop and
    the child is restartable; the supervisor stops cleanly in the middle of a loop."""
    starts = Starts()
    spec = starts.spec("child1", shutdown="brutal_kill")
    sup = new_sup([], strategy="one_for_one", **LOOP)
    assert sv.Supervisor.start_child(sup, spec) == started("child1")[0]
    (pid,) = [r.pid for r in sv.Supervisor.which_children(sup)]

    starts.fail("child1")
    sv.exit(pid, "error")
    failed("child1")
    assert reason_of(sv.Supervisor.start_child, sup, spec) == "already_present"
    assert reason_of(sv.Supervisor.restart_child, sup, "child1") == "restarting"
    assert reason_of(sv.Supervisor.delete_child, sup, "child1") == "restarting"
    assert sv.Supervisor.which_children(sup) == [sv.ChildInfo("child1", None, "worker", True)]
    assert sv.Supervisor.which_child(sup, "child1").restarting
    assert counts(sup) == [1, 0, 0, 1]

    sv.Supervisor.terminate_child(sup, "child1")
    attempts = starts.attempts("child1")
    assert rows(sup) == [("child1", None, False)]  # a queued retry, if any, was dropped
    assert starts.attempts("child1") == attempts

    starts.succeed("child1")
    pid2 = sv.Supervisor.restart_child(sup, "child1")
    assert pid2 == started("child1")[0]
    starts.fail("child1")
    sv.exit(pid2, "error")
    failed("child1")
    ref = watch(sup)
    sv.stop(sup, "shutdown")  # OTP-9549: the loop does not keep the supervisor from stopping
    assert wait_exit(ref) == "shutdown"


def test_hanging_restart_loop_rest_for_one() -> None:
    """Follows supervisor_SUITE:hanging_restart_loop_rest_for_one: the children after
    the restarting one stay stopped (``undefined``) until its group starts again;
    terminating the restarting child leaves the group stopped and the earlier child
    running."""
    starts = Starts()
    sup = new_sup(
        [starts.spec(c, shutdown="brutal_kill") for c in ("child1", "child2", "child3")],
        strategy="rest_for_one",
        **LOOP,
    )
    pid1, pid2, pid3 = started("child1", "child2", "child3")
    starts.fail("child2")
    sv.exit(pid2, "error")
    failed("child2")
    assert wait_dead(pid3) == "killed"
    assert reason_of(sv.Supervisor.start_child, sup, starts.spec("child2")) == "already_present"
    assert reason_of(sv.Supervisor.restart_child, sup, "child2") == "restarting"
    assert reason_of(sv.Supervisor.delete_child, sup, "child2") == "restarting"
    assert rows(sup) == [("child1", pid1, False), ("child2", None, True), ("child3", None, False)]
    assert counts(sup) == [3, 1, 0, 3]

    sv.Supervisor.terminate_child(sup, "child2")
    assert rows(sup) == [("child1", pid1, False), ("child2", None, False), ("child3", None, False)]
    starts.succeed("child2")
    new2 = sv.Supervisor.restart_child(sup, "child2")
    assert new2 == started("child2")[0]
    assert rows(sup) == [("child1", pid1, False), ("child2", new2, False), ("child3", None, False)]
    starts.fail("child2")
    sv.exit(new2, "error")
    failed("child2")
    ref = watch(sup)
    sv.stop(sup, "shutdown")
    assert wait_exit(ref) == "shutdown"
    assert wait_dead(pid1) == "killed"  # brutal_kill


def test_hanging_restart_loop_simple() -> None:
    """Follows supervisor_SUITE:hanging_restart_loop_simple: a dynamic child in a restart
    loop is listed as restarting and counted, and ``terminate_child`` with its last pid
    ends the loop and forgets it; the supervisor stops cleanly in a loop."""
    starts = Starts()
    dyn = new_dyn(**LOOP)
    spec = starts.spec("child1", restart="permanent", shutdown="brutal_kill")
    pid = sv.DynamicSupervisor.start_child(dyn, spec)
    assert pid == started("child1")[0]
    starts.fail("child1")
    sv.exit(pid, "error")
    failed("child1")
    assert sv.DynamicSupervisor.which_children(dyn) == [
        sv.ChildInfo("child1", None, "worker", True)
    ]
    assert sv.DynamicSupervisor.which_child(dyn, pid).restarting
    assert counts(dyn, dynamic=True) == [1, 0, 0, 1]

    sv.DynamicSupervisor.terminate_child(dyn, pid)
    attempts = starts.attempts("child1")
    assert sv.DynamicSupervisor.which_children(dyn) == []
    assert starts.attempts("child1") == attempts

    starts.succeed("child1")
    pid2 = sv.DynamicSupervisor.start_child(dyn, spec)
    assert pid2 == started("child1")[0]
    starts.fail("child1")
    sv.exit(pid2, "error")
    failed("child1")
    ref = watch(dyn)
    sv.stop(dyn, "shutdown")
    assert wait_exit(ref) == "shutdown"


def test_count_restarting_children() -> None:
    """Follows supervisor_SUITE:count_restarting_children: restarting children count as
    children (specs, workers) but not as active; once their starts succeed they are
    active again, and terminating them one by one brings the counts down."""
    starts = Starts()
    dyn = new_dyn(**LOOP)
    assert counts(dyn, dynamic=True) == [0, 0, 0, 0]
    ids = ("ch1", "ch2", "ch3")
    pids = [sv.DynamicSupervisor.start_child(dyn, starts.spec(c)) for c in ids]
    assert pids == started(*ids)
    assert counts(dyn, dynamic=True) == [3, 3, 0, 3]

    for child_id, pid in zip(ids[:2], pids[:2], strict=True):
        starts.fail(child_id)
        sv.exit(pid, "kill")
        failed(child_id)
    assert counts(dyn, dynamic=True) == [3, 1, 0, 3]

    for child_id in ids[:2]:
        starts.succeed(child_id)
    restarted = {next_start().child_id for _ in range(2)}
    assert restarted == {"ch1", "ch2"}
    assert counts(dyn, dynamic=True) == [3, 3, 0, 3]
    for n, row in enumerate(sv.DynamicSupervisor.which_children(dyn)):
        sv.DynamicSupervisor.terminate_child(dyn, row.pid)
        assert counts(dyn, dynamic=True) == [2 - n, 2 - n, 0, 2 - n]


# -- 3. group restarts that fail part-way -------------------------------------------------------


def test_one_for_all_other_child_fails_restart() -> None:
    """Follows supervisor_SUITE:one_for_all_other_child_fails_restart: child1 dies;
    child1 restarts but child2 fails to; the restarted child1 is terminated
    (``shutdown``) and the whole group starts again, so the group never ends half from
    one attempt and half from the next."""
    starts = Starts()
    starts.plan("child2", "ok", "fail")
    sup = new_sup(
        [starts.spec("child1"), starts.spec("child2")], strategy="one_for_all", intensity=3
    )
    old1, old2 = started("child1", "child2")
    sv.exit(old1, "die")
    (attempt1,) = started("child1")
    failed("child2")
    new1, new2 = started("child1", "child2")
    assert wait_dead(old2) == "shutdown"
    assert wait_dead(attempt1) == "shutdown"  # "restarting_child_not_terminated" otherwise
    assert rows(sup) == [("child1", new1, False), ("child2", new2, False)]
    assert new1.is_alive() and new2.is_alive()


def test_rest_for_one_other_child_fails_restart() -> None:
    """Follows supervisor_SUITE:rest_for_one_other_child_fails_restart: child1 dies;
    child1 restarts, child2 fails to; the retry restarts the tail from child2 only, so
    the restarted child1 keeps running ("restarting_started_child" otherwise), and
    child3 waits, stopped, until child2 has started."""
    starts = Starts()
    starts.plan("child2", "ok", "fail")
    sup = new_sup(
        [starts.spec(c) for c in ("child1", "child2", "child3")],
        strategy="rest_for_one",
        intensity=3,
    )
    old1, old2, old3 = started("child1", "child2", "child3")
    sv.exit(old1, "die")
    (new1,) = started("child1")
    failed("child2")
    new2, new3 = started("child2", "child3")
    assert wait_dead(old2) == "shutdown" and wait_dead(old3) == "shutdown"
    assert rows(sup) == [("child1", new1, False), ("child2", new2, False), ("child3", new3, False)]
    assert new1.is_alive()


def test_one_for_all_retries_count_towards_the_intensity() -> None:
    """Follows supervisor_SUITE:one_for_all_escalation: a group whose restart keeps
    failing is retried, each retry counting as a restart, until the supervisor gives up
    (``shutdown``) and leaves no child behind."""
    starts = Starts()
    sup = new_sup(
        [starts.spec("child1"), starts.spec("child2")], strategy="one_for_all", intensity=2
    )
    ref = watch(sup)
    old1, _ = started("child1", "child2")
    starts.plan("child2", "fail", "fail")
    sv.exit(old1, "die")  # restart 1: child1 starts, child2 fails
    (first,) = started("child1")
    failed("child2")
    (second,) = started("child1")  # restart 2 (the retry): child1 again, child2 fails
    failed("child2")
    assert wait_exit(ref) == "shutdown"  # restart 3 is one too many
    assert wait_dead(first) == "shutdown" and wait_dead(second) == "shutdown"


def test_a_restarting_child_joins_the_next_group_restart() -> None:
    """Follows supervisor_SUITE:one_for_all (a child's exit restarts every child): when
    a child dies while its sibling waits for a retry, the group restart starts the
    sibling too, and the sibling's stale retry is dropped, neither counted nor run."""
    starts = Starts()
    starts.plan("child2", "ok", "fail")
    sup = new_sup([starts.spec("child1"), starts.spec("child2")], strategy="one_for_all", **LOOP)
    _, old2 = started("child1", "child2")
    release = starts.gate("child2")
    sv.exit(old2, "die")
    (attempt1,) = started("child1")
    failed("child2")  # the supervisor now waits in child2's failing start
    sv.exit(attempt1, "kill")  # its exit signal is queued before the retry is
    release.set()
    new1, new2 = started("child1", "child2")
    assert rows(sup) == [("child1", new1, False), ("child2", new2, False)]
    assert (starts.attempts("child1"), starts.attempts("child2")) == (3, 3)
    assert sv.Supervisor.count_children(sup)["active"] == 2


# -- 4. terminating a dynamic child that is already gone ---------------------------------------


def test_terminating_a_dead_dynamic_child_is_ok() -> None:
    """Follows supervisor_SUITE:child_adm_simple ("Terminate non-existing process is
    ok"; "Terminate pid which is not a child of this supervisor is not ok")."""
    starts = Starts()
    dyn = new_dyn()
    pid = sv.DynamicSupervisor.start_child(dyn, starts.spec("child", restart="temporary"))
    other = sv.DynamicSupervisor.start_child(dyn, starts.spec("other", restart="temporary"))
    assert pid is not None and other is not None
    stop_child(pid, "kill")
    assert sv.DynamicSupervisor.terminate_child(dyn, pid) is None
    sv.DynamicSupervisor.terminate_child(dyn, other)
    assert sv.DynamicSupervisor.terminate_child(dyn, other) is None
    assert counts(dyn, dynamic=True) == [0, 0, 0, 0]
    stranger = Child.start_link(("stranger", False))
    assert reason_of(sv.DynamicSupervisor.terminate_child, dyn, stranger) == "not_found"
    assert stranger.is_alive()


# -- 5. ignore, get_childspec, which_child ------------------------------------------------------


def test_sup_start_ignore_child() -> None:
    """Follows supervisor_SUITE:sup_start_ignore_child: a child whose start returns None
    is kept, not running (``{child1, undefined, worker, []}``), and counted as a spec
    but not as active; ``restart_child`` starts it."""
    starts = Starts()
    starts.plan("child1", "ignore")
    sup = new_sup([])
    assert sv.Supervisor.start_child(sup, starts.spec("child1")) is None
    assert next_start() == Ignored("child1")
    pid2 = sv.Supervisor.start_child(sup, starts.spec("child2"))
    assert pid2 == started("child2")[0]
    assert sv.Supervisor.which_children(sup) == [
        sv.ChildInfo("child1", None, "worker"),
        sv.ChildInfo("child2", pid2, "worker"),
    ]
    assert counts(sup) == [2, 1, 0, 2]
    pid1 = sv.Supervisor.restart_child(sup, "child1")
    assert pid1 == started("child1")[0]
    assert counts(sup) == [2, 2, 0, 2]


def test_sup_start_ignore_temporary_child() -> None:
    """Follows supervisor_SUITE:sup_start_ignore_temporary_child and
    sup_start_ignore_temporary_child_start_child: an ignored temporary child's spec is
    not kept, whether it came with the supervisor's start or with ``start_child``."""
    starts = Starts()
    starts.plan("child1", "ignore", "ignore")
    sup = new_sup(
        [starts.spec("child1", restart="temporary"), starts.spec("child2", restart="temporary")]
    )
    assert next_start() == Ignored("child1")
    (pid2,) = started("child2")
    assert rows(sup) == [("child2", pid2, False)]
    assert counts(sup) == [1, 1, 0, 1]
    assert sv.Supervisor.start_child(sup, starts.spec("child1", restart="temporary")) is None
    assert next_start() == Ignored("child1")
    assert counts(sup) == [1, 1, 0, 1]


def test_sup_start_ignore_child_simple() -> None:
    """Follows supervisor_SUITE:sup_start_ignore_temporary_child_start_child_simple and
    sup_start_ignore_permanent_child_start_child_simple: a dynamic start that returns
    None adds no child, whatever its restart type, and the supervisor stops cleanly."""
    for restart in ("temporary", "permanent"):
        starts = Starts()
        starts.plan("child1", "ignore")
        dyn = new_dyn()
        spec = starts.spec("child1", restart=restart)
        assert sv.DynamicSupervisor.start_child(dyn, spec) is None
        pid = sv.DynamicSupervisor.start_child(dyn, spec)
        assert next_start() == Ignored("child1") and started("child1") == [pid]
        assert sv.DynamicSupervisor.which_children(dyn) == [sv.ChildInfo("child1", pid, "worker")]
        assert counts(dyn, dynamic=True) == [1, 1, 0, 1]
        ref = watch(dyn)
        sv.exit(dyn, "shutdown")  # from a process that is not its parent: ignored
        sv.stop(dyn, "shutdown")
        assert wait_exit(ref) == "shutdown"


def test_simple_one_for_one_restart_ignore() -> None:
    """Follows supervisor_SUITE:simple_one_for_one_restart_ignore: a transient or
    permanent dynamic child is restarted while its start succeeds, and dropped when a
    restart returns None (ignore)."""
    for restart in ("transient", "permanent"):
        starts = Starts()
        dyn = new_dyn(intensity=10, period=3600)
        pid1 = sv.DynamicSupervisor.start_child(dyn, starts.spec("child1", restart=restart))
        assert started("child1") == [pid1]
        assert pid1 is not None
        stop_child(pid1, "kill")
        (pid2,) = started("child1")
        assert [r.pid for r in sv.DynamicSupervisor.which_children(dyn)] == [pid2]
        starts.plan("child1", "ignore")
        stop_child(pid2, "kill")
        assert next_start() == Ignored("child1")
        assert sv.DynamicSupervisor.which_children(dyn) == []
        sv.stop(dyn, "shutdown")


def test_sup_start_map_get_childspec() -> None:
    """Follows supervisor_SUITE:sup_start_map: ``get_childspec`` returns the full spec,
    defaults filled in (shutdown 5 s for a worker, ``infinity`` for a supervisor,
    ``permanent``, ``worker``, not significant); ``not_found`` for an unknown id."""
    starts = Starts()
    sup = new_sup(
        [
            starts.spec("child1"),
            starts.spec("child2", shutdown="brutal_kill"),
            starts.spec("child3", type="supervisor"),
        ]
    )
    spec1 = sv.Supervisor.get_childspec(sup, "child1")
    assert (spec1.id, spec1.restart, spec1.shutdown, spec1.type, spec1.significant) == (
        "child1",
        "permanent",
        5.0,
        "worker",
        False,
    )
    assert sv.Supervisor.get_childspec(sup, "child2").shutdown == "brutal_kill"
    assert sv.Supervisor.get_childspec(sup, "child3").shutdown == "infinity"
    assert reason_of(sv.Supervisor.get_childspec, sup, "child4") == "not_found"


def test_sup_start_map_simple_get_childspec() -> None:
    """Follows supervisor_SUITE:sup_start_map_simple: a dynamic child's spec by its pid,
    defaults filled in; ``not_found`` for a pid that is not a child."""
    starts = Starts()
    dyn = new_dyn()
    spec = starts.spec("child", restart="temporary")
    pids = [sv.DynamicSupervisor.start_child(dyn, spec) for _ in range(3)]
    for pid in pids:
        assert pid is not None
        assert sv.DynamicSupervisor.get_childspec(dyn, pid) == spec._replace(shutdown=5.0)
    assert reason_of(sv.DynamicSupervisor.get_childspec, dyn, sv.self_pid()) == "not_found"


def test_which_children() -> None:
    """Follows supervisor_SUITE:which_children: ``which_child`` gives one row as
    ``which_children`` lists it, ``not_found`` for an unknown or deleted id."""
    starts = Starts()
    sup = new_sup([])
    assert sv.Supervisor.which_children(sup) == []
    assert reason_of(sv.Supervisor.which_child, sup, "childx") == "not_found"
    child1 = sv.Supervisor.start_child(sup, starts.spec("child1"))
    child2 = sv.Supervisor.start_child(sup, starts.spec("child2"))
    assert sv.Supervisor.which_child(sup, "child1") == sv.ChildInfo("child1", child1, "worker")
    assert sv.Supervisor.which_child(sup, "child2") == sv.ChildInfo("child2", child2, "worker")
    sv.Supervisor.terminate_child(sup, "child1")
    assert sv.Supervisor.which_child(sup, "child1") == sv.ChildInfo("child1", None, "worker")
    assert sv.Supervisor.which_children(sup) == [
        sv.ChildInfo("child1", None, "worker"),
        sv.ChildInfo("child2", child2, "worker"),
    ]
    sv.Supervisor.delete_child(sup, "child1")
    assert reason_of(sv.Supervisor.which_child, sup, "child1") == "not_found"
    assert sv.Supervisor.which_child(sup, "child2") == sv.ChildInfo("child2", child2, "worker")


def test_which_children_simple_one_for_one() -> None:
    """Follows supervisor_SUITE:which_children_simple_one_for_one: ``which_child`` by pid;
    ``not_found`` once terminated or for a stranger; a non-pid is refused (OTP:
    ``simple_one_for_one``; here ``invalid_request``)."""
    starts = Starts()
    dyn = new_dyn()
    assert reason_of(sv.DynamicSupervisor.which_child, dyn, sv.self_pid()) == "not_found"
    spec = starts.spec("child", restart="temporary")
    child1 = sv.DynamicSupervisor.start_child(dyn, spec)
    child2 = sv.DynamicSupervisor.start_child(dyn, spec)
    assert child1 is not None and child2 is not None
    assert sv.DynamicSupervisor.which_child(dyn, child1) == sv.ChildInfo("child", child1, "worker")
    sv.DynamicSupervisor.terminate_child(dyn, child1)
    assert reason_of(sv.DynamicSupervisor.which_child, dyn, child1) == "not_found"
    assert sv.DynamicSupervisor.which_child(dyn, child2) == sv.ChildInfo("child", child2, "worker")
    assert reason_of(sv.DynamicSupervisor.which_child, dyn, "not_a_pid") == "invalid_request"


# -- 5. significant children and auto_shutdown --------------------------------------------------

AUTO_SHUTDOWNS = ("never", "any_significant", "all_significant")


def test_child_specs_map_significant() -> None:
    """Follows supervisor_SUITE:child_specs_map: ``significant => maybe`` is invalid; a
    permanent significant child is a bad combination; ``check_childspecs/2`` with
    ``never`` refuses a significant child; every other combination is accepted; and
    ``auto_shutdown => never`` refuses a significant child at start."""
    starts = Starts()
    assert reason_of(sv.Supervisor.check_childspecs, [starts.spec("c", significant="maybe")]) == (
        "invalid_child_spec",
        "significant",
    )
    for auto_shutdown in (None, *AUTO_SHUTDOWNS):
        for restart in ("permanent", "transient", "temporary"):
            for shutdown in (None, 0, 1.0, "infinity", "brutal_kill"):
                for child_type in ("worker", "supervisor"):
                    for significant in (False, True):
                        spec = starts.spec(
                            "c",
                            restart=restart,
                            shutdown=shutdown,
                            type=child_type,
                            significant=significant,
                        )
                        refused = significant and (
                            restart == "permanent" or auto_shutdown == "never"
                        )
                        if refused:
                            assert reason_of(
                                sv.Supervisor.check_childspecs, [spec], auto_shutdown
                            ) == ("invalid_child_spec", "significant")
                        else:
                            sv.Supervisor.check_childspecs([spec], auto_shutdown)
    transient = starts.spec("c", restart="transient", significant=True)
    assert reason_of(sv.Supervisor.start_link, [transient]) == ("invalid_child_spec", "significant")
    sup = new_sup([])  # "never": start_child refuses it too
    assert reason_of(sv.Supervisor.start_child, sup, transient) == (
        "invalid_child_spec",
        "significant",
    )
    assert sv.Supervisor.which_children(sup) == []


def test_sup_flags_auto_shutdown() -> None:
    """Follows supervisor_SUITE:sup_flags: ``auto_shutdown => sometimes`` is refused
    with ``invalid_auto_shutdown``."""
    assert reason_of(lambda: sv.Supervisor.start_link([], auto_shutdown="sometimes")) == (
        "invalid_auto_shutdown",
        "sometimes",
    )
    assert reason_of(lambda: sv.Supervisor.check_childspecs([], auto_shutdown="sometimes")) == (
        "invalid_auto_shutdown",
        "sometimes",
    )


@pytest.mark.parametrize("restart", ["temporary", "transient"])
def test_nonsignificant_children(restart: str) -> None:
    """Follows supervisor_SUITE:nonsignificant_temporary and nonsignificant_transient:
    whatever the supervisor's auto_shutdown, a non-significant child exiting (terminated
    through the supervisor, killed, crashed, or stopped normally) never stops it."""
    for auto_shutdown in AUTO_SHUTDOWNS:
        starts = Starts()
        sup = new_sup([], intensity=5, auto_shutdown=auto_shutdown)
        spec = starts.spec("child1", restart=restart, significant=False)
        sv.Supervisor.start_child(sup, spec)
        started("child1")
        sv.Supervisor.terminate_child(sup, "child1")
        for how in ("kill", "died", "normal"):
            if restart == "temporary":
                pid = sv.Supervisor.start_child(sup, spec)
            else:
                pid = sv.Supervisor.which_child(sup, "child1").pid or sv.Supervisor.restart_child(
                    sup, "child1"
                )
            assert pid is not None
            stop_child(pid, how)
            assert sv.Supervisor.count_children(sup)["specs"] <= 1  # alive and answering
        ref = watch(sup)
        sv.stop(sup, "shutdown")
        assert wait_exit(ref) == "shutdown"
        drop_start_events()


def drop_start_events() -> None:
    while True:
        try:
            sv.receive(0, match=lambda m: isinstance(m, Started | FailedStart | Ignored))
        except TimeoutError:
            return


def three_children(
    starts: Starts, restart: str, auto_shutdown: str, strategy: str = "one_for_one"
) -> tuple[sv.Pid, sv.Ref, list[sv.Pid]]:
    """OTP's Child1..3: child1 and child2 significant, child3 not."""
    specs = [
        starts.spec("child1", restart=restart, significant=True),
        starts.spec("child2", restart=restart, significant=True),
        starts.spec("child3", restart=restart, significant=False),
    ]
    sup = new_sup(specs, strategy=strategy, intensity=5, auto_shutdown=auto_shutdown)
    return sup, watch(sup), started("child1", "child2", "child3")


def test_significant_temporary() -> None:
    """Follows supervisor_SUITE:significant_temporary: with ``any_significant``,
    terminating a significant temporary child through the supervisor does not stop it,
    but the child being killed, crashing or stopping normally does, with every child;
    with ``all_significant``, only the last significant child's exit does."""
    starts = Starts()
    sup, _, (pid1, pid2, pid3) = three_children(starts, "temporary", "any_significant")
    sv.Supervisor.terminate_child(sup, "child1")
    assert rows(sup) == [("child2", pid2, False), ("child3", pid3, False)]
    for how in ("kill", "died", "normal"):
        starts = Starts()
        sup, ref, (pid1, pid2, pid3) = three_children(starts, "temporary", "any_significant")
        stop_child(pid1, how)
        assert wait_exit(ref) == "shutdown"
        assert wait_dead(pid2) == "shutdown" and wait_dead(pid3) == "shutdown"

    starts = Starts()
    sup, ref, (pid1, pid2, pid3) = three_children(starts, "temporary", "all_significant")
    stop_child(pid1, "normal")
    assert rows(sup) == [("child2", pid2, False), ("child3", pid3, False)]
    stop_child(pid2, "normal")
    assert wait_exit(ref) == "shutdown"
    assert wait_dead(pid3) == "shutdown"


def test_significant_transient() -> None:
    """Follows supervisor_SUITE:significant_transient: a significant transient child
    terminated through the supervisor, killed or crashing does not stop the supervisor
    (it is restarted after the last two); one stopping normally does (``any``), or the
    last of them does (``all``)."""
    starts = Starts()
    sup, ref, (pid1, pid2, pid3) = three_children(starts, "transient", "any_significant")
    sv.Supervisor.terminate_child(sup, "child1")
    assert rows(sup)[0] == ("child1", None, False)
    (pid1,) = [sv.Supervisor.restart_child(sup, "child1")]
    assert started("child1") == [pid1]
    for how in ("kill", "died"):
        stop_child(pid1, how)
        (pid1,) = started("child1")
        assert rows(sup) == [
            ("child1", pid1, False),
            ("child2", pid2, False),
            ("child3", pid3, False),
        ]
    stop_child(pid1, "normal")
    assert wait_exit(ref) == "shutdown"
    assert wait_dead(pid2) == "shutdown" and wait_dead(pid3) == "shutdown"

    starts = Starts()
    sup, ref, (pid1, pid2, pid3) = three_children(starts, "transient", "all_significant")
    stop_child(pid1, "normal")
    assert rows(sup) == [("child1", None, False), ("child2", pid2, False), ("child3", pid3, False)]
    stop_child(pid2, "normal")
    assert wait_exit(ref) == "shutdown"
    assert wait_dead(pid3) == "shutdown"


def test_significant_simple() -> None:
    """Follows supervisor_SUITE:significant_simple: a simple_one_for_one supervisor has
    no auto_shutdown (OTP refuses the combination), so a dynamic supervisor refuses a
    significant child and adds nothing."""
    starts = Starts()
    dyn = new_dyn()
    spec = starts.spec("child1", restart="transient", significant=True)
    assert reason_of(sv.DynamicSupervisor.start_child, dyn, spec) == (
        "invalid_child_spec",
        "significant",
    )
    assert sv.DynamicSupervisor.which_children(dyn) == []


@pytest.mark.parametrize("strategy", ["one_for_one", "one_for_all", "rest_for_one"])
@pytest.mark.parametrize("auto_shutdown", ["any_significant", "all_significant"])
def test_significant_bystander(strategy: str, auto_shutdown: str) -> None:
    """Follows supervisor_SUITE:significant_bystander: significant children stopped
    because a sibling died (its group restart) do not trigger auto_shutdown."""
    starts = Starts()
    specs = [
        starts.spec("child1", restart="transient", significant=True),
        starts.spec("child2", restart="transient", significant=False),
        starts.spec("child3", restart="transient", significant=True),
    ]
    sup = new_sup(specs, strategy=strategy, intensity=5, auto_shutdown=auto_shutdown)
    pid1, pid2, pid3 = started("child1", "child2", "child3")
    stop_child(pid2, "kill")
    group = {"one_for_one": ["child2"], "one_for_all": ["child1", "child2", "child3"]}
    restarted = group.get(strategy, ["child2", "child3"])
    started(*restarted)
    now = {r.id: r.pid for r in sv.Supervisor.which_children(sup)}
    assert all(pid is not None and pid.is_alive() for pid in now.values())
    assert (now["child1"] == pid1) == ("child1" not in restarted)
    assert (now["child3"] == pid3) == ("child3" not in restarted)


def test_significant_escalation() -> None:
    """Follows supervisor_SUITE:significant_escalation: supervisor A has supervisor B as
    a significant child, B has worker C as a significant child, both with
    ``any_significant``: C stopping normally shuts down B, and B shuts down A. With B
    not significant, A lives on."""
    for significant in (True, False):
        starts = Starts()
        sup_b = sv.ChildSpec(
            "sup1",
            lambda s=starts: sv.Supervisor.start_link(
                [s.spec("child1", restart="transient", significant=True)],
                auto_shutdown="any_significant",
            ),
            restart="transient",
            type="supervisor",
            significant=significant,
        )
        sup_a = new_sup([sup_b], auto_shutdown="any_significant")
        ref_a = watch(sup_a)
        (b_pid,) = [r.pid for r in sv.Supervisor.which_children(sup_a)]
        assert b_pid is not None
        ref_b = watch(b_pid)
        (c_pid,) = started("child1")
        stop_child(c_pid, "normal")
        assert wait_exit(ref_b) == "shutdown"
        if significant:
            assert wait_exit(ref_a) == "shutdown"
        else:
            assert rows(sup_a) == [("sup1", None, False)]
            sv.stop(sup_a, "shutdown")
            assert wait_exit(ref_a) == "shutdown"


def test_ids_and_shutdowns_whose_comparisons_raise_are_refused():
    """Review finding: an id hashing like another but whose ``__eq__`` raises, or a
    shutdown whose ``__ge__`` raises, crashed the supervisor on a later lookup. Follows
    supervisor_SUITE:sup_start_fail / child_specs (a bad spec is an error answer)."""

    class BadEq:
        def __hash__(self) -> int:
            return hash("a")

        def __eq__(self, other: object) -> bool:
            raise RuntimeError("eq")

    class BadGe(float):
        def __ge__(self, other: object) -> bool:
            raise RuntimeError("ge")

    sup = sv.Supervisor.start([sv.ChildSpec("a", lambda: Child.start_link(("w", False)))])
    for spec, field in (
        (sv.ChildSpec(BadEq(), lambda: Child.start_link(("w", False))), "id"),
        (sv.ChildSpec("b", lambda: Child.start_link(("w", False)), shutdown=BadGe(1.0)), None),
    ):
        if field is None:  # a subclass of float is read as the plain number it holds
            sv.Supervisor.start_child(sup, spec)
            continue
        with pytest.raises(sv.SupervisorError) as info:
            sv.Supervisor.start_child(sup, spec)
        assert info.value.reason == ("invalid_child_spec", field)
    with pytest.raises(sv.SupervisorError) as info:
        sv.Supervisor.which_child(sup, BadEq())
    assert info.value.reason == "invalid_request"
    assert sup.is_alive()
    assert [child.id for child in sv.Supervisor.which_children(sup)] == ["a", "b"]
    sv.stop(sup)
