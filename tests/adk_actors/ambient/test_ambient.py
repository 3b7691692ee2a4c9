"""Ambient triggers: bounds, idempotency, retries, cancel, waiters, sessions,
schedules (behaviours §10), ported from the reference's ambient test cases."""

from __future__ import annotations

import time

import msgspec
import pytest

import adk_actors as adk
import supervision as sv
from adk_actors import admission
from adk_actors.ambient import AmbientError, Phase, TimedOut
from adk_actors.ambient.options import (
    DEFAULT_EVENT_TIMEOUT,
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_QUEUE,
    DEFAULT_MAX_WAITERS,
    MAX_CONCURRENCY,
    MAX_QUEUE,
)
from providers import content
from providers.errors import AdkError as AdkError_
from supervision import Supervisor, Task
from tests.adk_actors.ambient._support import event, idle, make, per_event, trigger, wait_until


def _reason(error: pytest.ExceptionInfo[AmbientError]) -> object:
    return error.value.reason


def test_options_have_the_spec_defaults_and_ceilings() -> None:
    """The trigger options' defaults (8 concurrent, queue 256, 120 s, retry 3 attempts
    of 30 s from 0.25 s to 5 s, x2, full jitter) and their ceilings."""
    options = adk.ambient.trigger_options({"session_policy": per_event()})
    assert (options.max_concurrency, options.max_queue) == (
        DEFAULT_MAX_CONCURRENCY,
        DEFAULT_MAX_QUEUE,
    )
    assert options.event_timeout == DEFAULT_EVENT_TIMEOUT
    assert options.max_waiters == DEFAULT_MAX_WAITERS
    assert options.retry == adk.ambient.RetryOptions()
    assert (options.retry.max_attempts, options.retry.attempt_timeout) == (3, 30.0)
    assert (options.retry.initial_delay, options.retry.max_delay) == (0.25, 5.0)
    assert (options.retry.backoff_factor, options.retry.jitter) == (2.0, "full")
    for key, bad in (
        ("max_concurrency", MAX_CONCURRENCY + 1),
        ("max_concurrency", 0),
        ("max_queue", MAX_QUEUE + 1),
        ("event_timeout", 0),
        ("max_waiters", 0),
        ("max_event_bytes", 10),
        ("max_retained", 0),
    ):
        with pytest.raises(AdkError_) as error:
            adk.ambient.trigger_options({"session_policy": per_event(), key: bad})
        assert error.value.reason == ("invalid_trigger_options", key)
    with pytest.raises(AdkError_) as error:
        adk.ambient.trigger_options({"session_policy": per_event(), "retry": {"jitter": "some"}})
    assert error.value.reason == ("invalid_trigger_options", "retry")
    with pytest.raises(AdkError_) as error:
        adk.ambient.trigger_options({"max_concurrency": 2})  # no session policy
    assert error.value.reason == ("invalid_trigger_options", "session_policy")
    with pytest.raises(AdkError_) as error:
        adk.ambient.trigger_options({"session_policy": {"mode": "implicit"}})
    assert error.value.reason == ("invalid_trigger_options", "session_policy")
    with pytest.raises(AdkError_) as error:
        adk.ambient.trigger_options({"session_policy": per_event(), "surprise": 1})
    assert error.value.reason == ("invalid_trigger_options", ("unknown_keys", ["surprise"]))
    backoff = adk.ambient.RetryOptions(initial_delay=0.1, max_delay=0.3, jitter="none")
    assert [backoff.delay(n, 0.5) for n in (1, 2, 3)] == [0.1, 0.2, 0.3]
    assert adk.ambient.RetryOptions(initial_delay=0.1).delay(1, 0.5) == pytest.approx(0.05)


