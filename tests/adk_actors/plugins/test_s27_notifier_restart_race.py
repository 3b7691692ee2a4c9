"""The plugin notifier restarted while notifications are on their way (second review of
the runner/plugins fixes, finding 7, "notifier `send` versus restart race"; issue 20
leftovers).

`send` looks the notifier up, then records which notifier the ticket went to. When
the notifier is killed between the two and its supervisor starts a new one (whose
`init` closes the tickets of the notifiers before it), the ticket used to be recorded
for the dead notifier after that sweep, and the cast went nowhere: the ticket stayed
open until the next restart, so `wait_notifications` was False after its whole
timeout. The interleaving is forced, not hoped for: a trace hook holds the sending
thread right after its look-up while the test kills the notifier through the kernel's
exit API and waits for the restart.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors import app
from adk_actors.plugins import notifier
from supervision.registry import whereis
from tests.adk_actors.plugins.test_notifier_lifecycle import Held

pl = adk.plugins


@pytest.fixture
def held_runner():
    sessions = adk.sessions.InMemorySessionService()
    held = Held()
    replies = ["r"] * 8
    agent = adk.spawn_agent("RaceAgent", {"provider": adk.ScriptedProvider(replies)})
    runner = adk.Runner(
        agent, "app", sessions, plugins=[{"plugin": held, "id": "held", "timeout": 30.0}]
    )
    yield held, runner
    held.release.set()
    sessions.close()


def _restarted_notifier(old: sv.Pid, timeout: float = 10.0) -> sv.Pid:
    """The notifier its supervisor started after `old`, once that restart (the new
    notifier's `init` included) is over: the supervisor answers only then."""
    supervisor = next(
        child.pid
        for child in sv.Supervisor.which_children(app.APP_NAME)
        if child.id == "plugin_notifier_supervisor"
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        (child,) = sv.Supervisor.which_children(supervisor)
        if child.pid is not None and child.pid != old:
            return child.pid
        time.sleep(0.01)
    raise AssertionError("the notifier was not restarted")


def _send_held_after_lookup(
    ticket: int, pipeline
) -> tuple[threading.Thread, threading.Event, threading.Event]:
    """Start `notifier.send` on a thread that stops right after `send` looked the
    notifier up (a trace hook on that thread only); set the second event to go on."""
    looked_up, go_on = threading.Event(), threading.Event()

    def hold_after_whereis(frame, event, arg):
        caller = frame.f_back
        if (
            event == "call"
            and frame.f_code is whereis.__code__
            and caller is not None
            and caller.f_code is notifier.send.__code__
        ):

            def on_return(frame, event, arg):
                if event == "return":
                    looked_up.set()
                    go_on.wait(10)
                return on_return

            return on_return
        return None

    def sender() -> None:
        sys.settrace(hold_after_whereis)
        try:
            notifier.send(ticket, pipeline, "after_run", {}, "late")
        finally:
            sys.settrace(None)

    thread = threading.Thread(target=sender)
    thread.start()
    return thread, looked_up, go_on


def test_finding_7_a_send_racing_a_restart_leaves_no_ticket_open(held_runner):
    held, runner = held_runner
    old = sv.whereis(notifier.NOTIFIER_NAME)
    before = notifier.dropped_notifications().get("notifier_exited", 0)
    ticket = notifier.announce()
    thread, looked_up, go_on = _send_held_after_lookup(ticket, runner.plugins)
    assert looked_up.wait(10)  # the sender holds the old notifier's pid
    sv.exit(old, "kill")
    new = _restarted_notifier(old)  # its init has swept already
    go_on.set()
    thread.join(10)
    assert not thread.is_alive()
    assert pl.wait_notifications(2)  # was False: the ticket stayed with the dead notifier
    assert notifier.dropped_notifications()["notifier_exited"] == before + 1
    assert held.done == []  # dropped, never run
    assert sv.whereis(notifier.NOTIFIER_NAME) == new
    assert runner.run("u", "after", "hi") == "r"  # the new notifier serves the next run
    assert held.entered.acquire(timeout=10)
    held.release.set()
    assert pl.wait_notifications(10)
    assert held.done == ["r"]


def test_killed_with_notifications_running_and_queued_every_ticket_closes(held_runner, monkeypatch):
    """Issue 20 leftovers: the notifier killed (kernel exit API, untrappable) while one
    notification runs and others wait in its queue; the new notifier closes them all."""
    monkeypatch.setattr(notifier, "MAX_RUNNING", 1)
    held, runner = held_runner
    before = notifier.dropped_notifications().get("notifier_exited", 0)
    for n in range(4):
        assert runner.run("u", f"q{n}", "hi") == "r"  # one runs, three wait
    assert held.entered.acquire(timeout=10)
    assert not pl.wait_notifications(0.1)
    old = sv.whereis(notifier.NOTIFIER_NAME)
    sv.exit(old, "kill")
    _restarted_notifier(old)
    assert pl.wait_notifications(5)  # while the killed one's hook is still blocked
    assert notifier.dropped_notifications()["notifier_exited"] == before + 4
    held.release.set()
    assert runner.run("u", "after", "hi") == "r"
    assert pl.wait_notifications(10)
    assert "r" in held.done
