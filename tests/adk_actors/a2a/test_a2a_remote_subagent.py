"""The sub-agent form of a remote A2A agent (issue 19 §2, Review2 2): `RemoteAgent.spawn`
makes a local proxy agent whose model is the remote agent (`A2AProvider`), against
`adk.a2a.serve` of a scripted agent and the scripted loopback peer of test_a2a_client.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

import adk_actors as adk
from adk_actors.a2a.client import connect
from adk_actors.a2a.remote_agent import RemoteAgent
from adk_actors.a2a.remote_provider import A2AProvider, answer_text
from adk_actors.a2a.server import A2AServer, serve
from providers import protocol
from providers.content import from_text
from tests.adk_actors.a2a.test_a2a_client import (
    FixturePeer,
    make_peer,
    peer,
    reason,
    rpc_result,
)

__all__ = ["make_peer", "peer"]  # the fixtures, shared with test_a2a_client.py

TOKEN = "remote-subagent-token-0123456789abcdef"


def bearer() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def echo(history: Any, tools: Any) -> dict[str, Any]:
    return {"text": "echo: " + history[-1].text_value()}


@pytest.fixture
def remote_echo() -> Iterator[tuple[A2AServer, adk.ScriptedProvider]]:
    """`adk.a2a.serve` of a scripted echo agent (bearer auth), and its model."""
    model = adk.ScriptedProvider(fn=echo, inline=True, record_histories=10)
    server = serve(adk.spawn_agent("Echo", {"provider": model}), auth_token=TOKEN)
    try:
        yield server, model
    finally:
        server.stop()


def remote(server: A2AServer) -> RemoteAgent:
    return RemoteAgent(server.url, auth=bearer, auth_scheme="bearer", allow_http_loopback=True)


def test_a_parent_delegates_to_a_remote_agent_named_in_its_sub_agents(
    remote_echo: tuple[A2AServer, adk.ScriptedProvider],
) -> None:
    """Review2 2: ``sub_agents`` names the proxy like any local agent; the parent's
    model gets the remote answer as the sub-agent's result, and the remote model saw
    only the delegated prompt (never the parent's conversation)."""
    server, remote_model = remote_echo
    remote(server).spawn("RemoteEcho")
    parent_model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "RemoteEcho", "args": {"prompt": "ping"}}]},
            {"text": "relayed"},
        ],
        record_histories=10,
    )
    parent = adk.spawn_agent(
        "Coordinator",
        {
            "provider": parent_model,
            "sub_agents": {"RemoteEcho": {"description": "Echoes, remotely."}},
        },
    )
    assert adk.prompt(parent, "ask the remote echo") == "relayed"
    assert parent_model.histories[1][-1].parts[0].response == {"result": "echo: ping"}
    (seen,) = remote_model.histories
    texts = [item.text_value() for item in seen if item.role == "user"]
    assert texts == ["ping"]


def test_prompt_and_a_workflow_reach_the_proxy_each_call_a_fresh_remote_context(
    remote_echo: tuple[A2AServer, adk.ScriptedProvider],
) -> None:
    """Review2 2: adk.prompt and adk.sequential use the proxy like a local agent; each
    call is a new remote task in a new remote context (the documented choice)."""
    server, _ = remote_echo
    proxy = remote(server).spawn("EchoProxy")
    assert adk.prompt(proxy, "one") == "echo: one"
    assert adk.sequential([proxy, proxy], "two") == "echo: echo: two"
    tasks = connect(
        server.url, auth=bearer, auth_scheme="bearer", allow_http_loopback=True
    ).list_tasks()["tasks"]
    assert len(tasks) == 3
    assert len({task["contextId"] for task in tasks}) == 3
    assert {task["status"]["state"] for task in tasks} == {"TASK_STATE_COMPLETED"}


def test_a_remote_failure_surfaces_typed() -> None:
    """Review2 2: a remote task that FAILED is ``("a2a_remote_task_failed", state)`` for
    adk.prompt on the proxy, and a failed sub-agent result for a parent's model."""
    broken = adk.spawn_agent(
        "Broken", {"provider": adk.ScriptedProvider(fn=lambda h, t: {"error": "boom"})}
    )
    server = serve(broken, auth_token=TOKEN)
    try:
        proxy = remote(server).spawn("RemoteBroken")
        refused = reason(lambda: adk.prompt(proxy, "x"))
        assert refused == ("a2a_remote_task_failed", "TASK_STATE_FAILED")
        parent_model = adk.ScriptedProvider(
            [
                {"tool_calls": [{"name": "RemoteBroken", "args": {"prompt": "x"}}]},
                {"text": "sorry"},
            ],
            record_histories=10,
        )
        parent = adk.spawn_agent(
            "Asker",
            {"provider": parent_model, "sub_agents": {"RemoteBroken": {"description": "Fails."}}},
        )
        assert adk.prompt(parent, "go") == "sorry"
        failed = parent_model.histories[1][-1].parts[0].response
        assert failed["success"] is False
        # a sub-agent's tuple reason reaches a model as the catalog's stable word
        assert failed["error"]["class"] == "AdkError"
    finally:
        server.stop()