def test_trigger_and_event_boundaries_fail_early() -> None:
    """trigger_and_event_boundaries_fail_early_case: an invalid runner or options and
    invalid events fail before admission; metadata comes back canonicalised."""
    setup = make()
    with pytest.raises(AdkError_) as error:
        adk.ambient.register_trigger("bad-runner", object(), session_policy=per_event())
    assert error.value.reason == ("invalid_trigger_options", "runner")
    with pytest.raises(AdkError_) as error:
        adk.ambient.register_trigger("bad", setup.runner, max_queue=-1, session_policy=per_event())
    assert error.value.reason == ("invalid_trigger_options", "max_queue")
    with pytest.raises(AdkError_) as error:
        adk.ambient.register_trigger("", setup.runner, session_policy=per_event())
    assert error.value.reason == "invalid_trigger_name"
    assert adk.ambient.triggers() == []
    name = trigger(setup)
    with pytest.raises(AmbientError) as error:
        adk.ambient.register_trigger(name, setup.runner, session_policy=per_event())
    assert _reason(error) == "already_registered"
    bad_events = [
        {"payload": lambda: None, "idempotency_key": "non-json"},
        {"payload": {"answer": 42}, "idempotency_key": "non-content-map"},
        {"payload": "x", "idempotency_key": "secret", "metadata": {"api_key": "never-store"}},
        {"payload": "x", "idempotency_key": "nested", "metadata": {"a": {"password": "p"}}},
        {"payload": "x", "idempotency_key": "not-json-meta", "metadata": {"a": object()}},
        {"payload": "x", "idempotency_key": "int-keys", "metadata": {1: "a"}},
        {"payload": "", "idempotency_key": "empty"},
        {"payload": "x"},
        {"payload": "x", "idempotency_key": ""},
        {"payload": "x", "idempotency_key": "unknown", "priority": 1},
        {"payload": "x", "idempotency_key": "too-long", "timeout": 10_000.0},
        {"payload": "x", "idempotency_key": "zero", "timeout": 0},
        {
            "payload": "x",
            "idempotency_key": "session",
            "session": {"user_id": "u", "session_id": "s"},
        },
        {"payload": "x" * 2_000_000, "idempotency_key": "huge"},
        "not a mapping",
    ]
    for bad in bad_events:
        with pytest.raises(AmbientError) as error:
            adk.ambient.submit(name, bad)  # type: ignore[arg-type]
        assert _reason(error) == "invalid_ambient_event", bad
    assert adk.ambient.trigger_status(name)["submitted"] == 0
    assert setup.model.calls == 0
    receipt = adk.ambient.submit(
        name,
        event("canonical", metadata={"source": "test", "tags": ("a", "b"), "n": 1.5}),
    )
    assert receipt.duplicate is False
    assert adk.ambient.status(receipt)["metadata"] == {
        "source": "test",
        "tags": ["a", "b"],
        "n": 1.5,
    }
    outcome = adk.ambient.wait(receipt, timeout=5)
    assert isinstance(outcome, adk.Completed)
    assert setup.model.calls == 1
    with pytest.raises(AmbientError) as error:
        adk.ambient.submit("no-such-trigger", event("x"))
    assert _reason(error) == "trigger_not_found"
    with pytest.raises(AmbientError) as error:
        adk.ambient.status("amb-0:no-such-trigger")
    assert _reason(error) == "not_found"
    with pytest.raises(AmbientError) as error:
        adk.ambient.status("run-123")
    assert _reason(error) == "not_found"


def test_content_payloads_are_accepted() -> None:
    """A validated `Content` payload runs like text."""
    setup = make()
    name = trigger(setup)
    message = content.new([content.text("Summarize")], role="user")
    outcome = adk.ambient.run(name, {"payload": message, "idempotency_key": "c"}, timeout=5)
    assert isinstance(outcome, adk.Completed)


def test_bounded_concurrency_and_queue_deadline() -> None:
    """bounded_concurrency_and_queue_deadline_case: max_concurrency=2, max_queue=2, the
    5th submit is ambient_queue_full; a queued event past its deadline times out; the
    trigger returns to 0 active, 0 queued."""
    setup = make(delay=0.15)
    name = trigger(setup, max_concurrency=2, max_queue=2, event_timeout=5.0)
    first = adk.ambient.submit(name, event("c-1"))
    second = adk.ambient.submit(name, event("c-2"))
    third = adk.ambient.submit(name, event("c-3", timeout=0.04))
    fourth = adk.ambient.submit(name, event("c-4"))
    with pytest.raises(AmbientError) as error:
        adk.ambient.submit(name, event("c-5"))
    assert _reason(error) == "ambient_queue_full"
    view = adk.ambient.trigger_status(name)
    assert (view["active"], view["queued"], view["rejected"]) == (2, 2, 1)
    assert adk.ambient.status(third)["state"] == Phase.QUEUED.value
    assert adk.ambient.wait(third, timeout=2) == TimedOut("deadline_exceeded")
    for receipt in (first, second, fourth):
        assert isinstance(adk.ambient.wait(receipt, timeout=5), adk.Completed)
    assert adk.ambient.status(third)["attempts"] == 0  # it never ran
    wait_until(lambda: idle(name))
    view = adk.ambient.trigger_status(name)
    assert view["peak_active"] == 2


