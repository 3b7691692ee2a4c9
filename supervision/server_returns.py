"""What a `GenServer`'s callbacks return, and `Exit`, which they raise.

`Reply`, `NoReply`, `Stop` (with `NO_REPLY`), `Ignore` from `init`, the `Timeout`
message of an idle ``timeout``, and `Exit(reason)`. The loop body that acts on them
is `server_process.ServerProcess`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from supervision import crash_report
from supervision.signals import Reason


class _NoReplyValue:
    def __repr__(self) -> str:
        return "NO_REPLY"


NO_REPLY: Any = _NoReplyValue()
"""`Stop(reason, state)` without `reply=` sends no reply to the caller."""


class Reply(NamedTuple):
    """From `handle_call`: answer the caller with `value`, continue with `state`.

    ``timeout=seconds``: if no message arrives within it, `handle_info(Timeout())` runs.
    ``continue_=payload``: `handle_continue(payload, state)` runs before any other
    message. At most one of the two (as in OTP); a payload is never None.
    """

    value: Any
    state: Any
    timeout: float | None = None
    continue_: Any = None


class NoReply(NamedTuple):
    """From any callback: continue with `state`, no reply now (`handle_call` answers
    later with `reply(from_, value)`). `timeout`, `continue_`: as for `Reply`. Elsewhere
    than `handle_call`, a bare state is the same as ``NoReply(state)``."""

    state: Any
    timeout: float | None = None
    continue_: Any = None


class Stop(NamedTuple):
    """From any callback (or `init`): run `terminate`, optionally reply, exit with `reason`."""

    reason: Any
    state: Any = None
    reply: Any = NO_REPLY


class _Marker:
    """A value without fields, equal to the instances of its own class only."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self).__name__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Ignore(_Marker):
    """From `init`: do not start. `start`/`start_link` return None (a supervisor skips
    the child), the process exits ``"normal"`` and its name is free again."""

    __slots__ = ()


class Timeout(_Marker):
    """The message `handle_info` gets when a callback's ``timeout=`` ran out with no
    other message (OTP's ``timeout``)."""

    __slots__ = ()


TIMEOUT_MESSAGE = Timeout()
IGNORED = Ignore()  # what a start slot holds when init returned Ignore()


class Exit(Exception):
    """Raise in a callback to end the server with exactly `reason` (``erlang:exit/1``).

    `terminate(reason, state)` runs, links and monitors see `reason`, a pending `call`
    gets `ProcessExit(reason)`; ``Exit("normal")`` and the shutdown family are normal
    exits (no crash report; a transient child is not restarted). Raised in `init`, the
    start fails with `StartError(reason)`; in `terminate`, `reason` becomes the exit reason.
    """

    def __init__(self, reason: Reason) -> None:
        super().__init__(crash_report.format_reason(reason))
        self.reason = reason
