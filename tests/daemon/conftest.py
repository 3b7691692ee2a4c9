"""Daemon tests: a real uvicorn on an ephemeral loopback port, per test."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

import adk_actors as adk
from adk_actors.daemon.app import build_app
from adk_actors.daemon.bodies import read_json_object
from adk_actors.daemon.listener import ListenerConfig, start_listener, stop_listener
from adk_actors.daemon.listener import listener_config as daemon_listener_config
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
    sessions: Any = None,
    runner_options: dict[str, Any] | None = None,
    extra_routes: Sequence[BaseRoute] = (),
    listener_config: ListenerConfig | None = None,
    **settings: Any,
) -> tuple[DevServer, Any]:
    """A daemon app on a fresh listener (`settings`: keyword values of `DevSettings`)."""
    state = DevState(
        dev_settings(token_digest=token_digest(TOKEN), **settings),
        sessions if sessions is not None else adk.sessions.InMemorySessionService(),
        runner_options,
    )
    config = listener_config or daemon_listener_config(state.settings)
    listener = start_listener(build_app(state, extra_routes), config)
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


# -- a probe route: what the guards do to any /dev/v1 route, independent of the areas ----

PROBE = "/dev/v1/probe"


async def _probe(request: Request) -> Response:
    if request.method == "POST":
        return JSONResponse({"echo": await read_json_object(request)})
    return JSONResponse({"ok": True})


PROBE_ROUTES: list[BaseRoute] = [Route(PROBE, _probe, methods=["GET", "POST"])]
"""``GET /dev/v1/probe`` answers ``{"ok": true}``; ``POST`` echoes its JSON object body
(read by `bodies.read_json_object`, with its 415/413/400)."""


@pytest.fixture
def probe_server() -> Iterator[DevServer]:
    """A daemon app with the probe route and default settings."""
    server, listener = start_dev_server(extra_routes=PROBE_ROUTES)
    yield server
    server.client.close()
    stop_listener(listener)
