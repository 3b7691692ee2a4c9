"""The answers the kernel's own servers give, and how they treat a malformed request.

Every kernel server (the supervisors, credit streams, the reactor) takes small typed
request classes, dispatches them with ``match`` and answers a call with `Ok(value)`
or `Refused(error)`; the public function that built the request raises the error in
the caller (`unwrap`). A request the server does not understand (an unknown class,
an argument of the wrong type) is refused with reason ``invalid_request``: it never
changes the server's state and never crashes it. An unexpected cast or message is
logged and dropped, as an OTP supervisor does.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from supervision.errors import KernelError
from supervision.logs import get_logger

_log = get_logger("supervision")


class Ok(NamedTuple):
    """A kernel server's answer to an accepted request."""

    value: Any


class Refused(NamedTuple):
    """A kernel server's answer to a request it refused: the caller raises `error`."""

    error: KernelError


Answer = Ok | Refused


def unwrap(answer: object) -> Any:
    """The value of an `Ok`; raises the error of a `Refused`."""
    match answer:
        case Ok(value):
            return value
        case Refused(error):
            raise error
    raise KernelError("bad_reply", f"expected Ok or Refused, got {type(answer).__name__}")


def describe(request: object) -> str:
    """A request's class name for an error message: bounded, and never its contents
    (which may hold arguments a log must not see)."""
    return type(request).__name__


def log_unexpected(server: str, channel: str, message: object) -> None:
    """Log and drop a cast or message a kernel server has no use for."""
    _log.warning(
        "supervision.server.unexpected_message",
        server=server,
        channel=channel,
        kind=describe(message),
    )


def is_hashable(value: object) -> bool:
    """True if `value` can be a dict key (a tuple holding a list cannot)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True