def test_idempotency_returns_one_execution() -> None:
    """idempotency_returns_one_execution_case: a duplicate key returns the same
    reference marked duplicate; the agent runs once."""
    setup = make(delay=0.03)
    name = trigger(setup)
    receipt = adk.ambient.submit(name, event("same-delivery"))
    again = adk.ambient.submit(name, event("same-delivery"))
    assert again == adk.ambient.Submitted(receipt.ref, True)
    assert isinstance(adk.ambient.wait(receipt, timeout=5), adk.Completed)
    assert adk.ambient.submit(name, event("same-delivery")).duplicate  # while retained
    time.sleep(0.05)
    assert setup.model.calls == 1
    assert adk.ambient.status(receipt)["attempts"] == 1
    assert adk.ambient.trigger_status(name)["duplicates"] == 2


def test_idempotency_memory_is_bounded() -> None:
    """Keys live exactly as long as their retained terminal events (`max_retained`)."""
    setup = make()
    name = trigger(setup, max_retained=1)
    first = adk.ambient.submit(name, event("k-1"))
    adk.ambient.wait(first, timeout=5)
    adk.ambient.wait(adk.ambient.submit(name, event("k-2")), timeout=5)
    with pytest.raises(AmbientError) as error:
        adk.ambient.status(first)
    assert _reason(error) == "not_found"
    again = adk.ambient.submit(name, event("k-1"))  # forgotten: a new delivery
    assert again.duplicate is False and again.ref != first.ref
    adk.ambient.wait(again, timeout=5)
    assert setup.model.calls == 3
    assert adk.ambient.trigger_status(name)["retained"] == 1


def test_retry_reaches_success_and_releases_admission() -> None:
    """retry_reaches_success_and_releases_admission_case: failing twice with
    max_attempts=3 completes on attempt 3; no admission permit is left."""
    setup = make(failures=2)
    name = trigger(
        setup,
        retry={
            "max_attempts": 3,
            "initial_delay": 0.001,
            "max_delay": 0.001,
            "backoff_factor": 1.0,
            "attempt_timeout": 2.0,
            "jitter": "none",
        },
    )
    receipt = adk.ambient.submit(name, event("retry-key"))
    assert adk.ambient.wait(receipt, timeout=5) == adk.Completed("answer 3")
    view = adk.ambient.status(receipt)
    assert view["attempts"] == 3 and setup.model.calls == 3
    wait_until(lambda: admission.status()["active"] == 0)


def test_retries_exhausted_fail_with_the_last_reason() -> None:
    """Every attempt failing ends as Failed(("run_failed", reason))."""
    setup = make(failures=5)
    name = trigger(
        setup,
        retry={"max_attempts": 2, "initial_delay": 0.001, "max_delay": 0.001, "jitter": "none"},
    )
    outcome = adk.ambient.run(name, event("doomed"), timeout=5)
    assert isinstance(outcome, adk.Failed) and outcome.reason[0] == "run_failed"
    assert setup.model.calls == 2


def test_attempt_timeout_cancels_the_orphan_run() -> None:
    """attempt_timeout_cancels_orphan_run_case: attempt timeout exhaustion is
    Failed("attempt_timeout"), the last run cancelled, no permit left."""
    setup = make(delay=5.0)
    name = trigger(
        setup,
        event_timeout=10.0,
        retry={
            "max_attempts": 2,
            "initial_delay": 0.001,
            "max_delay": 0.001,
            "backoff_factor": 1.0,
            "attempt_timeout": 0.05,
            "jitter": "none",
        },
    )
    receipt = adk.ambient.submit(name, event("timeout-key"))
    assert adk.ambient.wait(receipt, timeout=5) == adk.Failed("attempt_timeout")
    view = adk.ambient.status(receipt)
    assert view["attempts"] == 2
    assert isinstance(adk.runs.wait(view["run_id"], timeout=2), adk.Cancelled)
    wait_until(lambda: admission.status()["active"] == 0)
    wait_until(lambda: idle(name))


