"""Plugin hooks never block the invocation server (issue 16 §1).

``on_event`` runs in a task the server owns: status and cancel are answered while it
runs, the steps that arrive meanwhile are stored in order, and a cancel kills it (its
amendment never lands). ``after_run`` / ``on_run_error`` run after the terminal is
published, in the plugin notifier: a slow one delays no waiter.
"""

from __future__ import annotations

import threading

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors import plugins as pl
from adk_actors.outcomes import Cancelled

HIDDEN = {"city": "[hidden]"}


@pytest.fixture
def sessions():
    service = adk.sessions.InMemorySessionService()
    yield service
    service.close()


@adk.tool
def lookup(city: str) -> dict:
    """Look a city up."""
    return {"city": city}


def tool_then(text: str) -> adk.ScriptedProvider:
    return adk.ScriptedProvider(
        [{"tool_calls": [{"name": "lookup", "args": {"city": "Oslo"}}]}, {"text": text}]
    )


def is_tool_result(value: dict) -> bool:
    content = value.get("content")
    return bool(content) and content["role"] == "tool"


class HoldToolResult(pl.Plugin):
    """Holds the tool result's ``on_event`` until released, then hides its response."""

    mode = "intervene"

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.returned = threading.Event()
        self.run_errors: list[dict] = []

    def on_event(self, ctx, value, config):
        if not is_tool_result(value):
            return None
        self.entered.set()
        try:
            self.release.wait(30)
            value["content"]["parts"][0]["response"] = HIDDEN
            return pl.Amend(value)
        finally:
            self.returned.set()

    def on_run_error(self, ctx, value, config):
        self.run_errors.append(value)


def descriptor(plugin: pl.Plugin) -> dict:
    return {"plugin": plugin, "id": type(plugin).__name__, "timeout": 30.0}


def stored(sessions, session_id: str) -> list[adk.events.Event]:
    return sessions.get_session("app", "u", session_id).events


def hidden(events) -> list:
    return [
        e
        for e in events
        if e.content is not None
        and e.content.role == "tool"
        and e.content.parts[0].response == HIDDEN
    ]


def test_status_and_cancel_are_answered_while_an_on_event_hook_runs(sessions):
    hold = HoldToolResult()
    agent = adk.spawn_agent("Held", {"provider": tool_then("done")}, tools=[lookup])
    runner = adk.Runner(agent, "app", sessions, plugins=[descriptor(hold)])
    run_id = adk.runs.start(runner, "u", "s1", "go")
    assert hold.entered.wait(10)
    status = adk.runs.status(run_id)  # answered while the hook still runs
    assert status["state"] == "running" and status["phase"] == "open"
    assert not hold.returned.is_set()
    adk.runs.cancel(run_id, "stop_now")
    outcome = adk.runs.wait(run_id, timeout=10)
    assert isinstance(outcome, Cancelled) and outcome.reason == "stop_now"
    assert not hold.returned.is_set()  # the run ended without waiting for the hook
    assert adk.runs.status(run_id)["state"] == "cancelled"
    hold.release.set()


def test_cancel_during_a_hook_ends_the_run_once_and_its_amendment_never_lands(sessions):
    hold = HoldToolResult()
    agent = adk.spawn_agent("Cancelled", {"provider": tool_then("done")}, tools=[lookup])
    runner = adk.Runner(agent, "app", sessions, plugins=[descriptor(hold)])
    stream = runner.run_async("u", "s2", "go")
    seen = []
    with pytest.raises(adk.AdkError) as info:
        for event in stream:
            seen.append(event)
            if hold.entered.wait(10):
                adk.Runner.cancel(stream, "changed_my_mind")
    assert info.value.reason == ("cancelled", "changed_my_mind")
    hold.release.set()
    assert hold.returned.wait(10)  # the killed hook's amendment comes too late
    assert pl.wait_notifications(10)
    events = stored(sessions, "s2")
    assert hidden(events) == []
    assert not any(e.content is not None and e.content.role == "tool" for e in events)
    errors = [e for e in events if e.error is not None]
    assert len(errors) == 1 and not any(e.is_final for e in events)  # one terminal
    assert [e.id for e in seen] == [e.id for e in events[: len(seen)]]
    assert hold.run_errors == [{"reason": "changed_my_mind"}]  # notified once


