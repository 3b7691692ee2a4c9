"""Admission control: limits, the bounded queue, owner monitors, cancellation, status."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from functools import partial
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

import supervision as sv
from adk_actors import admission
from adk_actors.admission import Permit
from providers.errors import AdkError
from supervision.tasks import Task, TaskFailed
from tests.helpers import Recorder, wait_until


def _start(**config: Any) -> sv.Pid:
    return admission.start_link(config)


def _reason(fn: Any, *args: Any, **kwargs: Any) -> Any:
    with pytest.raises(AdkError) as info:
        fn(*args, **kwargs)
    return info.value.reason


def _counts(ctl: sv.Pid) -> tuple[int, int]:
    status = admission.status(ctl)
    return status["active"], status["queued"]


class Worker:
    """A plain thread that calls `acquire`, records the outcome, and holds its permit until told."""

    def __init__(self, ctl: sv.Pid, agent: str, label: str, order: Recorder, **kwargs: Any) -> None:
        self.label = label
        self.error: AdkError | None = None
        self.permit: Permit | None = None
        self.released: bool | None = None
        self.let_go = threading.Event()
        self._args = (ctl, agent, order, kwargs)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        ctl, agent, order, kwargs = self._args
        try:
            permit = admission.acquire(agent, server=ctl, **kwargs)
        except AdkError as error:
            self.error = error
            order.add(("error", self.label))
            return
        self.permit = permit
        order.add(self.label)
        self.let_go.wait(10)
        self.released = permit.release()

    def finish(self) -> None:
        self.let_go.set()
        self._thread.join(10)
        assert not self._thread.is_alive()


def _queue_worker(
    ctl: sv.Pid, agent: str, label: str, order: Recorder, queued: int, **kwargs: Any
) -> Worker:
    """Start a queued worker and wait until the controller holds it in the queue."""
    worker = Worker(ctl, agent, label, order, overflow="queue", **kwargs)
    wait_until(lambda: _counts(ctl)[1] == queued)
    return worker


def _has_length(order: Recorder, length: int) -> bool:
    return len(order.snapshot()) == length


@contextmanager
def _events() -> Iterator[list[MutableMapping[str, Any]]]:
    """Capture structlog events at every level, whatever an earlier test configured."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(wrapper_class=saved["wrapper_class"])


# -- configuration ----------------------------------------------------------------------


def test_config_defaults_and_json_safe_status() -> None:
    ctl = admission.start_link()
    status = admission.status(ctl)
    assert status == {
        "active": 0,
        "queued": 0,
        "global_limit": 256,
        "default_agent_limit": 16,
        "overflow": "reject",
        "max_queue": 1024,
        "default_queue_timeout": 30.0,
        "agents": {},
    }
    assert json.loads(json.dumps(status)) == status


@pytest.mark.parametrize(
    "config",
    [
        {"global_limit": 0},
        {"global_limit": admission.MAX_LIMIT + 1},
        {"global_limit": True},
        {"global_limit": 2.0},
        {"default_agent_limit": -1},
        {"agent_limits": {"a": 0}},
        {"agent_limits": {"": 1}},
        {"agent_limits": {1: 1}},
        {"agent_limits": ["a"]},
        {"overflow": "drop"},
        {"max_queue": -1},
        {"max_queue": admission.MAX_QUEUE_CEILING + 1},
        {"default_queue_timeout": 0},
        {"default_queue_timeout": float("nan")},
        {"default_queue_timeout": admission.MAX_TIMEOUT + 1},
        "global_limit=2",
    ],
)
def test_invalid_config_is_refused(config: Any) -> None:
    assert _reason(admission.validate_config, config) == "invalid_admission_config"
    assert _reason(admission.start_link, config) == "invalid_admission_config"
    assert _reason(admission.child_spec, config) == "invalid_admission_config"


