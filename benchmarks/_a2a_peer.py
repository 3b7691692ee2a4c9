"""An A2A 1.0 server built only from the official a2a-sdk's server classes, running
one of our agents: the peer of `benchmarks/a2a_tasks.py` and of the interop tests
(`tests/adk_actors/a2a/sdk_peer.py` re-exports it).

The SDK gives the HTTP side (`create_jsonrpc_routes`, `create_agent_card_routes`), the
request handler (`DefaultRequestHandler`), its `InMemoryTaskStore` and the task events
(`TaskUpdater`); `AdkAgentExecutor` is the only glue: each task is a stable run of our
agent (`adk.runs.start`), its outcome published as the SDK's task events. A run that
pauses (the agent called ``request_human_approval``) puts the task in
``TASK_STATE_INPUT_REQUIRED``; the follow-up message naming the task resumes it.

The peer is served by uvicorn on 127.0.0.1 in a thread of its own (`SdkPeer`), with
no authentication.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import uvicorn
from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
)
from google.protobuf import json_format
from starlette.applications import Starlette

import adk_actors as adk
from supervision import aio

RPC_PATH = "/a2a/v1"
CARD_PATH = "/.well-known/agent-card.json"
PEER_USER = "sdk-peer-user"


def _text(output: Any) -> str:
    """A run's final output as text (a Content's text, or the value as is)."""
    if isinstance(output, str):
        return output
    text = getattr(output, "text_value", None)
    return str(text() if callable(text) else output)


def _response_value(message: Message | None) -> Any:
    """What a follow-up message carries to a paused run (a human's answer is a JSON
    object): its one data part's object, else ``{"answer": <its text parts joined>}`` (as our task store does)."""
    if message is None:
        return {"answer": ""}
    data = [json_format.MessageToDict(part.data) for part in message.parts if part.HasField("data")]
    if len(data) == 1 and isinstance(data[0], dict):
        return data[0]
    return {"answer": "\n".join(part.text for part in message.parts if part.HasField("text"))}


class AdkAgentExecutor(AgentExecutor):
    """Runs each A2A task as a stable run of one of our agents (`adk.runs`)."""

    def __init__(self, runner: adk.Runner, *, timeout: float = 60.0) -> None:
        self._runner = runner
        self._timeout = timeout
        self._paused: dict[str, str] = {}  # task id -> the paused run to resume
        self._running: dict[str, str] = {}  # task id -> its run in flight

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        if context.current_task is None and context.message is not None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        await updater.start_work()
        paused = self._paused.pop(task_id, None)
        if paused is not None:
            value = _response_value(context.message)
            run_id = await aio.run_blocking(adk.runs.resume, paused, value)
        else:
            run_id = await aio.run_blocking(
                adk.runs.start, self._runner, PEER_USER, context_id, context.get_user_input()
            )
        self._running[task_id] = run_id
        try:
            outcome = await adk.runs.wait_async(run_id, self._timeout)
        except asyncio.CancelledError:
            await aio.run_blocking(_cancel_quietly, run_id)
            raise
        finally:
            self._running.pop(task_id, None)
        await self._publish(updater, task_id, run_id, outcome)

    async def _publish(self, updater: TaskUpdater, task_id: str, run_id: str, outcome: Any) -> None:
        match outcome:
            case adk.Completed(output=output):
                text = _text(output)
                await updater.add_artifact([Part(text=text)], name="response")
                await updater.complete(updater.new_agent_message([Part(text=text)]))
            case adk.Paused(event=event):
                self._paused[task_id] = run_id
                prompt = event.text() or "input required"
                await updater.requires_input(updater.new_agent_message([Part(text=prompt)]))
            case adk.Cancelled():
                await updater.cancel()
            case adk.Failed(reason=reason):
                await updater.failed(updater.new_agent_message([Part(text=json.dumps(reason))]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        for runs in (self._running, self._paused):
            run_id = runs.pop(task_id, None)
            if run_id is not None:
                await aio.run_blocking(_cancel_quietly, run_id)
        await TaskUpdater(event_queue, task_id, context.context_id or "").cancel()


def _cancel_quietly(run_id: str) -> None:
    try:
        adk.runs.cancel(run_id, "a2a_cancel")
    except adk.AdkError:
        pass  # already ended: nothing to stop


def peer_card(base_url: str, name: str) -> AgentCard:
    """The peer's agent card: one JSON-RPC 1.0 interface, streaming."""
    return AgentCard(
        name=name,
        description=f"{name}, served by the a2a-sdk server classes",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=base_url + RPC_PATH, protocol_binding="JSONRPC", protocol_version="1.0"
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id=name, name=name, description=f"Ask {name}.", tags=["agent"])],
    )


def build_app(agent: Any, base_url: str, *, name: str = "sdk_peer") -> Starlette:
    """A Starlette app of the a2a-sdk server classes serving `agent` at `base_url`."""
    runner = adk.Runner(agent, "a2a_sdk_peer", adk.sessions.InMemorySessionService())
    card = peer_card(base_url, name)
    handler = DefaultRequestHandler(
        agent_executor=AdkAgentExecutor(runner),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    routes = [
        *create_agent_card_routes(card, card_url=CARD_PATH),
        *create_jsonrpc_routes(handler, RPC_PATH),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()

    return Starlette(routes=routes, lifespan=lifespan)


class LoopbackServer:
    """An ASGI app served by uvicorn on 127.0.0.1 (a free port) in a thread of its own;
    `make_app(base_url)` builds it once the port is known (a card names its own URL)."""

    def __init__(self, make_app: Callable[[str], Any]) -> None:
        # IPPROTO_TCP named: asyncio turns Nagle off on accepted connections only then
        # (else each answer waits ~40 ms for the client's delayed ACK)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.card_url = self.url + CARD_PATH
        config = uvicorn.Config(
            make_app(self.url), log_level="warning", access_log=False, timeout_graceful_shutdown=2
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                self.stop()
                raise RuntimeError("the loopback server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop listening and wait for the server's thread; idempotent."""
        self._server.should_exit = True
        self._thread.join(10)
        self._socket.close()

    def __enter__(self) -> LoopbackServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SdkPeer(LoopbackServer):
    """`build_app(agent)`, the a2a-sdk server, on 127.0.0.1; `rpc_url` is its endpoint."""

    def __init__(self, agent: Any, *, name: str = "sdk_peer") -> None:
        super().__init__(lambda url: build_app(agent, url, name=name))
        self.rpc_url = self.url + RPC_PATH
