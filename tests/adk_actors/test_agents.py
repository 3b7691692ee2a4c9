"""Agents: lifecycle, names, FIFO prompts, lanes, failures, timeouts, restarts, delegation."""

from __future__ import annotations

import asyncio
import queue
import threading
import time

import pytest

import adk_actors as adk
import supervision as sv
from tests.helpers import Recorder, in_thread, wait_until


def echo(history, tools):
    return {"text": f"echo:{history[-1].text_value()}"}


def reason(fn):
    with pytest.raises(adk.AdkError) as info:
        fn()
    return info.value.reason


def test_spawn_prompt_stop_and_name_reuse():
    agent = adk.spawn_agent("Echo", {"provider": adk.ScriptedProvider(fn=echo)})
    assert adk.prompt(agent, "hi") == "echo:hi"
    assert (
        reason(lambda: adk.spawn_agent("Echo", {"provider": adk.ScriptedProvider(fn=echo)}))
        == "already_exists"
    )
    adk.stop_agent(agent)
    assert agent.pid is None and agent.status == "not_running"
    assert reason(lambda: adk.prompt(agent, "hi")) == "noproc"
    again = adk.spawn_agent(
        "Echo", {"provider": adk.ScriptedProvider(fn=echo)}
    )  # the name is free at once
    assert adk.prompt(again, "x") == "echo:x"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("user", "reserved_user"),
        ("", "invalid_identifier"),
        ("9Agent", "invalid_identifier"),
        ("bad-name", "invalid_identifier"),
        ("has space", "invalid_identifier"),
    ],
)
def test_agent_names(name, expected):
    assert (
        reason(lambda: adk.spawn_agent(name, {"provider": adk.ScriptedProvider(["x"])})) == expected
    )


def test_valid_underscore_name_and_strict_config():
    adk.spawn_agent("_TreeRoot1", {"provider": "scripted", "script": ["x"]})
    assert reason(
        lambda: adk.spawn_agent(
            "A", {"provider": "scripted", "script": ["x"], "instructons": "typo"}
        )
    ) == (
        "unknown_config_keys",
        ("instructons",),
    )
    assert reason(
        lambda: adk.spawn_agent(
            "B", {"provider": "scripted", "script": ["x"], "max_concurrent_invocations": 0}
        )
    ) == ("invalid_max_concurrent_invocations")
    assert reason(
        lambda: adk.spawn_agent("C", {"provider": "gemini", "model": "m", "temprature": 1})
    ) == (
        "unknown_config_keys",
        ("temprature",),
    )


def test_prompts_are_fifo_and_keep_the_conversation():
    log = Recorder()

    def slow(history, tools):
        text = history[-1].text_value()
        log.add(("start", text))
        time.sleep(0.05)
        log.add(("end", text))
        return {"text": f"re:{text}"}

    model = adk.ScriptedProvider(fn=slow, record_histories=10)
    agent = adk.spawn_agent("Fifo", {"provider": model})
    results = {}
    threads = [
        threading.Thread(target=lambda n=n: results.__setitem__(n, adk.prompt(agent, f"m{n}")))
        for n in range(3)
    ]
    for thread in threads:
        thread.start()
        time.sleep(0.01)
    for thread in threads:
        thread.join()
    assert results == {0: "re:m0", 1: "re:m1", 2: "re:m2"}
    events = log.snapshot()
    assert events == [
        ("start", "m0"),
        ("end", "m0"),
        ("start", "m1"),
        ("end", "m1"),
        ("start", "m2"),
        ("end", "m2"),
    ]
    assert [c.text_value() for c in model.histories[2]] == ["m0", "re:m0", "m1", "re:m1", "m2"]


def test_invoke_starts_from_a_fresh_history():
    model = adk.ScriptedProvider(fn=echo, record_histories=10)
    agent = adk.spawn_agent("Fresh", {"provider": model})
    adk.prompt(agent, "remember me")
    assert adk.invoke(agent, "who?", scope=("app", "u", "s")) == "echo:who?"
    assert [c.text_value() for c in model.histories[-1]] == ["who?"]


