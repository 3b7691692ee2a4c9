"""`spawn_from_file`: the file's agent, tools and script, and the missing-key hint."""

from __future__ import annotations

import pytest

import adk_actors as adk
from adk_actors.config_file import MISSING_KEY_HINT, load_agent_file, spawn_from_file
from tests.config_file.conftest import REPO


def runner_for(agent_file, sessions):
    ref = spawn_from_file(agent_file)
    return adk.Runner(ref, "app", sessions, **agent_file.runner_options)


@pytest.fixture
def sessions():
    service = adk.sessions.InMemorySessionService()
    yield service
    service.close()


def test_the_scripted_example_streams_pauses_for_approval_and_cycles(sessions):
    agent_file = load_agent_file(REPO / "examples" / "agent.scripted.json")
    runner = runner_for(agent_file, sessions)
    assert runner.run("u", "s", "hi") == "Hello! I am the offline scripted agent."
    paused = runner.run("u", "s", "publish")
    assert isinstance(paused, adk.Paused)
    pause = paused.event.actions.pause
    assert (pause.reason, pause.tool_name) == ("tool_confirmation", "publish_release")
    assert runner.resume("u", "s", {"confirmed": True}) == "Release 1.0.0 is published."
    # script_repeat: the script starts again instead of running out
    assert runner.run("u", "s", "again") == "Hello! I am the offline scripted agent."


def test_each_spawn_from_one_file_starts_its_script_afresh(write_config, sessions):
    agent_file = load_agent_file(
        write_config(
            {"name": "Fresh", "provider": "scripted", "script": [{"text": "one"}, {"text": "two"}]}
        )
    )
    runner = runner_for(agent_file, sessions)
    assert runner.run("u", "s", "a") == "one"
    adk.stop_agent(adk.AgentRef("Fresh"))
    runner = runner_for(agent_file, sessions)
    assert runner.run("u", "s2", "a") == "one"
    assert runner.run("u", "s2", "b") == "two"
    with pytest.raises(adk.AdkError):  # without script_repeat a script runs out
        runner.run("u", "s2", "c")


def test_config_is_a_fresh_copy_each_time(write_config):
    agent_file = load_agent_file(
        write_config({"provider": "scripted", "script": [{"text": "x"}], "instructions": "I"})
    )
    config = agent_file.config
    config["instructions"] = "changed"
    config["script"].append({"text": "y"})
    assert agent_file.config["instructions"] == "I"
    assert agent_file.config["script"] == [{"text": "x"}]


def test_a_gemini_file_without_a_key_says_how_to_run_offline(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    agent_file = load_agent_file(REPO / "examples" / "agent.json")  # loading needs no key
    with pytest.raises(adk.AdkError) as caught:
        spawn_from_file(agent_file)
    assert caught.value.reason == "missing_api_key"
    assert caught.value.detail == MISSING_KEY_HINT
    assert '"provider": "scripted"' in caught.value.detail


def test_a_gemini_file_with_a_key_spawns(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "test-key-not-used")
    ref = spawn_from_file(load_agent_file(REPO / "examples" / "agent.json"))
    assert adk.agent_info(ref)["status"] == "running"
    adk.stop_agent(ref)


def test_a_repeating_script_keeps_no_histories(write_config, sessions):
    """A daemon's repeating script answers forever: its provider keeps no histories
    (issue 20 §2), so memory does not grow with the number of calls."""
    agent_file = load_agent_file(
        write_config({"provider": "scripted", "script": [{"text": "x"}], "script_repeat": True})
    )
    config = agent_file.config
    provider = config["provider"]
    runner = adk.Runner(adk.spawn_agent(agent_file.name, config), "app", sessions)
    for turn in range(40):
        assert runner.run("u", f"s{turn}", "hi") == "x"
    assert provider.calls == 40
    assert provider.histories == []