def test_unknown_config_keys_are_named() -> None:
    with pytest.raises(AdkError) as info:
        admission.validate_config({"global_limit": 2, "globl_limit": 3, "burst": 1})
    assert info.value.reason == "invalid_admission_config"
    assert "burst" in info.value.detail and "globl_limit" in info.value.detail


def test_too_many_agent_limits_is_refused() -> None:
    limits = {f"agent-{n}": 1 for n in range(admission.MAX_AGENT_LIMIT_ENTRIES + 1)}
    assert _reason(admission.validate_config, {"agent_limits": limits}) == (
        "invalid_admission_config"
    )


def test_invalid_acquire_arguments() -> None:
    ctl = _start()
    assert _reason(admission.acquire, "", server=ctl) == "invalid_admission_request"
    assert _reason(admission.acquire, 42, server=ctl) == "invalid_admission_request"
    assert _reason(admission.acquire, "a", overflow="drop", server=ctl) == (
        "invalid_admission_request"
    )
    assert _reason(admission.acquire, "a", timeout=-1, server=ctl) == "invalid_admission_request"
    assert _reason(admission.acquire, "a", deadline=float("inf"), server=ctl) == (
        "invalid_admission_request"
    )
    assert _reason(admission.acquire, "a", request_id="", server=ctl) == (
        "invalid_admission_request"
    )
    assert _counts(ctl) == (0, 0)


def test_controller_not_running() -> None:
    assert _reason(admission.acquire, "a", server="adk.admission.nobody") == (
        "admission_unavailable"
    )
    assert _reason(admission.status, "adk.admission.nobody") == "admission_unavailable"


def test_child_spec_registers_the_controller_under_a_supervisor() -> None:
    spec = admission.child_spec({"global_limit": 3})
    assert spec.id == "admission_control"
    sup = sv.Supervisor.start_link(
        [admission.child_spec({"global_limit": 3}, name="adk.admission.test")]
    )
    first = sv.whereis("adk.admission.test")
    assert first is not None
    permit = admission.acquire("a", server="adk.admission.test")
    assert admission.status("adk.admission.test")["global_limit"] == 3
    sv.exit(first, "kill")  # permanent: restarted with an empty ledger
    wait_until(lambda: sv.whereis("adk.admission.test") not in (None, first))
    assert permit.release() is False  # its controller is gone, and its permits with it
    assert admission.status("adk.admission.test")["active"] == 0
    sv.stop(sup, "shutdown")


# -- reject mode --------------------------------------------------------------------------


def test_reject_mode_agent_and_global_limits() -> None:
    ctl = _start(global_limit=2, default_agent_limit=1, overflow="reject")
    a = admission.acquire("agent-a", server=ctl)
    assert isinstance(a, Permit) and a.agent == "agent-a"
    assert _reason(admission.acquire, "agent-a", server=ctl) == "concurrency_limit_reached"
    b = admission.acquire("agent-b", server=ctl)
    with pytest.raises(AdkError) as info:
        admission.acquire("agent-c", server=ctl)
    assert info.value.reason == "concurrency_limit_reached"
    assert "global" in info.value.detail
    assert admission.release(a) is True
    c = admission.acquire("agent-c", server=ctl)
    status = admission.status(ctl)
    assert status["active"] == 2
    assert status["agents"]["agent-b"] == {"active": 1, "queued": 0, "limit": 1}
    assert status["agents"]["agent-c"] == {"active": 1, "queued": 0, "limit": 1}
    assert "agent-a" not in status["agents"]
    assert b.release() and c.release()
    assert _counts(ctl) == (0, 0)


def test_per_agent_limits_override_the_default() -> None:
    ctl = _start(default_agent_limit=1, agent_limits={"BatchAgent": 3})
    permits = [admission.acquire("BatchAgent", server=ctl) for _ in range(3)]
    assert _reason(admission.acquire, "BatchAgent", server=ctl) == "concurrency_limit_reached"
    assert admission.status(ctl)["agents"]["BatchAgent"] == {"active": 3, "queued": 0, "limit": 3}
    assert admission.acquire("other", server=ctl).release() is True  # the default applies
    for permit in permits:
        permit.release()