def test_an_input_required_answer_is_the_question(peer: FixturePeer) -> None:
    """Review2 2: INPUT_REQUIRED answers with the status message (the question); only
    the latest user text is sent, as a new task with no context or task id."""
    asking = {
        "id": "task-9",
        "contextId": "ctx-9",
        "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": "which day?"}]},
        },
        "artifacts": [{"artifactId": "a", "parts": [{"text": "an older draft"}]}],
    }
    peer.answer = lambda request: rpc_result(request, {"task": asking})
    proxy = RemoteAgent(peer.base, allow_http_loopback=True).spawn("Booker")
    assert adk.prompt(proxy, "book a room") == "which day?"
    (sent,) = peer.seen("rpc")
    message = sent["body"]["params"]["message"]
    assert [part["text"] for part in message["parts"]] == ["book a room"]
    assert "contextId" not in message and "taskId" not in message


def test_the_outbound_rules_still_apply() -> None:
    """Review2 2: the proxy's client keeps the outbound rules: http (even to loopback)
    is refused without allow_http_loopback, typed, when the proxy is first asked."""
    model = adk.ScriptedProvider(fn=echo, inline=True)
    server = serve(adk.spawn_agent("Plain", {"provider": model}), auth_token=TOKEN)
    try:
        proxy = adk.spawn_agent("Insecure", {"provider": A2AProvider(server.url, auth=bearer)})
        assert reason(lambda: adk.prompt(proxy, "x")) == "insecure_a2a_destination"
        assert model.calls == 0
    finally:
        server.stop()


def test_a_proxy_has_no_local_model_settings(peer: FixturePeer) -> None:
    """Review2 2: what would never reach the remote agent is refused, not ignored."""
    tool = RemoteAgent(peer.base, allow_http_loopback=True)
    assert tool.spawn().name == "Peer"  # the card's name by default, like the tool
    assert reason(lambda: tool.spawn("P1", instructions="be brief")) == (
        "invalid_a2a_spawn_option",
        "instructions",
    )
    assert reason(lambda: tool.spawn("P2", provider="scripted"))[0] == "invalid_a2a_spawn_option"
    provider = A2AProvider(peer.base, allow_http_loopback=True)
    refused = reason(lambda: adk.spawn_agent("P3", {"provider": provider, "model": "x"}))
    assert refused == ("unknown_config_keys", ("model",))
    assert peer.seen("rpc") == []


def test_the_provider_runs_sync_outside_a_loop_and_async_inside_one(peer: FixturePeer) -> None:
    """Review2 2 / 3: `generate` (sync) runs on a private loop from plain code and is
    refused inside a running loop, where `agenerate` awaits the remote call."""
    provider = A2AProvider(peer.base, allow_http_loopback=True)
    config = {"provider": provider}
    assert protocol.generate(config, [from_text("hi")]) == "done"

    async def inside() -> tuple[Any, Any]:
        refused = reason(lambda: protocol.generate(config, [from_text("hi")]))
        return refused, await protocol.agenerate(config, [from_text("again")])

    refused, answered = asyncio.run(inside())
    assert refused == ("a2a_sync_call_in_event_loop", "agenerate")
    assert answered == "done"
    assert reason(lambda: protocol.generate(config, [])) == ("invalid_a2a_request", "prompt")


def test_answer_text_reads_every_outcome() -> None:
    """Artifacts for COMPLETED (the status message without any), a reply message, and
    a typed failure for the other states (REJECTED, AUTH_REQUIRED, WORKING)."""

    def task(state: str, *, said: str = "", made: str = "") -> dict[str, Any]:
        status: dict[str, Any] = {"state": state}
        if said:
            status["message"] = {"parts": [{"text": said}]}
        artifacts = [{"parts": [{"text": made}, {"data": {"n": 1}}]}] if made else []
        return {"task": {"id": "t", "status": status, "artifacts": artifacts}}

    assert answer_text(task("TASK_STATE_COMPLETED", said="ok", made="result")) == 'result\n{"n":1}'
    assert answer_text(task("TASK_STATE_COMPLETED", said="ok")) == "ok"
    assert answer_text({"message": {"parts": [{"text": "hello"}]}}) == "hello"
    for state in ("TASK_STATE_REJECTED", "TASK_STATE_AUTH_REQUIRED", "TASK_STATE_WORKING"):
        assert reason(lambda state=state: answer_text(task(state, said="no"))) == (
            "a2a_remote_task_failed",
            state,
        )
