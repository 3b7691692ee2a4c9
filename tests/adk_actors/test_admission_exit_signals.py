"""The admission controller traps exits (so `terminate` rebalances the queue metric)
yet handles exit signals as a trapping OTP gen_server does, and
``adk.admission.rejected`` counts the controller's refusals only (review of
runner/plugins, findings 7 and 9).
"""

from __future__ import annotations

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
from supervision.tasks import Task
from tests.helpers import wait_dead, wait_until

WAIT = 10.0


class Partner(sv.GenServer):
    """Links itself to a process, then exits with the reason it is cast."""

    def init(self, other: sv.Pid) -> sv.Pid:
        sv.link(other)
        return other

    def handle_cast(self, msg: Any, state: sv.Pid) -> Any:
        return sv.Stop(msg, state)


class Parent(sv.GenServer):
    """Starts a linked controller on request, then stops with the reason it is cast."""

    def init(self, _args: Any) -> None:
        return None

    def handle_call(self, request: Any, from_: sv.From, state: None) -> Any:
        return sv.Reply(admission.start_link({"global_limit": 1}), state)

    def handle_cast(self, msg: Any, state: None) -> Any:
        return sv.Stop(msg, state)


def _controller_under_a_parent() -> tuple[sv.Pid, sv.Pid]:
    parent = Parent.start(None)
    return parent, sv.call(parent, "start")


def test_finding_7_an_abnormal_exit_from_a_linked_process_stops_the_controller():
    parent, ctl = _controller_under_a_parent()
    partner = Partner.start(ctl)
    sv.cast(partner, "boom")
    assert wait_dead(ctl) == "boom"  # with that reason, as without trapping
    with pytest.raises(AdkError):
        admission.status(ctl)
    assert wait_dead(parent) == "boom"  # which reaches its (non-trapping) parent


def test_finding_7_a_normal_exit_from_a_linked_process_is_ignored():
    parent, ctl = _controller_under_a_parent()
    partner = Partner.start(ctl)
    sv.cast(partner, "normal")
    wait_dead(partner)
    assert admission.status(ctl)["active"] == 0  # still answers
    sv.stop(parent)


def test_finding_7_an_exit_signal_sent_to_the_controller_stops_it():
    parent, ctl = _controller_under_a_parent()
    sv.exit(ctl, "boom")
    assert wait_dead(ctl) == "boom"
    wait_dead(parent)


@pytest.mark.parametrize("reason", ["normal", "boom"])
def test_finding_7_its_parents_exit_stops_it_whatever_the_reason(reason):
    """A trapping gen_server terminates with its parent's exit, ``normal`` too (OTP)."""
    parent, ctl = _controller_under_a_parent()
    sv.cast(parent, reason)
    assert wait_dead(ctl) == reason


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemoryMetricReader]:
    """`default_metrics()` is, for this test, a catalog on an SDK provider of its own."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    monkeypatch.setattr(metrics_module, "_default", Metrics(provider))
    yield reader
    provider.shutdown()


def _rejected(reader: InMemoryMetricReader) -> dict[str, int]:
    found: dict[str, int] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "adk.admission.rejected":
                    for point in metric.data.data_points:
                        found[str(point.attributes["reason"])] = point.value
    return found


def _waiting(ctl: sv.Pid, **kwargs: Any) -> Task:
    queued = admission.status(ctl)["queued"]

    def ask() -> Any:
        try:
            admission.acquire("Lane", server=ctl, overflow="queue", **kwargs).release()
        except AdkError as error:
            return error.reason
        return "granted"

    task = Task.start(ask)
    wait_until(lambda: admission.status(ctl)["queued"] == queued + 1)
    return task


def test_finding_9_a_callers_cancel_or_exit_is_not_an_admission_rejection(recorded):
    ctl = admission.start_link({"global_limit": 1, "default_agent_limit": 1})
    held = admission.acquire("Lane", server=ctl)
    cancelled_id = admission.new_request_id()
    cancelled = _waiting(ctl, request_id=cancelled_id)
    assert admission.cancel(cancelled_id, server=ctl)
    assert cancelled.wait(WAIT) == "cancelled"  # still answered as before
    killed = _waiting(ctl)
    killed.kill()  # its requester is gone
    wait_until(lambda: admission.status(ctl)["queued"] == 0)
    withdrawn_id = admission.new_request_id()
    request = admission.submit("Lane", overflow="queue", request_id=withdrawn_id, server=ctl)
    wait_until(lambda: admission.status(ctl)["queued"] == 1)
    assert admission.withdraw(withdrawn_id, server=ctl)
    with pytest.raises(AdkError) as failure:
        admission.await_permit(request, timeout=WAIT)
    assert failure.value.reason == "cancelled"
    assert _rejected(recorded) == {}
    expired = _waiting(ctl, timeout=0.05)
    assert expired.wait(WAIT) == "queue_deadline_exceeded"
    with pytest.raises(AdkError):
        admission.acquire("Lane", server=ctl, overflow="reject")
    assert _rejected(recorded) == {"queue_deadline_exceeded": 1, "concurrency_limit_reached": 1}
    held.release()
    sv.stop(ctl)