def test_release_is_exactly_once_and_context_manager_releases() -> None:
    ctl = _start(default_agent_limit=2)
    first = admission.acquire("a", server=ctl)
    second = admission.acquire("a", server=ctl)
    assert admission.release(first) is True
    assert admission.release(first) is False  # a second release does not free another slot
    assert _counts(ctl) == (1, 0)
    with admission.acquire("a", server=ctl) as third:
        assert third.id not in (first.id, second.id)
        assert _reason(admission.acquire, "a", server=ctl) == "concurrency_limit_reached"
    assert _counts(ctl) == (1, 0)
    assert second.release() is True
    assert _counts(ctl) == (0, 0)
    with pytest.raises(AdkError):
        admission.release("not-a-permit")  # type: ignore[arg-type]


def test_per_call_overflow_overrides_the_controller_mode() -> None:
    ctl = _start(default_agent_limit=1, overflow="queue", default_queue_timeout=30.0)
    held = admission.acquire("a", server=ctl)
    assert _reason(admission.acquire, "a", overflow="reject", server=ctl) == (
        "concurrency_limit_reached"
    )
    assert _counts(ctl) == (1, 0)
    held.release()


def test_duplicate_request_id_is_refused() -> None:
    ctl = _start()
    permit = admission.acquire("a", request_id="req-1", server=ctl)
    assert permit.request_id == "req-1"
    assert _reason(admission.acquire, "b", request_id="req-1", server=ctl) == (
        "duplicate_request_id"
    )
    permit.release()
    admission.acquire("b", request_id="req-1", server=ctl).release()  # free again


# -- queue mode ---------------------------------------------------------------------------


def test_queue_is_bounded() -> None:
    ctl = _start(global_limit=1, default_agent_limit=1, overflow="queue", max_queue=2)
    order = Recorder()
    held = admission.acquire("a", server=ctl)
    first = _queue_worker(ctl, "a", "first", order, queued=1)
    second = _queue_worker(ctl, "b", "second", order, queued=2)
    assert _reason(admission.acquire, "c", overflow="queue", server=ctl) == ("admission_queue_full")
    assert _counts(ctl) == (1, 2)  # the refused request took nothing and lost nothing
    held.release()
    wait_until(lambda: order.snapshot() == ["first"])
    first.finish()
    wait_until(lambda: order.snapshot() == ["first", "second"])
    second.finish()
    assert first.released is True and second.released is True
    assert _counts(ctl) == (0, 0)


def test_fifo_within_an_agent() -> None:
    ctl = _start(default_agent_limit=1, overflow="queue", max_queue=10)
    order = Recorder()
    held = admission.acquire("a", server=ctl)
    workers = [_queue_worker(ctl, "a", f"w{n}", order, queued=n + 1) for n in range(4)]
    held.release()
    for n, worker in enumerate(workers):
        expected = [f"w{i}" for i in range(n + 1)]
        wait_until(partial(_has_length, order, n + 1))
        assert order.snapshot() == expected
        assert admission.status(ctl)["agents"]["a"]["active"] == 1
        worker.finish()
    assert _counts(ctl) == (0, 0)


def test_oldest_eligible_waiter_wins_across_agents() -> None:
    ctl = _start(global_limit=2, default_agent_limit=1, overflow="queue", max_queue=10)
    order = Recorder()
    held_a = admission.acquire("agent-a", server=ctl)
    held_b = admission.acquire("agent-b", server=ctl)
    waiting_a = _queue_worker(ctl, "agent-a", "waiting-a", order, queued=1)  # oldest
    waiting_c = _queue_worker(ctl, "agent-c", "waiting-c", order, queued=2)
    waiting_d = _queue_worker(ctl, "agent-d", "waiting-d", order, queued=3)
    held_b.release()  # global room; agent-a is at its own limit, so it must not block agent-c
    wait_until(lambda: order.snapshot() == ["waiting-c"])
    status = admission.status(ctl)
    assert status["agents"]["agent-a"] == {"active": 1, "queued": 1, "limit": 1}
    assert status["agents"]["agent-d"] == {"active": 0, "queued": 1, "limit": 1}
    held_a.release()  # now agent-a's waiter is eligible and the oldest one
    wait_until(lambda: order.snapshot() == ["waiting-c", "waiting-a"])
    waiting_c.finish()
    wait_until(lambda: order.snapshot() == ["waiting-c", "waiting-a", "waiting-d"])
    waiting_a.finish()
    waiting_d.finish()
    assert _counts(ctl) == (0, 0)


