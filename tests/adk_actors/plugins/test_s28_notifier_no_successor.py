"""A notifier that dies with no successor leaves no ticket open (session 28, Low
leftovers, item 1: "a ticket sent to a notifier that dies with no successor stays open
forever"), and its tickets close as it dies, with nobody polling (review of c48b015,
/tmp/s28/REVIEW_LOWS.md, N1 and T1).

A killed notifier runs no ``terminate``; its tickets used to be closed only by the
notifier its supervisor starts instead (that one's `init` sweeps them). When its
supervisor gives up instead (in the root tree: after its own intensity, once the root
gives up too), nothing closed them and `wait_notifications` stayed False until some
later tree start. c48b015 made every waiter poll for dead notifiers (every 50 ms,
every ticket); now the notifier's death itself closes them (the kernel tells its
death to an inbox it owns), counted as ``notifier_exited`` as a successor would have,
whether anyone waits or not. The notifier here is the real one, under a kernel
supervisor that gives up at the first exit, so the case is forced, not waited for.
"""

from __future__ import annotations

import threading

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.plugins import notifier
from tests.adk_actors.plugins.test_notifier_lifecycle import Held
from tests.helpers import wait_dead, wait_until

pl = adk.plugins


@pytest.fixture
def held_pipeline():
    """A Runner's plugin pipeline with a `Held` ``after_run``, then the tree stopped so
    that the test's own supervisor can start the notifier under its registered name;
    the test thread traps exits meanwhile."""
    sessions = adk.sessions.InMemorySessionService()
    held = Held()
    agent = adk.spawn_agent("Orphaned", {"provider": adk.ScriptedProvider(["one"])})
    runner = adk.Runner(
        agent, "app", sessions, plugins=[{"plugin": held, "id": "held", "timeout": 30.0}]
    )
    adk.stop()
    trapping = sv.trap_exit(True)  # a supervisor of the test's own giving up must not
    yield held, runner.plugins  # take the test thread down
    sv.trap_exit(trapping)
    held.release.set()
    sessions.close()


def _orphan_a_running_notification(held: Held, pipeline) -> None:
    """Send a notification to a notifier of our own, let its hook start (held), then
    kill the notifier: its supervisor gives up at once, so no successor follows."""
    supervisor = sv.Supervisor.start_link([notifier.child_spec()], intensity=0)
    ticket = notifier.announce()
    notifier.send(ticket, pipeline, "after_run", {}, "late")
    assert held.entered.acquire(timeout=10)  # its hook runs, held, in the notifier's task
    sv.exit(sv.whereis(notifier.NOTIFIER_NAME), "kill")  # no terminate, no restart
    assert wait_dead(supervisor, 10) is not None  # T1: gave up (was a sleep loop)
    assert sv.whereis(notifier.NOTIFIER_NAME) is None  # no successor to sweep


def test_a_notifier_whose_supervisor_gives_up_leaves_no_ticket_open(held_pipeline):
    held, pipeline = held_pipeline
    before = notifier.dropped_notifications().get("notifier_exited", 0)
    _orphan_a_running_notification(held, pipeline)
    assert pl.wait_notifications(2)  # was False: the dead notifier's ticket stayed open
    assert notifier.dropped_notifications()["notifier_exited"] == before + 1
    assert held.done == []  # dropped while its hook is still held, never finished


def test_review_n1_a_dead_notifiers_tickets_close_as_it_dies_with_nobody_waiting(
    held_pipeline,
):
    """Review N1: the ticket is closed and counted by the notifier's death, before
    anyone calls `wait_notifications` (c48b015 closed it only inside a waiter's poll);
    and a wait with no limit (None, as before c48b015: then a TypeError) returns."""
    held, pipeline = held_pipeline
    before = notifier.dropped_notifications().get("notifier_exited", 0)
    _orphan_a_running_notification(held, pipeline)
    wait_until(lambda: notifier.dropped_notifications().get("notifier_exited") == before + 1)
    assert pl.wait_notifications(None)
    assert held.done == []


def test_wait_notifications_without_a_limit_waits_for_the_notification(held_pipeline):
    """Review nit: `wait_notifications(None)` waits without a limit (c48b015 raised
    TypeError); it returns True once the held notification has run."""
    held, pipeline = held_pipeline
    supervisor = sv.Supervisor.start_link([notifier.child_spec()])
    try:
        notifier.send(notifier.announce(), pipeline, "after_run", {}, "late")
        assert held.entered.acquire(timeout=10)
        waited: list[bool | BaseException] = []

        def waiter() -> None:
            try:
                waited.append(pl.wait_notifications(None))
            except BaseException as error:  # the assertion below shows it
                waited.append(error)

        thread = threading.Thread(target=waiter, daemon=True)
        thread.start()
        held.release.set()
        thread.join(10)
        assert waited == [True]
        assert held.done == ["late"]
    finally:
        sv.stop(supervisor, "shutdown", 10)


def test_a_drop_after_the_death_notice_is_not_counted_twice():
    """Review, "one old path": a killed notifier's fenced callback may still drop a
    ticket (``too_many``, ``busy``) that its death notice has closed and counted as
    ``notifier_exited``; that drop counts nothing more (c48b015 counted it again)."""
    ticket = notifier.announce()
    notifier._tickets.close(ticket)  # as the death notice (or a successor's sweep) does
    before = notifier.dropped_notifications()
    notifier._drop(ticket, "after_run", "busy")
    assert notifier.dropped_notifications() == before


def test_review2_n_a_a_second_notifier_start_touches_nothing_and_is_already_started(
    held_pipeline,
):
    """Second review of bd5d6c5, N-A: a notifier started while one runs (a second
    tree, or `child_spec()` started twice) fails with `AlreadyStarted`, as when the
    kernel took the name before `init`, and leaves the live notifier's running
    notification alone. bd5d6c5 swept every ticket not its own first (the live one's
    too: counted ``notifier_exited``, `wait_notifications` True while the hook still
    ran), then failed with ``StartError(('already_registered', pid))``."""
    held, pipeline = held_pipeline
    supervisor = sv.Supervisor.start_link([notifier.child_spec()])
    try:
        live = sv.whereis(notifier.NOTIFIER_NAME)
        notifier.send(notifier.announce(), pipeline, "after_run", {}, "late")
        assert held.entered.acquire(timeout=10)
        before = notifier.dropped_notifications()
        with pytest.raises(sv.AlreadyStarted) as started:
            notifier.child_spec().start()
        assert started.value.pid == live
        assert notifier.NOTIFIER_NAME in str(started.value)
        assert notifier.dropped_notifications() == before
        assert pl.wait_notifications(0.1) is False  # the held hook still runs
        assert sv.whereis(notifier.NOTIFIER_NAME) == live and live.is_alive()
        held.release.set()
        assert pl.wait_notifications(10)
        assert held.done == ["late"]
    finally:
        sv.stop(supervisor, "shutdown", 10)
