"""The values `adk.runs` hands out: stream items, errors, and its bounds.

`RunEvent(seq, event)` and `RunTerminal(seq, outcome)` are what subscriptions
yield; they are frozen, JSON-safe msgspec structs like every value that crosses a
boundary. `RunError` is the `AdkError` every refusal raises (its `reason` is the
spec's atom); a `replay_gap` carries `gap`, an `already_resumed` the new `run_id`.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import msgspec

from adk_actors.events import Event
from adk_actors.outcomes import Outcome
from adk_actors.runs.options import DEFAULT_MAX_BUFFERED_EVENTS as DEFAULT_MAX_BUFFERED_EVENTS
from adk_actors.runs.options import DEFAULT_RETENTION as DEFAULT_RETENTION
from providers.errors import AdkError
from supervision import random_bytes

MAX_RETAINED_TERMINAL_RUNS = 100
CANCEL_GRACE = 0.25
MAX_RUN_ID_CHARS = 128
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")


class RunEvent(msgspec.Struct, frozen=True, tag="run_event"):
    """One stored event of a run, numbered from 1 in the order it was stored."""

    seq: int
    event: Event


class RunTerminal(msgspec.Struct, frozen=True, tag="run_terminal"):
    """The run's one terminal item: the same outcome `runs.wait` returns."""

    seq: int
    outcome: Outcome


class RunError(AdkError):
    """A refused run operation; `gap` for ``replay_gap``, `run_id` for ``already_resumed``."""

    def __init__(
        self,
        reason: Any,
        detail: str | None = None,
        *,
        gap: dict[str, Any] | None = None,
        run_id: str | None = None,
    ) -> None:
        super().__init__(reason, detail)
        self.gap = gap
        self.run_id = run_id


class RunTimeout(RunError, TimeoutError):
    """``timeout``: nothing was deliverable, or the run did not end, in time."""

    def __init__(self, detail: str) -> None:
        super().__init__("timeout", detail)


def new_run_id() -> str:
    """A fresh run id, ``run-<uuid4>``."""
    return f"run-{uuid.UUID(bytes=random_bytes(16), version=4)}"


def new_run_keys() -> tuple[str, str, str]:
    """A new run's (run id, invocation id, opening token) from one random draw of three
    independent parts: the run id ``run-<uuid4>``, the invocation ``inv-<uuid4 hex>``,
    and the token, so none can be told from another (an invocation id is seen in
    events, spans and logs)."""
    drawn = random_bytes(48)
    run_key = uuid.UUID(bytes=drawn[:16], version=4)
    invocation_key = uuid.UUID(bytes=drawn[16:32], version=4)
    return f"run-{run_key}", f"inv-{invocation_key.hex}", drawn[32:].hex()


def check_run_id(run_id: Any) -> str:
    """An explicit run id: a short token of letters, digits and ``_.:-``."""
    if (
        not isinstance(run_id, str)
        or len(run_id) > MAX_RUN_ID_CHARS
        or _RUN_ID.fullmatch(run_id) is None
    ):
        raise RunError(
            "invalid_run_id", f"a run id is 1..{MAX_RUN_ID_CHARS} characters of [A-Za-z0-9_.:-]"
        )
    return run_id


def check_cursor(after: Any) -> int:
    """A subscription cursor: the last sequence already consumed (0: from the start)."""
    if isinstance(after, bool) or not isinstance(after, int) or not 0 <= after < 2**62:
        raise RunError("invalid_cursor", "after is an int >= 0")
    return after
