"""A killed admission controller gives its queued requests back to the queue gauge.

Regression for the session 26 review finding (Low): "a killed admission controller's
queued requests stay counted". ``adk.admission.queue{lane}`` went up for each queued
request and came down only in `terminate`, which a controller killed with
``exit(pid, "kill")`` never runs, so the gauge kept reading requests that no
controller held any more. Read with the OpenTelemetry SDK's `InMemoryMetricReader`
on a catalog of the test's own (as `test_metric_call_sites.py` does).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import supervision as sv
from adk_actors import admission
from adk_actors.observability import Metrics
from adk_actors.observability import metrics as metrics_module
from providers.errors import AdkError
from tests.helpers import wait_until

WAIT = 10.0


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemoryMetricReader]:
    """`default_metrics()` is, for this test, a catalog on an SDK provider of its own
    (a controller takes it in `init`, so it is in place before the controller starts)."""
    found = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[found])
    monkeypatch.setattr(metrics_module, "_default", Metrics(provider))
    yield found
    provider.shutdown()


def _queued(reader: InMemoryMetricReader) -> dict[str, int]:
    """``adk.admission.queue`` by lane."""
    found: dict[str, int] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "adk.admission.queue":
                    for point in metric.data.data_points:
                        found[str(point.attributes["lane"])] = int(point.value)
    return found


def _gauge_settles(reader: InMemoryMetricReader, expected: dict[str, int]) -> bool:
    gc.collect()  # the killed controller's state is dropped; nothing else holds it
    return _queued(reader) == expected


_let_go = threading.Event()


@pytest.fixture(autouse=True)
def _threads_let_go() -> Iterator[None]:
    _let_go.clear()
    yield
    _let_go.set()  # a thread granted a permit holds it (and stays its owner) until then


def _queue_behind(ctl: sv.Pid, agent: str, count: int) -> list[Any]:
    """`count` threads each waiting for a permit of `agent` (which is full), and what
    each ended with; a thread that is granted one holds it until the test ends."""
    ended: list[Any] = []

    def wait_for_permit() -> None:
        try:
            ended.append(admission.acquire(agent, server=ctl, overflow="queue", timeout=WAIT))
        except AdkError as error:
            ended.append(error.reason)
            return
        _let_go.wait(WAIT)

    for _ in range(count):
        threading.Thread(target=wait_for_permit, daemon=True).start()
    wait_until(lambda: admission.status(ctl)["queued"] == count)
    return ended


def test_a_killed_controllers_queued_requests_leave_the_queue_gauge(reader):
    ctl = admission.AdmissionController.start(
        admission.validate_config({"default_agent_limit": 1, "overflow": "queue"})
    )
    held = admission.acquire("KilledQueue", server=ctl)
    ended = _queue_behind(ctl, "KilledQueue", 2)
    assert _queued(reader) == {"KilledQueue": 2}
    sv.exit(ctl, "kill")  # no terminate runs
    wait_until(lambda: len(ended) == 2)
    assert all(not isinstance(outcome, admission.Permit) for outcome in ended)
    wait_until(lambda: _gauge_settles(reader, {"KilledQueue": 0}))
    assert held.release() is False  # its permits went with it


def test_a_stopped_controller_gives_its_queue_back_once(reader):
    """`terminate` gives the queue back, and the state's finalizer then finds nothing
    left to give: the gauge is not taken below zero."""
    ctl = admission.AdmissionController.start(
        admission.validate_config({"default_agent_limit": 1, "overflow": "queue"})
    )
    held = admission.acquire("StoppedQueue", server=ctl)
    ended = _queue_behind(ctl, "StoppedQueue", 1)
    sv.stop(ctl)
    wait_until(lambda: len(ended) == 1)
    assert held.release() is False
    gc.collect()
    assert _queued(reader) == {"StoppedQueue": 0}


def test_requests_that_left_the_queue_are_not_given_back_again(reader):
    """A request granted before the kill left the gauge then; only the one still
    queued is given back."""
    ctl = admission.AdmissionController.start(
        admission.validate_config({"default_agent_limit": 1, "overflow": "queue"})
    )
    held = admission.acquire("DrainedQueue", server=ctl)
    ended = _queue_behind(ctl, "DrainedQueue", 2)
    held.release()  # the oldest waiter is granted: it leaves the queue
    wait_until(lambda: admission.status(ctl)["queued"] == 1)
    # The granted thread's outcome is in before the kill: otherwise the other thread's
    # `admission_unavailable` may be appended first (the order `ended` records is the
    # threads' wake-up order, not the controller's).
    wait_until(lambda: len(ended) == 1)
    assert isinstance(ended[0], admission.Permit)  # granted before the kill
    assert _queued(reader) == {"DrainedQueue": 1}
    sv.exit(ctl, "kill")
    wait_until(lambda: len(ended) == 2)
    assert ended[1] == "admission_unavailable"
    wait_until(lambda: _gauge_settles(reader, {"DrainedQueue": 0}))