def test_absolute_deadline_expires_a_queued_request() -> None:
    ctl = _start(default_agent_limit=1, overflow="queue")
    held = admission.acquire("a", server=ctl)
    deadline = time.monotonic() + 0.05
    assert _reason(admission.acquire, "a", overflow="queue", deadline=deadline, server=ctl) == (
        "queue_deadline_exceeded"
    )
    assert _counts(ctl) == (1, 0)
    past = time.monotonic() - 1.0
    assert _reason(admission.acquire, "a", deadline=past, server=ctl) == "queue_deadline_exceeded"
    assert _reason(admission.acquire, "a", timeout=0.02, server=ctl) == "queue_deadline_exceeded"
    held.release()
    assert _counts(ctl) == (0, 0)  # the expired requests were not admitted later
    admission.acquire("a", deadline=past, server=ctl).release()  # room: no waiting, no expiry


def test_default_queue_timeout_applies() -> None:
    ctl = _start(default_agent_limit=1, overflow="queue", default_queue_timeout=0.02)
    held = admission.acquire("a", server=ctl)
    assert _reason(admission.acquire, "a", server=ctl) == "queue_deadline_exceeded"
    held.release()


def test_cancel_a_queued_request() -> None:
    ctl = _start(default_agent_limit=1, overflow="queue")
    order = Recorder()
    held = admission.acquire("a", server=ctl)
    request_id = admission.new_request_id()
    worker = _queue_worker(ctl, "a", "w", order, queued=1, request_id=request_id)
    assert admission.cancel(request_id, server=ctl) is True
    wait_until(lambda: order.snapshot() == [("error", "w")])
    assert worker.error is not None and worker.error.reason == "cancelled"
    assert admission.cancel(request_id, server=ctl) is False  # no longer queued
    assert _counts(ctl) == (1, 0)
    assert admission.cancel(held.request_id, server=ctl) is True  # an active one is released
    assert _counts(ctl) == (0, 0)
    assert held.release() is False  # once only
    worker.finish()


def test_timers_and_monitors_are_cleaned_up() -> None:
    ctl = _start(default_agent_limit=1, overflow="queue")
    order = Recorder()
    held = admission.acquire("a", server=ctl)
    before = sv.kernel_stats(include_pseudo=True)
    request_id = admission.new_request_id()
    cancelled = _queue_worker(ctl, "a", "c", order, queued=1, request_id=request_id)
    admitted = _queue_worker(ctl, "a", "w", order, queued=2)
    assert sv.kernel_stats()["timers"] >= before["timers"] + 2
    admission.cancel(request_id, server=ctl)
    held.release()
    wait_until(lambda: "w" in order.snapshot())
    admitted.finish()
    cancelled.finish()
    assert _counts(ctl) == (0, 0)
    assert sv.kernel_stats()["timers"] == before["timers"]
    after = sv.kernel_stats(include_pseudo=True)
    assert after["monitors"] <= before["monitors"] - 1  # the test thread's own monitor is gone


# -- owners ------------------------------------------------------------------------------


class Holder(sv.GenServer):
    """A real process that takes a permit for itself and keeps it."""

    dispatcher = "thread"

    def handle_call(self, request: Any, from_: sv.From, state: Any) -> Any:
        agent, ctl, kwargs = request
        return sv.Reply(admission.acquire(agent, server=ctl, **kwargs), state)

    def handle_cast(self, msg: Any, state: Any) -> Any:
        agent, ctl, kwargs = msg
        admission.acquire(agent, server=ctl, **kwargs)  # blocks while queued
        return state


