"""Daemon tests: a real uvicorn on an ephemeral loopback port, per test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import httpx
import pytest

import adk_actors as adk
from adk_actors.daemon.app import build_app
from adk_actors.daemon.listener import ListenerConfig, start_listener, stop_listener
from adk_actors.daemon.settings import dev_settings, token_digest
from adk_actors.daemon.state import DevState

TOKEN = "test-token-0123456789abcdef"


class DevServer(NamedTuple):
    url: str
    state: DevState
    client: httpx.Client  # sends the bearer token

    def anonymous(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=10.0)


@pytest.fixture(autouse=True)
def app() -> Iterator[None]:
    adk.start()
    yield
    adk.stop()


def start_dev_server(
    sessions: Any = None, runner_options: dict[str, Any] | None = None, **settings: Any
) -> tuple[DevServer, Any]:
    state = DevState(
        dev_settings(token_digest=token_digest(TOKEN), **settings),
        sessions if sessions is not None else adk.sessions.InMemorySessionService(),
        runner_options,
    )
    listener = start_listener(build_app(state), ListenerConfig())
    client = httpx.Client(
        base_url=listener.url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=10.0
    )
    return DevServer(listener.url, state, client), listener


@pytest.fixture
def dev_server() -> Iterator[DevServer]:
    """A daemon app with default settings and an in-memory session service."""
    server, listener = start_dev_server()
    yield server
    server.client.close()
    stop_listener(listener)