def test_event_deadline_stops_the_running_event() -> None:
    """The one absolute deadline covers runs too: a running event past it is timed out
    and its run cancelled before the terminal is published."""
    setup = make(delay=5.0)
    name = trigger(setup, event_timeout=0.2, retry={"attempt_timeout": 10.0})
    receipt = adk.ambient.submit(name, event("slow"))
    assert adk.ambient.wait(receipt, timeout=5) == TimedOut()
    run_id = adk.ambient.status(receipt)["run_id"]
    assert adk.runs.status(run_id)["state"] == "cancelled"
    wait_until(lambda: idle(name))


def test_cancellation_cleans_active_and_queued_jobs() -> None:
    """cancellation_cleans_active_and_queued_jobs_case: cancel works for queued and
    active events; the active one's run is cancelled; counters and permits return
    to zero."""
    setup = make(delay=5.0)
    name = trigger(setup, max_concurrency=1, max_queue=1)
    active = adk.ambient.submit(name, event("active"))
    wait_until(lambda: adk.ambient.status(active)["run_id"] is not None and setup.model.calls == 1)
    queued = adk.ambient.submit(name, event("queued"))
    adk.ambient.cancel(queued, "test_queue_cancel")
    assert adk.ambient.wait(queued, timeout=2) == adk.Cancelled("test_queue_cancel")
    adk.ambient.cancel(active, "test_active_cancel")
    assert adk.ambient.wait(active, timeout=3) == adk.Cancelled("test_active_cancel")
    run_id = adk.ambient.status(active)["run_id"]
    assert adk.runs.status(run_id)["state"] == "cancelled"  # ended before the terminal
    with pytest.raises(AmbientError) as error:
        adk.ambient.cancel(active)
    assert _reason(error) == "already_terminal"
    wait_until(lambda: idle(name))
    wait_until(lambda: admission.status()["active"] == 0)
    assert setup.model.calls == 1  # the queued event never ran


def test_waiter_limit_and_caller_death_cleanup() -> None:
    """waiter_limit_and_caller_death_cleanup_case: max_waiters bounds awaiters; a dead
    waiter is forgotten."""
    setup = make(delay=5.0)
    name = trigger(setup, max_waiters=1)
    receipt = adk.ambient.submit(name, event("waiter-key"))
    waiter = Task.start(adk.ambient.wait, receipt)
    wait_until(lambda: adk.ambient.status(receipt)["waiter_count"] == 1)
    with pytest.raises(AmbientError) as error:
        adk.ambient.wait(receipt, timeout=0.1)
    assert _reason(error) == "waiter_limit_reached"
    waiter.kill()
    wait_until(lambda: adk.ambient.status(receipt)["waiter_count"] == 0)
    with pytest.raises(adk.ambient.AmbientTimeout):
        adk.ambient.wait(receipt, timeout=0.05)  # a timed-out wait leaves no waiter
    wait_until(lambda: adk.ambient.status(receipt)["waiter_count"] == 0)
    adk.ambient.cancel(receipt, "waiter_test_done")
    assert adk.ambient.wait(receipt, timeout=3) == adk.Cancelled("waiter_test_done")


def test_per_event_sessions_are_isolated() -> None:
    """per_event_sessions_are_isolated_case: per_event sessions differ per
    idempotency key, and are stable for one key."""
    setup = make()
    name = trigger(setup, session_policy=per_event("ambient-user", prefix="isolated-"))
    first = adk.ambient.submit(name, event("session-a"))
    second = adk.ambient.submit(name, event("session-b"))
    for receipt in (first, second):
        assert isinstance(adk.ambient.wait(receipt, timeout=5), adk.Completed)
    one, two = adk.ambient.status(first), adk.ambient.status(second)
    assert one["session_id"] != two["session_id"]
    assert one["session_id"].startswith("isolated-") and one["user_id"] == "ambient-user"
    for view in (one, two):
        session = setup.sessions.get_session("ambient_app", "ambient-user", view["session_id"])
        assert len(session.events) == 2  # the event's message and the answer


