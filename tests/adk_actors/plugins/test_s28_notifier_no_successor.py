"""A notifier that dies with no successor leaves no ticket open (session 28, Low
leftovers, item 1: "a ticket sent to a notifier that dies with no successor stays open
forever").

A killed notifier runs no ``terminate``; its tickets used to be closed only by the
notifier its supervisor starts instead (that one's `init` sweeps them). When its
supervisor gives up instead (in the root tree: after its own intensity, once the root
gives up too), nothing closed them and `wait_notifications` stayed False until some
later tree start. Now the waiter drops them itself, counted as ``notifier_exited`` as
a successor would have. The notifier here is the real one, under a kernel supervisor
that gives up at the first exit, so the case is forced, not waited for.
"""

from __future__ import annotations

import time

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.plugins import notifier
from tests.adk_actors.plugins.test_notifier_lifecycle import Held

pl = adk.plugins


@pytest.fixture
def held_pipeline():
    """A Runner's plugin pipeline with a `Held` ``after_run``, then the tree stopped so
    that the test's own supervisor can start the notifier under its registered name."""
    sessions = adk.sessions.InMemorySessionService()
    held = Held()
    agent = adk.spawn_agent("Orphaned", {"provider": adk.ScriptedProvider(["one"])})
    runner = adk.Runner(
        agent, "app", sessions, plugins=[{"plugin": held, "id": "held", "timeout": 30.0}]
    )
    adk.stop()
    yield held, runner.plugins
    held.release.set()
    sessions.close()


def test_a_notifier_whose_supervisor_gives_up_leaves_no_ticket_open(held_pipeline):
    held, pipeline = held_pipeline
    sv.trap_exit(True)  # the supervisor giving up must not take the test thread down
    supervisor = sv.Supervisor.start_link([notifier.child_spec()], intensity=0)
    before = notifier.dropped_notifications().get("notifier_exited", 0)
    ticket = notifier.announce()
    notifier.send(ticket, pipeline, "after_run", {}, "late")
    assert held.entered.acquire(timeout=10)  # its hook runs, held, in the notifier's task
    sv.exit(sv.whereis(notifier.NOTIFIER_NAME), "kill")  # no terminate, no restart
    deadline = time.monotonic() + 10
    while supervisor.is_alive():
        assert time.monotonic() < deadline, "the supervisor did not give up"
        time.sleep(0.01)
    assert sv.whereis(notifier.NOTIFIER_NAME) is None  # no successor to sweep
    assert pl.wait_notifications(2)  # was False: the dead notifier's ticket stayed open
    assert notifier.dropped_notifications()["notifier_exited"] == before + 1
    assert held.done == []  # dropped while its hook is still held, never finished
