"""An MCP client as an agent's toolset (spec: "Pass McpToolset in an agent's tool list
to make discovered MCP schemas model-visible ... invocation context is not sent to
the MCP server"): a scripted conversation end to end, with the same validation,
timeouts, structural errors and confirmation as local tools."""

from __future__ import annotations

import json
import uuid

import pytest

import adk_actors as adk
from adk_actors import mcp
from adk_actors.mcp.toolset import model_name
from adk_actors.outcomes import Paused
from tests.adk_actors.mcp.conftest import EVERYTHING, SDK_SERVER, Recorder
from tests.adk_actors.mcp.servers import sdk_server


@pytest.fixture
def sessions():
    service = adk.sessions.InMemorySessionService()
    yield service
    service.close()


def tool_parts(sessions, user="u", session="s"):
    """(function calls, function responses) of the stored events, in order."""
    calls, responses = [], []
    for event in sessions.get_session("app", user, session).events:
        for part in event.content.parts if event.content is not None else []:
            if type(part).__name__ == "FunctionCallPart":
                calls.append((part.name, dict(part.args)))
            if type(part).__name__ == "FunctionResponsePart":
                responses.append((part.name, part.response))
    return calls, responses


def spy_tools(model):
    seen = []
    original = model.agenerate

    async def spy(config, history, tools):
        seen.append([dict(tool) for tool in tools or []])
        return await original(config, history, tools)

    model.agenerate = spy
    return seen


def test_an_agent_answers_with_an_mcp_tool_over_http(http_server, sessions):
    """An agent whose tools come from an MCP server: the model sees the discovered
    schema, the events show the MCP tool call and its response, and the server got
    the arguments and nothing of the invocation."""
    recorders = []

    def make_app():
        recorders.append(Recorder(sdk_server.build().streamable_http_app()))
        return recorders[-1]

    server = http_server(make_app)
    client = mcp.connect("streamable_http", server.base + "/mcp", allow_http_loopback=True)
    assert all(tool.is_async for tool in client.fetch())  # awaited on the reactor, no thread
    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "add", "args": {"a": 2, "b": 40}}]}, "The sum is 42."]
    )
    seen = spy_tools(model)
    agent = adk.spawn_agent("Calculator", {"provider": model}, tools=[client])
    runner = adk.Runner(agent, "app", sessions)
    assert runner.run("secret-user", "secret-session", "add 2 and 40") == "The sum is 42."
    declared = {tool["name"]: tool for tool in seen[0]}
    assert declared["add"]["parameters"]["required"] == ["a", "b"]
    calls, responses = tool_parts(sessions, "secret-user", "secret-session")
    assert calls == [("add", {"a": 2, "b": 40})]
    assert responses == [
        ("add", {"content": [{"type": "text", "text": "42"}], "structuredContent": {"result": 42}})
    ]
    sent = [json.loads(body) for body in recorders[-1].bodies if body]
    tool_calls = [m for m in sent if m.get("method") == "tools/call"]
    assert [m["params"]["arguments"] for m in tool_calls] == [{"a": 2, "b": 40}]
    wire = b"".join(recorders[-1].bodies)
    for private in (b"secret-user", b"secret-session", b"Calculator"):
        assert private not in wire  # invocation context is never sent
    client.close()


def test_an_agent_uses_the_npm_everything_server_over_stdio(sessions):
    assert EVERYTHING.exists(), "run `make test` (or npm install --prefix .mcp-node ...)"
    client = mcp.connect("stdio", [str(EVERYTHING), "stdio"], connect_timeout=30)
    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "echo", "args": {"message": "over stdio"}}]}, "echoed"]
    )
    agent = adk.spawn_agent("Echoer", {"provider": model}, tools=[client])
    assert adk.Runner(agent, "app", sessions).run("u", "s", "echo") == "echoed"
    calls, responses = tool_parts(sessions)
    assert calls == [("echo", {"message": "over stdio"})]
    assert "over stdio" in responses[0][1]["content"][0]["text"]
    client.close()


def test_arguments_are_validated_before_the_server_is_asked(sessions):
    client = mcp.connect("stdio", SDK_SERVER)
    key = uuid.uuid4().hex
    model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "bump", "args": {"key": 7}}]},
            {"tool_calls": [{"name": "bump", "args": {"key": key}}]},
            "done",
        ]
    )
    agent = adk.spawn_agent("Bumper", {"provider": model}, tools=[client])
    assert adk.Runner(agent, "app", sessions).run("u", "s", "bump") == "done"
    _, responses = tool_parts(sessions)
    assert responses[0][1]["error"]["type"] == "invalid_tool_arguments"
    assert responses[0][1]["error"]["validation"]["kind"] == "expected_type"
    assert responses[1][1]["content"][0]["text"] == f"{key}=1"
    assert client.call_tool("calls", {"key": key}).content[0]["text"] == "1"  # ran once
    client.close()


def test_tool_errors_and_timeouts_are_structural(sessions):
    client = mcp.connect("stdio", SDK_SERVER)
    model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "fail", "args": {"why": "no"}}]},
            {"tool_calls": [{"name": "slow", "args": {"seconds": 60}}]},
            "done",
        ]
    )
    agent = adk.spawn_agent(
        "Failing",
        # the agent's tool timeout applies (its parallel path; every call stands alone);
        # 3 s, so the quick failing call keeps its answer on a loaded machine (at 1.5 s it
        # once came back without a kind under the parallel suite, as a timed-out call
        # does); the slow call sleeps far longer than that
        {"provider": model, "tool_execution": {"mode": "parallel", "tool_timeout": 3.0}},
        tools=[client],
    )
    assert adk.Runner(agent, "app", sessions).run("u", "s", "go") == "done"
    _, responses = tool_parts(sessions)
    assert responses[0][1]["success"] is False
    assert responses[0][1]["error"].get("kind") == "mcp_tool_error", responses[0]
    assert responses[1][1] == {
        "success": False,
        "error": {"component": "tool", "operation": "slow", "reason": "tool_timeout"},
    }
    assert client.call_tool("add", {"a": 1, "b": 1}).content[0]["text"] == "2"
    client.close()


def test_confirmation_applies_to_mcp_tools(sessions):
    key = uuid.uuid4().hex
    client = mcp.connect("stdio", SDK_SERVER, require_confirmation={"bump": True})
    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "bump", "args": {"key": key}}]}, "bumped"]
    )
    agent = adk.spawn_agent("Careful", {"provider": model}, tools=[client])
    runner = adk.Runner(agent, "app", sessions)
    assert isinstance(runner.run("u", "s", "bump"), Paused)
    assert client.call_tool("calls", {"key": key}).content[0]["text"] == "0"  # not yet
    assert runner.resume("u", "s", {"confirmed": True}) == "bumped"
    assert client.call_tool("calls", {"key": key}).content[0]["text"] == "1"
    client.close()


def test_mcp_names_become_valid_tool_names():
    assert model_name("get-sum") == "get_sum"
    assert model_name("a.b/c") == "a_b_c"
    assert model_name("9lives") == "t_9lives"
    assert model_name("x" * 100) == "x" * 64