def test_explicit_session_policy_is_enforced() -> None:
    """explicit_session_policy_is_enforced_case: explicit uses the event's
    user/session, and an event without one is refused."""
    setup = make()
    name = trigger(setup, session_policy={"mode": "explicit"})
    with pytest.raises(AmbientError) as error:
        adk.ambient.submit(name, event("missing-session"))
    assert _reason(error) == "invalid_ambient_event"
    with pytest.raises(AmbientError):
        adk.ambient.submit(name, event("partial", session={"user_id": "u"}))
    receipt = adk.ambient.submit(
        name, event("explicit-key", session={"user_id": "explicit-user", "session_id": "s-1"})
    )
    assert isinstance(adk.ambient.wait(receipt, timeout=5), adk.Completed)
    view = adk.ambient.status(receipt)
    assert (view["user_id"], view["session_id"]) == ("explicit-user", "s-1")
    assert len(setup.sessions.get_session("ambient_app", "explicit-user", "s-1").events) == 2


def test_shared_session_policy_uses_one_session() -> None:
    """shared: every event writes into the one configured session."""
    setup = make()
    name = trigger(
        setup,
        max_concurrency=1,
        session_policy={"mode": "shared", "user_id": "u", "session_id": "batch"},
    )
    receipts = [adk.ambient.submit(name, event(f"shared-{n}")) for n in range(2)]
    for receipt in receipts:
        assert isinstance(adk.ambient.wait(receipt, timeout=5), adk.Completed)
    assert {adk.ambient.status(r)["session_id"] for r in receipts} == {"batch"}
    assert len(setup.sessions.get_session("ambient_app", "u", "batch").events) == 4


def test_periodic_schedule_uses_the_bounded_runtime() -> None:
    """periodic_schedule_uses_bounded_runtime_case: a schedule source submits
    repeatedly through the same bounded path."""
    setup = make()
    name = trigger(setup, max_concurrency=1, max_queue=2)
    source = adk.ambient.start_schedule(
        name, "periodic", 0.03, {"payload": "scheduled message"}, initial_delay=0
    )
    try:
        wait_until(lambda: adk.ambient.schedule_status(source)["submitted"] >= 2)
        view = adk.ambient.schedule_status(source)
        assert view["type"] == "schedule" and view["interval"] == 0.03
        assert view["rejected"] <= 1
        ref = view["last_event_ref"]
        assert adk.ambient.status(ref)["metadata"]["schedule_id"] == "periodic"
    finally:
        adk.ambient.stop_schedule(source)
    with pytest.raises(AmbientError):
        adk.ambient.schedule_status(source)
    wait_until(lambda: idle(name))
    assert setup.model.calls >= 2
    with pytest.raises(AmbientError) as error:
        adk.ambient.start_schedule(name, "bad", 0, {"payload": "x"})
    assert error.value.reason == ("invalid_schedule_options", "interval")


def test_unregistering_a_busy_trigger_is_refused() -> None:
    """Unregistering a busy trigger is trigger_busy; an idle one goes, and its name is
    free again."""
    setup = make(delay=0.2)
    name = trigger(setup)
    receipt = adk.ambient.submit(name, event("busy"))
    with pytest.raises(AmbientError) as error:
        adk.ambient.unregister_trigger(name)
    assert _reason(error) == "trigger_busy"
    adk.ambient.wait(receipt, timeout=5)
    wait_until(lambda: idle(name))
    adk.ambient.unregister_trigger(name)
    assert name not in adk.ambient.triggers()
    with pytest.raises(AmbientError) as error:
        adk.ambient.submit(name, event("late"))
    assert _reason(error) == "trigger_not_found"
    with pytest.raises(AmbientError) as error:
        adk.ambient.unregister_trigger(name)
    assert _reason(error) == "not_found"
    adk.ambient.register_trigger(name, setup.runner, session_policy=per_event())
    assert name in adk.ambient.triggers()


def test_bounded_hundred_event_burst() -> None:
    """bounded_hundred_event_burst (concurrency suite): 100 events with
    max_concurrency 8 peak at exactly 8, all complete, counters return to zero."""
    setup = make(delay=0.05)
    name = trigger(setup, max_concurrency=8, max_queue=100)
    receipts = [adk.ambient.submit(name, event(f"burst-{n}")) for n in range(100)]
    outcomes = [adk.ambient.wait(r, timeout=30) for r in receipts]
    assert all(isinstance(o, adk.Completed) for o in outcomes)
    view = adk.ambient.trigger_status(name)
    assert view["peak_active"] == 8
    assert (view["active"], view["queued"], view["terminal"]) == (0, 0, 100)
    assert setup.model.calls == 100
    wait_until(lambda: admission.status()["active"] == 0)


