"""A run's credit stream is started for its first subscriber (issue 20 §4, session 29).

A run that is only waited for never starts a second process; its server keeps what a
subscriber would be replayed (at most ``max_buffered_events``; one more starts the
stream, which evicts from then on) and answers the window itself. Whoever subscribes
first, mid-run or after the end, sees exactly what a stream started with the run
would show: the replay from any cursor, the live items in order, the terminal.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.runner.request import run_name
from supervision.process import live_processes
from tests.adk_actors.run_stream_helpers import (
    assert_replay_gap,
    lookup,
    one_tool_round,
    run_stream,
    runner_for,
)
from tests.helpers import wait_until


def stream_processes():
    return {p.pid for p in live_processes() if p.label == "_StreamServer"}


def read_all(subscription, timeout=5.0):
    """Every item to the terminal, each read with a timeout (a lost terminal fails
    here instead of hanging until pytest's timeout)."""
    items = [subscription.next(timeout=timeout)]
    while not isinstance(items[-1], adk.runs.RunTerminal):
        items.append(subscription.next(timeout=timeout))
    return items


def session_event_ids(sessions, session_id):
    return [event.id for event in sessions.get_session("app", "u", session_id).events]


def test_a_run_nobody_subscribes_to_never_starts_a_stream(sessions):
    before = stream_processes()
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi")
    assert adk.runs.wait(run_id, timeout=10) == adk.Completed("echo: hi")
    info = adk.runs.status(run_id)  # answered by the server: no stream for it either
    assert info["state"] == "completed" and info["terminal_sequence"] == 3
    assert info["subscribers"] == 0
    assert info["latest_sequence"] == 2 and info["oldest_available_sequence"] == 1
    assert run_stream(run_id) is None and stream_processes() - before == set()


def test_the_first_subscriber_after_the_end_gets_the_whole_run_and_the_next_finds_it_by_name(
    sessions,
):
    runner = runner_for(sessions, "Tooler", one_tool_round(), tools=[lookup])
    run_id = adk.runs.start(runner, "u", "s", "where?")
    outcome = adk.runs.wait(run_id, timeout=10)
    assert run_stream(run_id) is None
    first = adk.runs.subscribe(run_id)
    stream = run_stream(run_id)
    assert stream is not None and first._stream == stream  # registered once started
    items = read_all(first)
    assert [item.seq for item in items] == [1, 2, 3, 4, 5]
    assert [item.event.id for item in items[:-1]] == session_event_ids(sessions, "s")
    assert items[-1].outcome == outcome
    later = adk.runs.subscribe(run_id, after=2)  # the registered stream, no round trip
    assert later._stream == stream
    assert [item.seq for item in read_all(later)] == [3, 4, 5]
    with pytest.raises(adk.runs.RunError) as ahead:
        adk.runs.subscribe(run_id, after=6)
    assert ahead.value.reason == "cursor_ahead"


def test_the_first_subscriber_mid_run_gets_the_replay_then_the_live_items(sessions):
    runner = runner_for(sessions, "Tooler", one_tool_round(final_delay=0.5), tools=[lookup])
    run_id = adk.runs.start(runner, "u", "s", "where?")
    wait_until(lambda: adk.runs.status(run_id)["latest_sequence"] == 3, timeout=10)
    info = adk.runs.status(run_id)
    assert info["state"] == "running" and info["subscribers"] == 0
    assert info["oldest_available_sequence"] == 1 and run_stream(run_id) is None
    with adk.runs.subscribe(run_id, after=1) as subscription:
        items = read_all(subscription)
    assert [item.seq for item in items] == [2, 3, 4, 5]
    assert [item.event.id for item in items[:-1]] == session_event_ids(sessions, "s")[1:]
    assert items[-1].outcome == adk.runs.wait(run_id, timeout=10)


def test_a_credit_subscriber_first_mid_run_holds_the_items_until_it_acks(sessions):
    runner = runner_for(sessions, "Tooler", one_tool_round(final_delay=0.3), tools=[lookup])
    run_id = adk.runs.start(runner, "u", "s", "where?")
    wait_until(lambda: adk.runs.status(run_id)["latest_sequence"] == 3, timeout=10)
    subscription = adk.runs.subscribe_credit(run_id)
    first = subscription.next(timeout=5)
    assert first.seq == 1
    with pytest.raises(adk.runs.RunTimeout):
        subscription.next(timeout=0.1)  # one unacknowledged item at most
    assert adk.runs.status(run_id)["subscribers"] == 1
    seen = [first]
    while not isinstance(seen[-1], adk.runs.RunTerminal):
        subscription.ack(seen[-1].seq)
        seen.append(subscription.next(timeout=5))
    assert [item.seq for item in seen] == [1, 2, 3, 4, 5]


def test_an_async_first_subscriber_mid_run_reads_every_item(sessions):
    """(The loop is measured while the first subscribe waits on a busy server in
    test_s29_stream_review.py.)"""
    runner = runner_for(sessions, "Tooler", one_tool_round(final_delay=0.3), tools=[lookup])
    run_id = adk.runs.start(runner, "u", "s", "where?")

    async def follow():
        subscription = await adk.runs.subscribe_credit_async(run_id)
        seen = [await subscription.anext(timeout=5)]
        while not isinstance(seen[-1], adk.runs.RunTerminal):
            await subscription.ack_async(seen[-1].seq)
            seen.append(await subscription.anext(timeout=5))
        return seen

    seen = asyncio.run(follow())
    assert [item.seq for item in seen] == [1, 2, 3, 4, 5]
    assert seen[-1].outcome == adk.runs.wait(run_id, timeout=10)


def test_past_its_window_before_any_subscriber_a_run_starts_its_stream_which_evicts(sessions):
    """Case: more than ``max_buffered_events`` published before the first subscriber:
    the window and the gap are what a stream started with the run shows."""
    runner = runner_for(sessions, "Tooler", one_tool_round(final_delay=0.5), tools=[lookup])
    run_id = adk.runs.start(runner, "u", "s", "where?", max_buffered_events=2)
    wait_until(lambda: run_stream(run_id) is not None, timeout=10)  # at its third event
    info = adk.runs.status(run_id)
    assert info["state"] == "running"
    assert (info["oldest_available_sequence"], info["latest_sequence"]) == (2, 3)
    assert_replay_gap(run_id, oldest=2, latest=3, terminal=False)
    items = read_all(adk.runs.subscribe(run_id, after=1))
    assert [item.seq for item in items] == [2, 3, 4, 5]
    assert [item.event.id for item in items[:-1]] == session_event_ids(sessions, "s")[1:]


def test_at_its_window_a_run_keeps_every_event_without_a_stream(sessions):
    runner = runner_for(sessions, "Tooler", one_tool_round(), tools=[lookup])
    run_id = adk.runs.start(runner, "u", "s", "where?", max_buffered_events=4)
    adk.runs.wait(run_id, timeout=10)
    assert run_stream(run_id) is None
    assert [item.seq for item in read_all(adk.runs.subscribe(run_id))] == [1, 2, 3, 4, 5]


def test_concurrent_first_subscribers_share_one_stream(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi")
    adk.runs.wait(run_id, timeout=10)
    before = stream_processes()
    barrier = threading.Barrier(8)
    results: list[tuple[sv.Pid, list[int]]] = []
    lock = threading.Lock()

    def subscribe():
        barrier.wait(5)
        subscription = adk.runs.subscribe(run_id)
        seqs = [item.seq for item in read_all(subscription)]
        with lock:
            results.append((subscription._stream, seqs))

    threads = [threading.Thread(target=subscribe) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(results) == 8
    assert {stream for stream, _ in results} == {run_stream(run_id)}
    assert all(seqs == [1, 2, 3] for _, seqs in results)
    assert stream_processes() - before == {run_stream(run_id)}


def test_status_is_the_same_before_and_after_the_stream_starts(sessions):
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi")
    adk.runs.wait(run_id, timeout=10)
    window = ("latest_sequence", "oldest_available_sequence", "terminal_sequence", "state")
    before = adk.runs.status(run_id)
    subscription = adk.runs.subscribe_credit(run_id)  # holds one item: still subscribed
    after = adk.runs.status(run_id)
    assert {k: before[k] for k in window} == {k: after[k] for k in window}
    assert (before["subscribers"], after["subscribers"]) == (0, 1)
    subscription.close()
    wait_until(lambda: adk.runs.status(run_id)["subscribers"] == 0, timeout=5)


def test_after_its_retention_a_run_nobody_subscribed_to_is_not_found(sessions):
    """Its end (the retention's shutdown runs `terminate`) starts no stream either: a
    stream is started for a run stopped in flight only (test_s29_stream_review.py)."""
    before = stream_processes()
    run_id = adk.runs.start(runner_for(sessions, "Echo"), "u", "s", "hi", retention=0.2)
    adk.runs.wait(run_id, timeout=10)
    wait_until(lambda: sv.whereis(run_name(run_id)) is None, timeout=5)
    assert stream_processes() - before == set() and run_stream(run_id) is None
    for subscribe in (adk.runs.subscribe, adk.runs.subscribe_credit):
        with pytest.raises(adk.runs.RunError) as gone:
            subscribe(run_id)
        assert gone.value.reason == "not_found"


def test_a_run_killed_while_a_first_subscriber_reads_it_is_not_found_to_it(sessions):
    """The lazily started stream is linked to its server: killed with it, its reader is
    told ``not_found`` at once (a stream left unlinked would leave it waiting), and
    later subscribers are ``not_found`` (a subscribe killed while it waits on the
    server: test_s29_stream_review.py)."""
    runner = runner_for(sessions, "Slow", adk.ScriptedProvider([{"text": "x", "delay": 5}]))
    run_id = adk.runs.start(runner, "u", "s", "hi")
    wait_until(lambda: adk.runs.status(run_id)["latest_sequence"] == 1, timeout=5)
    subscription = adk.runs.subscribe(run_id)  # starts the stream: the OpenStream path
    assert subscription._stream == run_stream(run_id) is not None
    assert subscription.next(timeout=5).seq == 1
    sv.exit(sv.whereis(run_name(run_id)), "kill")
    with pytest.raises(adk.runs.RunError) as lost:
        subscription.next(timeout=5)
    assert lost.value.reason == "not_found"
    wait_until(lambda: sv.whereis(run_name(run_id)) is None, timeout=5)
    assert run_stream(run_id) is None
    with pytest.raises(adk.runs.RunError) as gone:
        adk.runs.subscribe(run_id)
    assert gone.value.reason == "not_found"
    outcome = adk.runs.wait(run_id, timeout=5)
    assert isinstance(outcome, adk.Failed) and outcome.reason[0] == "run_actor_exit"
