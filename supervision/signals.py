"""Messages and exit reasons the kernel delivers: `Down`, `ExitSignal`, `Crash`.

Exit reasons are plain values: ``"normal"``, ``"shutdown"``, ``("shutdown", detail)``,
``"killed"``, ``"noproc"``, or a bounded `Crash(kind, message)`. A raw exception object
or traceback never crosses a process boundary.
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

from supervision.pid import Pid
from supervision.redaction import redact_text

Reason = Any
"""An exit reason: a string, a ``("shutdown", detail)`` tuple, a `Crash`, or any value."""

MAX_CRASH_MESSAGE_CHARS = 512
"""Crash messages are cut to this many characters so a reason stays bounded."""


class Crash(NamedTuple):
    """The exit reason of a process whose callback raised: exception class and a short message."""

    kind: str
    message: str

    @classmethod
    def from_exception(cls, exc: BaseException) -> Crash:
        """Build a bounded, redacted reason from an exception (never the traceback).

        The message is the exception's text through `redact_text`, cut to
        `MAX_CRASH_MESSAGE_CHARS`: it serves the kernel's own crash reports and the
        processes linked to or monitoring the crashed one. Layers above that hold user
        data (tools, providers) keep only `kind` of a crash they did not raise.
        """
        try:
            text = str(exc)
        except Exception:  # a broken __str__ must not break the crash report
            text = ""
        return cls(type(exc).__name__, scrub_message(text))


def scrub_message(text: str) -> str:
    """`redact_text`, then bound the length to `MAX_CRASH_MESSAGE_CHARS`.

    Redaction runs on a window larger than the bound, so a credential cut by the bound
    is still recognized as one.
    """
    text = redact_text(text, limit=8 * MAX_CRASH_MESSAGE_CHARS)
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
