"""Review of 3142f62 (a run's credit stream started for its first subscriber), findings
1, 2, 3, 5 and 6 (/tmp/s29/REVIEW_STREAM.md): each test names the finding it follows.

A server is held busy the way `test_runs.Busy` does it (a `replace_state` whose
function waits), or in a session write (a held session lock); every read of a
subscription has a timeout, so a broken handover fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.a2a.task_runs import RunEnded, RunLedger, RunPlan, RunStarted, follow_run
from adk_actors.runner.messages import OpenStream, RunStatus
from adk_actors.runner.request import stream_name
from supervision.process import live_processes, resolve
from tests.adk_actors.run_stream_helpers import (
    Busy,
    assert_replay_gap,
    lookup,
    one_tool_round,
    run_stream,
    runner_for,
    server_of,
)
from tests.helpers import wait_until


def tool_then_answer(history, tools):
    """`one_tool_round` for any number of runs: a tool call, then the answer."""
    if len(history) == 1:  # a fresh session: the user message alone
        return {"tool_calls": [{"name": "lookup", "args": {"city": "Paris"}}]}
    return {"text": "done"}


def read_all(subscription, timeout=5.0):
    """Every item to the terminal, each read with a timeout (a lost terminal fails)."""
    items = [subscription.next(timeout=timeout)]
    while not isinstance(items[-1], adk.runs.RunTerminal):
        if isinstance(subscription, adk.runs.CreditSubscription):
            subscription.ack(items[-1].seq)
        items.append(subscription.next(timeout=timeout))
    return items


def subscription_inboxes():
    return len([p for p in live_processes() if p.label == "run subscription"])


def session_event_ids(sessions, session_id):
    return [event.id for event in sessions.get_session("app", "u", session_id).events]


class SessionHeld:
    """Holds a session's lock on a thread of its own (the run's server then blocks in
    its next read or write of that session) until released."""

    def __init__(self, sessions, session_id="s"):
        self.held, self.released = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._hold, args=(sessions, session_id))

    def _hold(self, sessions, session_id):
        with sessions.lock("app", "u", session_id):
            self.held.set()
            self.released.wait(20)

    def __enter__(self):
        self.thread.start()
        assert self.held.wait(5)
        return self

    def __exit__(self, *exc_info):
        self.released.set()
        self.thread.join(5)


# -- finding 1: the first subscribe waits on a server that may be busy ---------------------


def test_a_first_subscribe_to_a_busy_server_is_unavailable_never_a_raw_timeout(
    sessions, monkeypatch
):
    """Finding 1 (b): the blocking forms raised the kernel's `CallTimeout`."""
    monkeypatch.setattr(adk.runs.subscription, "ROUND_TRIP_TIMEOUT", 0.2)
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi")
    outcome = adk.runs.wait(run_id, timeout=10)
    inboxes = subscription_inboxes()
    with Busy(server_of(run_id)):
        for subscribe in (adk.runs.subscribe, adk.runs.subscribe_credit):
            with pytest.raises(adk.runs.RunError) as busy:
                subscribe(run_id)
            assert busy.value.reason == "unavailable"
    assert subscription_inboxes() == inboxes  # nothing was made, nothing stays subscribed
    items = read_all(adk.runs.subscribe_credit(run_id))  # the server answers again
    assert [item.seq for item in items] == [1, 2, 3] and items[-1].outcome == outcome


