"""Issue 16 §2: the catalog's instruments have call sites that report real values.

Admission (``adk.admission.queue`` back to zero once every queued request has left,
whatever ended it; ``adk.admission.rejected`` by reason), kernel restarts
(``adk.restarts`` through `supervision.on_restart`) and the pool's saturation gauges,
each read with the SDK's `InMemoryMetricReader`. The runtime records to
`default_metrics()`: the tests that read labels put a catalog on their own SDK meter
provider in its place (a global provider can be set once per process).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import adk_actors as adk
import supervision as sv
from adk_actors import admission
from adk_actors.observability import Metrics, default_metrics
from adk_actors.observability import metrics as metrics_module
from providers.errors import AdkError
from providers.fake_gemini import FakeGemini
from supervision.sync_pool import shared_pool
from supervision.tasks import Task
from tests.helpers import wait_dead, wait_until

WAIT = 10.0


def _points(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, Any], ...], Any]:
    """The data points of instrument `name`, by their sorted labels."""
    found: dict[tuple[tuple[str, Any], ...], Any] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        found[tuple(sorted(point.attributes.items()))] = point.value
    return found


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemoryMetricReader]:
    """`default_metrics()` is, for this test, a catalog on an SDK provider of its own."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    monkeypatch.setattr(metrics_module, "_default", Metrics(provider))
    yield reader
    provider.shutdown()


def _queued(reader: InMemoryMetricReader) -> dict[str, int]:
    return {
        dict(labels)["lane"]: value
        for labels, value in _points(reader, "adk.admission.queue").items()
    }


def _rejected(reader: InMemoryMetricReader) -> dict[tuple[str, str], int]:
    return {
        (dict(labels)["lane"], dict(labels)["reason"]): value
        for labels, value in _points(reader, "adk.admission.rejected").items()
    }


# -- tokens -----------------------------------------------------------------------------


def test_a_gemini_agents_tokens_are_counted_by_type(recorded):
    """The fake Gemini server's ``usageMetadata`` (3 prompt, 2 candidate tokens per
    answer) reaches ``adk.tokens`` through the agent's model call."""
    with FakeGemini() as fake:
        fake.reply_text("one")
        fake.reply_text("two")
        agent = adk.spawn_agent(
            "MeteredTokens",
            {
                "provider": "gemini",
                "model": "gemini-3.1-flash-lite",
                "api_key": "test-key",
                "base_url": fake.base_url,
            },
        )
        assert adk.prompt(agent, "hi") == "one"
        assert adk.prompt(agent, "again") == "two"
    tokens = {
        dict(labels)["type"]: value for labels, value in _points(recorded, "adk.tokens").items()
    }
    assert tokens == {"input": 6, "output": 4}
    (labels,) = [
        dict(labels)
        for labels in _points(recorded, "adk.tokens")
        if dict(labels)["type"] == "input"
    ]
    assert (labels["provider"], labels["model"]) == ("gemini", "gemini-3.1-flash-lite")


# -- admission --------------------------------------------------------------------------


def test_runs_queued_then_drained_leave_the_queue_metric_at_zero(recorded):
    """A Runner on the application's controller (``adk.start(admission_control=...)``):
    two runs wait behind the agent's limit, then every run completes."""
    adk.stop()
    adk.start(admission_control={"global_limit": 4, "default_agent_limit": 1, "overflow": "queue"})
    gate = threading.Event()
    model = adk.ScriptedProvider(fn=lambda history, tools: gate.wait(WAIT) and {"text": "ok"})
    agent = adk.spawn_agent("MeteredQueue", {"provider": model})
    sessions = adk.sessions.InMemorySessionService()
    try:
        runner = adk.Runner(
            agent, "app", sessions, admission_control={"overflow": "queue", "queue_timeout": WAIT}
        )
        tasks = [Task.start(runner.run, "u", f"s{n}", "hi") for n in range(3)]
        wait_until(lambda: admission.status()["queued"] == 2)
        assert _queued(recorded) == {"MeteredQueue": 2}  # the agent's own limit made them wait
        gate.set()
        assert [task.wait(WAIT) for task in tasks] == ["ok"] * 3
        assert _queued(recorded) == {"MeteredQueue": 0}
        assert _rejected(recorded) == {}
    finally:
        gate.set()
        sessions.close()


