"""A2A 1.0: serve an agent as A2A tasks and call remote A2A agents.

``adk.a2a.serve(agent, host=..., port=..., auth_token=... | verifier=...)``: see
`adk_actors.a2a.server`; ``adk.a2a.connect(card_url, auth=..., ...)``: see
`adk_actors.a2a.client`; ``adk.a2a.RemoteAgent(card_url, ...)``: a remote agent as a
sub-agent (``RemoteAgent(...).spawn(name)``: a local proxy agent whose model is the remote
agent, `adk_actors.a2a.remote_provider`) or a tool (`adk_actors.a2a.remote_agent`). The package README has the split
between the official ``a2a-sdk`` (the wire types) and what this package adds.

The names load on first use (PEP 562), so ``import adk_actors`` never pays for the SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adk_actors.a2a.card import build_card
    from adk_actors.a2a.client import A2AClient, StreamTimeout, aconnect, connect
    from adk_actors.a2a.remote_agent import RemoteAgent
    from adk_actors.a2a.remote_provider import A2AProvider
    from adk_actors.a2a.server import A2AServer, serve
    from adk_actors.a2a.server_options import A2AServerOptions

_WHERE = {
    "A2AClient": "client",
    "connect": "client",
    "aconnect": "client",
    "StreamTimeout": "client",
    "RemoteAgent": "remote_agent",
    "A2AProvider": "remote_provider",
    "A2AServer": "server",
    "serve": "server",
    "A2AServerOptions": "server_options",
    "build_card": "card",
}

__all__ = [
    "A2AClient",
    "A2AProvider",
    "A2AServer",
    "A2AServerOptions",
    "RemoteAgent",
    "StreamTimeout",
    "aconnect",
    "build_card",
    "connect",
    "serve",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'adk_actors.a2a' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"adk_actors.a2a.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
