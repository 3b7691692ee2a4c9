"""Hung sync tools in one agent cannot starve the others: each agent has its own
bounded share of the kernel's task pool, and threads stuck past their deadline are
counted."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.agents.spec import compile_spec
from adk_actors.agents.thread_limits import DEFAULT_MAX_TOOL_THREADS, check_max_tool_threads
from adk_actors.agents.turn_context import agent_thread_stats
from providers.content import FunctionResponsePart
from providers.errors import AdkError
from supervision import SyncPool, Task, TaskBusy
from supervision.aio import wait_task
from tests.helpers import wait_until

HUNG_CALLS = 40


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at teardown: the hung tools return and their threads go back to the pool."""
    event = threading.Event()
    yield event
    event.set()
    wait_until(lambda: sv.kernel_stats()["task_threads_abandoned"] == 0, timeout=30)


def hanging_tool(release: threading.Event, entered: list[int]) -> adk.Tool:
    lock = threading.Lock()

    class Hang(adk.Tool):
        name = "hang"
        description = "Never returns (until the test ends)."
        parallel_safe = True
        parameters = {"type": "object", "properties": {}, "additionalProperties": False}

        def execute(self, args: dict[str, Any], ctx: Any) -> Any:
            with lock:
                entered.append(1)
            release.wait()
            return {"late": True}

    return Hang()


def add_tool() -> adk.Tool:
    class Add(adk.Tool):
        name = "add"
        description = "Adds two numbers."
        parameters = {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        }

        def execute(self, args: dict[str, Any], ctx: Any) -> Any:
            return {"sum": args["a"] + args["b"]}

    return Add()