def test_refused_runs_are_counted_by_reason_and_lane(recorded):
    adk.stop()
    adk.start(admission_control={"global_limit": 1, "default_agent_limit": 1, "max_queue": 1})
    gate = threading.Event()
    entered = threading.Event()

    def slow(history: Any, tools: Any) -> dict[str, str]:
        entered.set()
        gate.wait(WAIT)
        return {"text": "done"}

    agent = adk.spawn_agent("MeteredReject", {"provider": adk.ScriptedProvider(fn=slow)})
    other = adk.spawn_agent("MeteredOther", {"provider": adk.ScriptedProvider(["never"])})
    sessions = adk.sessions.InMemorySessionService()
    try:
        holder = Task.start(
            adk.Runner(agent, "app", sessions, admission_control={}).run, "u", "s1", "one"
        )
        assert entered.wait(WAIT)
        rejecting = adk.Runner(agent, "app", sessions, admission_control={"overflow": "reject"})
        for session in ("s2", "s3"):
            with pytest.raises(AdkError) as failure:
                rejecting.run("u", session, "two")
            assert failure.value.reason == ("admission_failed", "concurrency_limit_reached")
        with pytest.raises(AdkError):  # the other agent is held back by the global limit
            adk.Runner(other, "app", sessions, admission_control={"overflow": "reject"}).run(
                "u", "s4", "three"
            )
        queueing = adk.Runner(
            other, "app", sessions, admission_control={"overflow": "queue", "queue_timeout": WAIT}
        )
        waiting = Task.start(queueing.run, "u", "s5", "four")
        wait_until(lambda: admission.status()["queued"] == 1)
        with pytest.raises(AdkError) as failure:  # the queue holds one
            queueing.run("u", "s6", "five")
        assert failure.value.reason == ("admission_failed", "admission_queue_full")
        assert _rejected(recorded) == {
            ("MeteredReject", "concurrency_limit_reached"): 2,
            ("_global", "concurrency_limit_reached"): 1,
            ("_global", "admission_queue_full"): 1,
        }
        assert _queued(recorded) == {"_global": 1}
        gate.set()
        assert holder.wait(WAIT) == "done" and waiting.wait(WAIT) == "never"
        assert _queued(recorded) == {"_global": 0}
    finally:
        gate.set()
        sessions.close()


def _waiting(ctl: sv.Pid, agent: str, **kwargs: Any) -> Task:
    """A task that queues for `agent` and returns its permit's outcome."""
    queued = admission.status(ctl)["queued"]

    def ask() -> Any:
        try:
            permit = admission.acquire(agent, server=ctl, overflow="queue", **kwargs)
        except AdkError as error:
            return error.reason
        permit.release()
        return "granted"

    task = Task.start(ask)
    wait_until(lambda: admission.status(ctl)["queued"] == queued + 1)
    return task


def test_every_way_out_of_the_queue_counts_down_exactly_once(recorded):
    """Granted, cancelled, expired, owner killed, and the controller stopping with
    requests still queued: the queue metric ends at zero."""
    ctl = admission.start_link({"global_limit": 1, "default_agent_limit": 1})
    held = admission.acquire("Lane", server=ctl)
    granted = _waiting(ctl, "Lane")
    expired = _waiting(ctl, "Lane", timeout=0.05)
    assert expired.wait(WAIT) == "queue_deadline_exceeded"
    killed = _waiting(ctl, "Lane")
    killed.kill()
    wait_until(lambda: admission.status(ctl)["queued"] == 1)
    cancelled_id = admission.new_request_id()
    cancelled = _waiting(ctl, "Lane", request_id=cancelled_id)
    assert admission.cancel(cancelled_id, server=ctl)
    assert cancelled.wait(WAIT) == "cancelled"
    assert held.release()
    assert granted.wait(WAIT) == "granted"
    assert _queued(recorded) == {"Lane": 0}
    # a cancel or a killed requester is the caller's doing: not a refusal (review finding 9)
    assert _rejected(recorded) == {("Lane", "queue_deadline_exceeded"): 1}

    held = admission.acquire("Lane", server=ctl)
    _waiting(ctl, "Lane")
    _waiting(ctl, "Other")  # the global limit holds it back
    assert _queued(recorded) == {"Lane": 1, "_global": 1}
    sv.stop(ctl)  # terminate: the requests still queued leave the metric
    assert _queued(recorded) == {"Lane": 0, "_global": 0}


