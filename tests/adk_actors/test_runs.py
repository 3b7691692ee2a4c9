"""Stable runs (`adk.runs`): every bullet of behaviors §4, against real agents and Runners."""

from __future__ import annotations

import asyncio
import re
import threading

import msgspec
import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.app import RUN_SUPERVISOR
from adk_actors.runner.request import Fresh, Handoffs, InvocationRequest, stream_name
from adk_actors.runner.server import InvocationServer
from adk_actors.runs.values import MAX_RETAINED_TERMINAL_RUNS
from supervision import default_task_supervisor
from supervision.process import current_process, live_processes
from tests.adk_actors.run_stream_helpers import Busy, echo
from tests.helpers import in_thread, wait_until


def runner_for(sessions, name, provider=None, tools=(), **options):
    agent = adk.spawn_agent(
        name, {"provider": provider or adk.ScriptedProvider(fn=echo)}, tools=list(tools)
    )
    return adk.Runner(agent, "app", sessions, **options)


def slow(text="done", delay=0.5):
    return adk.ScriptedProvider([{"text": text, "delay": delay}])


def refused(fn):
    with pytest.raises(adk.AdkError) as info:
        fn()
    return info.value


def drain(run_id, after=0):
    return list(adk.runs.subscribe(run_id, after=after))


def run_processes():
    kinds = ("InvocationServer", "_StreamServer", "run subscription")
    return sorted((p for p in live_processes() if p.label in kinds), key=lambda p: p.pid)


def gone(run_id):
    try:
        adk.runs.status(run_id)
    except adk.AdkError as error:
        return error.reason == "not_found"
    return False


class Publish(adk.Tool):
    name = "publish"
    description = "Publish the release."
    parameters = {"type": "object", "properties": {}}
    require_confirmation = True

    def execute(self, args, ctx):
        return {"published": True}


@adk.tool
def lookup(city: str) -> dict:
    """Look a city up."""
    return {"city": city}


def paused_run(sessions, session_id="release"):
    script = [{"tool_calls": [{"name": "publish", "args": {}}]}, {"text": "published"}]
    runner = runner_for(sessions, "Releaser", adk.ScriptedProvider(script), tools=[Publish()])
    run_id = adk.runs.start(runner, "u", session_id, "Publish it.")
    outcome = adk.runs.wait(run_id, timeout=10)
    assert isinstance(outcome, adk.Paused)
    return run_id, outcome


# -- ids, one terminal, status -------------------------------------------------------------------


def test_a_run_has_a_uuid_id_one_terminal_and_its_output_once(sessions):
    runner = runner_for(sessions, "Echo")
    run_id = adk.runs.start(runner, "u", "s", "hello")
    assert re.fullmatch(
        r"run-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", run_id
    )
    outcome = adk.runs.wait(run_id, timeout=10)
    assert outcome == adk.Completed("echo: hello")
    items = drain(run_id)
    assert [type(item) for item in items] == [adk.runs.RunEvent] * 2 + [adk.runs.RunTerminal]
    assert [item.seq for item in items] == [1, 2, 3]
    finals = [item.event for item in items[:-1] if item.event.is_final]
    assert len(finals) == 1 and finals[0].text() == "echo: hello"
    assert items[-1].outcome == outcome
    events = sessions.get_session("app", "u", "s").events
    assert [item.event.id for item in items[:-1]] == [event.id for event in events]


