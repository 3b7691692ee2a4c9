"""`RemoteAgent`: a remote A2A agent as a tool of a local agent (spawn_agent(tools=[...])),
against `adk.a2a.serve` and the scripted loopback peer of test_a2a_client.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from starlette.responses import Response

import adk_actors as adk
from adk_actors.a2a.remote_agent import RemoteAgent, summary, tool_name
from adk_actors.a2a.server import serve
from tests.adk_actors.a2a.test_a2a_client import (
    FixturePeer,
    make_peer,
    peer,
    plain_card,
    reason,
    rpc_failure,
    rpc_result,
    task_json,
)

__all__ = ["make_peer", "peer"]  # the fixtures, shared with test_a2a_client.py

TOKEN = "remote-agent-token-0123456789abcdef"


def echo(history: Any, tools: Any) -> dict[str, Any]:
    return {"text": "echo: " + history[-1].text_value()}


def tool_response(model: adk.ScriptedProvider, turn: int) -> Any:
    """What the tool answered the model (the last part of its `turn`-th history)."""
    return model.histories[turn][-1].parts[0].response


def test_a_remote_agent_served_by_adk_is_a_tool_of_a_local_agent() -> None:
    remote = adk.spawn_agent("Echo", {"provider": adk.ScriptedProvider(fn=echo, inline=True)})
    server = serve(remote, auth_token=TOKEN)
    try:
        tool = RemoteAgent(
            server.url,
            auth=lambda: {"Authorization": f"Bearer {TOKEN}"},
            auth_scheme="bearer",
            allow_http_loopback=True,
        )
        assert tool.name == "Echo" and tool.description == "The Echo agent."
        assert tool.schema()["parameters"]["required"] == ["prompt"]
        model = adk.ScriptedProvider(
            [{"tool_calls": [{"name": "Echo", "args": {"prompt": "ping"}}]}, {"text": "relayed"}],
            record_histories=10,
        )
        local = adk.spawn_agent("Local", {"provider": model}, tools=[tool])
        assert adk.prompt(local, "ask the echo agent") == "relayed"
        answer = tool_response(model, 1)
        assert answer["state"] == "TASK_STATE_COMPLETED"
        assert answer["text"] == "echo: ping"
        assert answer["task_id"].startswith("task-") and answer["context_id"]
    finally:
        server.stop()


def test_a_task_that_asks_for_input_is_continued_with_its_task_id(peer: FixturePeer) -> None:
    """The model sees INPUT_REQUIRED with the question, then answers with task_id."""

    def answer(request: dict[str, Any]) -> Response:
        message = request["params"]["message"]
        if message.get("taskId") == "task-7":
            return rpc_result(request, {"task": task_json("task-7", text="booked")})
        asking = {
            "id": "task-7",
            "contextId": "ctx-1",
            "status": {
                "state": "TASK_STATE_INPUT_REQUIRED",
                "message": {
                    "messageId": "m-q",
                    "role": "ROLE_AGENT",
                    "parts": [{"text": "which day?"}],
                },
            },
        }
        return rpc_result(request, {"task": asking})

    peer.answer = answer
    tool = RemoteAgent(peer.base, name="booker", allow_http_loopback=True)
    model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "booker", "args": {"prompt": "book a room"}}]},
            {"tool_calls": [{"name": "booker", "args": {"prompt": "monday", "task_id": "task-7"}}]},
            {"text": "done"},
        ],
        record_histories=10,
    )
    local = adk.spawn_agent("Planner", {"provider": model}, tools=[tool])
    assert adk.prompt(local, "book") == "done"
    first, second = tool_response(model, 1), tool_response(model, 2)
    assert first == {
        "state": "TASK_STATE_INPUT_REQUIRED",
        "task_id": "task-7",
        "context_id": "ctx-1",
        "text": "which day?",
    }
    assert second["state"] == "TASK_STATE_COMPLETED" and second["text"] == "booked"
    assert peer.seen("rpc")[1]["body"]["params"]["message"]["taskId"] == "task-7"


def test_a_remote_failure_reaches_the_model_as_a_failed_tool_result(peer: FixturePeer) -> None:
    peer.answer = lambda request: rpc_failure(request, -32001, "task not found")
    tool = RemoteAgent(peer.base, allow_http_loopback=True)
    model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "Peer", "args": {"prompt": "x", "task_id": "task-gone"}}]},
            {"text": "sorry"},
        ],
        record_histories=10,
    )
    local = adk.spawn_agent("Asker", {"provider": model}, tools=[tool])
    assert adk.prompt(local, "go") == "sorry"
    refusal = tool_response(model, 1)
    assert refusal["success"] is False
    assert refusal["error"]["reason"] == "a2a_rpc_error"  # the stable head of the typed reason


def test_construction_applies_the_outbound_rules_and_names_the_tool(
    make_peer: Callable[..., FixturePeer],
) -> None:
    peer = make_peer(lambda rpc_url: plain_card(rpc_url, name="Research Agent-2"))
    assert reason(lambda: RemoteAgent(peer.base)) == "insecure_a2a_destination"
    assert RemoteAgent(peer.base, allow_http_loopback=True).name == "Research_Agent_2"
    assert (
        RemoteAgent(peer.base, allow_http_loopback=True, description="Finds papers.").description
        == "Finds papers."
    )
    assert tool_name("2fast") == "a_2fast" and tool_name("") == "remote_agent"


def test_summary_reads_a_message_answer_and_data_parts() -> None:
    answer = {
        "message": {
            "messageId": "m",
            "role": "ROLE_AGENT",
            "contextId": "c",
            "parts": [{"text": "hi"}, {"data": {"n": 1}}],
        }
    }
    assert summary(answer) == {
        "state": "MESSAGE",
        "task_id": None,
        "context_id": "c",
        "text": 'hi\n{"n":1}',
    }


@pytest.mark.parametrize("args", [{}, {"prompt": 3}, {"prompt": "x", "task_id": 5}])
def test_bad_arguments_are_refused_without_a_request(
    peer: FixturePeer, args: dict[str, Any]
) -> None:
    tool = RemoteAgent(peer.base, allow_http_loopback=True)
    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "Peer", "args": args}]}, {"text": "ok"}], record_histories=10
    )
    local = adk.spawn_agent("Caller", {"provider": model}, tools=[tool])
    assert adk.prompt(local, "go") == "ok"
    assert tool_response(model, 1)["success"] is False
    assert peer.seen("rpc") == []


def test_a_remote_agent_built_inside_a_running_loop_discovers_on_first_use(
    peer: FixturePeer,
) -> None:
    """Review client 3: building a RemoteAgent in async code never blocks the loop:
    with name= the card is discovered on the first execute; without it the typed
    refusal names the async factory, which discovers awaited."""

    async def build() -> tuple[RemoteAgent, Any, RemoteAgent]:
        lazy = RemoteAgent(peer.base, name="booker", allow_http_loopback=True)
        refused = reason(lambda: RemoteAgent(peer.base, allow_http_loopback=True))
        made = await RemoteAgent.create(peer.base, allow_http_loopback=True)
        return lazy, refused, made

    lazy, refused, made = asyncio.run(build())
    assert refused == ("a2a_sync_call_in_event_loop", "RemoteAgent.create")
    assert made.name == "Peer" and made.description == "A scripted peer."
    assert lazy.client is None and len(peer.seen("card")) == 1
    assert "booker" in repr(lazy)
    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "booker", "args": {"prompt": "hi"}}]}, {"text": "done"}],
        record_histories=10,
    )
    local = adk.spawn_agent("Lazy", {"provider": model}, tools=[lazy])
    assert adk.prompt(local, "go") == "done"
    assert tool_response(model, 1)["state"] == "TASK_STATE_COMPLETED"
    assert len(peer.seen("card")) == 2 and len(peer.seen("rpc")) == 1


def test_an_input_required_answer_shows_the_question_not_an_old_artifact() -> None:
    """Review client nit 10: for INPUT_REQUIRED (and AUTH_REQUIRED, FAILED, REJECTED)
    the model sees the status message (the question) before any earlier artifact; a
    completed task still shows its artifacts. Peer task ids pass through as given."""
    task: dict[str, Any] = {
        "id": "projects/p1/tasks/7f3a+Zm9v=",
        "contextId": "c1",
        "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "which day?"}]},
        },
        "artifacts": [{"artifactId": "a", "parts": [{"text": "draft itinerary (earlier)"}]}],
    }
    asking = summary({"task": task})
    assert asking["text"] == "which day?" and asking["task_id"] == "projects/p1/tasks/7f3a+Zm9v="
    done = {**task, "status": {**task["status"], "state": "TASK_STATE_COMPLETED"}}
    assert summary({"task": done})["text"] == "draft itinerary (earlier)"
    bare = {**task, "status": {"state": "TASK_STATE_FAILED"}}
    assert summary({"task": bare})["text"] == "draft itinerary (earlier)"
