"""``/a2a/v1`` and the A2A agent card: the daemon's agent over A2A 1.0 (``adk serve --a2a``).

The agent of ``adk serve --config`` is served by `adk_actors.a2a.server_http.a2a_routes`
with its own task store (a child of the root tree, stopped by `DaemonA2A.close`). The
routes are behind the daemon's guards (loopback Host, same origin, drain, deadline) and
their own A2A rules; the JSON-RPC endpoint's bearer token is the developer token
(``ADK_DEV_TOKEN``), checked in-loop against its SHA-256 like the /dev/v1 routes (no
hook thread), and every caller with it is the principal ``developer``. The card
(public, like the console page) is published once the listener's URL is known
(`DaemonA2A.publish`).

A blocking ``SendMessage`` answers within the daemon's ``request_timeout`` or not at all
(503 ``request_timeout``; the task goes on): the task store's ``task_timeout`` is at most
that long, so an unfinished task is FAILED rather than orphaned; streams are free of the
deadline once they start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from starlette.routing import BaseRoute

from adk_actors.a2a import wire
from adk_actors.a2a.card import card_for_agent
from adk_actors.a2a.server import bearer_security
from adk_actors.a2a.server_http import A2A_AUTH_NAMES, CardSlot, a2a_routes
from adk_actors.a2a.server_options import server_options
from adk_actors.a2a.tasks import start_task_store, stop_task_store
from adk_actors.agents import AgentRef
from adk_actors.config_file import AgentFile
from adk_actors.daemon.settings import DevSettings
from adk_actors.serving.auth import BearerAuth
from adk_actors.sessions import SessionService

PRINCIPAL = "developer"
CHILD_ID = "daemon_a2a_tasks"
DRAIN_TIMEOUT = 5.0
"""How long `close` waits for the runs being started before it stops the task store."""


class DaemonA2A(NamedTuple):
    """The A2A routes to mount, `publish(base_url)` once listening, `close()` at stop."""

    routes: list[BaseRoute]
    publish: Callable[[str], None]
    close: Callable[[], None]


def a2a_routes_for_daemon(
    agent: AgentRef,
    agent_file: AgentFile,
    settings: DevSettings,
    sessions: SessionService | None = None,
) -> DaemonA2A:
    """The card and JSON-RPC routes serving `agent`, with the developer token; the
    tasks' runs keep their sessions in `sessions` (the daemon's store, so the console
    lists them; by default an in-memory one the task store owns)."""
    options = server_options({"task_timeout": min(60.0, settings.request_timeout)})
    bearer = BearerAuth(
        auth_token=None,
        verifier=None,
        callback_timeout=5.0,
        names=A2A_AUTH_NAMES,
        token_digest=settings.token_digest,
        token_principal=PRINCIPAL,
    )
    store = start_task_store(
        agent, options, child_id=CHILD_ID, app_name=agent_file.name, sessions=sessions
    )
    slot = CardSlot()

    def publish(base_url: str) -> None:
        slot.publish(
            card_for_agent(
                agent.name,
                f"The {agent.name} agent (adk serve).",
                base_url.rstrip("/") + wire.RPC_PATH,
                **bearer_security(),
            )
        )

    def close() -> None:
        store.drain(DRAIN_TIMEOUT)  # a request still in flight is refused, not lost (Review2 1)
        stop_task_store(store)
        bearer.hooks.release_idle()

    return DaemonA2A(a2a_routes(store, slot, bearer, options), publish, close)
