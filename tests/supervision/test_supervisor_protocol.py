"""Supervisors answer malformed requests with a typed error and stay as they were.

Each test follows a case of Erlang/OTP's ``lib/stdlib/test/supervisor_SUITE.erl``
(named in its docstring): OTP replies ``{error, What}`` to a bad child spec or a
request the supervisor kind does not take, and the supervisor lives on with the same
children. Here the reply is a `SupervisorError` raised in the caller; the supervisor
is never crashed and its children never change.
"""

from __future__ import annotations

import math

import pytest
from structlog.testing import capture_logs

import supervision as sv
from supervision.child_spec import (
    CountChildren,
    DeleteChild,
    RestartChild,
    StartChild,
    TerminateChild,
    WhichChildren,
)
from supervision.protocol import Ok, Refused
from tests.helpers import wait_dead
from tests.supervision.dynamic_start_paths import each_start_path  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("leak_check", "each_start_path")


class Idle(sv.GenServer):
    """A child that only waits."""


def good(child_id, **options):
    return sv.ChildSpec(child_id, lambda: Idle.start_link(), **options)


def snapshot(sup):
    """What must not change when a request is refused: the rows and the counts."""
    return sv.Supervisor.which_children(sup), sv.Supervisor.count_children(sup)


def refused_reason(fn, *args):
    with pytest.raises(sv.SupervisorError) as info:
        fn(*args)
    return info.value.reason


def stop_cleanly(sup):
    sv.stop(sup, "shutdown")
    assert not sup.is_alive()


def test_start_child_with_bad_specs_is_refused_and_the_supervisor_lives_on():
    """OTP ``child_specs``: ``start_child(sup_test, hej)`` and the bad specs B1..B4
    (bad start, restart type, shutdown, child type) are refused one by one; the
    supervisor keeps running with no child added, and stops normally afterwards."""
    sup = sv.Supervisor.start_link([])
    before = snapshot(sup)
    bad = [
        ("hej", ("invalid_child_spec", "spec")),
        (("child", lambda: None), ("invalid_child_spec", "spec")),  # a tuple, not a ChildSpec
        (sv.ChildSpec("child", "mfa"), ("invalid_child_spec", "start")),
        (good("child", restart="prmanent"), ("invalid_child_spec", "restart")),
        (good("child", shutdown=-10), ("invalid_child_spec", "shutdown")),
        (good("child", type="wrker"), ("invalid_child_spec", "type")),
        (sv.ChildSpec(["un", "hashable"], Idle.start_link), ("invalid_child_spec", "id")),
    ]
    for spec, reason in bad:
        assert refused_reason(sv.Supervisor.start_child, sup, spec) == reason
        assert sup.is_alive()
        assert snapshot(sup) == before
    stop_cleanly(sup)


def test_check_childspecs_accepts_good_specs_and_names_what_is_wrong():
    """OTP ``child_specs``: ``check_childspecs`` accepts C1..C5, refuses each bad spec
    with its reason, refuses a spec that is not in a list (``badarg``) and two specs
    sharing an id (``duplicate_child_name``)."""
    for spec in (
        good("child", shutdown="infinity", type="supervisor"),
        good("child", shutdown=1.0, type="supervisor"),
        good("child", restart="temporary", shutdown=1.0),
        good("child", restart="transient", shutdown=1.0),
        good("child", shutdown="infinity"),
    ):
        sv.Supervisor.check_childspecs([spec])
    assert refused_reason(sv.Supervisor.check_childspecs, [good("c", restart="prmanent")]) == (
        "invalid_child_spec",
        "restart",
    )
    assert refused_reason(sv.Supervisor.check_childspecs, good("c")) == (
        "invalid_child_spec",
        "children",
    )
    assert refused_reason(sv.Supervisor.check_childspecs, [good("c"), good("c")]) == (
        "duplicate_child_id",
        "c",
    )


def test_faulty_specs_at_start_are_refused_before_anything_starts():
    """OTP ``child_specs`` ("Faulty child specs in supervisor start") and
    ``sup_start_map_faulty_specs`` (``child4``, a term that is no spec at all):
    `start_link` raises and starts no process."""
    before = sv.kernel_stats()["processes"]
    assert refused_reason(sv.Supervisor.start_link, [sv.ChildSpec("c", "mfa")]) == (
        "invalid_child_spec",
        "start",
    )
    assert refused_reason(sv.Supervisor.start_link, [good("c", restart="prmanent")]) == (
        "invalid_child_spec",
        "restart",
    )
    assert refused_reason(sv.Supervisor.start_link, [good("ok"), "child4"]) == (
        "invalid_child_spec",
        "spec",
    )
    assert sv.kernel_stats()["processes"] == before


