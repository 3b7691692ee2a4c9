"""Messages and exit reasons the kernel delivers: `Down`, `ExitSignal`, `Crash`.

Exit reasons are plain values: ``"normal"``, ``"shutdown"``, ``("shutdown", detail)``,
``"killed"``, ``"noproc"``, or a bounded `Crash(kind, message)`. A raw exception object
or traceback never crosses a process boundary.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, NamedTuple

from supervision.pid import Pid

Reason = Any
"""An exit reason: a string, a ``("shutdown", detail)`` tuple, a `Crash`, or any value."""

MAX_CRASH_MESSAGE_CHARS = 512
"""Crash messages are cut to this many characters so a reason stays bounded."""

_SECRET_PATTERNS = (
    # "Bearer <token>" first: "Authorization: Bearer <token>" must lose the token, not
    # only the word "Bearer" to the key=value rule below
    re.compile(r"(?i)\b(bearer)(\s+)()[A-Za-z0-9._~+/=-]+"),
    # key=value / key: value pairs whose key names a secret
    re.compile(
        r"(?i)\b([\w-]*(?:api[_-]?key|token|secret|password|passwd|authorization|credential)[\w-]*)"
        r"(\s*[=:]\s*)(['\"]?)[^\s'\",;&]+"
    ),
    re.compile(r"()()()AIza[0-9A-Za-z_-]{20,}"),  # Google API keys
)


class Crash(NamedTuple):
    """The exit reason of a process whose callback raised: exception class and a short message."""

    kind: str
    message: str

    @classmethod
    def from_exception(cls, exc: BaseException) -> Crash:
        """Build a bounded, secret-scrubbed reason from an exception (never the traceback)."""
        return cls(type(exc).__name__, scrub_message(str(exc)))


def scrub_message(text: str) -> str:
    """Remove things that look like credentials and bound the length."""
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}[redacted]", text)
    if len(text) > MAX_CRASH_MESSAGE_CHARS:
        text = text[: MAX_CRASH_MESSAGE_CHARS - 3] + "..."
    return text


def is_normal_exit(reason: Reason) -> bool:
    """True for reasons that do not count as a failure: normal and the shutdown family.

    A transient child is restarted only when this is false, and crash reports are
    written only for such reasons.
    """
    if reason == "normal" or reason == "shutdown":
        return True
    return isinstance(reason, tuple) and len(reason) == 2 and reason[0] == "shutdown"


_ref_ids = itertools.count(1)


class Ref:
    """A unique reference, as returned by `monitor` and `send_after`: hashable and printable."""

    __slots__ = ("_id",)

    def __init__(self) -> None:
        self._id = next(_ref_ids)

    def __repr__(self) -> str:
        return f"#Ref<{self._id}>"

    def __hash__(self) -> int:
        return self._id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ref) and other._id == self._id


class Down(NamedTuple):
    """Delivered once to a monitoring process when the monitored process exits."""

    ref: Ref
    pid: Pid | Any  # the pid, or the name that was monitored and did not resolve
    reason: Reason


class ExitSignal(NamedTuple):
    """An exit signal turned into a message because the receiver traps exits."""

    pid: Pid | None
    reason: Reason
