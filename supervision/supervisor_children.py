"""A static supervisor's children, their phases, and how a group of them restarts.

Each child is in one phase (`ChildPhase`): RUNNING (it has a pid), RESTARTING (its
restart failed and a `RetryStart` is queued in the supervisor's mailbox) or STOPPED (no
process: terminated, ignored by its start, exited without a restart, or left unstarted by
a group restart that failed before it). Only `Children` changes a phase, so the pid index
and the retry tokens always agree with the phases.

A restart follows OTP's ``supervisor:restart/3``: the group is the child alone
(one_for_one), every child (one_for_all) or the child and those started after it
(rest_for_one). The group's running members are stopped in reverse start order, its
temporary members dropped, and the rest started in order. If one fails to start, it
becomes RESTARTING and the members after it stay STOPPED; its retry restarts the same
kind of group again (the whole group for one_for_all, the tail from the failed child for
rest_for_one), so the siblings started by the failed attempt are stopped and started
again, and a group never ends up half from one attempt and half from another.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Hashable, Iterator
from typing import Literal, NamedTuple

from supervision import crash_report
from supervision.child_spec import (
    ChildInfo,
    ChildSpec,
    ChildStartFailed,
    shutdown_child,
    start_child_process,
)
from supervision.pid import Pid
from supervision.primitives import send
from supervision.process import self_pid
from supervision.signals import Reason

Strategy = Literal["one_for_one", "one_for_all", "rest_for_one"]
STRATEGIES = ("one_for_one", "one_for_all", "rest_for_one")


class ChildPhase(enum.Enum):
    RUNNING = "running"
    RESTARTING = "restarting"
    STOPPED = "stopped"


class RetryStart(NamedTuple):
    """Self-message: start a RESTARTING child's group again (counts as a restart).

    `token` names one failed attempt: a retry whose child was terminated, restarted or
    failed again since then is stale and ignored, so one failure queues one retry.
    `reason` is the exit reason that started the restart (for the restart reports)."""

    child_id: Hashable
    token: int
    reason: Reason


_tokens = itertools.count(1)


class Child:
    """One child. Invariants: `pid` is set iff `phase` is RUNNING; `token` is set iff
    `phase` is RESTARTING (the token of the queued `RetryStart`)."""

    __slots__ = ("phase", "pid", "spec", "token")

    def __init__(self, spec: ChildSpec) -> None:
        self.spec = spec
        self.phase = ChildPhase.STOPPED
        self.pid: Pid | None = None
        self.token: int | None = None

    def info(self) -> ChildInfo:
        restarting = self.phase is ChildPhase.RESTARTING
        return ChildInfo(self.spec.id, self.pid, self.spec.type, restarting)


class Children:
    """The children in start order, indexed by id and by the pid of the running ones."""

    def __init__(self) -> None:
        self._by_id: dict[Hashable, Child] = {}  # insertion order is start order
        self._by_pid: dict[Pid, Child] = {}

    def __iter__(self) -> Iterator[Child]:
        return iter(list(self._by_id.values()))

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, child_id: Hashable) -> Child | None:
        return self._by_id.get(child_id)

    def with_pid(self, pid: Pid) -> Child | None:
        return self._by_pid.get(pid)

    def taken(self, pid: Pid) -> bool:
        """A pid a start must not return: the supervisor's own or a current child's."""
        return pid == self_pid() or pid in self._by_pid

    def tail(self, child: Child) -> list[Child]:
        """`child` and the children started after it."""
        children = list(self._by_id.values())
        return children[children.index(child) :]

    def add(self, spec: ChildSpec) -> Child:
        child = Child(spec)
        self._by_id[spec.id] = child
        return child

    def remove(self, child: Child) -> None:
        self.stopped(child)
        del self._by_id[child.spec.id]

    def running(self, child: Child, pid: Pid) -> None:
        self.stopped(child)
        child.phase, child.pid = ChildPhase.RUNNING, pid
        self._by_pid[pid] = child

    def restarting(self, child: Child) -> int:
        """Mark `child` RESTARTING; returns the token its `RetryStart` must carry."""
        self.stopped(child)
        child.phase, child.token = ChildPhase.RESTARTING, next(_tokens)
        return child.token

    def stopped(self, child: Child) -> None:
        if child.pid is not None:
            del self._by_pid[child.pid]
        child.phase, child.pid, child.token = ChildPhase.STOPPED, None, None


def start(children: Children, child: Child) -> Pid | None:
    """Start one STOPPED child; it is RUNNING, or STOPPED if its start returned None.
    Raises `ChildStartFailed` (the child stays STOPPED)."""
    pid = start_child_process(child.spec, children.taken)
    if pid is not None:
        children.running(child, pid)
    return pid


def stop(children: Children, child: Child) -> None:
    """Stop a child the OTP way (a RESTARTING child has no process: its retry is dropped)."""
    if child.pid is not None:
        shutdown_child(child.pid, child.spec.shutdown)  # type: ignore[arg-type]
    children.stopped(child)


def stop_all(children: Children) -> None:
    for child in reversed(list(children)):
        stop(children, child)


def restart(children: Children, strategy: Strategy, child: Child, reason: Reason) -> None:
    """Restart `child`'s group after `child` exited with `reason` (the caller counted the
    restart against the intensity); each member started again is reported once.

    On a start failure the failed member is RESTARTING and a `RetryStart` is queued; the
    members after it stay STOPPED until the retry starts its group again."""
    if strategy == "one_for_one":
        group = [child]
    elif strategy == "one_for_all":
        group = list(children)
    else:
        group = children.tail(child)
    for member in reversed(group):
        stop(children, member)
    for member in group:
        if member.spec.restart == "temporary" and member is not child:
            children.remove(member)  # temporary siblings are stopped, never restarted
    for member in group:
        if children.get(member.spec.id) is not member:
            continue
        try:
            pid = start(children, member)
        except ChildStartFailed as failed:
            crash_report.supervisor_event(
                "supervision.supervisor.child_start_failed",
                self_pid(),
                child_id=member.spec.id,
                reason=failed.reason,
            )
            token = children.restarting(member)
            send(self_pid(), RetryStart(member.spec.id, token, reason))
            return
        if pid is not None:
            crash_report.child_restarted(self_pid(), member.spec.id, pid, reason)
