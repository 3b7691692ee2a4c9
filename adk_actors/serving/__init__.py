"""The supervised HTTP listener both HTTP surfaces use (the daemon's ``adk serve`` and
``adk.mcp.serve``): uvicorn serving one ASGI app as a kernel process in the root tree.

listener = start_listener(lambda: app, UvicornOptions(max_connections=256),
                          host="127.0.0.1", port=0, child_id="my_listener")
listener.url            # http://127.0.0.1:PORT
stop_listener(listener)
"""

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

__all__ = [
    "BoundedHttpProtocol",
    "Listener",
    "ListenerNames",
    "UvicornListener",
    "UvicornOptions",
    "bind_socket",
    "bounded_protocol",
    "is_loopback",
    "start_listener",
    "stop_listener",
    "too_many_connections",
]