def test_owner_killed_releases_its_permit_exactly_once() -> None:
    ctl = _start(default_agent_limit=2, overflow="queue")
    holder = Holder.start()
    lost = sv.call(holder, ("a", ctl, {}))
    kept = admission.acquire("a", server=ctl)
    assert _counts(ctl) == (2, 0)
    with _events() as logs:
        sv.exit(holder, "kill")
        wait_until(lambda: _counts(ctl) == (1, 0))
        assert admission.release(lost) is False  # the monitor already released it
        assert _counts(ctl) == (1, 0)  # and only once: the other permit still counts
    released = [e for e in logs if e["event"] == "adk.admission.released"]
    assert [e["cause"] for e in released] == ["owner_down"]
    assert kept.release() is True
    assert _counts(ctl) == (0, 0)


def test_killed_task_releases_its_permit() -> None:
    ctl = _start(default_agent_limit=1, overflow="queue")
    holding = threading.Event()
    wake = threading.Event()
    late: list[bool] = []

    def work() -> None:
        permit = admission.acquire("a", server=ctl)
        holding.set()
        wake.wait(10)
        late.append(permit.release())  # runs fenced after the kill

    task = Task.start(work)
    assert holding.wait(5)
    assert _counts(ctl) == (1, 0)
    task.kill()
    wait_until(lambda: _counts(ctl) == (0, 0))
    with pytest.raises(TaskFailed):
        task.wait(5)
    wake.set()
    wait_until(lambda: late)
    assert late == [False]
    assert _counts(ctl) == (0, 0)
    admission.acquire("a", server=ctl).release()


def test_thread_that_ends_without_releasing_frees_its_permit() -> None:
    ctl = _start(default_agent_limit=1)
    thread = threading.Thread(target=lambda: admission.acquire("a", server=ctl))
    thread.start()
    thread.join(5)
    wait_until(lambda: _counts(ctl) == (0, 0))


@pytest.mark.parametrize("kind", ["task", "server"])
def test_queued_requester_death_removes_it(kind: str) -> None:
    ctl = _start(default_agent_limit=1, overflow="queue")
    held = admission.acquire("a", server=ctl)
    if kind == "task":
        task = Task.start(lambda: admission.acquire("a", server=ctl))
        wait_until(lambda: _counts(ctl) == (1, 1))
        task.kill()
    else:
        server = Holder.start()
        sv.cast(server, ("a", ctl, {}))
        wait_until(lambda: _counts(ctl) == (1, 1))
        sv.exit(server, "kill")
    wait_until(lambda: _counts(ctl) == (1, 0))
    assert admission.status(ctl)["agents"]["a"] == {"active": 1, "queued": 0, "limit": 1}
    held.release()
    assert _counts(ctl) == (0, 0)  # nothing was granted to the dead requester


# -- concurrency and observability --------------------------------------------------------


def test_ten_workers_never_exceed_the_global_limit() -> None:
    ctl = _start(global_limit=3, default_agent_limit=3, overflow="queue", max_queue=16)
    lock = threading.Lock()
    active = [0]
    peak = [0]
    seen: list[int] = []
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for _ in range(3):
                with admission.acquire(f"agent-{n % 4}", server=ctl):
                    with lock:
                        active[0] += 1
                        peak[0] = max(peak[0], active[0])
                    seen.append(admission.status(ctl)["active"])
                    time.sleep(0.002)
                    with lock:
                        active[0] -= 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    assert errors == []
    assert 1 <= peak[0] <= 3
    assert len(seen) == 30 and max(seen) <= 3
    assert _counts(ctl) == (0, 0)


def _has_process_handle(value: Any) -> bool:
    if isinstance(value, sv.Pid | sv.Ref | sv.From | threading.Thread):
        return True
    if isinstance(value, dict):
        return any(_has_process_handle(k) or _has_process_handle(v) for k, v in value.items())
    if isinstance(value, list | tuple | set):
        return any(_has_process_handle(item) for item in value)
    return False


