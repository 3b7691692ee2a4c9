"""Blast radius: an agent in a crash loop stops only itself.

Each agent has its own restart intensity (``restart_intensity`` in its config, by
default more than 3 restarts within 5 s is too many). Past it the agent is *failed*:
not restarted again, reported by `agent_info` and `AgentRef` with its last exit
reason, and its name is free for a new spawn. No other agent, run or supervisor of
the tree restarts.
"""

from __future__ import annotations

import threading

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.agents import compile_spec
from adk_actors.agents.server import AgentLifeline
from adk_actors.app import AGENT_SUPERVISOR, APP_NAME
from adk_actors.runner.request import run_name
from tests.helpers import wait_until

BYSTANDERS = 20
KILLS = 200


def echo(history, tools):
    return {"text": f"echo:{history[-1].text_value()}"}


def reason(fn):
    with pytest.raises(adk.AdkError) as info:
        fn()
    return info.value.reason


def kill_until_failed(agent: adk.AgentRef, most: int) -> int:
    """Kill the agent's current process, wait for its restart or its failure; repeat.
    Returns how many kills it took to fail it (`most` if it never failed)."""
    for kill in range(1, most + 1):
        pid = agent.pid
        assert pid is not None
        sv.exit(pid, "kill")
        wait_until(lambda pid=pid: agent.pid not in (None, pid) or agent.status == "failed")
        if agent.status == "failed":
            return kill
    return most


def tree_children() -> list[tuple[object, sv.Pid | None]]:
    return [(row.id, row.pid) for row in sv.Supervisor.which_children(APP_NAME)]


def test_a_crash_loop_fails_one_agent_and_nothing_else_restarts():
    gate = threading.Event()
    entered = threading.Semaphore(0)

    def blocked(history, tools):
        entered.release()
        gate.wait(30)
        return {"text": f"done:{history[-1].text_value()}"}

    sessions = adk.sessions.InMemorySessionService()
    bystanders = [
        adk.spawn_agent(f"Bystander{n}", {"provider": adk.ScriptedProvider(fn=blocked)})
        for n in range(BYSTANDERS)
    ]
    runs = [
        adk.runs.start(adk.Runner(agent, "app", sessions), "u", f"s{n}", f"m{n}")
        for n, agent in enumerate(bystanders)
    ]
    for _ in runs:  # every run is in flight: inside its model call
        assert entered.acquire(timeout=10)
    # an intensity well above the agent supervisor's old 100 restarts in 5 s, which one
    # crashing agent used to exhaust, restarting every agent and every run
    crashing = adk.spawn_agent(
        "Crashing",
        {
            "provider": adk.ScriptedProvider(fn=echo),
            "restart_intensity": {"intensity": 150, "period": 60.0},
        },
    )
    agent_pids = [agent.pid for agent in bystanders]
    run_pids = [sv.whereis(run_name(run_id)) for run_id in runs]
    children = tree_children()
    agent_supervisor = sv.whereis(AGENT_SUPERVISOR)

    kills = kill_until_failed(crashing, KILLS)

    assert kills == 151  # 150 restarts, then the 151st crash fails it
    info = adk.agent_info(crashing)
    assert info["status"] == "failed" and info["reason"] == "killed"
    assert info["restarts"] == 150
    assert info["restart_intensity"] == {"intensity": 150, "period": 60.0}
    assert crashing.pid is None and crashing.status == "failed"
    assert crashing.failure == info
    assert reason(lambda: adk.prompt(crashing, "hi")) == ("agent_failed", "killed")
    assert reason(lambda: adk.invoke(crashing, "hi")) == ("agent_failed", "killed")
    assert reason(lambda: adk.delegate(crashing, "hi")) == ("agent_failed", "killed")

    # nothing else restarted: the same processes serve the other agents and the runs
    assert [agent.pid for agent in bystanders] == agent_pids
    assert [sv.whereis(run_name(run_id)) for run_id in runs] == run_pids
    assert tree_children() == children
    assert sv.whereis(AGENT_SUPERVISOR) == agent_supervisor
    assert all(adk.runs.status(run_id)["state"] == "running" for run_id in runs)

    gate.set()
    for n, run_id in enumerate(runs):
        assert adk.runs.wait(run_id, timeout=30) == adk.Completed(f"done:m{n}")
    assert [agent.pid for agent in bystanders] == agent_pids

    # the name is free: a new spawn gets a fresh agent with a fresh restart budget
    again = adk.spawn_agent("Crashing", {"provider": adk.ScriptedProvider(fn=echo)})
    assert again.status == "running" and again.failure is None
    assert adk.prompt(again, "back") == "echo:back"
    info = adk.agent_info(again)
    assert info["status"] == "running" and info["restarts"] == 0
    sessions.close()


