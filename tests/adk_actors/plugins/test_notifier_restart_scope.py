"""A notifier that dies is restarted alone (second review of the runner/plugins fixes,
finding 2): it sits before the agents in the rest_for_one root tree, so it has a
one_for_one supervisor of its own; killed, it must not take the agents down (a
restarted agent supervisor starts empty, and every agent would be gone)."""

from __future__ import annotations

import time

import adk_actors as adk
import supervision as sv
from adk_actors.agents.names import registered_name
from adk_actors.plugins.notifier import NOTIFIER_NAME


def test_killing_the_notifier_leaves_the_agents_and_their_runs_alone():
    agent = adk.spawn_agent("NotifierSurvivor", {"provider": adk.ScriptedProvider(["one", "two"])})
    runner = adk.Runner(agent, "app", adk.sessions.InMemorySessionService())
    assert runner.run("u", "s", "hi") == "one"
    agent_pid = sv.whereis(registered_name("NotifierSurvivor"))
    first = sv.whereis(NOTIFIER_NAME)
    sv.exit(first, "kill")
    deadline = time.monotonic() + 5
    while sv.whereis(NOTIFIER_NAME) in (None, first):
        assert time.monotonic() < deadline, "the notifier was not restarted"
        time.sleep(0.01)
    assert sv.whereis(registered_name("NotifierSurvivor")) == agent_pid
    assert runner.run("u", "s", "again") == "two"
