"""The invocation server's store queue with ``on_event`` plugins (review of
runner/plugins, findings 1 and 5).

Finding 1: a final-output denial's audit event is stored before the error terminal
whether or not an ``on_event`` plugin runs (the case of
``test_runner_policy::test_an_oversized_final_output_fails_and_is_not_stored`` with an
observer plugin). Finding 5: a turn that ends within the cancel grace completes even
when an ``on_event`` hook holds its last steps past the grace.
"""

from __future__ import annotations

import threading

import pytest

import adk_actors as adk
from adk_actors import plugins as pl
from adk_actors.outcomes import Completed
from adk_actors.policy import is_audit_event
from adk_actors.runs import api as runs_api

OPEN = {"id": "open", "agents": {"allow": "all"}, "tools": {"allow": "all"}}
MARKER = "RESULT-MARKER-" + "x" * 64


@pytest.fixture
def sessions():
    service = adk.sessions.InMemorySessionService()
    yield service
    service.close()


class Observer(pl.Plugin):
    """Sees every event and changes nothing."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_event(self, ctx, value, config):
        self.seen.append(value["author"])


@pytest.mark.parametrize("observers", [0, 1, 2])
def test_finding_1_a_denied_final_output_keeps_its_audit_event_with_on_event_plugins(
    sessions, observers
):
    agent = adk.spawn_agent(f"Verbose{observers}", {"provider": adk.ScriptedProvider([MARKER])})
    plugins = [{"plugin": Observer(), "id": f"o{i}"} for i in range(observers)]
    runner = adk.Runner(
        agent,
        "app",
        sessions,
        runtime_policy={**OPEN, "max_content_bytes": 50},
        plugins=plugins,
    )
    with pytest.raises(adk.AdkError) as failure:
        runner.run("u", "s", "go")
    assert failure.value.reason[0] == "runtime_policy_denied"
    events = sessions.get_session("app", "u", "s").events
    assert MARKER not in str(events)
    assert not any(e.is_final for e in events)
    audits = [e for e in events if is_audit_event(e)]
    assert [a.actions.policy_decisions[0].operation for a in audits] == ["final_output"]
    # in order: the opening, the audit, then the one error terminal
    assert events[0].author == "user" and events[1] is audits[0]
    assert events[-1].error is not None and len([e for e in events if e.error]) == 1
    for plugin in plugins:
        assert plugin["plugin"].seen == ["system"]  # the audit went through on_event


@adk.tool
def lookup(city: str) -> dict:
    """Look a city up."""
    return {"city": city}


GRACE = 1.0


def test_finding_5_a_turn_ending_within_the_grace_completes_behind_a_slow_hook(
    sessions, monkeypatch
):
    monkeypatch.setattr(runs_api, "CANCEL_GRACE", GRACE)  # the turn surely ends within it
    entered = threading.Event()
    release = threading.Event()
    turn_may_end = threading.Event()
    turn_ended = threading.Event()

    class HoldToolResult(pl.Plugin):
        def on_event(self, ctx, value, config):
            content = value.get("content")
            if content and content["role"] == "tool":
                entered.set()
                release.wait(30)  # past the grace: the final step waits behind it

    def model(history, tools):
        if history[-1].role != "tool":
            return {"tool_calls": [{"name": "lookup", "args": {"city": "Oslo"}}]}
        turn_may_end.wait(30)
        turn_ended.set()
        return {"text": "done"}

    agent = adk.spawn_agent("Graced", {"provider": adk.ScriptedProvider(fn=model)}, tools=[lookup])
    plugin = {"plugin": HoldToolResult(), "id": "hold", "timeout": 30.0}
    runner = adk.Runner(agent, "app", sessions, plugins=[plugin])
    run_id = adk.runs.start(runner, "u", "g", "go")
    assert entered.wait(10)
    adk.runs.cancel(run_id, "stop")
    turn_may_end.set()
    assert turn_ended.wait(10)
    threading.Event().wait(GRACE * 1.5)  # the grace is over while the hook still holds
    release.set()
    outcome = adk.runs.wait(run_id, timeout=10)
    assert isinstance(outcome, Completed) and outcome.output == "done"
    events = sessions.get_session("app", "u", "g").events
    assert events[-1].is_final and not any(e.error for e in events)