def test_lane_fairness_with_two_slots():
    gates = {name: threading.Event() for name in ("A1", "B1", "A2", "C1")}
    log = Recorder()

    def gated(history, tools):
        text = history[-1].text_value()
        log.add(text)
        gates[text].wait(5)
        return {"text": text}

    agent = adk.spawn_agent(
        "Fair", {"provider": adk.ScriptedProvider(fn=gated), "max_concurrent_invocations": 2}
    )
    lanes = {
        "A1": ("app", "u", "A"),
        "B1": ("app", "u", "B"),
        "A2": ("app", "u", "A"),
        "C1": ("app", "u", "C"),
    }
    threads = {}
    for name in ("A1", "B1", "A2", "C1"):
        threads[name] = threading.Thread(
            target=adk.invoke, args=(agent, name), kwargs={"scope": lanes[name]}
        )
        threads[name].start()
        wait_until(
            lambda: (
                adk.agent_info(agent)["active"] + adk.agent_info(agent)["queued"] == len(threads)
            )
        )
    # both slots are granted; their model calls may start in either order
    wait_until(lambda: len(log.snapshot()) == 2)
    assert sorted(log.snapshot()) == ["A1", "B1"]  # nothing else while both slots are busy
    gates["A1"].set()
    wait_until(lambda: len(log.snapshot()) == 3)
    assert log.snapshot()[2] == "C1"  # the oldest ready lane, not A2
    gates["B1"].set()
    wait_until(lambda: len(log.snapshot()) == 4)
    assert log.snapshot()[3] == "A2"
    for gate in gates.values():
        gate.set()
    for thread in threads.values():
        thread.join()
    assert adk.agent_info(agent)["active"] == 0


def test_provider_failure_is_an_error_and_the_agent_survives():
    agent = adk.spawn_agent(
        "Flaky", {"provider": adk.ScriptedProvider([{"error": "unavailable"}, "fine"])}
    )
    pid = agent.pid
    assert reason(lambda: adk.prompt(agent, "one")) == "unavailable"
    assert adk.prompt(agent, "two") == "fine"
    assert agent.pid == pid


def test_turn_timeout_kills_the_worker_and_the_agent_serves_on():
    model = adk.ScriptedProvider([{"text": "late", "delay": 2.0}, "quick"])
    agent = adk.spawn_agent("Slow", {"provider": model, "turn_timeout": 0.2})
    assert reason(lambda: adk.prompt(agent, "one")) == "turn_timeout"
    assert adk.prompt(agent, "two") == "quick"


def test_call_timeout_shorter_than_the_provider():
    model = adk.ScriptedProvider([{"text": "slow answer", "delay": 0.5}, "next"])
    agent = adk.spawn_agent("Patient", {"provider": model})
    assert reason(lambda: adk.prompt(agent, "one", timeout=0.1)) == "agent_call_timeout"
    assert adk.prompt(agent, "two", timeout=5) == "next"  # queued behind the first, served


def test_killing_the_caller_kills_its_turn():
    started = threading.Event()

    def long_turn(history, tools):
        if history[-1].text_value() == "long":
            started.set()
            time.sleep(1.0)
            return {"text": "too late"}
        return {"text": "short"}

    agent = adk.spawn_agent("Caller", {"provider": adk.ScriptedProvider(fn=long_turn)})
    holder = {}

    def caller():
        holder["pid"] = sv.self_pid()
        try:
            adk.prompt(agent, "long")
        except adk.AdkError as error:
            holder["error"] = error

    thread = threading.Thread(target=caller)
    thread.start()
    assert started.wait(5)
    sv.exit(holder["pid"], "kill")  # the caller's process dies; its thread cannot be stopped
    wait_until(
        lambda: adk.agent_info(agent)["active"] == 0, timeout=0.9
    )  # before the 1 s turn ends
    assert adk.prompt(agent, "next") == "short"
    thread.join(5)


def test_stop_agent_fails_running_and_queued_callers():
    gate = threading.Event()
    agent = adk.spawn_agent(
        "Busy", {"provider": adk.ScriptedProvider(fn=lambda h, t: (gate.wait(5), {"text": "x"})[1])}
    )
    outcomes = []

    def ask():
        try:
            outcomes.append(adk.prompt(agent, "q"))
        except adk.AdkError as error:
            outcomes.append(error.reason)

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for thread in threads:
        thread.start()
    wait_until(lambda: adk.agent_info(agent)["queued"] == 2)
    adk.stop_agent(agent)
    for thread in threads:
        thread.join(5)
    gate.set()
    assert outcomes == ["agent_stopped"] * 3
    adk.spawn_agent("Busy", {"provider": adk.ScriptedProvider(["again"])})


