"""``async for`` over `Runner.run_async` awaits its start (issue 20 §4, session 30).

Before, `afollow` started the invocation server with the blocking start, so the
consumer's event loop waited in a call to the run supervisor. These tests hold the
server's start in its init (`gated`) to see the loop run on meanwhile, cancel the
consumer while the start is in flight (the invocation must end ``consumer_closed``,
not run on unfollowed), and check that ``async for`` keeps the stream's behaviour:
`Runner.cancel` before iteration, leaving early (``consumer_closed``). The sync
``for`` keeps its blocking start (`test_runner.py`, `test_reference_runner.py`).
"""

from __future__ import annotations

import asyncio
import threading

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.runner.request import handoffs
from supervision.process import live_processes
from tests.adk_actors.test_s30_start_async_gate import gated, until
from tests.helpers import wait_until

pl = adk.plugins


class Ends(pl.Plugin):
    """Records each invocation's end as the plugins are told it."""

    def __init__(self) -> None:
        self.ends: list[tuple[str, object]] = []
        self._lock = threading.Lock()

    def after_run(self, ctx, value, config):
        with self._lock:
            self.ends.append(("completed", value))

    def on_run_error(self, ctx, value, config):
        with self._lock:
            self.ends.append(("error", value["reason"]))


def late(history, tools):
    """Answers after 5 s, awaited (no thread sleeps): still running when cancelled."""
    return {"text": "late", "delay": 5}


def never(history, tools):
    """Answers after a minute (awaited): a server still alive within the test's waits
    was left running."""
    return {"text": "never", "delay": 60}


def ended_by_its_caller_leaving(sessions, session_id="s"):
    """The invocation's server is gone long before its model would answer, and the
    session shows no answer: at most the cancel (none if it ended before opening, when
    the plugins are not told either)."""
    wait_until(lambda: not live("InvocationServer"), timeout=10)
    try:
        events = sessions.get_session("app", "u", session_id).events
    except adk.AdkError:
        return  # it ended before opening the session
    assert not any(e.is_final for e in events)
    assert [e.error.reason for e in events if e.error] in ([], ["consumer_closed"])


def runner_for(sessions, name, model, ends=None):
    agent = adk.spawn_agent(name, {"provider": adk.ScriptedProvider(fn=model, inline=True)})
    plugins = [] if ends is None else [{"plugin": ends, "id": "ends"}]
    return adk.Runner(agent, "app", sessions, plugins=plugins)


def live(label):
    return [p for p in live_processes() if p.label == label and p.alive]


def test_async_for_starts_while_the_event_loop_runs_on(sessions):
    runner = runner_for(sessions, "HeldStream", lambda h, t: {"text": "ok"})

    async def consume():
        return [event async for event in runner.run_async("u", "s", "hi")]

    async def main():
        with gated("HeldStream") as gate:
            consumer = asyncio.ensure_future(consume())
            await until(gate.entered.is_set)  # runs while the consumer's start is held
            in_flight = not consumer.done()
            gate.release()
            return gate, in_flight, await consumer

    gate, in_flight, events = asyncio.run(main())
    assert in_flight and not gate.timed_out
    assert [event.author for event in events] == ["user", "HeldStream"]
    assert events[-1].text() == "ok"


def test_a_consumer_cancelled_while_its_start_is_in_flight_cancels_the_invocation(sessions):
    """The invocation ends and nothing is left behind. Two things end it, either enough:
    the abandon step's ``consumer_closed`` cancel and the consumer's inbox (its owner)
    closing, so this checks the end, not which of them came first (session 30 review,
    L2); `test_start_invocation_async_cancelled_in_flight_cancels_what_it_started`
    checks the abandon step without an owner."""
    runner = runner_for(sessions, "LeftStream", never)
    inboxes = len(live("invocation caller"))

    async def consume():
        async for _event in runner.run_async("u", "s", "hi"):
            raise AssertionError("the consumer was cancelled before any event")

    async def main():
        with gated("LeftStream") as gate:
            consumer = asyncio.ensure_future(consume())
            await until(gate.entered.is_set)
            consumer.cancel()  # the start is sent and held in the server's init
            gate.release()
            with pytest.raises(asyncio.CancelledError):
                await consumer
        return gate

    assert not asyncio.run(main()).timed_out
    ended_by_its_caller_leaving(sessions)
    assert len(live("invocation caller")) == inboxes and handoffs.pending() == 0


def test_start_invocation_async_cancelled_in_flight_cancels_what_it_started(sessions):
    runner = runner_for(sessions, "LeftStart", never)

    async def main():
        with gated("LeftStart") as gate:
            starting = asyncio.ensure_future(runner.start_invocation_async("u", "s", "hi"))
            await until(gate.entered.is_set)
            starting.cancel()
            gate.release()
            with pytest.raises(asyncio.CancelledError):
                await starting
        return gate

    assert not asyncio.run(main()).timed_out
    ended_by_its_caller_leaving(sessions)  # by default: nobody is left to follow it


def test_start_invocation_async_returns_the_started_server(sessions):
    ends = Ends()
    runner = runner_for(sessions, "Started", lambda h, t: {"text": "ok"}, ends)
    server = asyncio.run(runner.start_invocation_async("u", "s", "hi"))
    assert isinstance(server, sv.Pid)
    wait_until(lambda: ends.ends, timeout=10)
    assert ends.ends == [("completed", "ok")]
    assert [e.author for e in sessions.get_session("app", "u", "s").events] == ["user", "Started"]


def test_runner_cancel_before_async_iteration_cancels_it_once_started(sessions):
    runner = runner_for(sessions, "EarlyCancel", late)
    stream = runner.run_async("u", "s", "hi")
    adk.Runner.cancel(stream, "early")

    async def consume():
        return [event async for event in stream]

    with pytest.raises(adk.AdkError) as info:
        asyncio.run(consume())
    assert info.value.reason == ("cancelled", "early")
    wait_until(lambda: not live("InvocationServer"), timeout=10)


def test_runner_cancel_while_iterating_with_async_for(sessions):
    runner = runner_for(sessions, "MidCancel", late)
    stream = runner.run_async("u", "s", "hi")
    seen = []

    async def consume():
        async for event in stream:
            seen.append(event)
            adk.Runner.cancel(stream, "mid")

    with pytest.raises(adk.AdkError) as info:
        asyncio.run(consume())
    assert info.value.reason == ("cancelled", "mid")
    assert [event.author for event in seen] == ["user", "MidCancel"]
    assert seen[-1].error.reason == "mid"
    events = sessions.get_session("app", "u", "s").events
    assert [e.error.reason for e in events if e.error] == ["mid"]


def test_leaving_async_for_early_still_records_consumer_closed(sessions):
    runner = runner_for(sessions, "EarlyLeaver", late)

    async def leave():
        async for event in runner.run_async("u", "s", "hi"):
            assert event.author == "user"
            break

    asyncio.run(leave())
    events = sessions.get_session("app", "u", "s").events
    assert [e.error.reason for e in events if e.error] == ["consumer_closed"]
    assert not any(e.is_final for e in events)