def test_malformed_and_duplicate_requests_are_refusals_too(recorded):
    ctl = admission.start_link({"global_limit": 1})
    answer = sv.call(ctl, ("not", "a", "request"))
    assert isinstance(answer, admission.Refused) and answer.reason == "invalid_admission_request"
    request_id = admission.new_request_id()
    with (
        admission.acquire("Dup", server=ctl, request_id=request_id),
        pytest.raises(AdkError) as failure,
    ):
        admission.acquire("Dup", server=ctl, request_id=request_id)
    assert failure.value.reason == "duplicate_request_id"
    assert _rejected(recorded) == {
        ("_global", "invalid_admission_request"): 1,
        ("Dup", "duplicate_request_id"): 1,
    }


# -- restarts ---------------------------------------------------------------------------


class _Crasher(sv.GenServer):
    def init(self, args: Any) -> None:
        return None

    def handle_cast(self, msg: Any, state: None) -> Any:
        raise RuntimeError("crash on purpose")


def test_a_kernel_restart_is_counted_by_the_default_catalog():
    """The default catalog subscribes to `supervision.on_restart` once: a permanent
    child that crashes and is restarted adds one to ``adk.restarts``."""
    before = default_metrics().snapshot()["instruments"]["adk.restarts"]["count"]
    sup = sv.Supervisor.start_link(
        [sv.ChildSpec("crasher", lambda: _Crasher.start_link(None))],
        strategy="one_for_one",
        name="metered-restarts",
    )
    try:
        (child,) = sv.Supervisor.which_children(sup)
        assert child.pid is not None
        sv.cast(child.pid, "crash")
        wait_dead(child.pid)
        wait_until(lambda: sv.Supervisor.which_children(sup)[0].pid not in (child.pid, None))
        after = default_metrics().snapshot()["instruments"]["adk.restarts"]["count"]
        assert after == before + 1
    finally:
        sv.stop(sup)


def test_a_restarted_agent_is_counted_under_its_supervisors_name(recorded):
    """A killed agent is restarted by ``adk.agents``: the report `default_metrics()`
    subscribes to is labelled with that name (here on the test's own catalog, subscribed
    the same way); an unnamed supervisor is labelled ``_unnamed``, never by pid."""
    metrics = default_metrics()
    unsubscribe = sv.on_restart(metrics.restarted)
    try:
        adk.spawn_agent("MeteredCrash", {"provider": adk.ScriptedProvider(["after"])})
        first = adk.AgentRef("MeteredCrash").pid
        assert first is not None
        sv.exit(first, "kill")
        wait_until(lambda: adk.AgentRef("MeteredCrash").pid not in (first, None))
        assert adk.prompt(adk.AgentRef("MeteredCrash"), "hi") == "after"
    finally:
        unsubscribe()
    metrics.restarted(sv.RestartReport("<0.42>", "worker", "killed"))
    metrics.restarted(sv.RestartReport("<0.43>", "worker", "killed"))
    restarts = {
        dict(labels)["supervisor"]: value
        for labels, value in _points(recorded, "adk.restarts").items()
    }
    assert restarts == {"adk.agents": 1, "_unnamed": 2}


# -- pool saturation ---------------------------------------------------------------------


def test_pool_gauges_report_the_kernel_pools_real_saturation():
    """`default_metrics()`'s gauges read `kernel_stats`: a busy task, a queued one and an
    abandoned (killed, still running) one show up, then the pool drains."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    Metrics(provider, pool_stats=sv.kernel_stats)
    pool = shared_pool("metrics-gauges-test", "ADK_TEST_METRICS_GAUGE_THREADS", 1)
    gate = threading.Event()

    def gauges() -> dict[str, int]:
        return {
            name: next(iter(_points(reader, name).values()))
            for name in (
                "adk.pool.threads",
                "adk.pool.busy",
                "adk.pool.queued",
                "adk.pool.abandoned",
            )
        }

    base = sv.kernel_stats()
    try:
        running = Task.start(gate.wait, WAIT, pool=pool)
        waiting = Task.start(gate.wait, WAIT, pool=pool)
        wait_until(lambda: gauges()["adk.pool.busy"] >= base["task_threads_busy"] + 1)
        wait_until(lambda: gauges()["adk.pool.queued"] >= base["task_queue"] + 1)
        assert gauges()["adk.pool.threads"] >= 1
        running.kill()  # its thread cannot be interrupted: it runs on, abandoned
        wait_until(lambda: gauges()["adk.pool.abandoned"] >= base["task_threads_abandoned"] + 1)
        gate.set()
        assert waiting.wait(WAIT) is True
        wait_until(lambda: gauges()["adk.pool.busy"] <= base["task_threads_busy"])
        wait_until(lambda: gauges()["adk.pool.abandoned"] <= base["task_threads_abandoned"])
    finally:
        gate.set()
        provider.shutdown()