def test_bad_supervisor_flags_are_refused():
    """OTP ``sup_flags``: an unknown strategy, an intensity that is not an int >= 0 and
    a period that is not a finite positive number are refused."""
    reason = refused_reason(lambda: sv.Supervisor.start_link([], strategy="none_for_one"))
    assert reason == ("invalid_strategy", "none_for_one")
    for intensity in (math.inf, -1, "2", True):
        reason = refused_reason(lambda i=intensity: sv.Supervisor.start_link([], intensity=i))
        assert reason[0] == "invalid_intensity"
    for period in (0, -1.0, math.inf, math.nan, "3600"):
        reason = refused_reason(lambda p=period: sv.Supervisor.start_link([], period=p))
        assert reason[0] == "invalid_period"


def test_child_management_errors_leave_the_children_as_they_were():
    """OTP ``child_adm`` and ``extra_return``: ``not_found`` for an unknown id on
    terminate, delete and restart; ``running`` for delete and restart of a running
    child; ``already_started`` / ``already_present`` for a second start; terminating
    by pid is not allowed on a static supervisor (``not_found``, the child runs on);
    a supervisor that is not there is ``noproc``."""
    sup = sv.Supervisor.start_link([good("child1")])
    (row,) = sv.Supervisor.which_children(sup)
    before = snapshot(sup)
    for op in (
        sv.Supervisor.terminate_child,
        sv.Supervisor.delete_child,
        sv.Supervisor.restart_child,
    ):
        assert refused_reason(op, sup, "hej") == "not_found"
    assert refused_reason(sv.Supervisor.delete_child, sup, "child1") == "running"
    assert refused_reason(sv.Supervisor.restart_child, sup, "child1") == "running"
    assert refused_reason(sv.Supervisor.start_child, sup, good("child1")) == (
        "already_started",
        row.pid,
    )
    assert refused_reason(sv.Supervisor.terminate_child, sup, row.pid) == "not_found"
    assert snapshot(sup) == before and row.pid.is_alive()

    sv.Supervisor.terminate_child(sup, "child1")
    sv.Supervisor.terminate_child(sup, "child1")  # like deleting what is gone: ok
    assert refused_reason(sv.Supervisor.start_child, sup, good("child1")) == "already_present"

    for op in (sv.Supervisor.which_children, sv.Supervisor.count_children):
        with pytest.raises(sv.ProcessExit) as info:
            op("foo")
        assert info.value.reason == "noproc"
    stop_cleanly(sup)


def test_requests_a_static_supervisor_does_not_take_are_invalid_and_change_nothing():
    """OTP ``child_adm``, for requests outside the API (OTP has no clause for them; we
    answer ``invalid_request``): an unknown request naming a stopped child must not
    delete it, an unhashable id is refused, and stray casts and messages are logged
    and dropped."""
    sup = sv.Supervisor.start_link([good("a"), good("b")])
    sv.Supervisor.terminate_child(sup, "a")
    before = snapshot(sup)
    for request in (
        ("delete_chlid", "a"),  # the old tuple protocol, misspelt
        ("terminate_child", "a"),  # the old tuple protocol, spelt right
        "which_children",
        None,
        TerminateChild(["a"]),
        RestartChild({"a": 1}),
        DeleteChild(["a"]),
    ):
        answer = sv.call(sup, request)
        assert type(answer) is Refused, request
        assert answer.error.reason == "invalid_request"
        assert snapshot(sup) == before
    with capture_logs() as logs:
        sv.cast(sup, ("delete_child", "a"))
        sv.send(sup, ("delete_child", "a"))
        assert snapshot(sup) == before  # a call after them: both were handled
    unexpected = [e for e in logs if e["event"] == "supervision.server.unexpected_message"]
    assert [(e["channel"], e["kind"]) for e in unexpected] == [("cast", "tuple")]
    assert sv.call(sup, WhichChildren()) == Ok(before[0])
    assert sv.call(sup, CountChildren()) == Ok(before[1])
    stop_cleanly(sup)