def test_status_and_events_contain_no_process_handles() -> None:
    ctl = _start(global_limit=2, default_agent_limit=1, overflow="queue", max_queue=1)
    order = Recorder()
    with _events() as logs:
        held = admission.acquire("a", server=ctl)
        assert _reason(admission.acquire, "a", overflow="reject", server=ctl) == (
            "concurrency_limit_reached"
        )
        request_id = admission.new_request_id()
        worker = _queue_worker(ctl, "a", "w", order, queued=1, request_id=request_id)
        status = admission.status(ctl)
        assert _reason(admission.acquire, "a", overflow="queue", server=ctl) == (
            "admission_queue_full"
        )
        admission.cancel(request_id, server=ctl)
        wait_until(lambda: order.snapshot() == [("error", "w")])
        assert _reason(admission.acquire, "a", timeout=0.01, server=ctl) == (
            "queue_deadline_exceeded"
        )
        held.release()
        worker.finish()
    assert not _has_process_handle(status)
    text = json.dumps(status)
    assert "<0." not in text
    names = {event["event"] for event in logs}
    assert {
        "adk.admission.admitted",
        "adk.admission.rejected",
        "adk.admission.queued",
        "adk.admission.cancelled",
        "adk.admission.expired",
        "adk.admission.released",
    } <= names
    ours = [event for event in logs if event["event"].startswith("adk.admission.")]
    for event in ours:
        assert not _has_process_handle(event), event
        assert "<0." not in repr(event)
        assert request_id not in repr(event)
    rejected = {event["reason"] for event in ours if event["event"] == "adk.admission.rejected"}
    assert rejected == {"concurrency_limit_reached", "admission_queue_full"}


# -- the typed protocol ----------------------------------------------------------------------


def test_unknown_or_malformed_messages_are_refused_and_change_nothing() -> None:
    ctl = _start(default_agent_limit=1, overflow="queue")
    held = admission.acquire("a", server=ctl)
    before = admission.status(ctl)
    me = sv.self_pid()
    for message in [
        ("acquire", admission.Acquire("r1", "a", me, None, None, None)),  # the old tuple form
        ("release", held.id),
        ("status",),
        "status",
        admission.Release(123),  # type: ignore[arg-type]
        admission.Cancel(None),  # type: ignore[arg-type]
        admission.Withdraw(held.request_id, "not-a-pid"),  # type: ignore[arg-type]
        admission.Acquire("r2", 5, me, None, None, None),  # type: ignore[arg-type]
        admission.Acquire("r3", "a", me, "drop", None, None),  # type: ignore[arg-type]
        admission.Acquire("r4", "a", "me", None, None, None),  # type: ignore[arg-type]
        admission.Acquire("r5", "a", me, None, 5, None),  # an int deadline: not a float
    ]:
        answer = sv.call(ctl, message)
        assert answer == admission.Refused("invalid_admission_request", "unknown request"), message
    sv.cast(ctl, ("abandon", held.request_id))
    sv.cast(ctl, admission.Abandon(7))  # type: ignore[arg-type]
    sv.send(ctl, "noise")
    assert admission.status(ctl) == before
    assert held.release() is True
    assert _counts(ctl) == (0, 0)


def test_replies_are_typed() -> None:
    ctl = _start(default_agent_limit=1)
    me = sv.self_pid()
    granted = sv.call(ctl, admission.Acquire("r1", "a", me, None, None, None))
    assert isinstance(granted, admission.Granted)
    assert (granted.request_id, granted.agent) == ("r1", "a")
    refused = sv.call(ctl, admission.Acquire("r2", "a", me, None, None, None))
    assert isinstance(refused, admission.Refused)
    assert refused.reason == "concurrency_limit_reached"
    assert sv.call(ctl, admission.Release(granted.permit_id)) is True
    assert sv.call(ctl, admission.Release(granted.permit_id)) is False
    assert sv.call(ctl, admission.Status())["active"] == 0