def test_the_default_intensity_is_three_restarts_in_five_seconds():
    agent = adk.spawn_agent("Fragile", {"provider": adk.ScriptedProvider(fn=echo)})
    assert kill_until_failed(agent, KILLS) == 4
    info = adk.agent_info(agent)
    assert info["status"] == "failed" and info["reason"] == "killed"
    assert info["restarts"] == 3
    assert info["restart_intensity"] == {"intensity": 3, "period": 5.0}


def test_a_crash_within_the_intensity_restarts_the_agent_under_its_name():
    agent = adk.spawn_agent("Phoenix", {"provider": adk.ScriptedProvider(fn=echo)})
    assert adk.prompt(agent, "before") == "echo:before"
    for restarts in (1, 2, 3):
        old = agent.pid
        sv.exit(old, "kill")
        wait_until(lambda old=old: agent.pid not in (None, old))
        assert adk.prompt(agent, f"after {restarts}") == f"echo:after {restarts}"
        info = adk.agent_info(agent)
        assert info["status"] == "running" and info["restarts"] == restarts
    assert agent.status == "running" and agent.failure is None


def test_a_crash_reason_is_reported_and_intensity_zero_never_restarts():
    agent = adk.spawn_agent(
        "OneShot",
        {"provider": adk.ScriptedProvider(fn=echo), "restart_intensity": {"intensity": 0}},
    )
    sv.exit(agent.pid, "boom")  # the agent traps exits: only its parent's would stop it
    assert adk.prompt(agent, "still here") == "echo:still here"
    pid = agent.pid
    sv.stop(pid, ("custom_crash", "detail"))  # an abnormal stop: terminate records it
    wait_until(lambda: agent.status == "failed")
    info = adk.agent_info(agent)
    assert info["reason"] == ("custom_crash", "detail") and info["restarts"] == 0
    assert reason(lambda: adk.prompt(agent, "x")) == ("agent_failed", "custom_crash")


def test_a_stopped_agent_is_not_failed_and_stopping_a_failed_one_forgets_it():
    agent = adk.spawn_agent("Calm", {"provider": adk.ScriptedProvider(fn=echo)})
    adk.stop_agent(agent)
    assert agent.status == "not_running" and agent.failure is None
    assert reason(lambda: adk.agent_info(agent)) == "noproc"

    failing = adk.spawn_agent(
        "Doomed",
        {"provider": adk.ScriptedProvider(fn=echo), "restart_intensity": {"intensity": 0}},
    )
    assert kill_until_failed(failing, KILLS) == 1
    adk.stop_agent(failing)  # forgets the failure
    assert failing.status == "not_running"
    assert reason(lambda: adk.stop_agent(failing)) == "not_found"


def test_a_failure_does_not_outlive_the_application_tree():
    agent = adk.spawn_agent(
        "Ephemeral",
        {"provider": adk.ScriptedProvider(fn=echo), "restart_intensity": {"intensity": 0}},
    )
    assert kill_until_failed(agent, KILLS) == 1
    adk.stop()
    adk.start()
    assert agent.status == "not_running"
    assert reason(lambda: adk.agent_info(agent)) == "noproc"


@pytest.mark.parametrize("intensity", [0, 1])
def test_a_restart_that_finds_its_name_respawned_ends_quietly(intensity):
    # The race of a restart with a new spawn_agent of the free name, made deterministic:
    # the test process plays the supervisor and calls the lifeline itself.
    spec = compile_spec("Twin", {"provider": adk.ScriptedProvider(fn=echo)})
    lifeline = AgentLifeline(spec, intensity, 5.0)
    first = lifeline.start()
    sv.stop(first, "normal")
    newer = adk.spawn_agent("Twin", {"provider": adk.ScriptedProvider(fn=echo)})
    pid = newer.pid
    assert lifeline.start() is None  # over budget (0) or the name taken (1): no agent
    assert newer.pid == pid and newer.status == "running" and newer.failure is None
    adk.stop_agent(newer)
    assert newer.status == "not_running"


@pytest.mark.parametrize(
    ("budget", "field"),
    [
        (3, "restart_intensity"),
        ({"intensity": 3, "window": 5}, "restart_intensity"),
        ({"intensity": -1}, "intensity"),
        ({"intensity": 1001}, "intensity"),
        ({"intensity": True}, "intensity"),
        ({"intensity": 2.5}, "intensity"),
        ({"period": 0}, "period"),
        ({"period": "5"}, "period"),
        ({"period": 86_401}, "period"),
    ],
)
def test_restart_intensity_is_checked_at_spawn(budget, field):
    config = {"provider": adk.ScriptedProvider(fn=echo), "restart_intensity": budget}
    assert reason(lambda: adk.spawn_agent("Checked", config)) == (
        "invalid_restart_intensity",
        field,
    )
    assert adk.AgentRef("Checked").pid is None