def test_a_non_spec_start_child_does_not_take_down_the_subtree():
    """OTP ``child_specs`` (``start_child(sup_test, hej)`` gets ``{error, _}``): a
    start_child with something that is not a ChildSpec used to crash the supervisor,
    and with it every child; now the children keep their pids."""
    sup = sv.Supervisor.start_link([good("a"), good("b")])
    pids = [row.pid for row in sv.Supervisor.which_children(sup)]
    for junk in (42, None, ("a", Idle.start_link), {"id": "c"}):
        answer = sv.call(sup, StartChild(junk))
        assert type(answer) is Refused
        assert answer.error.reason == ("invalid_child_spec", "spec")
    assert [row.pid for row in sv.Supervisor.which_children(sup)] == pids
    assert all(pid.is_alive() for pid in pids)
    stop_cleanly(sup)


def test_dynamic_supervisor_refuses_what_a_simple_one_for_one_refuses():
    """OTP ``child_adm_simple``: terminating by id is refused (OTP:
    ``simple_one_for_one``; here ``invalid_request``) and changes no count; terminating
    a pid that already exited is ``ok``; a live pid that is not a child is
    ``not_found`` and keeps running; restart and delete are not requests a dynamic
    supervisor takes."""
    dyn = sv.DynamicSupervisor.start_link()
    first = sv.DynamicSupervisor.start_child(dyn, good("child"))
    second = sv.DynamicSupervisor.start_child(dyn, good("child"))
    counts = sv.DynamicSupervisor.count_children(dyn)
    assert counts == {"specs": 2, "active": 2, "supervisors": 0, "workers": 2}

    assert refused_reason(sv.DynamicSupervisor.terminate_child, dyn, "child1") == (
        "invalid_request"
    )
    assert sv.DynamicSupervisor.count_children(dyn) == counts

    sv.DynamicSupervisor.terminate_child(dyn, first)
    assert not first.is_alive()
    sv.DynamicSupervisor.terminate_child(dyn, first)  # "Terminate non-existing process is ok"
    assert sv.DynamicSupervisor.count_children(dyn)["active"] == 1

    stranger = Idle.start_link()
    assert refused_reason(sv.DynamicSupervisor.terminate_child, dyn, stranger) == "not_found"
    assert stranger.is_alive()

    for request in (RestartChild("child1"), DeleteChild("child1"), ("start_child", "x"), 42):
        answer = sv.call(dyn, request)
        assert type(answer) is Refused and answer.error.reason == "invalid_request"
    assert [row.pid for row in sv.DynamicSupervisor.which_children(dyn)] == [second]
    sv.stop(stranger)
    stop_cleanly(dyn)


def test_dynamic_supervisor_start_child_with_a_bad_spec_is_refused():
    """OTP ``child_specs`` on a dynamic supervisor (Elixir's DynamicSupervisor test
    "with invalid child spec" does the same): ``start_child(dyn, 42)`` and a spec with
    a bad field are refused, and no child is added."""
    dyn = sv.DynamicSupervisor.start_link(max_children=1)
    assert refused_reason(sv.DynamicSupervisor.start_child, dyn, 42) == (
        "invalid_child_spec",
        "spec",
    )
    assert refused_reason(sv.DynamicSupervisor.start_child, dyn, good("c", shutdown="soon")) == (
        "invalid_child_spec",
        "shutdown",
    )
    assert sv.DynamicSupervisor.which_children(dyn) == []
    pid = sv.DynamicSupervisor.start_child(dyn, good("c"))  # the bound was not used up
    assert pid is not None and pid.is_alive()
    stop_cleanly(dyn)


def test_a_child_that_fails_to_start_fails_the_supervisor_start():
    """OTP ``sup_start_fail``: the start returns an error naming the reason, and the
    caller, though linked, is not taken down with the supervisor."""

    def fail():
        raise ValueError("no")

    with pytest.raises(sv.StartError) as info:
        sv.Supervisor.start_link([good("ok"), sv.ChildSpec("bad", fail)])
    assert info.value.reason == ("failed_to_start_child", "bad", sv.Crash("ValueError", "no"))
    assert sv.self_pid().is_alive()


def test_a_refused_request_leaves_a_supervisor_that_still_restarts_children():
    """OTP ``child_specs`` then ``permanent_abnormal``: after refusals the supervisor
    still does its job: a killed permanent child is replaced."""
    sup = sv.Supervisor.start_link([good("a")])
    sv.call(sup, StartChild("junk"))
    sv.call(sup, TerminateChild([]))
    (row,) = sv.Supervisor.which_children(sup)
    sv.exit(row.pid, "kill")
    assert wait_dead(row.pid) == "killed"
    (new,) = sv.Supervisor.which_children(sup)
    assert new.pid is not None and new.pid != row.pid
    stop_cleanly(sup)
