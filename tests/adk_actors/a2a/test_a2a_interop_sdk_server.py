"""Our client (`adk.a2a.connect`, `adk.a2a.RemoteAgent`) against a server built only
from the official a2a-sdk's server classes (`sdk_peer.py`: DefaultRequestHandler,
InMemoryTaskStore, create_jsonrpc_routes, our scripted agent behind an AgentExecutor),
over HTTP on 127.0.0.1: send, stream, get, list, cancel, the input-required round trip,
and the SDK's errors as typed `AdkError` reasons.

Follows adk_a2a_v1_http_test: well_known_and_unary_client_case,
stream_client_closes_on_terminal_case, and adk_a2a_v1_server_test:
cancellation_stops_execution_case.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import adk_actors as adk
from adk_actors.a2a.client import connect
from adk_actors.a2a.remote_agent import RemoteAgent
from providers.errors import AdkError
from tests.adk_actors.a2a.sdk_peer import SdkPeer


def echo(history: Any, tools: Any) -> dict[str, Any]:
    return {"text": "echo: " + history[-1].text_value()}


@pytest.fixture
def echo_peer() -> Iterator[SdkPeer]:
    agent = adk.spawn_agent("Echo", {"provider": adk.ScriptedProvider(fn=echo, inline=True)})
    with SdkPeer(agent, name="Echo") as peer:
        yield peer


def state(task: dict[str, Any]) -> str:
    return str(task["status"]["state"])


def text_of(parts: list[dict[str, Any]]) -> str:
    return "".join(part.get("text", "") for part in parts)


def rpc_error(fn: Any) -> Any:
    with pytest.raises(AdkError) as failure:
        fn()
    return failure.value.reason


def test_our_client_sends_gets_and_lists_on_the_sdk_server(echo_peer: SdkPeer) -> None:
    """Discovery reads the SDK's card; SendMessage answers the completed task; GetTask
    and ListTasks (by context) return it."""
    with connect(echo_peer.card_url, allow_http_loopback=True) as remote:
        assert remote.card["name"] == "Echo"
        assert remote.rpc_url == echo_peer.rpc_url
        task = remote.send("hello")["task"]
        assert state(task) == "TASK_STATE_COMPLETED"
        assert text_of(task["artifacts"][0]["parts"]) == "echo: hello"
        fetched = remote.get_task(task["id"])
        assert fetched["id"] == task["id"] and state(fetched) == "TASK_STATE_COMPLETED"
        listed = remote.list_tasks(context_id=task["contextId"])
        assert [t["id"] for t in listed["tasks"]] == [task["id"]]


def test_our_client_streams_from_the_sdk_server(echo_peer: SdkPeer) -> None:
    """SendStreamingMessage: the task first, the artifact, COMPLETED last (the SDK's
    stream has no event ids)."""
    with connect(echo_peer.url, allow_http_loopback=True) as remote:
        items = remote.stream("stream me", timeout=30)
    events = [item["event"] for item in items]
    assert "task" in events[0]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    artifacts = [e["artifactUpdate"]["artifact"] for e in events if "artifactUpdate" in e]
    assert [text_of(a["parts"]) for a in artifacts] == ["echo: stream me"]


def test_our_client_subscribes_to_a_working_task_on_the_sdk_server() -> None:
    """SubscribeToTask on a task still working: the SDK's snapshot first, COMPLETED last."""
    agent = adk.spawn_agent(
        "Slowish", {"provider": "scripted", "script": [{"text": "done at last", "delay": 0.3}]}
    )
    with SdkPeer(agent) as peer, connect(peer.url, allow_http_loopback=True) as remote:
        task = remote.send("slow", return_immediately=True)["task"]
        events = [item["event"] for item in remote.subscribe(task["id"], timeout=30)]
        assert events[0]["task"]["id"] == task["id"]
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_our_client_cancels_on_the_sdk_server() -> None:
    """A working task cancels to CANCELED; then the SDK's -32002 and -32001 come back as
    ("a2a_rpc_error", code)."""
    slow = adk.spawn_agent(
        "Slow", {"provider": "scripted", "script": [{"text": "late", "delay": 30}]}
    )
    with SdkPeer(slow) as peer, connect(peer.url, allow_http_loopback=True) as remote:
        task = remote.send("take your time", return_immediately=True)["task"]
        assert state(task) in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        cancelled = remote.cancel(task["id"])
        assert state(cancelled) == "TASK_STATE_CANCELED"
        assert rpc_error(lambda: remote.cancel(task["id"])) == ("a2a_rpc_error", -32002)
        assert rpc_error(lambda: remote.get_task("no-such-task")) == ("a2a_rpc_error", -32001)


def test_our_client_answers_an_input_required_task_on_the_sdk_server() -> None:
    """The SDK server's task waits in INPUT_REQUIRED; our follow-up (a data part, the
    task's id) resumes it to COMPLETED."""
    model = adk.ScriptedProvider(
        [
            {
                "tool_calls": [
                    {"name": "request_human_approval", "args": {"summary": "Delete old deploy"}}
                ]
            },
            {"text": "deleted"},
        ],
        record_histories=10,
    )
    agent = adk.spawn_agent("Approver", {"provider": model}, tools=[adk.request_human_approval])
    with SdkPeer(agent) as peer, connect(peer.url, allow_http_loopback=True) as remote:
        paused = remote.send("Delete the obsolete deployment.")["task"]
        assert state(paused) == "TASK_STATE_INPUT_REQUIRED"
        assert text_of(paused["status"]["message"]["parts"]) == "Delete old deploy"
        answer = {"parts": [{"data": {"approved": True}}]}
        done = remote.send(answer, task_id=paused["id"], context_id=paused["contextId"])["task"]
        assert state(done) == "TASK_STATE_COMPLETED"
        assert text_of(done["artifacts"][-1]["parts"]) == "deleted"
    (seen,) = model.histories[1][-1].parts
    assert seen.response == {"approved": True}


def test_remote_agent_tool_relays_to_the_sdk_server(echo_peer: SdkPeer) -> None:
    """`RemoteAgent` as the tool of a local scripted agent: the SDK server's answer is
    the tool's result."""
    remote = RemoteAgent(echo_peer.card_url, allow_http_loopback=True)
    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": remote.name, "args": {"prompt": "hi"}}]}, {"text": "relayed"}],
        record_histories=10,
    )
    agent = adk.spawn_agent("Relay", {"provider": model}, tools=[remote])
    assert adk.prompt(agent, "Ask the remote agent.") == "relayed"
    (result,) = model.histories[1][-1].parts
    assert result.response["state"] == "TASK_STATE_COMPLETED"
    assert result.response["text"] == "echo: hi"


def test_our_client_refuses_plain_http_unless_allowed(echo_peer: SdkPeer) -> None:
    """http is refused without allow_http_loopback, before any request is sent."""
    assert rpc_error(lambda: connect(echo_peer.card_url)) == "insecure_a2a_destination"