def test_an_async_first_subscribe_waits_for_a_busy_server_and_the_loop_keeps_running(sessions):
    """Finding 6: the loop is measured (a ticker beside the pending subscribe), while
    the run's server, which the first subscribe asks for the stream, is held busy."""
    runner = runner_for(sessions, "Tooler", one_tool_round(), tools=[lookup])
    run_id = adk.runs.start(runner, "u", "s", "where?")
    outcome = adk.runs.wait(run_id, timeout=10)
    assert run_stream(run_id) is None

    async def ticks_while_pending(task, seconds=0.3):
        loop = asyncio.get_running_loop()
        ticks, deadline = 0, loop.time() + seconds
        while loop.time() < deadline:
            ticks += 1
            await asyncio.sleep(0.01)
        assert not task.done()  # still waiting for the server
        return ticks

    async def follow():
        with Busy(server_of(run_id)):
            pending = asyncio.ensure_future(adk.runs.subscribe_credit_async(run_id))
            assert await ticks_while_pending(pending) >= 10
        subscription = await asyncio.wait_for(pending, 5)
        seen = [await subscription.anext(timeout=5)]
        while not isinstance(seen[-1], adk.runs.RunTerminal):
            await subscription.ack_async(seen[-1].seq)
            seen.append(await subscription.anext(timeout=5))
        return subscription, seen

    subscription, seen = asyncio.run(follow())
    assert subscription._stream == run_stream(run_id)  # the one the server started
    assert [item.seq for item in seen] == [1, 2, 3, 4, 5] and seen[-1].outcome == outcome


def test_the_a2a_bridge_follows_a_run_whose_server_is_busy_to_its_outcome(sessions, monkeypatch):
    """Finding 1 (c): the bridge reported ``Failed(("run_lost", "unavailable"))`` (its
    task FAILED) while the run went on and completed. It now waits for the outcome, so
    its run never starts a stream either."""
    monkeypatch.setattr(adk.runs.subscription, "ROUND_TRIP_TIMEOUT", 0.2)
    runner = runner_for(sessions, "Echo")
    ledger = RunLedger()
    epoch, _ = ledger.open_epoch()
    started: list[str] = []

    def start():
        run_id = adk.runs.start(runner, "u", "s", "hi")
        started.append(run_id)
        return run_id

    plan = RunPlan(sv.self_pid(), "task-1", 1, start, time.monotonic() + 30, ledger, epoch)
    with SessionHeld(sessions) as held:  # the server blocks in its opening session work
        release = threading.Timer(1.5, held.released.set)  # longer than any old bound
        release.start()
        asyncio.run(asyncio.wait_for(follow_run(plan), 20))
        release.join()
    run_id = started[0]
    assert sv.receive(timeout=5) == RunStarted("task-1", 1, run_id)
    ended = sv.receive(timeout=5)
    assert isinstance(ended, RunEnded) and ended.run_id == run_id
    assert ended.outcome == adk.Completed("echo: hi") == adk.runs.wait(run_id, timeout=5)
    assert run_stream(run_id) is None  # waited for, never subscribed to
    assert list(ledger.open_epoch()[1]) == [run_id]  # the store's to release, as before


# -- finding 2: the stream's name only after the backlog and the terminal ------------------