def healthy_model(history: Any, tools: Any) -> Any:
    answers = [p for p in history[-1].parts if isinstance(p, FunctionResponsePart)]
    if not answers:
        return {"tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}}]}
    return {"text": f"sum={answers[0].response['sum']}"}


def test_forty_hung_tools_in_one_agent_do_not_starve_another(release):
    entered: list[int] = []
    calls = [{"name": "hang", "args": {}, "id": f"c{n}"} for n in range(HUNG_CALLS)]
    hung_model = adk.ScriptedProvider(
        [{"tool_calls": calls}, "after the hang", {"tool_calls": calls[:1]}, "still here"],
        record_histories=10,
    )
    hung = adk.spawn_agent(
        "Hung",
        {
            "provider": hung_model,
            "tool_execution": {
                "mode": "parallel",
                "max_concurrency": HUNG_CALLS,
                "tool_timeout": 1,
            },
        },
        tools=[hanging_tool(release, entered)],
    )
    answers: list[Any] = []
    asker = threading.Thread(target=lambda: answers.append(adk.prompt(hung, "go", timeout=60)))
    asker.start()
    try:
        # the agent's share lets only max_tool_threads of its 40 calls take a thread
        wait_until(lambda: len(entered) == DEFAULT_MAX_TOOL_THREADS, timeout=30)
        stats = agent_thread_stats("Hung")
        assert stats["tool_threads"] == DEFAULT_MAX_TOOL_THREADS
        assert stats["max_tool_threads"] == DEFAULT_MAX_TOOL_THREADS

        # meanwhile another agent's sync tool and callback run, directly and via a Runner
        seen: list[str] = []
        healthy = adk.spawn_agent(
            "Healthy",
            {
                "provider": adk.ScriptedProvider(fn=healthy_model),
                "callbacks": {"before_tool": lambda ctx, call: seen.append(call.name)},
            },
            tools=[add_tool()],
        )
        assert adk.prompt(healthy, "add", timeout=60) == "sum=5"
        runner = adk.Runner(healthy, "app", adk.sessions.InMemorySessionService())
        assert runner.run("u", "s", "add") == "sum=5"
        assert seen == ["add", "add"]

        # the hung calls time out: the turn goes on; their threads stay stuck, counted
        asker.join(60)
        assert answers == ["after the hang"]
        assert len(entered) == DEFAULT_MAX_TOOL_THREADS  # the waiting ones never started
        stats = agent_thread_stats("Hung")
        assert stats["tool_threads_abandoned"] == DEFAULT_MAX_TOOL_THREADS
        assert stats["tool_threads_waiting"] == 0
        assert sv.kernel_stats()["task_threads_abandoned"] >= DEFAULT_MAX_TOOL_THREADS
        timed_out = [r["error"]["reason"] for r in map(dict, responses(hung_model, 1))]
        assert timed_out == ["tool_timeout"] * HUNG_CALLS

        # a share held only by stuck threads refuses new work at once: the turn goes on
        assert adk.prompt(hung, "again", timeout=60) == "still here"
        assert agent_thread_stats("Hung")["capacity_exhausted"] >= 1
        (refused,) = responses(hung_model, 3)
        assert refused["success"] is False
        assert len(entered) == DEFAULT_MAX_TOOL_THREADS

        # and the healthy agent still answers
        assert adk.prompt(healthy, "add", timeout=60) == "sum=5"
    finally:
        release.set()
        asker.join(60)
    wait_until(lambda: agent_thread_stats("Hung")["tool_threads"] == 0, timeout=30)


def responses(model: adk.ScriptedProvider, call_index: int) -> list[Any]:
    """The function responses the model saw at call `call_index`."""
    return [part.response for part in model.histories[call_index][-1].parts]


# -- the kernel's shares ------------------------------------------------------------------------


def test_a_share_bounds_its_tasks_queues_the_rest_and_refuses_when_hung(release):
    share = SyncPool.Share("test", 2, max_waiting=3)
    started: list[int] = []
    lock = threading.Lock()

    def work(n: int) -> int:
        with lock:
            started.append(n)
        release.wait()
        return n

    tasks = [Task.start(work, n, share=share) for n in range(5)]
    wait_until(lambda: len(started) == 2, timeout=10)
    assert share.stats() | {"refused": 0} == {
        "limit": 2,
        "active": 2,
        "abandoned": 0,
        "waiting": 3,
        "refused": 0,
    }
    with pytest.raises(TaskBusy) as full:  # 2 run, 3 wait: the line is full
        Task.start(work, 9, share=share)
    assert full.value.reason == "capacity_exhausted"
    for task in tasks[:2]:
        task.kill()  # the running ones: abandoned, their threads still busy
    wait_until(lambda: share.stats()["abandoned"] == 2, timeout=10)
    assert sv.kernel_stats()["task_threads_abandoned"] >= 2
    with pytest.raises(TaskBusy) as hung:  # every slot is held by a stuck thread
        Task.start(work, 10, share=share)
    assert hung.value.reason == "capacity_exhausted"
    assert share.stats()["refused"] == 2
    release.set()
    assert [task.wait(10) for task in tasks[2:]] == [2, 3, 4]  # the waiting ones ran after
    wait_until(lambda: share.stats()["active"] == 0, timeout=10)


def test_abandoned_threads_are_replaced_up_to_a_bound(release):
    pool = SyncPool(max_threads=2, max_queue=10, max_abandoned=1)
    tasks = [Task.start(release.wait, pool=pool) for _ in range(2)]
    wait_until(lambda: pool.stats()["busy"] == 2, timeout=10)
    for task in tasks:
        task.kill()
    assert pool.stats()["abandoned"] == 2
    replacement = Task.start(lambda: "fresh", pool=pool)  # a third thread, though 2 are hung
    assert replacement.wait(10) == "fresh"
    assert pool.stats()["threads"] == 3
    stuck = Task.start(release.wait, pool=pool)  # takes the replacement thread
    wait_until(lambda: pool.stats()["busy"] == 3, timeout=10)
    stuck.kill()
    late = Task.start(lambda: "queued", pool=pool)  # no fourth thread: it waits in the queue
    assert pool.stats()["threads"] == 3 and pool.stats()["queued"] == 1
    release.set()
    assert late.wait(10) == "queued"


def test_max_tool_threads_values(monkeypatch):
    assert check_max_tool_threads(None) == DEFAULT_MAX_TOOL_THREADS
    assert check_max_tool_threads(256) == 256
    for bad in (0, 257, True, 2.0, "8"):
        with pytest.raises(AdkError) as info:
            check_max_tool_threads(bad)
        assert info.value.reason == "invalid_max_tool_threads"
    monkeypatch.setenv("ADK_MAX_TOOL_THREADS", "16")
    assert check_max_tool_threads(None) == 16
    monkeypatch.setenv("ADK_MAX_TOOL_THREADS", "lots")
    with pytest.raises(AdkError):
        check_max_tool_threads(None)


def test_max_tool_threads_is_an_agent_config_key():
    scripted = {"provider": "scripted", "script": [{"text": "ok"}]}
    assert compile_spec("Few", {**scripted, "max_tool_threads": 2}).max_tool_threads == 2
    assert compile_spec("Default", scripted).max_tool_threads == DEFAULT_MAX_TOOL_THREADS
    with pytest.raises(AdkError) as info:
        compile_spec("Bad", {**scripted, "max_tool_threads": 0})
    assert info.value.reason == "invalid_max_tool_threads"


def test_a_serial_call_refused_for_capacity_is_a_tool_error_and_the_turn_goes_on(release):
    entered: list[int] = []
    call = {"name": "hang", "args": {}}
    model = adk.ScriptedProvider(
        [{"tool_calls": [call]}, {"tool_calls": [call]}, "refused"], record_histories=10
    )
    agent = adk.spawn_agent(
        "SerialHung",
        {"provider": model, "max_tool_threads": 1, "turn_timeout": 0.5},
        tools=[hanging_tool(release, entered)],
    )
    with pytest.raises(AdkError) as info:  # the turn dies; its tool's thread stays stuck
        adk.prompt(agent, "go", timeout=60)
    assert info.value.reason == "turn_timeout"
    wait_until(lambda: agent_thread_stats("SerialHung")["tool_threads_abandoned"] == 1)
    assert adk.prompt(agent, "again", timeout=60) == "refused"
    (refused,) = responses(model, 2)
    assert refused == {
        "success": False,
        "error": {"kind": "capacity_exhausted", "operation": "hang"},
    }
    assert len(entered) == 1  # the refused call never took a thread
    threads = adk.agent_info(agent)["threads"]  # stuck threads are visible in its status
    assert threads["tool_threads_abandoned"] == 1 and threads["capacity_exhausted"] == 1


def test_a_finished_task_never_counts_as_hung_for_the_next_one():
    """Review finding: a task woke its waiter before its thread left the share, so the
    next task found a full share of not-alive members and was refused."""
    share = SyncPool.Share("sequential", 1)

    async def one_after_another() -> int:
        for _ in range(5_000):
            await wait_task(Task.start(lambda: 1, share=share))  # TaskBusy would escape
        return share.stats()["refused"]

    assert Task.start(one_after_another).wait(120) == 0