# -- request_permit: a permit for a process that must stay responsive ------------------------


class Requester(sv.GenServer):
    """Asks for a permit with `request_permit` and takes the answer in `handle_info`."""

    def init(self, ctl: Any) -> dict[str, Any]:
        return {"ctl": ctl, "pending": None, "permit": None, "error": None, "answers": 0}

    def handle_call(self, request: Any, from_: sv.From, state: dict[str, Any]) -> Any:
        match request:
            case ("request", kwargs):
                state["pending"] = admission.request_permit("a", server=state["ctl"], **kwargs)
                return sv.Reply(state["pending"], state)
            case "outcome":
                return sv.Reply((state["permit"], state["error"], state["answers"]), state)
            case "release":
                return sv.Reply(state["permit"].release(), state)
            case ("withdraw", request_id):
                return sv.Reply(admission.withdraw(request_id, server=state["ctl"]), state)
            case "ping":
                return sv.Reply("pong", state)
        return sv.Reply(None, state)

    def handle_info(self, msg: Any, state: dict[str, Any]) -> dict[str, Any]:
        match msg:
            case sv.Response(request_id=ref) if ref == state["pending"]:
                state["answers"] += 1
                try:
                    state["permit"] = admission.permit_from_response(msg, server=state["ctl"])
                except AdkError as error:
                    state["error"] = error.reason
        return state


def _outcome(requester: sv.Pid) -> tuple[Permit | None, Any, int]:
    """The requester's permit, error reason and number of answers, once it has one."""
    result: tuple[Permit | None, Any, int] = wait_until(
        lambda: (lambda out: out if out[2] else None)(sv.call(requester, "outcome"))
    )
    return result


def test_request_permit_granted_at_once() -> None:
    ctl = _start(default_agent_limit=1)
    requester = Requester.start(ctl)
    ref = sv.call(requester, ("request", {}))
    assert isinstance(ref, sv.Ref)
    permit, error, answers = _outcome(requester)
    assert error is None and answers == 1
    assert isinstance(permit, Permit) and permit.agent == "a"
    assert _counts(ctl) == (1, 0)
    assert _reason(admission.acquire, "a", server=ctl) == "concurrency_limit_reached"
    assert sv.call(requester, "release") is True
    assert _counts(ctl) == (0, 0)
    sv.stop(requester)


def test_request_permit_queued_then_granted_on_a_release() -> None:
    ctl = _start(default_agent_limit=1, overflow="queue")
    held = admission.acquire("a", server=ctl)
    requester = Requester.start(ctl)
    sv.call(requester, ("request", {"timeout": 30.0}))
    wait_until(lambda: _counts(ctl) == (1, 1))
    assert sv.call(requester, "ping") == "pong"  # responsive while its request waits
    assert sv.call(requester, "outcome")[2] == 0
    held.release()
    permit, error, answers = _outcome(requester)
    assert error is None and answers == 1 and permit is not None
    assert _counts(ctl) == (1, 0)
    assert sv.call(requester, "release") is True
    assert _counts(ctl) == (0, 0)
    sv.stop(requester)


@pytest.mark.parametrize(
    ("config", "kwargs", "reason"),
    [
        ({"default_agent_limit": 1}, {}, "concurrency_limit_reached"),
        ({"default_agent_limit": 1, "max_queue": 0}, {"overflow": "queue"}, "admission_queue_full"),
        (
            {"default_agent_limit": 1},
            {"overflow": "queue", "timeout": 0.02},
            "queue_deadline_exceeded",
        ),
    ],
)
def test_request_permit_refused(
    config: dict[str, Any], kwargs: dict[str, Any], reason: str
) -> None:
    ctl = _start(**config)
    held = admission.acquire("a", server=ctl)
    requester = Requester.start(ctl)
    sv.call(requester, ("request", kwargs))
    permit, error, answers = _outcome(requester)
    assert (permit, error, answers) == (None, reason, 1)
    assert _counts(ctl) == (1, 0)
    held.release()
    assert _counts(ctl) == (0, 0)
    sv.stop(requester)


