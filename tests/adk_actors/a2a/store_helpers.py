"""Shared helpers of the task store tests (test_a2a_tasks*.py): a store for a scripted
agent under the root tree, driven from an asyncio event loop as the HTTP layer does."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import pytest
from a2a.types import a2a_pb2 as pb

import adk_actors as adk
from adk_actors.a2a import errors, wire
from adk_actors.a2a.server_options import server_options
from adk_actors.a2a.tasks import TaskStore, start_task_store, stop_task_store

T = TypeVar("T")
ALICE, BOB = "alice@example.com", "bob@example.com"
SLOW = {"text": "late", "delay": 30}
APPROVAL = {"tool_calls": [{"name": "request_human_approval", "args": {"summary": "Go?"}}]}


def run(awaitable: Awaitable[T]) -> T:
    """`awaitable`'s result, on a fresh event loop."""

    async def main() -> T:
        return await awaitable

    return asyncio.run(main())


def echo(history: Any, tools: Any) -> dict[str, str]:
    """A scripted model that echoes the last message."""
    return {"text": f"echo: {history[-1].text_value()}"}


def stopped_after() -> Iterator[list[TaskStore]]:
    """The body of a ``stores`` fixture: the stores a test appends are stopped after it."""
    started: list[TaskStore] = []
    yield started
    for store in started:
        stop_task_store(store)


def start_store(
    stores: list[TaskStore],
    provider: Any,
    tools: Any = (),
    name: str = "Agent",
    sessions: Any = None,
    **options: Any,
) -> TaskStore:
    """A store for agent `name` on `provider` (stopped after the test), its runs on
    `sessions` (by default sessions of its own), under app ``a2a.a2a-test-<name>``."""
    agent = adk.spawn_agent(name, {"provider": provider}, tools=list(tools))
    store = start_task_store(
        agent, server_options(options), child_id=f"a2a-test-{name}", sessions=sessions
    )
    stores.append(store)
    return store


def request(text: str = "hello", *, immediately: bool = False, **ids: str) -> pb.SendMessageRequest:
    config = pb.SendMessageConfiguration(return_immediately=immediately)
    return pb.SendMessageRequest(message=wire.user_message(text, **ids), configuration=config)


def refusal(awaitable: Awaitable[Any]) -> errors.RpcError:
    """The `RpcError` `awaitable` raises (the test fails if it raises none)."""
    with pytest.raises(errors.RpcError) as info:
        run(awaitable)
    return info.value


def texts(message: pb.Message) -> list[str]:
    return [part.text for part in message.parts if part.WhichOneof("content") == "text"]