def test_crashed_agent_restarts_under_its_name_and_refs_follow():
    agent = adk.spawn_agent("Phoenix", {"provider": adk.ScriptedProvider(fn=echo)})
    old = agent.pid
    sv.exit(old, "kill")
    new = wait_until(lambda: agent.pid if agent.pid not in (None, old) else None)
    assert new != old
    assert adk.prompt(agent, "back") == "echo:back"
    info = adk.agent_info(agent)
    assert info["status"] == "running" and info["restarts"] == 1
    assert agent.status == "running"  # within its restart intensity (see test_blast_radius)


def test_delegate_to_queue_pid_and_asyncio_queue():
    agent = adk.spawn_agent("Delegate", {"provider": adk.ScriptedProvider(fn=echo)})
    box: queue.Queue = queue.Queue()
    ref = adk.delegate(agent, "one", reply_to=box)
    response = box.get(timeout=5)
    assert response.ref == ref and response.value == "echo:one" and response.error is None
    assert response.agent == agent

    mine = adk.delegate(agent, "two", reply_to=sv.self_pid(), ref="my-ref")
    message = sv.receive(5, match=lambda m: isinstance(m, adk.AgentResponse))
    assert mine == "my-ref" and message.ref == "my-ref" and message.value == "echo:two"

    async def main():
        inbox: asyncio.Queue = asyncio.Queue()
        adk.delegate(agent, "three", reply_to=inbox)
        return await asyncio.wait_for(inbox.get(), 5)

    assert asyncio.run(main()).value == "echo:three"
    adk.delegate(agent, "fire and forget")
    wait_until(lambda: adk.agent_info(agent)["completed"] == 4)


def test_delegate_failure_carries_the_error():
    agent = adk.spawn_agent(
        "Failing", {"provider": adk.ScriptedProvider([{"error": "unavailable"}])}
    )
    box: queue.Queue = queue.Queue()
    adk.delegate(agent, "x", reply_to=box)
    response = box.get(timeout=5)
    assert response.value is None and response.error.reason == "unavailable"


def test_a_thousand_concurrent_prompts_across_fifty_agents_are_exactly_correlated():
    agents = [
        adk.spawn_agent(f"Worker{n}", {"provider": adk.ScriptedProvider(fn=echo)})
        for n in range(50)
    ]
    box: queue.Queue = queue.Queue()
    expected = {}
    for index in range(1000):
        agent = agents[index % 50]
        ref = adk.delegate(agent, f"msg-{index}", reply_to=box)
        expected[ref] = (agent, f"echo:msg-{index}")
    responses = [box.get(timeout=30) for _ in range(1000)]
    assert {r.ref for r in responses} == set(expected)
    for response in responses:
        agent, text = expected[response.ref]
        assert response.agent == agent and response.value == text
    assert in_thread(lambda: adk.prompt(agents[0], "after")) == "echo:after"


def test_the_asyncio_facade_never_blocks_the_loop():
    import asyncio
    import threading

    gate = threading.Event()

    def slow(history, tools):
        gate.wait(5)
        return {"text": f"hello {history[-1].text_value()}"}

    agent = adk.spawn_agent("AsyncFacade", {"provider": adk.ScriptedProvider(fn=slow)})
    sessions = adk.sessions.InMemorySessionService()
    runner = adk.Runner(agent, "app", sessions)

    async def main():
        ticks = 0

        async def tick():
            nonlocal ticks
            while not gate.is_set():
                ticks += 1
                await asyncio.sleep(0.005)
            gate.set()

        ticker = asyncio.create_task(tick())
        asyncio.get_running_loop().call_later(0.2, gate.set)
        prompted, ran = await asyncio.gather(
            adk.aio.prompt(agent, "Ada"), adk.aio.run(runner, "u", "s", "Grace")
        )
        await ticker
        run_id = adk.runs.start(runner, "u", "s2", "Alan")
        waited = await adk.aio.wait(run_id, timeout=5)
        return prompted, ran, waited, ticks

    prompted, ran, waited, ticks = asyncio.run(main())
    assert (prompted, ran, waited) == ("hello Ada", "hello Grace", adk.Completed("hello Alan"))
    assert ticks > 5  # the loop ran while both calls waited on the model
    sessions.close()