def test_ambient_supervisor_sits_in_the_root_tree() -> None:
    """The ambient supervisor follows admission control in the root tree, one_for_all
    over the job supervisor, the trigger supervisor and the registry."""
    ids = [child.id for child in Supervisor.which_children(adk.app.APP_NAME)]
    assert ids.index("ambient_supervisor") == ids.index("admission_control") + 1
    inner = [child.id for child in Supervisor.which_children(adk.app.AMBIENT_SUPERVISOR)]
    assert inner == ["job_supervisor", "trigger_supervisor", "registry"]


def test_outcomes_are_json_safe() -> None:
    """Status is JSON-safe: outcome, metadata, no pids."""
    setup = make()
    name = trigger(setup)
    receipt = adk.ambient.submit(name, event("json"))
    adk.ambient.wait(receipt, timeout=5)
    view = adk.ambient.status(receipt)
    assert msgspec.json.decode(msgspec.json.encode(view)) == view
    assert view["outcome"] == {"type": "completed", "output": "answer 1"}


def test_a_killed_job_fails_its_event_and_cancels_its_run() -> None:
    """A job that dies is the event's failure (job_process_down), published after its
    run was cancelled; the trigger frees the slot."""
    setup = make(delay=5.0)
    name = trigger(setup)
    receipt = adk.ambient.submit(name, event("doomed-job"))
    wait_until(lambda: setup.model.calls == 1)
    jobs = list(sv.get_state(("adk.ambient.trigger", name)).by_pid)  # the running jobs
    assert len(jobs) == 1
    sv.exit(jobs[0], "kill")
    outcome = adk.ambient.wait(receipt, timeout=5)
    assert isinstance(outcome, adk.Failed) and outcome.reason[0] == "job_process_down"
    run_id = adk.ambient.status(receipt)["run_id"]
    assert adk.runs.status(run_id)["state"] == "cancelled"
    wait_until(lambda: idle(name))


def test_the_ambient_supervisor_restarts_its_children_together() -> None:
    """one_for_all: the registry dying takes the trigger and job supervisors with it;
    the ambient runtime comes back empty and usable."""
    setup = make()
    name = trigger(setup)
    registry = sv.whereis("adk.ambient.registry")
    triggers_before = sv.whereis("adk.ambient.triggers")
    sv.exit(registry, "kill")
    wait_until(
        lambda: (
            sv.whereis("adk.ambient.registry") not in (None, registry)
            and sv.whereis("adk.ambient.triggers") not in (None, triggers_before)
        )
    )
    assert adk.ambient.triggers() == []
    with pytest.raises(AmbientError) as error:
        adk.ambient.submit(name, event("after-restart"))
    assert _reason(error) == "trigger_not_found"
    name = trigger(setup)
    assert isinstance(adk.ambient.run(name, event("again"), timeout=5), adk.Completed)


class _Publish(adk.Tool):
    name = "publish"
    description = "Publish the release."
    parameters = {"type": "object", "properties": {}}
    require_confirmation = True

    def execute(self, args: dict[str, object], ctx: object) -> dict[str, bool]:
        return {"published": True}


def test_a_paused_run_is_terminal_for_the_event() -> None:
    """A pause ends the delivery: Paused(event), with the run id to resume it."""
    agent = adk.spawn_agent(
        "AmbientReleaser",
        {
            "provider": "scripted",
            "script": [{"tool_calls": [{"name": "publish", "args": {}}]}, {"text": "Released."}],
        },
        tools=[_Publish()],
    )
    runner = adk.Runner(agent, "ambient_app", adk.sessions.InMemorySessionService())
    adk.ambient.register_trigger("releases", runner, session_policy=per_event())
    receipt = adk.ambient.submit("releases", event("release-1"))
    outcome = adk.ambient.wait(receipt, timeout=5)
    assert isinstance(outcome, adk.Paused)
    run_id = adk.ambient.status(receipt)["run_id"]
    resumed = adk.runs.resume(run_id, {"confirmed": True})
    assert adk.runs.wait(resumed, timeout=5) == adk.Completed("Released.")
    assert idle("releases")