def test_concurrent_first_subscribers_inside_the_window_each_get_exactly_the_tail(sessions):
    """Finding 2 (the reviewer's order_probe): a name registered before the backlog and
    the terminal are handed over makes a subscriber that finds it ``cursor_ahead``."""
    provider = adk.ScriptedProvider(fn=tool_then_answer)
    runner = runner_for(sessions, "Tooler", provider, tools=[lookup])
    bad: list[object] = []
    lock = threading.Lock()
    for n in range(10):
        run_id = adk.runs.start(runner, "u", f"s{n}", "where?")
        adk.runs.wait(run_id, timeout=10)
        assert run_stream(run_id) is None
        barrier = threading.Barrier(8)

        def follow(run_id=run_id, barrier=barrier):
            barrier.wait(5)
            try:
                seqs = [item.seq for item in read_all(adk.runs.subscribe(run_id, after=2))]
            except adk.AdkError as error:
                seqs = [error.reason]
            if seqs != [3, 4, 5]:
                with lock:
                    bad.append(seqs)

        threads = [threading.Thread(target=follow) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    assert bad == []


# -- finding 3: a reused run id never reaches an earlier run's stream ----------------------


def test_a_run_id_whose_stream_name_is_still_held_is_refused_as_before(sessions):
    """Finding 3: the new run was started, and its subscribers were handed the stream
    still registered under its name (another run's items). It is refused, as it was
    when the stream started with the server, and nothing of it is left."""
    run_id = "run-reused"
    earlier = sv.CreditStream.start_link(name=stream_name(run_id))
    sv.CreditStream.publish(earlier, "an earlier run's item")
    runner = runner_for(sessions, "Echo")
    with pytest.raises(adk.runs.RunError) as refused:
        adk.runs.start(runner, "u", "s", "hi", run_id=run_id)
    assert refused.value.reason == "already_exists"
    assert server_of(run_id) is None and run_stream(run_id) == earlier
    with pytest.raises(adk.AdkError) as no_session:  # nothing was started
        sessions.get_session("app", "u", "s")
    assert no_session.value.reason == "not_found"
    sv.CreditStream.close_async(earlier)
    wait_until(lambda: run_stream(run_id) is None, timeout=5)
    assert adk.runs.start(runner, "u", "s", "hi", run_id=run_id) == run_id
    items = read_all(adk.runs.subscribe(run_id))
    assert [item.event.id for item in items[:-1]] == session_event_ids(sessions, "s")


def test_after_its_retention_a_subscribed_run_leaves_no_stream_and_its_id_is_free(sessions):
    """Findings 3 and 6: the lazily started stream goes with its server (no process or
    name left, so a subscriber is ``not_found``), and the id can be used again at once
    without reaching the earlier run's stream."""
    run_id = "run-again"
    runner = runner_for(sessions, "Echo")
    adk.runs.start(runner, "u", "first", "one", run_id=run_id, retention=0.3)
    adk.runs.wait(run_id, timeout=10)
    subscription = adk.runs.subscribe(run_id)  # starts the stream (the lookup path)
    stream = run_stream(run_id)
    assert stream is not None and subscription._stream == stream
    assert [item.seq for item in read_all(subscription)] == [1, 2, 3]
    wait_until(lambda: server_of(run_id) is None, timeout=5)
    assert run_stream(run_id) is None  # its name went before its server did
    wait_until(lambda: stream._process is None or not stream._process.alive, timeout=5)
    for subscribe in (adk.runs.subscribe, adk.runs.subscribe_credit):
        with pytest.raises(adk.runs.RunError) as gone:
            subscribe(run_id)
        assert gone.value.reason == "not_found"
    adk.runs.start(runner, "u", "second", "two", run_id=run_id)
    items = read_all(adk.runs.subscribe(run_id))
    assert [item.event.id for item in items[:-1]] == session_event_ids(sessions, "second")
    assert items[-1].outcome == adk.Completed("echo: two")


# -- finding 5: a subscriber arriving while the server stops -------------------------------


def test_a_subscriber_arriving_while_a_stopped_run_records_its_end_reads_the_shutdown(sessions):
    """Finding 5: a run nobody subscribed to is stopped mid-flight (a shutdown exit, as
    `adk.stop()` sends) while its end's session write is held: a subscriber arriving
    meanwhile was ``not_found``; it now finds the stream by name and reads the end."""
    runner = runner_for(sessions, "Slow", adk.ScriptedProvider([{"text": "x", "delay": 10}]))
    run_id = adk.runs.start(runner, "u", "s", "hi")
    wait_until(lambda: adk.runs.status(run_id)["latest_sequence"] == 1, timeout=5)
    assert run_stream(run_id) is None
    with SessionHeld(sessions) as held:
        sv.exit(server_of(run_id), "shutdown")
        wait_until(lambda: run_stream(run_id) is not None, timeout=5)
        subscription = adk.runs.subscribe(run_id)
        first = subscription.next(timeout=5)
        assert first.seq == 1  # the backlog, handed over before the name
        held.released.set()
        items = [first, *read_all(subscription)]
    assert [item.seq for item in items] == [1, 2, 3]
    assert items[-1].outcome == adk.Failed("shutdown")
    assert items[1].event.id == session_event_ids(sessions, "s")[-1]  # the stored end


# -- finding 6: the cases the first tests did not reach -------------------------------------


def test_a_server_killed_while_a_first_subscribe_waits_on_it_is_not_found(sessions, monkeypatch):
    """Finding 6: the subscribe is in flight (an `OpenStream` queued behind a busy
    server) when the server is killed: `ProcessExit`, then ``not_found``, at once."""
    monkeypatch.setattr(adk.runs.subscription, "ROUND_TRIP_TIMEOUT", 60.0)
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi")
    adk.runs.wait(run_id, timeout=10)
    server = server_of(run_id)
    results: list[object] = []

    def subscribe():
        try:
            results.append(adk.runs.subscribe(run_id))
        except adk.AdkError as error:
            results.append(error.reason)

    with Busy(server):
        subscriber = threading.Thread(target=subscribe)
        subscriber.start()
        # In flight: its OpenStream is queued behind the busy server (finding 11).
        wait_until(lambda: resolve(server).mailbox_size() >= 1)
        assert subscriber.is_alive() and run_stream(run_id) is None  # waiting on the server
        sv.exit(server, "kill")
        subscriber.join(10)
    assert results == ["not_found"]
    outcome = adk.runs.wait(run_id, timeout=5)
    assert outcome == adk.Completed("echo: hi")  # it had ended: its outcome stays known


def test_an_event_past_the_window_right_at_the_terminal_starts_the_stream_that_evicts(sessions):
    """Finding 6: the event one past ``max_buffered_events`` is the final answer, stored
    in the same step as the terminal: the stream starts there, evicts item 1, ends."""
    runner = runner_for(sessions, "Tooler", one_tool_round(), tools=[lookup])
    run_id = adk.runs.start(runner, "u", "s", "where?", max_buffered_events=3)
    outcome = adk.runs.wait(run_id, timeout=10)
    assert run_stream(run_id) is not None  # started by the fourth event
    info = adk.runs.status(run_id)
    assert (info["oldest_available_sequence"], info["latest_sequence"]) == (2, 4)
    assert info["terminal_sequence"] == 5
    assert_replay_gap(run_id, oldest=2, latest=4, terminal=True)
    items = read_all(adk.runs.subscribe_credit(run_id, after=1))
    assert [item.seq for item in items] == [2, 3, 4, 5] and items[-1].outcome == outcome
    assert [item.event.id for item in items[:-1]] == session_event_ids(sessions, "s")[1:]


def test_a_plain_invocation_answers_run_requests_not_a_run(sessions):
    """Finding 6: `OpenStream` and `RunStatus` are a stable run's requests only."""
    runner = runner_for(sessions, "Slow", adk.ScriptedProvider([{"text": "x", "delay": 1}]))
    server = runner.start_invocation("u", "s", "hi")
    for request in (OpenStream(), RunStatus()):
        assert sv.call(server, request, 5) == ("error", "not_a_run")


def test_a_cancelled_wait_async_leaves_no_waiter_on_the_run(sessions):
    """Finding 1 (c): the A2A bridge now waits (`wait_async`); a bridge stopped by its
    store is cancelled at that await, and the run's server forgets the waiter then,
    not at the run's end."""
    runner = runner_for(sessions, "Slow", adk.ScriptedProvider([{"text": "x", "delay": 5}]))
    run_id = adk.runs.start(runner, "u", "s", "hi")

    async def cancelled_wait():
        waiting = asyncio.ensure_future(adk.runs.wait_async(run_id))
        await asyncio.sleep(0.1)
        assert sv.get_state(server_of(run_id)).waiters  # the bridge's wait, held
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(cancelled_wait())
    wait_until(lambda: not sv.get_state(server_of(run_id)).waiters, timeout=5)
    adk.runs.cancel(run_id)


def test_status_and_cancel_of_a_busy_server_are_unavailable_never_a_raw_timeout(
    sessions, monkeypatch
):
    """Session 29 note (Low, kept before): `adk.runs.status` and `cancel` on a server held
    busy past `ROUND_TRIP_TIMEOUT` raised the kernel's `CallTimeout` (the daemon answered
    500); they are ``unavailable`` (503 there), and answer again once it is free."""
    monkeypatch.setattr(adk.runs.subscription, "ROUND_TRIP_TIMEOUT", 0.2)
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi")
    adk.runs.wait(run_id, timeout=10)
    with Busy(server_of(run_id)):
        for ask in (adk.runs.status, adk.runs.cancel):
            with pytest.raises(adk.runs.RunError) as busy:
                ask(run_id)
            assert busy.value.reason == "unavailable"
    assert adk.runs.status(run_id)["state"] == "completed"
