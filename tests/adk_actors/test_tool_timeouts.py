"""An agent's ``tool_execution.tool_timeout`` bounds every tool call, serial or parallel:
one deadline rule, one ``tool_timeout`` failure, and a hung worker handled the same
way (a coroutine is cancelled, a sync tool's thread is abandoned, fenced and counted)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.agents.turn_context import agent_thread_stats
from tests.helpers import wait_until

TIMEOUT = 0.3
TIMED_OUT = {
    "success": False,
    "error": {"component": "tool", "operation": "hang", "reason": "tool_timeout"},
}
EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at teardown: the hung tools return and their threads go back to the pool."""
    event = threading.Event()
    yield event
    event.set()
    wait_until(lambda: sv.kernel_stats()["task_threads_abandoned"] == 0, timeout=30)


class Hang(adk.Tool):
    """A sync tool that blocks its thread until the test releases it."""

    name = "hang"
    description = "Never returns (until the test ends)."
    parameters = EMPTY
    parallel_safe = True

    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.entered = threading.Event()
        self.returned = threading.Event()

    def execute(self, args: dict[str, Any], ctx: Any) -> Any:
        self.entered.set()
        self.release.wait()
        self.returned.set()
        return {"late": True}


class AsyncHang(adk.Tool):
    """An async tool that sleeps far past any deadline; records its cancellation."""

    name = "hang"
    description = "Sleeps a minute."
    parameters = EMPTY
    parallel_safe = True

    def __init__(self) -> None:
        self.cancelled = threading.Event()

    async def execute(self, args: dict[str, Any], ctx: Any) -> Any:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return {"late": True}


@adk.tool
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


def hung_agent(name: str, mode: str, tool: adk.Tool) -> tuple[Any, adk.ScriptedProvider]:
    calls = [{"name": "hang", "args": {}, "id": "h"}, {"name": "add", "args": {"a": 2, "b": 3}}]
    model = adk.ScriptedProvider([{"tool_calls": calls}, "went on"], record_histories=10)
    agent = adk.spawn_agent(
        name,
        {"provider": model, "tool_execution": {"mode": mode, "tool_timeout": TIMEOUT}},
        tools=[tool, add],
    )
    return agent, model


def answered(model: adk.ScriptedProvider) -> list[dict[str, Any]]:
    """The function responses the model saw on its second call."""
    return [dict(part.response) for part in model.histories[1][-1].parts]


@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_a_hung_sync_tool_times_out_at_the_deadline_in_either_mode(mode, release):
    """Follows erlang_adk test/runtime/tasks/adk_task_test.erl tool_timeout_is_per_call_case:
    a call past its tool timeout is an error value (``tool_timeout``), the next call in
    the batch still runs, and the hung worker is stopped: its thread is abandoned
    (counted for the agent) and fenced (its late result goes nowhere)."""
    hang = Hang(release)
    agent, model = hung_agent(f"SyncHang_{mode}", mode, hang)
    started = time.monotonic()
    assert adk.prompt(agent, "go", timeout=30) == "went on"
    elapsed = time.monotonic() - started
    assert hang.entered.is_set()
    assert TIMEOUT <= elapsed < TIMEOUT + 1.5  # the deadline (plus its grace), not the turn's
    assert answered(model) == [TIMED_OUT, {"result": 5}]
    stats = agent_thread_stats(f"SyncHang_{mode}")
    assert stats["tool_threads_abandoned"] == 1 and stats["tool_threads"] == 1
    release.set()
    wait_until(lambda: hang.returned.is_set())
    wait_until(lambda: agent_thread_stats(f"SyncHang_{mode}")["tool_threads"] == 0)
    assert len(model.histories) == 2  # the late result reached nobody


@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_a_hung_async_tool_is_cancelled_at_the_deadline_in_either_mode(mode):
    hang = AsyncHang()
    agent, model = hung_agent(f"AsyncHang_{mode}", mode, hang)
    started = time.monotonic()
    assert adk.prompt(agent, "go", timeout=30) == "went on"
    assert time.monotonic() - started < TIMEOUT + 1.5
    assert answered(model) == [TIMED_OUT, {"result": 5}]
    assert hang.cancelled.wait(5)  # a coroutine holds no thread: it is cancelled
    assert agent_thread_stats(f"AsyncHang_{mode}")["tool_threads_abandoned"] == 0


def test_the_deadline_bounds_a_serial_call_under_a_runner(release):
    """The Runner's stored tool event carries the same ``tool_timeout`` failure."""
    hang = Hang(release)
    agent, _model = hung_agent("RunnerHang", "serial", hang)
    sessions = adk.sessions.InMemorySessionService()
    try:
        runner = adk.Runner(agent, "app", sessions)
        assert runner.run("u", "s", "go") == "went on"
        stored = [
            dict(part.response)
            for event in sessions.get_session("app", "u", "s").events
            for part in (event.content.parts if event.content is not None else [])
            if type(part).__name__ == "FunctionResponsePart"
        ]
        assert stored == [TIMED_OUT, {"result": 5}]
    finally:
        sessions.close()


def test_serial_calls_each_get_the_full_timeout():
    """Serial calls run one after another, each under its own deadline: two calls that
    each take most of the timeout both finish (no deadline is shared across them)."""

    @adk.tool
    def slow(n: int) -> int:
        """Takes a while."""
        time.sleep(TIMEOUT * 0.6)
        return n

    calls = [{"name": "slow", "args": {"n": n}} for n in (1, 2)]
    model = adk.ScriptedProvider([{"tool_calls": calls}, "done"], record_histories=10)
    agent = adk.spawn_agent(
        "SlowSerial",
        {"provider": model, "tool_execution": {"mode": "serial", "tool_timeout": TIMEOUT}},
        tools=[slow],
    )
    assert adk.prompt(agent, "go", timeout=30) == "done"
    assert answered(model) == [{"result": 1}, {"result": 2}]
