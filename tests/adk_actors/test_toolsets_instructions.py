"""Toolset snapshots and instruction templates."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time

import pytest

import adk_actors as adk
from adk_actors.tools.catalog import ToolCatalog
from adk_actors.tools.toolset import TurnListings
from providers.content import FunctionCallPart


class Backend(adk.Toolset):
    """A mutable backend, like an MCP server whose tools can change."""

    name = "weather-backend"

    def __init__(self):
        self.tool_name = "forecast"

    def fetch(self):
        outer = self

        class Forecast(adk.Tool):
            name = outer.tool_name
            description = "Forecast."
            parameters = {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            }

            def execute(self, args, ctx):
                return {"forecast": f"sunny in {args['city']}"}

        return [Forecast()]


def reason(fn):
    with pytest.raises(adk.AdkError) as info:
        fn()
    return info.value.reason


def test_a_renamed_backend_tool_fails_closed_until_refresh():
    backend = Backend()
    snapshot = backend.snapshot()
    script = [{"tool_calls": [{"name": "forecast", "args": {"city": "Oslo"}}]}, "first"]
    model = adk.ScriptedProvider(
        [*script, {"tool_calls": [{"name": "forecast", "args": {"city": "Oslo"}}]}, "second"],
        record_histories=10,
    )
    agent = adk.spawn_agent("Snap", {"provider": model}, tools=[snapshot])
    assert adk.prompt(agent, "weather") == "first"
    assert model.histories[1][-1].parts[0].response == {"forecast": "sunny in Oslo"}
    backend.tool_name = "forecast_v2"  # the backend renames its tool
    assert adk.prompt(agent, "weather again") == "second"
    assert model.histories[3][-1].parts[0].response == {
        "success": False,
        "error": {"kind": "tool_catalog_changed", "operation": "forecast"},
    }
    refreshed = snapshot.refresh()
    assert [tool.name for tool in refreshed.tools] == ["forecast_v2"]


def test_toolset_names_are_checked_like_any_tool():
    @adk.tool
    def forecast(city: str) -> str:
        return city

    error = reason(
        lambda: adk.spawn_agent(
            "Dup", {"provider": adk.ScriptedProvider(["x"])}, tools=[Backend(), forecast]
        )
    )
    assert error[:2] == ("duplicate_tool_name", "forecast") and "toolset weather-backend" in error


class CountingBackend(adk.Toolset):
    """A backend that counts its listings; its tool is sync or `async def`, and it lists
    with `fetch` (and, for `native_async`, its own `afetch`)."""

    name = "counting-backend"

    def __init__(self, async_tool=False, native_async=False, slow=0.0):
        self.async_tool = async_tool
        self.native_async = native_async
        self.slow = slow
        self.tool_name = "forecast"
        self.listings = []  # "fetch" | "afetch", one per listing
        self.fail_next = False
        self.lock = threading.Lock()

    def fetch(self):
        with self.lock:
            self.listings.append("fetch")
            failing, self.fail_next = self.fail_next, False
        time.sleep(self.slow)
        if failing:
            raise adk.AdkError("backend_down", "the backend is down")
        return [self.tool()]

    def tool(self):
        outer = self

        class Forecast(adk.Tool):
            name = outer.tool_name
            description = "Forecast."
            parallel_safe = True
            parameters = {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            }

            def execute(self, args, ctx):
                return {"forecast": f"sunny in {args['city']}"}

        class AsyncForecast(Forecast):
            async def execute(self, args, ctx):
                await asyncio.sleep(0)
                asyncio.get_running_loop()  # on the reactor, not a pool thread
                return {"forecast": f"sunny in {args['city']}", "awaited": True}

        return AsyncForecast() if self.async_tool else Forecast()


class NativeAsyncBackend(CountingBackend):
    async def afetch(self):
        with self.lock:
            self.listings.append("afetch")
        await asyncio.sleep(self.slow)
        return [self.tool()]


agents = itertools.count()


def forecasts(*cities):
    return {"tool_calls": [{"name": "forecast", "args": {"city": city}} for city in cities]}


def tool_responses(model, call_index):
    return [dict(part.response) for part in model.histories[call_index][-1].parts]


@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_an_async_toolset_tool_is_awaited_like_a_local_async_tool(mode):
    """Review finding: the toolset guard called an `async def execute` synchronously, so
    the coroutine was never awaited and the model got ``invalid_tool_result``."""
    backend = CountingBackend(async_tool=True)
    snapshot = backend.snapshot()
    assert ToolCatalog([snapshot]).is_async("forecast")
    model = adk.ScriptedProvider([forecasts("Oslo", "Lima"), "done"], record_histories=10)
    agent = adk.spawn_agent(
        f"AsyncSet_{mode}",
        {"provider": model, "tool_execution": {"mode": mode}},
        tools=[snapshot],
    )
    assert adk.prompt(agent, "weather") == "done"
    assert tool_responses(model, 1) == [
        {"forecast": "sunny in Oslo", "awaited": True},
        {"forecast": "sunny in Lima", "awaited": True},
    ]


def test_an_async_toolset_tool_still_fails_closed_when_the_backend_changes():
    backend = NativeAsyncBackend(async_tool=True, native_async=True)
    model = adk.ScriptedProvider(
        [forecasts("Oslo"), "first", forecasts("Oslo"), "second"], record_histories=10
    )
    agent = adk.spawn_agent("AsyncChanged", {"provider": model}, tools=[backend.snapshot()])
    assert adk.prompt(agent, "weather") == "first"
    assert tool_responses(model, 1)[0]["awaited"] is True
    backend.tool_name = "forecast_v2"
    assert adk.prompt(agent, "weather again") == "second"
    assert tool_responses(model, 3) == [
        {"success": False, "error": {"kind": "tool_catalog_changed", "operation": "forecast"}}
    ]
    assert backend.listings == ["fetch", "afetch", "afetch"]  # async tools list with afetch


@pytest.mark.parametrize(
    ("mode", "backend"),
    [
        ("serial", lambda: CountingBackend()),
        ("parallel", lambda: CountingBackend(slow=0.05)),
        ("serial", lambda: CountingBackend(async_tool=True)),
        ("parallel", lambda: NativeAsyncBackend(async_tool=True, native_async=True, slow=0.05)),
    ],
    ids=["serial", "parallel", "serial_async", "parallel_async"],
)
def test_a_toolset_is_listed_once_per_turn(mode, backend):
    """Review finding: the guard listed the backend before every call (for MCP, a round
    trip per call). A turn lists each toolset once, at its first call (concurrent first
    calls share that listing), and checks every call of the turn against it; the next
    turn lists again, so a change between turns still fails closed."""
    backend = backend()
    model = adk.ScriptedProvider(
        [
            *(forecasts("Oslo", "Lima", "Rome"), forecasts("Pune", "Kyiv"), "first"),
            *(forecasts("Oslo"), "second"),
        ],
        record_histories=10,
    )
    agent = adk.spawn_agent(
        f"Listed_{next(agents)}",
        {"provider": model, "tool_execution": {"mode": mode, "max_concurrency": 4}},
        tools=[backend.snapshot()],
    )
    assert len(backend.listings) == 1  # the snapshot
    assert adk.prompt(agent, "weather") == "first"
    assert len(tool_responses(model, 1)) == 3 and len(tool_responses(model, 2)) == 2
    assert all("forecast" in response for response in tool_responses(model, 2))
    assert len(backend.listings) == 2  # one listing for the five calls of the turn
    assert adk.prompt(agent, "again") == "second"
    assert len(backend.listings) == 3


def test_a_failed_listing_is_not_kept_for_the_turn():
    """A listing that fails answers that call with the backend's reason; the next call
    of the same turn asks the backend again."""
    backend = CountingBackend()
    model = adk.ScriptedProvider(
        [forecasts("Oslo"), forecasts("Lima"), "done"], record_histories=10
    )
    agent = adk.spawn_agent("Flaky", {"provider": model}, tools=[backend.snapshot()])
    backend.fail_next = True
    assert adk.prompt(agent, "weather") == "done"
    assert tool_responses(model, 1) == [
        {
            "success": False,
            "error": {
                "component": "tool",
                "operation": "forecast",
                "class": "AdkError",
                "reason": "backend_down",
            },
        }
    ]
    assert tool_responses(model, 2) == [{"forecast": "sunny in Lima"}]
    assert len(backend.listings) == 3


def test_outside_a_turn_each_call_lists_the_backend():
    backend = CountingBackend()
    catalog = ToolCatalog([backend.snapshot()])
    call = FunctionCallPart("forecast", {"city": "Oslo"}, "c1")
    for _ in range(2):
        assert catalog.call(call, adk.ToolContext()).response == {"forecast": "sunny in Oslo"}
    assert len(backend.listings) == 3


def test_a_stopped_lister_or_waiter_never_spoils_the_shared_listing():
    """Concurrent first calls of a turn share one listing: a waiter that is cancelled
    leaves it to the others; a lister that is cancelled (its deadline) lets the next
    waiter list again instead of failing it."""
    backend = NativeAsyncBackend(async_tool=True, native_async=True, slow=0.2)

    async def scenario():
        listings = TurnListings()
        lister = asyncio.create_task(listings.alisting(backend))
        await asyncio.sleep(0.05)
        quitter, waiter = (asyncio.create_task(listings.alisting(backend)) for _ in range(2))
        await asyncio.sleep(0.05)
        quitter.cancel()
        assert list(await lister) == ["forecast"] and list(await waiter) == ["forecast"]
        assert quitter.cancelled() and backend.listings == ["afetch"]

        listings = TurnListings()
        lister = asyncio.create_task(listings.alisting(backend))
        await asyncio.sleep(0.05)
        waiter = asyncio.create_task(listings.alisting(backend))
        await asyncio.sleep(0.05)
        lister.cancel()
        assert list(await waiter) == ["forecast"]
        assert lister.cancelled() and backend.listings == ["afetch"] * 3

    asyncio.run(scenario())


def test_instruction_templates_over_scoped_state():
    seen = []
    model = adk.ScriptedProvider(fn=lambda history, tools: {"text": "ok"})
    original_generate = model.agenerate  # turns call the model as a coroutine

    async def spy(config, history, tools):
        seen.append(config.get("instructions"))
        return await original_generate(config, history, tools)

    model.agenerate = spy
    agent = adk.spawn_agent(
        "Greeter", {"provider": model, "instructions": "Greet {user:name}. Plan: {app:plan?}."}
    )
    adk.invoke(agent, "hi", scope=("app", "u1", "s1"), state={"user:name": "Ada"})
    assert seen == ["Greet Ada. Plan: ."]
    assert reason(lambda: adk.invoke(agent, "hi", scope=("app", "u1", "s1"))) == (
        "missing_instruction_key",
        "user:name",
    )
    assert reason(
        lambda: adk.spawn_agent("Leaky", {"provider": model, "instructions": "Use {user:api_key}"})
    ) == (
        "secret_instruction_key",
        "user:api_key",
    )


def test_dynamic_instruction_provider_gets_a_read_only_scope():
    captured = {}

    def instructions(scope):
        captured["scope"] = scope
        return f"You serve {scope['user_id']} ({len(scope['state'])} state keys)."

    seen = []
    model = adk.ScriptedProvider(fn=lambda history, tools: {"text": "ok"})
    original = model.agenerate  # turns call the model as a coroutine

    async def spy(config, history, tools):
        seen.append(config["instructions"])
        return await original(config, history, tools)

    model.agenerate = spy
    agent = adk.spawn_agent("Dynamic", {"provider": model, "instructions": instructions})
    adk.invoke(agent, "hi", scope=("app", "u7", "s"), state={"k": 1})
    assert seen == ["You serve u7 (1 state keys)."]
    with pytest.raises(TypeError):
        captured["scope"]["user_id"] = "someone else"  # read-only

    def broken(scope):
        raise RuntimeError("bug")

    failing = adk.spawn_agent(
        "Broken", {"provider": adk.ScriptedProvider(["x"]), "instructions": broken}
    )
    assert reason(lambda: adk.prompt(failing, "hi")) == "instruction_provider_failed"
