"""The daemon's HTTP listener: `adk_actors.serving`'s supervised uvicorn listener with
the daemon's bounds, names and error bodies.

`start_listener` adds a `serving.UvicornListener` serving the daemon's app as the last
child of the root tree, so it stops first. If uvicorn stops on its own, the process
exits with ``http_listener_stopped`` and its supervisor restarts it on the same port (a
port that cannot be bound again is ``http_listener_bind_failed``, and after the
supervisor's restart intensity the tree gives up).

Connections are bounded: at most ``max_connections`` at once (past it a request is
answered 503 ``too_many_connections``, the API's JSON error body with ``Retry-After``,
and its connection closes), idle keep-alive connections close after
``keepalive_timeout``, and every request head (request line and headers) must arrive
within ``head_timeout``, in at most ``max_head_bytes`` and ``max_headers`` headers
(`serving.BoundedHttpProtocol`: 408 and 431 otherwise, then the connection closes).
uvicorn's ``proxy_headers`` is off: every client is local, so ``X-Forwarded-Proto`` /
``X-Forwarded-For`` are never trusted (the same-origin check reads the scheme).
"""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.types import Receive, Scope, Send

from adk_actors.daemon.errors import ApiError, error_response
from adk_actors.daemon.settings import DevSettings
from adk_actors.serving import (
    Listener,
    ListenerNames,
    UvicornOptions,
    bounded_protocol,
    stop_listener,
)
from adk_actors.serving import start_listener as start_uvicorn_listener
from providers.errors import AdkError

__all__ = [
    "Listener",
    "ListenerConfig",
    "check_dev_host",
    "listener_config",
    "start_listener",
    "stop_listener",
    "too_many_connections",
]

_NAMES = ListenerNames(log="adk.daemon")
"""serving's HTTP listener names (``http_listener_bind_failed``, ...), logged as the daemon's."""


class ListenerConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Where and how to listen (times in seconds)."""

    host: str = "127.0.0.1"
    port: int = 0
    max_connections: int = 2048
    keepalive_timeout: float = 5.0
    graceful_timeout: float = 10.0
    head_timeout: float = 10.0
    max_head_bytes: int = 32 * 1024
    max_headers: int = 100


def listener_config(
    settings: DevSettings, host: str = "127.0.0.1", port: int = 0
) -> ListenerConfig:
    """The listener of a daemon with `settings` (its connection and keep-alive bounds)."""
    return ListenerConfig(
        host=host,
        port=port,
        max_connections=settings.max_connections,
        keepalive_timeout=settings.keepalive_timeout,
    )


async def too_many_connections(scope: Scope, receive: Receive, send: Send) -> None:
    """The answer to a request past ``max_connections``, in place of uvicorn's plain-text
    503: the API's error body, ``Retry-After`` and a connection that closes."""
    await error_response(
        ApiError(
            503,
            "too_many_connections",
            "The daemon has its maximum number of connections; retry",
            headers={
                "retry-after": "1",
                "connection": "close",
                "x-content-type-options": "nosniff",
            },
        )
    )(scope, receive, send)


def check_dev_host(host: str) -> str:
    """`host` if it is ``127.0.0.1`` or ``::1`` (the developer API's only addresses, as
    the reference CLI has it); anything else is ``developer_server_must_bind_loopback``."""
    if host not in ("127.0.0.1", "::1"):
        raise AdkError(
            "developer_server_must_bind_loopback",
            "the developer server listens on 127.0.0.1 or ::1 only",
        )
    return host


def _options(config: ListenerConfig) -> UvicornOptions:
    return UvicornOptions(
        max_connections=config.max_connections,
        keepalive_timeout=config.keepalive_timeout,
        graceful_timeout=config.graceful_timeout,
        protocol=bounded_protocol(
            max_head_bytes=config.max_head_bytes,
            max_headers=config.max_headers,
            head_timeout=config.head_timeout,
            overloaded=too_many_connections,
            overloaded_event="adk.daemon.too_many_connections",
        ),
        names=_NAMES,
    )


def start_listener(app: Any, config: ListenerConfig, child_id: str = "http_listener") -> Listener:
    """Start a listener for `app` as the last child of the root tree (rest_for_one: it
    stops first, and restarts if anything before it does). A port that cannot be bound
    raises ``("http_listener_bind_failed", errno)``."""
    return start_uvicorn_listener(
        lambda: app, _options(config), host=config.host, port=config.port, child_id=child_id
    )
