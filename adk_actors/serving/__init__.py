"""The supervised HTTP listener the HTTP surfaces use (the daemon's ``adk serve``,
``adk.mcp.serve`` and ``adk.a2a.serve``): uvicorn serving one ASGI app as a kernel
process in the root tree; and what those servers share: bearer-token authentication
(`BearerAuth`), bounded worker threads (`WorkerPool`), the bounded request-body reader
(`read_body`) and the non-loopback rule (`check_exposure`).

listener = start_listener(lambda: app, UvicornOptions(max_connections=256),
                          host="127.0.0.1", port=0, child_id="my_listener")
listener.url            # http://127.0.0.1:PORT
stop_listener(listener)
"""

from adk_actors.serving.auth import AuthNames, BearerAuth, bearer_token
from adk_actors.serving.bodies import Body, BodyStatus, read_body
from adk_actors.serving.exposure import ExposureReasons, check_exposure
from adk_actors.serving.listener import (
    Listener,
    ListenerNames,
    UvicornListener,
    UvicornOptions,
    bind_socket,
    is_loopback,
    start_listener,
    stop_listener,
)
from adk_actors.serving.protocol import BoundedHttpProtocol, bounded_protocol, too_many_connections
from adk_actors.serving.workers import PoolNames, WorkerPool, WorkersBusy

__all__ = [
    "AuthNames",
    "BearerAuth",
    "Body",
    "BodyStatus",
    "BoundedHttpProtocol",
    "ExposureReasons",
    "Listener",
    "ListenerNames",
    "PoolNames",
    "UvicornListener",
    "UvicornOptions",
    "WorkerPool",
    "WorkersBusy",
    "bearer_token",
    "bind_socket",
    "bounded_protocol",
    "check_exposure",
    "is_loopback",
    "read_body",
    "start_listener",
    "stop_listener",
    "too_many_connections",
]