def test_status_is_json_safe_and_has_no_pids(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi")
    adk.runs.wait(run_id, timeout=10)
    info = adk.runs.status(run_id)
    assert msgspec.json.decode(msgspec.json.encode(info)) == info
    assert info["run_id"] == run_id and info["state"] == "completed"
    assert info["parent_run_id"] is None and info["resumed_to"] is None
    assert info["subscribers"] == 0 and info["latest_sequence"] == 2
    assert info["terminal_sequence"] == 3
    assert info["outcome"] == {"type": "completed", "output": "echo: hi"}
    assert "<0." not in repr(info)


def test_a_failed_invocation_is_a_failed_run(sessions):
    runner = runner_for(sessions, "Broken", adk.ScriptedProvider([{"error": "unavailable"}]))
    run_id = adk.runs.start(runner, "u", "s", "hi")
    outcome = adk.runs.wait(run_id, timeout=10)
    assert isinstance(outcome, adk.Failed)
    assert drain(run_id)[-1].outcome == outcome
    assert adk.runs.status(run_id)["state"] == "failed"


def test_a_stopped_agent_fails_the_run_before_anything_is_stored(sessions):
    runner = runner_for(sessions, "Gone")
    adk.stop_agent("Gone")
    run_id = adk.runs.start(runner, "u", "s", "hi")
    assert adk.runs.wait(run_id, timeout=10) == adk.Failed("noproc")
    assert [type(item) for item in drain(run_id)] == [adk.runs.RunTerminal]


def test_unknown_runs_and_invalid_options(sessions):
    assert refused(lambda: adk.runs.status("run-nope")).reason == "not_found"
    assert refused(lambda: adk.runs.wait("run-nope", 1)).reason == "not_found"
    assert refused(lambda: adk.runs.subscribe("run-nope")).reason == "not_found"
    assert refused(lambda: adk.runs.cancel("run-nope")).reason == "not_found"
    assert refused(lambda: adk.runs.resume("run-nope", {})).reason == "not_found"
    runner = runner_for(sessions, "Echo")
    for options, reason in (
        ({"retention": 0}, "invalid_retention"),
        ({"retention": float("inf")}, "invalid_retention"),
        ({"max_buffered_events": 0}, "invalid_max_buffered_events"),
        ({"max_buffered_events": 70_000}, "invalid_max_buffered_events"),
        ({"run_id": ""}, "invalid_run_id"),
        ({"run_id": "has space"}, "invalid_run_id"),
    ):
        assert (
            refused(lambda o=options: adk.runs.start(runner, "u", "s", "x", **o)).reason == reason
        )
    assert adk.runs.stats()["actors"] == 0


def test_wait_times_out_without_ending_the_run(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Slow", slow()), "u", "s", "hi")
    error = refused(lambda: adk.runs.wait(run_id, timeout=0.05))
    assert error.reason == "timeout" and isinstance(error, TimeoutError)
    assert adk.runs.wait(run_id, timeout=10) == adk.Completed("done")
    assert asyncio.run(adk.runs.wait_async(run_id, timeout=10)) == adk.Completed("done")


# -- subscriptions -------------------------------------------------------------------------------


def test_late_push_subscriber_gets_the_replay_then_the_same_terminal_as_wait(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hello")
    outcome = adk.runs.wait(run_id, timeout=10)
    items = drain(run_id)
    assert [item.seq for item in items] == [1, 2, 3]
    assert items[0].event.author == "user" and items[1].event.is_final
    assert items[2] == adk.runs.RunTerminal(3, outcome)
    assert drain(run_id, after=1)[0].seq == 2  # resuming from a cursor


def test_live_push_subscriber_sees_every_event_then_the_terminal(sessions):
    runner = runner_for(
        sessions,
        "Tooler",
        adk.ScriptedProvider(
            [
                {"tool_calls": [{"name": "lookup", "args": {"city": "Oslo"}}], "delay": 0.2},
                {"text": "Oslo it is"},
            ]
        ),
        tools=[lookup],
    )
    run_id = adk.runs.start(runner, "u", "s", "where?")
    items = drain(run_id)
    assert [item.seq for item in items] == [1, 2, 3, 4, 5]
    assert items[-1].outcome == adk.Completed("Oslo it is") == adk.runs.wait(run_id, 10)
    assert current_process().pending() == 0  # items went to the subscription, not our mailbox


def test_async_for_does_not_block_the_event_loop(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Slow", slow(delay=0.3)), "u", "s", "hi")
    order = []

    async def consume():
        async for item in adk.runs.subscribe(run_id):
            order.append(type(item).__name__)
        order.append("drained")

    async def tick():
        await asyncio.sleep(0.01)
        order.append("tick")

    async def main():
        await asyncio.gather(consume(), tick())

    asyncio.run(main())
    assert order.index("tick") < order.index("RunTerminal")
    assert order.count("RunEvent") == 2 and order[-1] == "drained"


def test_credit_window_of_one_releases_exactly_one_item_per_ack(sessions):
    runner = runner_for(sessions, "Slow", slow(delay=0.5))
    run_id = adk.runs.start(runner, "u", "s", "hi", max_buffered_events=1)
    sub = adk.runs.subscribe_credit(run_id, after=0)
    first = sub.next(timeout=5)
    assert first.seq == 1 and first.event.author == "user"
    outcome = adk.runs.wait(run_id, timeout=10)
    with pytest.raises(adk.runs.RunTimeout):  # nothing more while 1 is unacknowledged
        sub.next(timeout=0.2)
    sub.ack(1)
    second = sub.next(timeout=5)
    assert second.seq == 2 and second.event.is_final
    with pytest.raises(adk.runs.RunTimeout):
        sub.next(timeout=0.2)
    sub.ack(2)
    assert sub.next(timeout=5) == adk.runs.RunTerminal(3, outcome)  # needs no ack
    assert sub.closed


def test_replay_gap_on_subscribe_installs_nothing(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi", max_buffered_events=1)
    adk.runs.wait(run_id, timeout=10)
    for subscribe in (adk.runs.subscribe, adk.runs.subscribe_credit):
        error = refused(lambda s=subscribe: s(run_id, after=0))
        assert error.reason == "replay_gap"
        assert error.gap == {
            "after_sequence": 0,
            "oldest_available_sequence": 2,
            "latest_sequence": 2,
            "terminal": True,
        }
        assert adk.runs.status(run_id)["subscribers"] == 0
    assert [item.seq for item in drain(run_id, after=1)] == [2, 3]


def test_replay_gap_on_ack_keeps_the_subscriber(sessions):
    script = [
        {"tool_calls": [{"name": "lookup", "args": {"city": "Oslo"}}], "delay": 0.5},
        {"text": "Oslo"},
    ]
    runner = runner_for(sessions, "Tooler", adk.ScriptedProvider(script), tools=[lookup])
    run_id = adk.runs.start(runner, "u", "s", "where?", max_buffered_events=1)
    sub = adk.runs.subscribe_credit(run_id)
    assert sub.next(timeout=5).seq == 1
    adk.runs.wait(run_id, timeout=10)  # 2 and 3 were evicted meanwhile
    error = refused(lambda: sub.ack(1))
    assert error.reason == "replay_gap" and error.gap["after_sequence"] == 1
    assert error.gap["oldest_available_sequence"] == 4
    assert adk.runs.status(run_id)["subscribers"] == 1
    sub.close()
    wait_until(lambda: adk.runs.status(run_id)["subscribers"] == 0)


def test_credit_errors(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi")
    adk.runs.wait(run_id, timeout=10)
    sub = adk.runs.subscribe_credit(run_id)
    assert sub.next(timeout=5).seq == 1
    assert refused(lambda: sub.ack(2)).reason == "invalid_credit_ack"  # not delivered yet
    sub.ack(1)
    sub.ack(1)  # repeating the last ack is harmless
    assert sub.next(timeout=5).seq == 2
    assert refused(lambda: sub.ack(0)).reason == "invalid_credit_ack"  # already acked
    running = adk.runs.start(runner_for(sessions, "Slow", slow()), "u", "t", "hi")
    push = adk.runs.subscribe(running)  # still subscribed: its terminal has not come yet
    assert push.next(timeout=5).seq == 1
    assert refused(lambda: push.ack(1)).reason == "not_credit_subscriber"
    push.close()
    stranger = adk.runs.subscribe_credit(run_id)
    stranger.close()
    assert refused(lambda: stranger.ack(1)).reason == "not_subscribed"
    assert refused(lambda: adk.runs.subscribe(run_id, after=4)).reason == "cursor_ahead"
    assert refused(lambda: adk.runs.subscribe_credit(run_id, after=99)).reason == "cursor_ahead"
    sub.close()


def test_a_dead_subscriber_is_removed(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Slow", slow(delay=2)), "u", "s", "hi")
    kept = []

    def subscriber():
        sub = adk.runs.subscribe(run_id)
        kept.append(sub)  # still referenced: only its owner's exit removes it
        assert sub.next(timeout=5).seq == 1

    in_thread(subscriber)
    wait_until(lambda: adk.runs.status(run_id)["subscribers"] == 0)
    mine = adk.runs.subscribe(run_id)
    assert adk.runs.status(run_id)["subscribers"] == 1
    adk.runs.cancel(run_id)
    assert isinstance(list(mine)[-1].outcome, adk.Cancelled)
    assert adk.runs.status(run_id)["subscribers"] == 0


def test_async_credit_subscription(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi")

    async def consume():
        sub = adk.runs.subscribe_credit(run_id)
        seen = []
        while True:
            item = await sub.anext(timeout=5)
            seen.append(item)
            if isinstance(item, adk.runs.RunTerminal):
                return seen
            sub.ack(item.seq)

    seen = asyncio.run(consume())
    assert [item.seq for item in seen] == [1, 2, 3]
    assert seen[-1].outcome == adk.runs.wait(run_id, timeout=5)


def run_stream(run_id):
    """The run's credit stream, started as for a first subscriber if it was not (a run
    nobody subscribed to has none: see test_s29_lazy_run_stream.py)."""
    stream = adk.runs.api._stream(run_id)
    assert sv.whereis(stream_name(run_id)) == stream
    return stream


async def ticks_while_pending(task, seconds=0.3):
    """How often a coroutine beside `task` ran in `seconds`; `task` must still wait."""
    loop = asyncio.get_running_loop()
    ticks, deadline = 0, loop.time() + seconds
    while loop.time() < deadline:
        ticks += 1
        await asyncio.sleep(0.01)
    assert not task.done()
    return ticks


def subscription_inboxes():
    return len([p for p in live_processes() if p.label == "run subscription"])


def test_async_credit_subscribe_and_ack_never_block_the_event_loop(sessions):
    """Subscribe and every ack are awaited while the run's stream is held busy: the
    loop keeps running meanwhile, and no thread is used for them."""
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi")
    outcome = adk.runs.wait(run_id, timeout=10)
    stream = run_stream(run_id)

    async def consume():
        with Busy(stream):
            pending = asyncio.ensure_future(adk.runs.subscribe_credit_async(run_id, after=0))
            assert await ticks_while_pending(pending) >= 10
        sub = await pending
        seen = [await sub.anext(timeout=5)]
        while not isinstance(seen[-1], adk.runs.RunTerminal):
            with Busy(stream):
                pending = asyncio.ensure_future(sub.ack_async(seen[-1].seq))
                assert await ticks_while_pending(pending) >= 10
            await pending
            seen.append(await sub.anext(timeout=5))
        return sub, seen

    sub, seen = asyncio.run(consume())
    assert [item.seq for item in seen] == [1, 2, 3]
    assert seen[-1].outcome == outcome and sub.closed
    assert adk.runs.status(run_id)["subscribers"] == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("runs-control")]


def test_an_async_subscribe_or_ack_the_stream_does_not_answer_is_unavailable(sessions, monkeypatch):
    monkeypatch.setattr(adk.runs.subscription, "ROUND_TRIP_TIMEOUT", 0.1)
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi")
    adk.runs.wait(run_id, timeout=10)
    stream = run_stream(run_id)
    inboxes = subscription_inboxes()

    async def main():
        with Busy(stream), pytest.raises(adk.runs.RunError) as subscribing:
            await adk.runs.subscribe_credit_async(run_id)
        assert subscribing.value.reason == "unavailable"
        sub = await adk.runs.subscribe_credit_async(run_id)
        first = await sub.anext(timeout=5)
        with Busy(stream), pytest.raises(adk.runs.RunError) as acking:
            await sub.ack_async(first.seq)
        assert acking.value.reason == "unavailable"
        sub.close()

    asyncio.run(main())
    wait_until(lambda: adk.runs.status(run_id)["subscribers"] == 0)
    wait_until(lambda: subscription_inboxes() == inboxes)


def test_async_credit_subscribe_refusals_leave_nothing_subscribed(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi", max_buffered_events=1)
    adk.runs.wait(run_id, timeout=10)
    subscribe = adk.runs.api.subscribe_credit_async
    inboxes = subscription_inboxes()
    gap = refused(lambda: asyncio.run(subscribe(run_id, after=0)))
    assert gap.reason == "replay_gap" and gap.gap["oldest_available_sequence"] == 2
    assert refused(lambda: asyncio.run(subscribe(run_id, after=9))).reason == "cursor_ahead"
    assert refused(lambda: asyncio.run(subscribe("run-nope"))).reason == "not_found"
    assert adk.runs.status(run_id)["subscribers"] == 0
    assert subscription_inboxes() == inboxes


def test_a_cancelled_async_subscribe_leaves_nothing_subscribed(sessions):
    """The stream gets to the subscribe only after its awaiting task was cancelled:
    the inbox it names is closed by then, and the request is withdrawn."""
    run_id = adk.runs.start(runner_for(sessions, "Slow", slow(delay=5)), "u", "s", "hi")
    stream = run_stream(run_id)
    inboxes = subscription_inboxes()

    async def cancel_while_subscribing():
        with Busy(stream):
            task = asyncio.ensure_future(adk.runs.subscribe_credit_async(run_id))
            await asyncio.sleep(0.05)  # the request waits in the stream's mailbox
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(cancel_while_subscribing())
    assert adk.runs.status(run_id)["subscribers"] == 0  # asked after the subscribe
    wait_until(lambda: subscription_inboxes() == inboxes)
    adk.runs.cancel(run_id)


def test_a_subscription_ends_with_not_found_when_its_run_goes_away(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi", retention=0.2)
    sub = adk.runs.subscribe_credit(run_id)
    assert sub.next(timeout=5).seq == 1  # never acknowledged: the terminal never comes
    wait_until(lambda: gone(run_id))
    assert refused(lambda: sub.next(timeout=5)).reason == "not_found"
    assert sub.closed


def test_many_waiters_get_the_same_outcome_and_quitters_are_forgotten(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Slow", slow(delay=0.3)), "u", "s", "hi")
    for _ in range(5):
        with pytest.raises(adk.runs.RunTimeout):
            adk.runs.wait(run_id, timeout=0.01)
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(adk.runs.wait(run_id, timeout=10)))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [adk.Completed("done")] * 8


# -- lifetime: starter, cancel, retention --------------------------------------------------------


def test_the_starter_exiting_does_not_stop_the_run(sessions):
    runner = runner_for(sessions, "Slow", slow(delay=0.3))
    run_id = in_thread(lambda: adk.runs.start(runner, "u", "s", "hi"))
    assert adk.runs.wait(run_id, timeout=10) == adk.Completed("done")

    started = []

    def starter():
        started.append(
            adk.runs.start(runner_for(sessions, "Slow2", slow(delay=0.3)), "u", "t", "x")
        )
        threading.Event().wait(10)

    task = sv_task(starter)
    wait_until(lambda: started)
    task.kill()
    assert adk.runs.wait(started[0], timeout=10) == adk.Completed("done")


def sv_task(fn):
    from supervision.tasks import Task

    return Task.start(fn)


def test_cancel_while_blocked(sessions):
    baseline_turns = default_task_supervisor().count()
    runner = runner_for(sessions, "Stuck", adk.ScriptedProvider([{"text": "late", "delay": 3}]))
    run_id = adk.runs.start(runner, "u", "s", "hi")
    sub = adk.runs.subscribe(run_id)
    assert sub.next(timeout=5).seq == 1  # the user event: the invocation is under way
    assert default_task_supervisor().count() == baseline_turns + 1  # its turn
    adk.runs.cancel(run_id, reason="user_cancel")
    adk.runs.cancel(run_id, reason="second")  # still running: accepted, the first reason wins
    outcome = adk.runs.wait(run_id, timeout=10)
    assert outcome == adk.Cancelled("user_cancel")
    cancelled = sub.next(timeout=5)  # the stream carries every stored event, the end too
    assert cancelled.seq == 2 and cancelled.event.error.reason == "user_cancel"
    assert sub.next(timeout=5) == adk.runs.RunTerminal(3, outcome)
    assert adk.runs.status(run_id)["state"] == "cancelled"
    assert refused(lambda: adk.runs.cancel(run_id)).reason == "already_terminal"
    wait_until(lambda: default_task_supervisor().count() <= baseline_turns)  # its turn died
    events = sessions.get_session("app", "u", "s").events
    assert [event.author for event in events] == ["user", "Stuck"]
    assert events[1].error.reason == "user_cancel"
    assert events[1].invocation_id == events[0].invocation_id


def test_cancel_reason_must_be_json_safe(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Slow", slow(delay=0.2)), "u", "s", "hi")
    assert (
        refused(lambda: adk.runs.cancel(run_id, reason=object())).reason == "invalid_cancel_reason"
    )
    assert adk.runs.wait(run_id, timeout=10) == adk.Completed("done")


def test_retention_expiry_makes_the_run_not_found(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi", retention=0.2)
    adk.runs.wait(run_id, timeout=10)
    assert adk.runs.status(run_id)["state"] == "completed"
    wait_until(lambda: gone(run_id))
    assert refused(lambda: adk.runs.wait(run_id, 1)).reason == "not_found"
    assert refused(lambda: adk.runs.subscribe(run_id)).reason == "not_found"
    wait_until(lambda: adk.runs.stats()["actors"] == 0)


def test_at_most_100_terminal_runs_are_retained_oldest_first(sessions):
    runner = runner_for(sessions, "Echo")
    ids = []
    for n in range(101):  # one after another: they end in this order
        ids.append(adk.runs.start(runner, "u", f"s{n}", "hi"))
        adk.runs.wait(ids[-1], timeout=10)
    wait_until(lambda: adk.runs.stats()["retained"] == 100)
    assert refused(lambda: adk.runs.status(ids[0])).reason == "not_found"
    assert adk.runs.status(ids[1])["state"] == "completed"
    wait_until(lambda: adk.runs.stats()["actors"] == 100)


def test_runs_do_not_outlive_the_registry(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Stuck", slow(delay=3)), "u", "s", "hi")
    registry = sv.whereis("adk.run_registry")
    sv.exit(registry, "kill")  # rest_for_one: the run supervisor and its runs go too
    wait_until(lambda: gone(run_id))
    wait_until(lambda: sv.whereis("adk.run_registry") not in (None, registry))
    wait_until(lambda: sv.whereis(RUN_SUPERVISOR) is not None)
    assert adk.runs.stats()["actors"] == 0
    fresh = adk.runs.start(runner_for(sessions, "Echo"), "u", "t", "hi")
    assert adk.runs.wait(fresh, timeout=10) == adk.Completed("echo: hi")


# -- resume --------------------------------------------------------------------------------------


def test_resume_of_a_paused_run(sessions):
    run_id, paused = paused_run(sessions)
    assert paused.event.actions.pause is not None
    assert adk.runs.status(run_id)["state"] == "paused"
    new_id = adk.runs.resume(run_id, {"confirmed": True})
    assert new_id != run_id and new_id.startswith("run-")
    assert adk.runs.wait(new_id, timeout=10) == adk.Completed("published")
    assert adk.runs.status(run_id)["resumed_to"] == new_id
    assert adk.runs.status(new_id)["parent_run_id"] == run_id
    assert adk.runs.status(run_id)["state"] == "paused"  # otherwise unchanged
    assert adk.runs.wait(run_id, timeout=1) == paused
    assert drain(run_id)[-1].outcome == paused
    error = refused(lambda: adk.runs.resume(run_id, {"confirmed": True}))
    assert error.reason == "already_resumed" and error.run_id == new_id


def test_resume_of_a_run_that_is_not_paused(sessions):
    done = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi")
    adk.runs.wait(done, timeout=10)
    assert refused(lambda: adk.runs.resume(done, {"confirmed": True})).reason == "run_not_paused"
    running = adk.runs.start(runner_for(sessions, "Slow", slow()), "u", "t", "hi")
    assert refused(lambda: adk.runs.resume(running, {"confirmed": True})).reason == "run_not_paused"
    adk.runs.wait(running, timeout=10)


def test_an_invalid_resume_response_is_rejected_before_anything_is_linked(sessions):
    run_id, _ = paused_run(sessions)
    before = adk.runs.stats()
    for response in ({"confirmed": "maybe"}, {}, "yes"):
        error = refused(lambda r=response: adk.runs.resume(run_id, r))
        assert error.reason == "invalid_tool_confirmation_response"
    assert adk.runs.status(run_id)["resumed_to"] is None
    assert adk.runs.stats() == before
    new_id = adk.runs.resume(run_id, {"confirmed": True})
    assert adk.runs.wait(new_id, timeout=10) == adk.Completed("published")


def test_a_declined_confirmation_resumes_too(sessions):
    run_id, _ = paused_run(sessions)
    new_id = adk.runs.resume(run_id, {"confirmed": False})
    assert isinstance(adk.runs.wait(new_id, timeout=10), adk.Completed | adk.Paused)
    assert adk.runs.status(new_id)["parent_run_id"] == run_id


# -- ids and handoffs ----------------------------------------------------------------------------


def test_a_duplicate_run_id_is_refused_and_leaves_nothing_behind(sessions):
    runner = runner_for(sessions, "Slow", slow(delay=0.3))
    assert adk.runs.start(runner, "u", "s", "hi", run_id="run-fixed") == "run-fixed"
    before, processes = adk.runs.stats(), run_processes()
    assert len(processes) == 1  # the run actor (nobody subscribed: no stream yet)
    error = refused(lambda: adk.runs.start(runner, "u", "other", "hi", run_id="run-fixed"))
    assert error.reason == "already_exists"
    assert adk.runs.stats() == before and before["pending_handoffs"] == 0
    assert run_processes() == processes
    assert adk.runs.wait("run-fixed", timeout=10) == adk.Completed("done")
    with pytest.raises(adk.AdkError):
        sessions.get_session("app", "u", "other")  # the refused run never ran
    assert (
        refused(  # still taken while the first run is retained
            lambda: adk.runs.start(runner, "u", "other", "hi", run_id="run-fixed")
        ).reason
        == "already_exists"
    )


def test_handoffs_are_one_shot(sessions):
    table = Handoffs()
    request = InvocationRequest(None, "u", "s", "inv-x", "token", Fresh(adk.content.new(["hi"])))
    ref = table.put(request)
    assert table.take(ref) is request
    assert refused(lambda: table.take(ref)).reason == "handoff_taken"
    assert table.pending() == 0
    spec = sv.ChildSpec(ref, lambda: InvocationServer.start_link(ref), restart="temporary")
    with pytest.raises(sv.SupervisorError) as info:  # a server started on a spent handoff
        sv.DynamicSupervisor.start_child(RUN_SUPERVISOR, spec)
    assert info.value.reason == ("shutdown", "handoff_taken")
    assert adk.runs.stats()["actors"] == 0


def test_runs_sit_after_the_task_supervisor_in_the_root_tree():
    ids = [child.id for child in sv.Supervisor.which_children("adk.app")]
    assert ids.index("task_supervisor") < ids.index("run_registry") < ids.index("run_supervisor")


def test_a_killed_run_actor_still_has_exactly_one_outcome(sessions):
    from adk_actors.runner.request import run_name

    runner = runner_for(sessions, "Doomed", slow(delay=5.0))
    sessions.create_session("app", "u", "doomed")
    run_id = adk.runs.start(runner, "u", "doomed", "hi")
    wait_until(lambda: len(sessions.get_session("app", "u", "doomed").events) == 1)  # opened
    sv.exit(sv.whereis(run_name(run_id)), "kill")
    outcome = adk.runs.wait(run_id, timeout=5)
    # the registry starts watching a run from a cast; killed before it did, its monitor
    # can only say noproc (as OTP's would)
    assert outcome in (
        adk.Failed(("run_actor_exit", "killed")),
        adk.Failed(("run_actor_exit", "noproc")),
    )
    assert adk.runs.wait(run_id, timeout=5) == outcome  # the same, every time
    assert adk.runs.status(run_id)["state"] == "failed"
    assert refused(lambda: adk.runs.cancel(run_id)).reason == "already_terminal"
    wait_until(lambda: sessions.get_session("app", "u", "doomed").events[-1].error is not None)
    last = sessions.get_session("app", "u", "doomed").events[-1]
    assert last.error.reason == outcome.reason  # the session is closed too, the same way


def test_a_resume_refused_by_admission_can_be_resumed_again(sessions):
    from adk_actors import admission

    controller = admission.start_link({"global_limit": 1})
    script = [{"tool_calls": [{"name": "publish", "args": {}}]}, {"text": "published"}]
    runner = runner_for(
        sessions,
        "Gated",
        adk.ScriptedProvider(script),
        tools=[Publish()],
        admission_control={"server": controller},
    )
    parent = adk.runs.start(runner, "u", "gated", "Publish it.")
    assert isinstance(adk.runs.wait(parent, timeout=10), adk.Paused)
    held = admission.acquire("Gated", server=controller)
    refused_child = adk.runs.resume(parent, {"confirmed": True})
    outcome = adk.runs.wait(refused_child, timeout=10)
    assert outcome == adk.Failed(("admission_failed", "concurrency_limit_reached"))
    held.release()
    child = adk.runs.resume(parent, {"confirmed": True})  # the pause was never claimed
    assert adk.runs.wait(child, timeout=10) == adk.Completed("published")
    assert adk.runs.status(parent)["resumed_to"] == child
    assert refused(lambda: adk.runs.resume(parent, {"confirmed": True})).reason == (
        "already_resumed"
    )


# -- runs that wait for people --------------------------------------------------------------------


def test_a_paused_run_resumes_after_its_retention_and_does_not_count_as_retained(sessions):
    script = [{"tool_calls": [{"name": "publish", "args": {}}]}, {"text": "published"}]
    runner = runner_for(sessions, "Patient", adk.ScriptedProvider(script), tools=[Publish()])
    run_id = adk.runs.start(runner, "u", "patient", "Publish it.", retention=0.2)
    assert isinstance(adk.runs.wait(run_id, timeout=10), adk.Paused)
    wait_until(lambda: gone(run_id))  # its retention is over: not in memory any more
    assert refused(lambda: adk.runs.resume(run_id, {"confirmed": True})).reason == "not_found"
    (waiting,) = adk.runs.pending(runner, "u")  # the sessions still know it
    assert waiting["run_id"] == run_id and waiting["type"] == "tool_confirmation"
    assert waiting["session_id"] == "patient" and waiting["tool_name"] == "publish"
    resumed = adk.runs.resume(run_id, {"confirmed": True}, runner=runner, user_id="u")
    assert adk.runs.wait(resumed, timeout=10) == adk.Completed("published")
    assert adk.runs.status(resumed)["parent_run_id"] == run_id
    assert adk.runs.pending(runner, "u") == []
    again = refused(
        lambda: adk.runs.resume(run_id, {"confirmed": True}, runner=runner, user_id="u")
    )
    assert again.reason == "not_found"  # the pause was claimed once


def test_paused_runs_are_never_evicted_by_ended_ones(sessions):
    run_id, _ = paused_run(sessions)
    quick = runner_for(sessions, "Quick")
    for n in range(MAX_RETAINED_TERMINAL_RUNS + 5):
        adk.runs.wait(adk.runs.start(quick, "u", f"q{n}", "hi"), timeout=10)
    assert isinstance(adk.runs.wait(run_id, timeout=5), adk.Paused)  # still in memory
    assert adk.runs.stats()["retained"] == MAX_RETAINED_TERMINAL_RUNS + 1


def test_runs_list_filters_and_pages(sessions):
    paused_id, _ = paused_run(sessions, session_id="p")
    echoing = runner_for(sessions, "Lister")
    done = [adk.runs.start(echoing, "u", f"l{n}", f"m{n}") for n in range(5)]
    for run_id in done:
        adk.runs.wait(run_id, timeout=10)
    waiting = adk.runs.list(state="paused")
    assert [view["run_id"] for view in waiting["runs"]] == [paused_id]
    assert waiting["runs"][0]["agent"] == "Releaser" and waiting["next_cursor"] is None
    first = adk.runs.list(agent="Lister", limit=2)
    second = adk.runs.list(agent="Lister", limit=2, cursor=first["next_cursor"])
    third = adk.runs.list(agent="Lister", limit=2, cursor=second["next_cursor"])
    listed = [v["run_id"] for page in (first, second, third) for v in page["runs"]]
    assert sorted(listed) == sorted(done) and third["next_cursor"] is None
    assert adk.runs.list(session_id="l3")["runs"][0]["run_id"] == done[3]
    assert refused(lambda: adk.runs.list(limit=0)).reason == "invalid_limit"
    assert refused(lambda: adk.runs.list(cursor="nope")).reason == "invalid_cursor"
