"""A killed admission controller's queue leaves the gauge without the cyclic collector,
and a give-back reached from inside the collector is deferred, never made there
(review of b429e36, finding 1: the state's finalizer could run inside a collection on a
thread holding a metrics lock and deadlock it; and a kill racing a callback left the
state on the dead process, so only a collection freed it)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
import structlog
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import supervision as sv
from adk_actors import admission, collector
from adk_actors.admission import server as controller
from tests.adk_actors import test_s27_admission_killed_queue as killed_queue
from tests.helpers import wait_until

reader = killed_queue.reader  # the fixtures and helpers of the killed-queue tests
_threads_let_go = killed_queue._threads_let_go
_queue_behind, _queued = killed_queue._queue_behind, killed_queue._queued


@pytest.fixture
def no_collector() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    yield
    if was:
        gc.enable()


def test_a_killed_controllers_queue_leaves_the_gauge_with_no_collection(
    reader: InMemoryMetricReader, no_collector: None
) -> None:
    ctl = admission.AdmissionController.start(
        admission.validate_config({"default_agent_limit": 1, "overflow": "queue"})
    )
    admission.acquire("NoCollection", server=ctl)
    ended = _queue_behind(ctl, "NoCollection", 2)
    sv.exit(ctl, "kill")
    wait_until(lambda: len(ended) == 2)
    wait_until(lambda: _queued(reader) == {"NoCollection": 0})  # no gc.collect() anywhere


def test_a_finalizer_reached_by_reference_counting_runs_at_once() -> None:
    ran: list[str] = []

    class Target:
        pass

    found = Target()
    collector.finalize(found, ran.append, "now")
    del found
    assert ran == ["now"]


def test_a_failing_deferred_finalizer_is_logged_and_the_rest_run() -> None:
    ran: list[str] = []

    class Cycle:
        def __init__(self) -> None:
            self.me = self

    def fails() -> None:
        raise RuntimeError("boom")

    first, second = Cycle(), Cycle()
    collector.finalize(first, fails)
    collector.finalize(second, ran.append, "second")
    del first, second
    gc.collect()
    assert ran == []  # deferred: nothing ran inside the collection
    with structlog.testing.capture_logs() as logs:
        collector.run_deferred()
    assert ran == ["second"]
    assert [entry["event"] for entry in logs] == ["adk.collector.finalizer_failed"]


def test_collecting_is_true_only_inside_a_collection() -> None:
    seen: list[bool] = []

    class Cycle:
        def __init__(self) -> None:
            self.me = self

    found = Cycle()
    weakref.finalize(found, lambda: seen.append(collector.collecting()))
    del found
    assert not collector.collecting()
    gc.collect()
    assert seen == [True]
    assert not collector.collecting()


def test_a_give_back_from_inside_a_collection_waits_for_the_next_controller(
    reader: InMemoryMetricReader,
) -> None:
    """A controller state freed by the collector (here: made part of a cycle) gives its
    queue back at the next controller's start, not inside the collection."""
    state = controller.ControllerState(admission.validate_config({"overflow": "queue"}))
    state.queue.up("Orphan")
    collector.finalize(state, state.queue.give_back)
    state.monitors[sv.self_pid()] = state  # type: ignore[assignment]  # a cycle
    del state
    gc.collect()
    assert _queued(reader) == {"Orphan": 1}  # deferred: nothing done inside the collection
    ctl = admission.AdmissionController.start(admission.validate_config({}))
    assert _queued(reader) == {"Orphan": 0}  # the next controller's init gave it back
    sv.stop(ctl)
