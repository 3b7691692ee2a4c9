"""Issue 20 §3: what a spawned process keeps is smaller, and behaves the same.

A server spawned from a context with no variables keeps no context of its own until it
needs one; a process keeps its single link without a set; a dynamic supervisor keeps a
running child as its spec alone. These tests pin the behaviour those shortcuts must keep.
"""

from __future__ import annotations

import contextvars
from typing import Any

import pytest

import supervision as sv
from tests.helpers import wait_dead, wait_until

tag: contextvars.ContextVar[str] = contextvars.ContextVar("footprint_tag", default="none")

pytestmark = pytest.mark.usefixtures("each_dispatcher")


class SetsInInit(sv.GenServer):
    """Sets `tag` in init; ``call "get"`` answers what its callbacks see."""

    def init(self, args: Any) -> None:
        tag.set(f"init-{args}")
        return None

    def handle_call(self, request: Any, from_: Any, state: None) -> Any:
        return sv.Reply(tag.get(), state)


class Plain(sv.GenServer):
    """``call "set"`` sets `tag`; ``("link" | "unlink", pid)`` links or unlinks it;
    every call answers what `tag` is."""

    def handle_call(self, request: Any, from_: Any, state: Any) -> Any:
        match request:
            case "set":
                tag.set("set-in-call")
            case ("link", sv.Pid() as pid):
                sv.link(pid)
            case ("unlink", sv.Pid() as pid):
                sv.unlink(pid)
        return sv.Reply(tag.get(), state)


def test_a_variable_set_in_init_from_an_empty_context_stays_the_servers() -> None:
    """The spawner has no variables: init still runs in the server's own context, and
    what it sets is there in every later callback, and nowhere else."""
    first = SetsInInit.start_link("a")
    second = Plain.start_link()
    assert sv.call(first, "get") == "init-a"
    assert sv.call(first, "get") == "init-a"
    assert sv.call(second, "get") == "none"
    assert tag.get() == "none"  # the spawner's context is untouched
    sv.stop(first)
    sv.stop(second)


def test_a_variable_set_by_a_callback_outlives_the_callback() -> None:
    """A server spawned with no variables that sets one later keeps it from then on."""
    pid = Plain.start_link()
    assert sv.call(pid, "get") == "none"
    assert sv.call(pid, "set") == "set-in-call"
    assert sv.call(pid, "get") == "set-in-call"
    sv.stop(pid)


def test_links_one_two_and_back_to_one() -> None:
    """A process's links as it gains a second and loses one (OTP's link semantics): an
    exit travels over the links that remain, and only over those."""
    sv.trap_exit(True)
    try:
        me = sv.self_pid()
        single = Plain.start_link()  # one link: to me
        sv.exit(single, "boom-1")
        assert sv.receive(5, match=lambda m: isinstance(m, sv.ExitSignal)) == sv.ExitSignal(
            single, "boom-1"
        )
        first = Plain.start_link()
        second = Plain.start(None)
        assert sv.call(first, ("link", second)) == "none"  # first: linked to me and second
        assert sv.call(first, ("unlink", me)) == "none"  # first: linked to second alone
        sv.exit(first, "boom-2")
        assert wait_dead(second) == "boom-2"
        with pytest.raises(TimeoutError):
            sv.receive(0.05, match=lambda m: isinstance(m, sv.ExitSignal))
    finally:
        sv.trap_exit(False)


def test_a_dynamic_child_answers_every_query_running_and_restarting() -> None:
    """OTP supervisor_SUITE ``simple_one_for_one`` queries over a running child, then one
    whose restart keeps failing (listed as restarting, by its last pid)."""
    fail = [False]

    def start() -> sv.Pid:
        if fail[0]:
            raise RuntimeError("down")
        return Plain.start_link()

    # failed restarts are retried at once: an intensity that lasts for the whole test
    dyn = sv.DynamicSupervisor.start(intensity=10_000_000, period=3600.0)
    try:
        spec = sv.ChildSpec("c", start, shutdown=1.5)
        pid = sv.DynamicSupervisor.start_child(dyn, spec)
        assert pid is not None
        assert sv.DynamicSupervisor.get_childspec(dyn, pid) == spec
        assert sv.DynamicSupervisor.which_child(dyn, pid) == sv.ChildInfo("c", pid, "worker")
        assert sv.DynamicSupervisor.count_children(dyn) == {
            "specs": 1,
            "active": 1,
            "supervisors": 0,
            "workers": 1,
        }
        fail[0] = True
        sv.exit(pid, "kill")
        wait_until(lambda: sv.DynamicSupervisor.which_child(dyn, pid).restarting)
        assert sv.DynamicSupervisor.which_child(dyn, pid) == sv.ChildInfo("c", None, "worker", True)
        assert sv.DynamicSupervisor.get_childspec(dyn, pid) == spec
        assert sv.DynamicSupervisor.count_children(dyn)["active"] == 0
        sv.DynamicSupervisor.terminate_child(dyn, pid)  # stops the restarting
        assert sv.DynamicSupervisor.which_children(dyn) == []
    finally:
        sv.stop(dyn, "shutdown")
