"""The plugin notifier's tickets, place in the tree and bound (review of
runner/plugins, findings 2, 3 and 4).

A ticket never outlives the notifier it was sent to, so `wait_notifications` cannot
stay False for ever; the notifier starts before the invocation servers and stops after
them, and what it drops is logged and counted; at most `MAX_RUNNING` notifications run
at once, so slow ``after_run`` hooks leave the shared pool to other Runners.
"""

from __future__ import annotations

import threading
import time

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors import app
from adk_actors.plugins import notifier

pl = adk.plugins


@pytest.fixture
def sessions():
    service = adk.sessions.InMemorySessionService()
    yield service
    service.close()


class Held(pl.Plugin):
    """``after_run`` that blocks until released, counting who entered."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()
        self.done: list[str] = []
        self._lock = threading.Lock()

    def after_run(self, ctx, value, config):
        self.entered.release()
        self.release.wait(30)
        with self._lock:
            self.done.append(value)


def _runner(name: str, plugin: pl.Plugin | None, sessions, replies: list[str]) -> adk.Runner:
    agent = adk.spawn_agent(name, {"provider": adk.ScriptedProvider(replies)})
    plugins = [] if plugin is None else [{"plugin": plugin, "id": "held", "timeout": 30.0}]
    return adk.Runner(agent, "app", sessions, plugins=plugins)


def _until(check, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_finding_2_a_killed_notifiers_tickets_close_when_the_next_one_starts(sessions):
    held = Held()
    runner = _runner("Killed", held, sessions, ["one"])
    assert runner.run("u", "k1", "hi") == "one"
    assert held.entered.acquire(timeout=10)  # its after_run runs in the notifier
    before = notifier.dropped_notifications().get("notifier_exited", 0)
    old = sv.whereis(notifier.NOTIFIER_NAME)
    sv.exit(old, "kill")  # no terminate: its running ticket is left open
    assert _until(lambda: sv.whereis(notifier.NOTIFIER_NAME) not in (None, old))
    held.release.set()
    assert pl.wait_notifications(5)  # the new notifier closed the old one's ticket
    assert notifier.dropped_notifications()["notifier_exited"] == before + 1
    adk.stop()
    adk.start()
    assert pl.wait_notifications(1)


def test_finding_3_the_notifier_starts_before_the_runs_and_stops_after_them():
    order = [child.id for child in sv.Supervisor.which_children(app.APP_NAME)]
    notifier_at = order.index("plugin_notifier_supervisor")  # the notifier under its own
    assert notifier_at < order.index("agent_supervisor") < order.index("run_supervisor")
    assert order.index("plugin_instance_supervisor") < notifier_at


def test_finding_3_a_run_ended_before_stop_is_notified_and_a_late_send_is_counted(sessions):
    held = Held()
    runner = _runner("Stopping", held, sessions, ["done"])
    assert runner.run("u", "s1", "hi") == "done"
    assert held.entered.acquire(timeout=10)
    stopper = threading.Thread(target=adk.stop)
    stopper.start()
    # everything after the notifier has stopped: the notifier now drains the hook
    assert _until(lambda: sv.whereis(app.AGENT_SUPERVISOR) is None)
    assert sv.whereis(notifier.NOTIFIER_NAME) is not None
    before = notifier.dropped_notifications().get("stopping", 0)
    ticket = notifier.announce()
    notifier.send(ticket, runner.plugins, "after_run", {}, "late")
    assert notifier.dropped_notifications()["stopping"] == before + 1  # dropped at once
    held.release.set()
    stopper.join(20)
    assert not stopper.is_alive()
    assert held.done == ["done"]  # the drain let the running one finish, never "late"
    assert pl.wait_notifications(1)  # and no ticket is left open
    adk.start()


def test_finding_4_slow_notifications_run_at_most_max_running_at_once(sessions):
    held = Held()
    runner = _runner("Bounded", held, sessions, ["x"] * (notifier.MAX_RUNNING + 8))
    for i in range(notifier.MAX_RUNNING + 8):
        assert runner.run("u", f"b{i}", "hi") == "x"  # none waits for its after_run
    for _ in range(notifier.MAX_RUNNING):
        assert held.entered.acquire(timeout=10)
    # the others wait in the notifier, not in the pool: a plain run still gets threads
    plain = _runner("Plain", None, sessions, ["quick"])
    assert plain.run("u", "p", "hi") == "quick"
    assert not held.entered.acquire(timeout=0.2)  # no seventeenth running
    assert len(held.done) == 0
    held.release.set()
    assert pl.wait_notifications(10)
    assert len(held.done) == notifier.MAX_RUNNING + 8


def test_finding_4_past_the_pending_bound_a_notification_is_dropped_and_counted(
    sessions, monkeypatch
):
    monkeypatch.setattr(notifier, "MAX_RUNNING", 1)
    monkeypatch.setattr(notifier, "MAX_PENDING", 1)
    held = Held()
    runner = _runner("Overflow", held, sessions, ["a", "b", "c"])
    before = notifier.dropped_notifications().get("too_many", 0)
    for session in ("o1", "o2", "o3"):
        runner.run("u", session, "hi")
    assert held.entered.acquire(timeout=10)
    assert _until(lambda: notifier.dropped_notifications().get("too_many", 0) == before + 1)
    held.release.set()
    assert pl.wait_notifications(10)
    assert sorted(held.done) == ["a", "b"]
