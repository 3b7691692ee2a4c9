"""Stateful plugin instances: supervised, serialized, bounded, never committing late."""

from __future__ import annotations

import threading
import time

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors import plugins as pl
from adk_actors.app import PLUGIN_INSTANCE_SUPERVISOR


class Counter(pl.StatefulPlugin):
    """Counts its before_run calls; ``value`` steers the test cases."""

    def __init__(self, init_delay: float = 0.0) -> None:
        self.init_delay = init_delay
        self.started = threading.Event()
        self.release = threading.Event()

    def init(self, config):
        time.sleep(self.init_delay)
        return {"count": 0}

    def before_run(self, ctx, value, config, state):
        count = state["count"] + 1
        if value in ("delay", "kill_owner"):  # outlive the caller, until released
            self.started.set()
            self.release.wait(5)
        elif value == "big":
            return pl.Amend(count), {"count": count, "blob": "x" * 2000}
        return pl.Amend(count), {"count": count}


def counter_instance(**options):
    return pl.start_instance(Counter(), id="counter", **options)


def test_application_supervised_runtime():
    """Ported: adk_plugin_stateful_test application_supervised_runtime_test."""
    pid = counter_instance()
    status = pl.instance_status(pid)
    assert status["id"] == "counter"
    assert status["identity"] == "pid"
    assert status["restart_policy"] == "temporary"
    (child,) = [
        info
        for info in sv.DynamicSupervisor.which_children(PLUGIN_INSTANCE_SUPERVISOR)
        if info.pid == pid
    ]
    assert sv.DynamicSupervisor.get_childspec(PLUGIN_INSTANCE_SUPERVISOR, pid).restart == (
        "temporary"
    )
    assert child is not None
    pl.stop_instance(pid)
    assert not pid.is_alive()


def test_the_supervisor_sits_before_the_agents_in_the_root_tree():
    children = [info.id for info in sv.Supervisor.which_children("adk.app")]
    assert children.index("plugin_instance_supervisor") < children.index("agent_supervisor")
    assert children.index("session_owner") < children.index("plugin_instance_supervisor")


