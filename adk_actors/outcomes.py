"""How an invocation or a run ends: exactly one of four outcomes.

`Completed(output)`, `Paused(event)`, `Cancelled(reason)`, `Failed(reason)` are
frozen, JSON-safe values, shared by the Runner and `adk.runs`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from adk_actors.events import Event
from providers.content import Content


class Completed(msgspec.Struct, frozen=True, tag="completed"):
    """The invocation answered; `output` is its final text or Content."""

    output: str | Content


class Paused(msgspec.Struct, frozen=True, tag="paused"):
    """The invocation waits for a human or a long-running operation; `event` says why."""

    event: Event


class Cancelled(msgspec.Struct, frozen=True, tag="cancelled"):
    """Cancelled before it ended; `reason` is the first cancel's reason."""

    reason: Any


class Failed(msgspec.Struct, frozen=True, tag="failed"):
    """Ended with an error; `reason` is the spec's stable reason."""

    reason: Any


Outcome = Completed | Paused | Cancelled | Failed
OUTCOME_TYPES = (Completed, Paused, Cancelled, Failed)
