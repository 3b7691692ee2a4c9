"""What a plugin hook returns, and what a whole phase comes to.

A hook returns one of:

* ``None``, ``"continue"``, ``"observe"`` or ``"ok"`` (or `CONTINUE`): keep the
  current value and go on;
* `Amend(value)` (or ``{"amend": value}``): go on with `value` in its place, through
  the remaining plugins, the local callback and the operation;
* `Return(value)` (or ``{"return": value}``): end the phase now with `value`,
  skipping the remaining plugins, the local callback and the operation;
  `Replace` (``{"replace": value}``) is the same early return, never an amendment;
* `Halt(reason)` (or ``{"halt": reason}``): stop with a typed, bounded error.

A pipeline run over one phase ends in a `PhaseOutcome` whose `kind` is a
`PhaseKind` and whose `trace` holds one structural `TraceEntry` per plugin.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from providers.errors import AdkError

CONTINUE = "continue"
CONTINUE_RESULTS = frozenset({None, "continue", "observe", "ok"})


@dataclass(frozen=True)
class Amend:
    """Go on with `value` in place of the phase's value."""

    value: Any


@dataclass(frozen=True)
class Return:
    """End the phase now with `value`: later plugins, the local callback and the
    operation are skipped."""

    value: Any


Replace = Return
"""The compatibility alias of `Return`: an early return, never an amendment."""


@dataclass(frozen=True)
class Halt:
    """Stop with ``("plugin_halted", plugin_id, hook, reason)``; `reason` is bounded."""

    reason: Any = "halted"


class PhaseKind(enum.Enum):
    CONTINUE = "continue"
    AMEND = "amend"
    RETURN = "return"
    HALT = "halt"
    ERROR = "error"


@dataclass(frozen=True)
class TraceEntry:
    """One plugin's part in a phase: its id, the hook and a structural outcome tag
    (``observed``, ``amended``, ``returned``, ``halted``, ``skipped``, or a failure
    such as ``timeout``, ``exception``, ``invalid_result``, ``result_too_large``,
    ``observer_cannot_amend``, ``notification_result_ignored``). Never a value."""

    plugin: str
    hook: str
    outcome: str


@dataclass(frozen=True)
class PhaseOutcome:
    """A phase after every plugin: `value` is the value to go on with (CONTINUE,
    AMEND), the returned value (RETURN), or the bounded reason (HALT, ERROR)."""

    kind: PhaseKind
    value: Any
    trace: tuple[TraceEntry, ...] = ()

    @property
    def returned(self) -> bool:
        return self.kind is PhaseKind.RETURN

    def settle(self) -> Any:
        """The value to go on with (or the returned one); raises `AdkError` with
        ``("plugin_halted", id, hook, reason)`` or ``("plugin_failed", id, hook,
        failure)`` for HALT and ERROR."""
        if self.kind in (PhaseKind.HALT, PhaseKind.ERROR):
            what = "a plugin stopped the run" if self.kind is PhaseKind.HALT else "a plugin failed"
            raise AdkError(self.value, what)
        return self.value


def normalize(result: Any) -> tuple[str, Any] | None:
    """A hook's answer as ``(tag, payload)`` with tag one of ``continue``, ``amend``,
    ``return``, ``halt``; None for anything else (an invalid result)."""
    if isinstance(result, str) or result is None:
        return ("continue", None) if result in CONTINUE_RESULTS else None
    match result:
        case Amend(value):
            return "amend", value
        case Return(value):
            return "return", value
        case Halt(reason):
            return "halt", reason
    if isinstance(result, Mapping) and len(result) == 1:
        ((key, value),) = result.items()
        if key == "amend":
            return "amend", value
        if key in ("return", "replace"):
            return "return", value
        if key == "halt":
            return "halt", value
    return None