def test_steps_arriving_during_a_slow_on_event_hook_are_stored_in_order(sessions):
    second_call = threading.Event()
    replies = iter(
        [{"tool_calls": [{"name": "lookup", "args": {"city": "Oslo"}}]}, {"text": "final"}]
    )

    def model(history, tools):
        reply = next(replies)
        if "text" in reply:
            second_call.set()
        return reply

    class SlowFirstStep(pl.Plugin):
        """Holds the first step until the turn has moved on, then hides tool results."""

        mode = "intervene"

        def __init__(self) -> None:
            self.order: list[str] = []

        def on_event(self, ctx, value, config):
            self.order.append(value["id"])
            if len(self.order) == 1:
                assert second_call.wait(10)  # later steps reach the server meanwhile
            if is_tool_result(value):
                value["content"]["parts"][0]["response"] = HIDDEN
                return pl.Amend(value)
            return None

    plugin = SlowFirstStep()
    agent = adk.spawn_agent("Ordered", {"provider": adk.ScriptedProvider(fn=model)}, tools=[lookup])
    runner = adk.Runner(agent, "app", sessions, plugins=[descriptor(plugin)])
    streamed = list(runner.run_async("u", "s3", "go"))
    events = stored(sessions, "s3")
    assert [e.id for e in streamed] == [e.id for e in events]
    assert [e.author for e in events] == ["user", "Ordered", "Ordered", "Ordered"]
    assert events[1].content.parts[0].name == "lookup"  # the call, then its result
    assert len(hidden(events)) == 1 and events[2].content.role == "tool"
    assert events[3].is_final and events[3].text() == "final"
    assert plugin.order == [e.id for e in events[1:]]


class SlowAfterRun(pl.Plugin):
    """Records what the run's status says when ``after_run`` runs, then waits."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.done = threading.Event()
        self.states: list[str] = []

    def after_run(self, ctx, value, config):
        run_id = ctx["run_id"]
        self.states.append(adk.runs.status(run_id)["state"] if run_id else value)
        self.entered.set()
        self.release.wait(30)
        self.done.set()


def test_after_run_runs_after_the_terminal_and_a_slow_one_delays_no_waiter(sessions):
    slow = SlowAfterRun()
    agent = adk.spawn_agent("Notified", {"provider": adk.ScriptedProvider(["fine", "plain"])})
    runner = adk.Runner(agent, "app", sessions, plugins=[descriptor(slow)])
    run_id = adk.runs.start(runner, "u", "s4", "hi")
    outcome = adk.runs.wait(run_id, timeout=10)  # while after_run has not returned
    assert outcome.output == "fine"
    assert slow.entered.wait(10)
    assert slow.states == ["completed"]  # it ran once the terminal was out
    assert not slow.done.is_set()
    assert runner.run("u", "s5", "hi") == "plain"  # a plain run returns just as well
    assert not pl.wait_notifications(0.01)  # both still held
    slow.release.set()
    assert pl.wait_notifications(10)
    assert slow.done.is_set()
    assert slow.states == ["completed", "plain"]


def test_a_plain_run_returns_before_its_slow_on_run_error(sessions):
    started = threading.Event()
    release = threading.Event()
    seen = []

    class SlowOnError(pl.Plugin):
        def on_run_error(self, ctx, value, config):
            started.set()
            release.wait(30)
            seen.append(value)

    agent = adk.spawn_agent("Failing", {"provider": adk.ScriptedProvider([{"error": "down"}])})
    runner = adk.Runner(agent, "app", sessions, plugins=[descriptor(SlowOnError())])
    with pytest.raises(adk.AdkError) as info:
        runner.run("u", "s6", "hi")
    assert info.value.reason == "down"
    assert started.wait(10) and seen == []
    release.set()
    assert pl.wait_notifications(10)
    assert seen == [{"reason": "down"}]


def test_a_phase_driven_by_messages_settles_like_a_waited_one():
    """`Pipeline.steps`: what the server uses; same trace and value as `run`."""

    class Upper(pl.Plugin):
        mode = "intervene"

        def on_event(self, ctx, value, config):
            return pl.Amend(value.upper())

    class Skips(pl.Plugin):
        def before_model(self, ctx, value, config):
            return None

    gate = threading.Event()

    class Late(pl.Plugin):
        def on_event(self, ctx, value, config):
            gate.wait(10)

    pipeline = pl.Pipeline.compile(
        [Upper(), Skips(), {"plugin": Late(), "id": "Late", "timeout": 0.05}]
    )
    phase = pipeline.steps("on_event", {}, "hi")
    results = 0
    while (task := phase.next()) is not None:
        result = sv.receive(
            10, match=lambda m, t=task: isinstance(m, sv.TaskResult) and m.pid == t.pid
        )
        phase.settle(result)
        results += 1
    outcome = phase.outcome()
    assert results == 2  # a plugin without the hook starts no task
    assert outcome.kind is pl.PhaseKind.AMEND and outcome.value == "HI"
    assert [(e.plugin, e.outcome) for e in outcome.trace] == [
        ("Upper", "amended"),
        ("Skips", "skipped"),
        ("Late", "timeout"),
    ]
    assert pipeline.run("on_event", {}, "hi").trace == outcome.trace
    gate.set()  # the timed-out hooks' threads end now