def test_request_permit_bad_arguments_raise_at_once() -> None:
    ctl = _start()
    assert _reason(admission.request_permit, "", server=ctl) == "invalid_admission_request"
    assert _reason(admission.request_permit, "a", timeout=True, server=ctl) == (
        "invalid_admission_request"
    )
    assert _reason(admission.permit_from_response, ("ok", "p", "a")) == (
        "invalid_admission_request"
    )
    assert _counts(ctl) == (0, 0)


def test_request_permit_controller_down_is_unavailable() -> None:
    requester = Requester.start("adk.admission.nobody")
    sv.call(requester, ("request", {}))
    assert _outcome(requester) == (None, "admission_unavailable", 1)
    sv.stop(requester)
    ctl = admission.AdmissionController.start(
        admission.validate_config({"default_agent_limit": 1, "overflow": "queue"})
    )
    held = admission.acquire("a", server=ctl)
    queued = Requester.start(ctl)
    sv.call(queued, ("request", {}))
    wait_until(lambda: _counts(ctl) == (1, 1))
    sv.exit(ctl, "kill")  # the controller dies while the request waits
    assert _outcome(queued) == (None, "admission_unavailable", 1)
    assert held.release() is False
    sv.stop(queued)


def test_request_permit_requester_killed_while_queued_is_removed() -> None:
    ctl = _start(default_agent_limit=1, overflow="queue")
    held = admission.acquire("a", server=ctl)
    requester = Requester.start(ctl)
    sv.call(requester, ("request", {}))
    wait_until(lambda: _counts(ctl) == (1, 1))
    sv.exit(requester, "kill")
    wait_until(lambda: _counts(ctl) == (1, 0))
    held.release()
    assert _counts(ctl) == (0, 0)  # nothing was granted to the dead requester


def test_request_permit_requester_killed_while_holding_releases_exactly_once() -> None:
    ctl = _start(default_agent_limit=2)
    requester = Requester.start(ctl)
    sv.call(requester, ("request", {}))
    lost, _, _ = _outcome(requester)
    kept = admission.acquire("a", server=ctl)
    assert lost is not None and _counts(ctl) == (2, 0)
    with _events() as logs:
        sv.exit(requester, "kill")
        wait_until(lambda: _counts(ctl) == (1, 0))
        assert admission.release(lost) is False  # the monitor already released it
        assert _counts(ctl) == (1, 0)
    released = [e for e in logs if e["event"] == "adk.admission.released"]
    assert [e["cause"] for e in released] == ["owner_down"]
    assert kept.release() is True
    assert _counts(ctl) == (0, 0)


def test_withdraw_a_queued_or_granted_request() -> None:
    ctl = _start(default_agent_limit=1, overflow="queue")
    held = admission.acquire("a", server=ctl)
    requester = Requester.start(ctl)
    request_id = admission.new_request_id()
    sv.call(requester, ("request", {"request_id": request_id}))
    wait_until(lambda: _counts(ctl) == (1, 1))
    assert sv.call(requester, ("withdraw", request_id)) is True
    assert _outcome(requester) == (None, "cancelled", 1)
    assert sv.call(requester, ("withdraw", request_id)) is False  # gone
    held.release()
    assert _counts(ctl) == (0, 0)
    granted_id = admission.new_request_id()
    sv.call(requester, ("request", {"request_id": granted_id}))
    wait_until(lambda: _counts(ctl) == (1, 0))
    assert admission.withdraw(granted_id, server=ctl) is False  # not the owner: untouched
    assert sv.call(requester, ("withdraw", granted_id)) is True  # the owner: released
    assert _counts(ctl) == (0, 0)
    assert _reason(admission.withdraw, "", server=ctl) == "invalid_admission_request"
    sv.stop(requester)
