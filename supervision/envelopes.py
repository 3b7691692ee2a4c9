"""What a server's mailbox holds: envelope `Tag`s, and the system requests.

Envelopes are plain tuples whose first item is a `Tag`; a dispatcher hands each to
`ServerProcess.handle`. `GetState` and `ReplaceState` ride in ``SYSTEM`` envelopes:
OTP's ``sys:get_state`` / ``sys:replace_state``, answered between two messages.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import Any, NamedTuple


class Tag(IntEnum):
    """What an envelope in a server's mailbox is; its first item.

    Envelopes are plain tuples, ``(tag, *fields)``, because they are the kernel's hot
    path: ``(CALL, request, from_)``, ``(CAST, msg)``, ``(INFO, msg)``,
    ``(INIT, args, name, started)``, ``(STOP, reason)``, and the kernel's own
    ``(CONTINUE, payload)``, ``(TIMEOUT, idle_timer)``, ``(SYSTEM, request, from_)``.
    """

    CALL = 0
    CAST = 1
    INFO = 2
    INIT = 3
    STOP = 4
    CONTINUE = 5
    TIMEOUT = 6
    SYSTEM = 7

    @property
    def callback(self) -> str:
        """The name crash reports give the callback this envelope runs (``"call"``, ...)."""
        return "info" if self is Tag.TIMEOUT else self.name.lower()


# Module-level aliases: the loop compares with `is`, and a global lookup is cheaper
# than an attribute lookup on the enum class.
CALL, CAST, INFO, INIT, STOP = Tag.CALL, Tag.CAST, Tag.INFO, Tag.INIT, Tag.STOP
CONTINUE, TIMEOUT, SYSTEM = Tag.CONTINUE, Tag.TIMEOUT, Tag.SYSTEM


class GetState(NamedTuple):
    """A system request: answer `Ok(state)`."""


class ReplaceState(NamedTuple):
    """A system request: state = fn(state), answer `Ok(new state)`; if fn raises, keep
    the state and answer `Refused(KernelError(("callback_failed", crash)))`."""

    fn: Callable[[Any], Any]
