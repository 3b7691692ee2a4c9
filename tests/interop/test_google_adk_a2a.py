"""A2A 1.0 between us and google-adk, both ways, on 127.0.0.1.

google-adk's `to_a2a` serves a google-adk `LlmAgent` (a fake model answering fixed
text) and our client (`adk.a2a.connect`, `adk.a2a.RemoteAgent`) sends, streams, gets
and cancels tasks on it; google-adk's `RemoteA2aAgent` (the a2a-sdk client inside)
talks to our server (`adk.a2a.serve`, bearer token).

Runs in the bench venv (`make interop`), where google-adk is installed; in the main
venv it is skipped.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest.importorskip("google.adk")

import asyncio

import httpx
from a2a.client.client import ClientConfig
from a2a.client.client_factory import ClientFactory
from google.adk.a2a.agent import RemoteA2aAgent
from google.adk.a2a.utils.agent_to_a2a import to_a2a
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types

import adk_actors as adk
from benchmarks._a2a_peer import LoopbackServer
from providers.errors import AdkError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # google-adk's EXPERIMENTAL notes

TOKEN = "interop-token-with-at-least-32-bytes"


class FixedLlm(BaseLlm):
    """google-adk's side of the test: a model answering ``fixed answer to <prompt>``."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1] if llm_request.contents else None
        prompt = "".join(part.text or "" for part in (last.parts or [])) if last else ""
        reply = types.Content(role="model", parts=[types.Part(text=f"fixed answer to {prompt}")])
        yield LlmResponse(content=reply)


def google_adk_app(base_url: str) -> Any:
    agent = LlmAgent(
        name="fixed_agent", description="Answers fixed text.", model=FixedLlm(model="fixed")
    )
    address = urlsplit(base_url)
    return to_a2a(agent, host=address.hostname or "127.0.0.1", port=address.port or 80)


@pytest.fixture(autouse=True)
def runtime() -> Iterator[None]:
    adk.start()
    yield
    adk.stop()


@pytest.fixture
def google_adk_server() -> Iterator[LoopbackServer]:
    with LoopbackServer(google_adk_app) as server:
        yield server


def state(task: dict[str, Any]) -> str:
    return str(task["status"]["state"])


def artifact_text(task: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for part in task["artifacts"][-1]["parts"])


# -- our client against google-adk's server ------------------------------------------------------


def test_our_client_sends_and_gets_a_task_from_google_adk(
    google_adk_server: LoopbackServer,
) -> None:
    """SendMessage (blocking) answers the completed task; GetTask returns it again."""
    with adk.a2a.connect(google_adk_server.url, allow_http_loopback=True) as remote:
        assert remote.card["name"] == "fixed_agent"
        task = remote.send("hello")["task"]
        assert state(task) == "TASK_STATE_COMPLETED"
        assert artifact_text(task) == "fixed answer to hello"
        again = remote.get_task(task["id"])
        assert again["id"] == task["id"] and state(again) == "TASK_STATE_COMPLETED"
        assert again["history"][0]["parts"][0]["text"] == "hello"


def test_our_client_streams_from_google_adk(google_adk_server: LoopbackServer) -> None:
    """SendStreamingMessage: the task first, then updates, the terminal status last."""
    with adk.a2a.connect(google_adk_server.url, allow_http_loopback=True) as remote:
        events = [item["event"] for item in remote.stream("stream me")]
    assert "task" in events[0]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    texts = [
        part.get("text")
        for event in events
        if "artifactUpdate" in event
        for part in event["artifactUpdate"]["artifact"]["parts"]
    ]
    assert "fixed answer to stream me" in texts


def test_google_adk_errors_reach_our_client_as_rpc_errors(
    google_adk_server: LoopbackServer,
) -> None:
    """An unknown task is -32001; cancelling a completed one is -32002 (not cancelable)."""
    with adk.a2a.connect(google_adk_server.url, allow_http_loopback=True) as remote:
        with pytest.raises(AdkError) as unknown:
            remote.get_task("task-that-does-not-exist")
        assert unknown.value.reason == ("a2a_rpc_error", -32001)
        task = remote.send("done")["task"]
        with pytest.raises(AdkError) as terminal:
            remote.cancel(task["id"])
        assert terminal.value.reason == ("a2a_rpc_error", -32002)


def test_our_remote_agent_tool_calls_google_adk(google_adk_server: LoopbackServer) -> None:
    """`adk.a2a.RemoteAgent` as the tool of a local scripted agent: the remote answer
    comes back as the tool's result."""
    remote = adk.a2a.RemoteAgent(google_adk_server.url, allow_http_loopback=True)
    model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": remote.name, "args": {"prompt": "the weather"}}]},
            {"text": "relayed"},
        ],
        record_histories=10,
    )
    agent = adk.spawn_agent("Relay", {"provider": model}, tools=[remote])
    assert adk.prompt(agent, "Ask the remote agent.") == "relayed"
    (result,) = model.histories[1][-1].parts
    assert result.response["state"] == "TASK_STATE_COMPLETED"
    assert result.response["text"] == "fixed answer to the weather"


# -- google-adk's RemoteA2aAgent against our server --------------------------------------------


def echo(history: Any, tools: Any) -> dict[str, Any]:
    return {"text": "echo: " + history[-1].text_value()}


async def run_remote(card_url: str, prompt: str, headers: dict[str, str]) -> list[Any]:
    """google-adk's RemoteA2aAgent, as the root agent of an InMemoryRunner: its events."""
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        factory = ClientFactory(ClientConfig(httpx_client=http))
        remote = RemoteA2aAgent(name="ours", agent_card=card_url, a2a_client_factory=factory)
        runner = InMemoryRunner(agent=remote, app_name="interop")
        session = await runner.session_service.create_session(app_name="interop", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text=prompt)])
        return [
            event
            async for event in runner.run_async(
                user_id="u", session_id=session.id, new_message=message
            )
        ]


def test_google_adk_remote_agent_calls_our_server() -> None:
    """google-adk's RemoteA2aAgent reads our card, sends with its a2a-sdk client and
    shows our agent's answer; without the token it gets no answer."""
    agent = adk.spawn_agent("Echo", {"provider": adk.ScriptedProvider(fn=echo, inline=True)})
    with adk.a2a.serve(agent, auth_token=TOKEN) as server:
        card_url = server.card_url
        events = asyncio.run(run_remote(card_url, "ping", {"Authorization": f"Bearer {TOKEN}"}))
        texts = [
            part.text
            for event in events
            if event.content
            for part in event.content.parts or []
            if part.text
        ]
        assert "echo: ping" in texts, events
        refused = asyncio.run(run_remote(card_url, "ping", {}))
        assert not any(event.content and event.content.parts for event in refused)
        assert any(event.error_message for event in refused), refused