def test_serialized_concurrent_state():
    """Ported: adk_plugin_stateful_test serialized_concurrent_state_test (behaviors §9:
    20 concurrent calls see counts 1..20)."""
    pid = counter_instance()
    pipeline = pl.Pipeline.compile(
        [{"plugin": pl.InstancePlugin(pid, timeout=5.0), "id": "counter", "mode": "intervene"}]
    )
    results = []
    lock = threading.Lock()

    def one():
        outcome = pipeline.run("before_run", {}, "normal")
        with lock:
            results.append(outcome.value)

    threads = [threading.Thread(target=one) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(results) == list(range(1, 21))
    status = pl.instance_status(pid)
    assert (status["busy"], status["queued"], status["generation"]) == (False, 0, 20)
    pl.stop_instance(pid)


def test_initialization_is_time_bounded():
    """Ported: adk_plugin_stateful_test initialization_is_time_and_heap_isolated_test
    (the time half; Python has no per-worker heap limit)."""
    started = time.monotonic()
    with pytest.raises(adk.AdkError) as info:
        pl.start_instance(Counter(init_delay=1.0), id="slow", init_timeout=0.05)
    assert info.value.reason == "stateful_plugin_init_timeout"
    assert time.monotonic() - started < 0.5

    class Broken(pl.StatefulPlugin):
        def init(self, config):
            raise RuntimeError("init bug")

    with pytest.raises(adk.AdkError) as info:
        pl.start_instance(Broken(), id="broken")
    assert info.value.reason == "stateful_plugin_init_failed"


def test_failed_pid_identity_is_not_silently_restarted():
    """Ported: adk_plugin_stateful_test failed_pid_identity_is_not_silently_restarted_test."""
    pid = counter_instance()
    assert pl.invoke(pid, "before_run", {}, "normal", 1.0) == pl.Amend(1)
    ref = sv.monitor(pid)
    sv.exit(pid, "kill")
    down = sv.receive(2.0, lambda message: isinstance(message, sv.Down) and message.ref == ref)
    assert down.reason == "killed"
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and sv.DynamicSupervisor.count_children(
        PLUGIN_INSTANCE_SUPERVISOR
    ).get("active"):
        time.sleep(0.01)
    with pytest.raises(adk.AdkError) as info:
        pl.stop_instance(pid)
    assert info.value.reason == "not_found"
    with pytest.raises(adk.AdkError) as info:
        pl.invoke(pid, "before_run", {}, "normal", 1.0)
    assert info.value.reason == "not_found"
    replacement = counter_instance()
    assert replacement != pid
    assert pl.invoke(replacement, "before_run", {}, "normal", 1.0) == pl.Amend(1)
    pl.stop_instance(replacement)


def test_owner_death_discards_late_state():
    """Ported: adk_plugin_stateful_test owner_death_discards_late_state_test."""
    plugin = Counter()
    pid = pl.start_instance(plugin, id="counter")
    owner = sv.Task.start(pl.invoke, pid, "before_run", {}, "delay", 10.0)
    assert plugin.started.wait(2.0)
    owner.kill()
    plugin.release.set()  # the fenced body returns; the next callback may start
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and pl.instance_status(pid)["busy"]:
        time.sleep(0.01)
    assert pl.instance_status(pid)["busy"] is False  # the callback was stopped
    assert pl.invoke(pid, "before_run", {}, "normal", 1.0) == pl.Amend(1)
    pl.stop_instance(pid)


def test_completion_after_owner_death_never_commits():
    """Ported: adk_plugin_stateful_test
    completion_before_owner_down_never_commits_dead_owner_state_test: the callback
    completes only once its owner is dead; its state is discarded whichever of the
    completion and the owner's Down the instance sees first."""
    plugin = Counter()
    pid = pl.start_instance(plugin, id="counter")
    owner = sv.Task.start(pl.invoke, pid, "before_run", {}, "kill_owner", 10.0)
    assert plugin.started.wait(2.0)
    owner.kill()
    plugin.release.set()
    assert pl.invoke(pid, "before_run", {}, "normal", 2.0) == pl.Amend(1)
    assert pl.instance_status(pid)["generation"] == 1
    pl.stop_instance(pid)


def test_a_timed_out_callback_never_commits():
    plugin = Counter()
    pid = pl.start_instance(plugin, id="counter")
    with pytest.raises(adk.AdkError) as info:
        pl.invoke(pid, "before_run", {}, "delay", 0.1)
    assert info.value.reason == "stateful_plugin_timeout"
    plugin.release.set()
    assert pl.invoke(pid, "before_run", {}, "normal", 1.0) == pl.Amend(1)
    pl.stop_instance(pid)


def test_queue_and_state_are_bounded():
    plugin = Counter()
    pid = pl.start_instance(plugin, id="counter", max_queue=1, max_state_bytes=1000)
    with pytest.raises(adk.AdkError) as info:
        pl.invoke(pid, "before_run", {}, "big", 1.0)
    assert info.value.reason == "plugin_state_too_large"
    busy = sv.Task.start(pl.invoke, pid, "before_run", {}, "delay", 10.0)
    assert plugin.started.wait(2.0)
    waiting = sv.Task.start(pl.invoke, pid, "before_run", {}, "normal", 10.0)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and pl.instance_status(pid)["queued"] < 1:
        time.sleep(0.01)
    with pytest.raises(adk.AdkError) as info:
        pl.invoke(pid, "before_run", {}, "normal", 1.0)
    assert info.value.reason == "plugin_queue_full"
    busy.kill()
    plugin.release.set()
    assert waiting.wait(2.0) == pl.Amend(1)  # the oversized state never committed
    pl.stop_instance(pid)


def test_stateful_instance_bounds_are_hard():
    """Ported: adk_plugin_stateful_test stateful_instance_bounds_are_hard_test."""
    invalid = [
        {"id": "i" * 257},
        {"id": ""},
        {"id": "c", "max_queue": 4097},
        {"id": "c", "max_state_bytes": 64 * 1024 * 1024 + 1},
        {"id": "c", "init_timeout": 30.001},
        {"id": "c", "config": {"blob": "x" * (1024 * 1024 + 1)}},
    ]
    for options in invalid:
        with pytest.raises(adk.AdkError) as info:
            pl.start_instance(Counter(), **options)
        reason = info.value.reason
        assert (reason[0] if isinstance(reason, tuple) else reason) == (
            "invalid_plugin_instance_spec"
        )
    pid = pl.start_instance(
        Counter(), id="c", max_queue=4096, max_state_bytes=64 * 1024 * 1024, init_timeout=30
    )
    with pytest.raises(adk.AdkError) as info:
        pl.invoke(pid, "before_run", {}, "normal", 120.001)
    assert info.value.reason == "invalid_plugin_instance_invocation"
    pl.stop_instance(pid)


def test_adapter_forwards_every_hook_the_plugin_implements():
    """Ported: adk_plugin_stateful_test adapter_forwards_every_plugin_hook_test."""

    class Echo(pl.StatefulPlugin):
        def init(self, config):
            return []

        def __getattr__(self, name):
            if name in pl.HOOKS:
                return lambda ctx, value, config, state: (None, [*state, name])
            raise AttributeError(name)

    pid = pl.start_instance(Echo(), id="echo")
    adapter = pl.InstancePlugin(pid)
    assert adapter.implemented_hooks() == frozenset(pl.HOOKS)
    pipeline = pl.Pipeline.compile([{"plugin": adapter, "id": "echo"}])
    for hook in pl.HOOKS:
        assert pipeline.run(hook, {}, None).trace[0].outcome == "observed"
    assert pl.instance_status(pid)["generation"] == len(pl.HOOKS)
    pl.stop_instance(pid)


class InPlace(pl.StatefulPlugin):
    """Changes its state in place, then runs past its caller's deadline."""

    def __init__(self) -> None:
        self.active = 0
        self.overlapped = False
        self.lock = threading.Lock()
        self.started = threading.Event()
        self.release = threading.Event()

    def init(self, config):
        return {"n": 0}

    def before_run(self, ctx, value, config, state):
        with self.lock:
            self.active += 1
            self.overlapped |= self.active > 1
        try:
            if value == "read":
                return pl.Amend(dict(state)), state
            state["n"] += 1  # in place, as ordinary Python does
            self.started.set()
            if value == "slow":
                self.release.wait(float(config.get("hold", 0.3)))
            return None, state
        finally:
            with self.lock:
                self.active -= 1


def test_an_in_place_change_of_a_timed_out_callback_never_commits():
    """Review H2: every callback gets its own copy of the state."""
    plugin = InPlace()
    pid = pl.start_instance(plugin, id="in_place")
    for _ in range(3):
        with pytest.raises(adk.AdkError) as info:
            pl.invoke(pid, "before_run", {}, "slow", 0.1)
        assert info.value.reason in ("stateful_plugin_timeout", "plugin_instance_busy")
    time.sleep(0.5)
    assert pl.invoke(pid, "before_run", {}, "read", 2.0) == pl.Amend({"n": 0})
    assert pl.instance_status(pid)["generation"] == 1  # only the read committed
    assert plugin.overlapped is False  # calls stayed serialized
    pl.stop_instance(pid)


def test_an_in_place_change_of_a_callback_whose_owner_died_never_commits():
    plugin = InPlace()
    pid = pl.start_instance(plugin, id="in_place", config={"hold": 5})
    owner = sv.Task.start(pl.invoke, pid, "before_run", {}, "slow", 10.0)
    assert plugin.started.wait(2.0)
    owner.kill()
    plugin.release.set()
    assert pl.invoke(pid, "before_run", {}, "read", 2.0) == pl.Amend({"n": 0})
    assert plugin.overlapped is False
    pl.stop_instance(pid)


def test_no_callback_starts_while_a_fenced_one_still_runs():
    """Review H2: a timed-out sync callback keeps its thread; the next call waits for
    it (and fails ``plugin_instance_busy`` if its own deadline passes first)."""
    plugin = InPlace()
    pid = pl.start_instance(plugin, id="in_place", config={"hold": 5})
    with pytest.raises(adk.AdkError) as info:
        pl.invoke(pid, "before_run", {}, "slow", 0.1)
    assert info.value.reason == "stateful_plugin_timeout"
    assert pl.instance_status(pid)["busy"] is True  # its thread still runs
    with pytest.raises(adk.AdkError) as info:
        pl.invoke(pid, "before_run", {}, "read", 0.2)
    assert info.value.reason == "plugin_instance_busy"
    waiting = sv.Task.start(pl.invoke, pid, "before_run", {}, "read", 5.0)
    time.sleep(0.1)
    plugin.release.set()
    assert waiting.wait(3.0) == pl.Amend({"n": 0})
    assert plugin.overlapped is False
    pl.stop_instance(pid)


def test_a_full_pool_fails_the_call_not_the_instance(monkeypatch):
    """Review L5: a refused task start is that call's ``plugin_instance_busy``."""
    from adk_actors.plugins import stateful

    plugin = InPlace()
    pid = pl.start_instance(plugin, id="in_place")
    real_start = sv.Task.start
    refuse = threading.Event()
    refuse.set()

    def start(fn, *args, **kwargs):
        if refuse.is_set() and fn is stateful._callback:
            raise sv.TaskBusy(1, 1)
        return real_start(fn, *args, **kwargs)

    monkeypatch.setattr(stateful.Task, "start", start)
    with pytest.raises(adk.AdkError) as info:
        pl.invoke(pid, "before_run", {}, "read", 1.0)
    assert info.value.reason == "plugin_instance_busy"
    assert pid.is_alive()
    refuse.clear()
    assert pl.invoke(pid, "before_run", {}, "read", 1.0) == pl.Amend({"n": 0})
    pl.stop_instance(pid)
