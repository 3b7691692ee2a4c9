"""A planning run's budgets, as one msgspec struct decoded in one place."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from adk_actors.planning.plan import json_copy
from providers.errors import AdkError, decode_options

MAX_SECONDS = 86_400.0
DEFAULT_RETENTION = 60.0
MAX_STEPS = 10_000
MAX_REPLANS = 1_000
MAX_BYTES = 16 << 20
REASON = "invalid_planning_options"

Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_SECONDS)]
Bytes = Annotated[int, msgspec.Meta(ge=1, le=MAX_BYTES)]


class PlanningOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What bounds one planning run (defaults as the reference's)."""

    max_steps: Annotated[int, msgspec.Meta(ge=1, le=MAX_STEPS)] = 16
    """Executor calls in total, across every revision of the plan."""
    max_replans: Annotated[int, msgspec.Meta(ge=0, le=MAX_REPLANS)] = 3
    """Accepted replacement plans."""
    timeout: Seconds = 60.0
    """One absolute deadline for the whole run, in seconds."""
    callback_timeout: Seconds = 10.0
    """Each planner or executor call, capped by the deadline."""
    max_plan_bytes: Bytes = 1 << 20
    """Canonical JSON size of each accepted plan."""
    max_output_bytes: Bytes = 1 << 20
    """Canonical JSON size of one callback's answer (an executor output, a completed
    result, a failure reason): bigger answers become failures, so one callback cannot
    grow the result without bound."""
    result_metadata: dict[str, Any] = {}
    """Caller metadata copied into the result (secret-named keys pruned)."""
    retention: Annotated[float, msgspec.Meta(ge=0, le=MAX_SECONDS)] = DEFAULT_RETENTION
    """Seconds a run that ended (completed, failed or cancelled) before anyone awaited
    its result stays to answer `wait`; then it stops (0: at once, unless awaited)."""


def planning_options(**options: Any) -> PlanningOptions:
    """The checked options; a bad one raises ``AdkError(("invalid_planning_options",
    key))``, unknown ones ``AdkError(("invalid_planning_options", ("unknown_keys",
    [...])))``."""
    checked = decode_options(PlanningOptions, options, REASON, what="planning option")
    metadata = json_copy(checked.result_metadata, (REASON, "result_metadata"))
    if len(msgspec.json.encode(metadata)) > checked.max_output_bytes:
        raise AdkError(
            (REASON, "result_metadata"), "result_metadata is larger than max_output_bytes"
        )
    return msgspec.structs.replace(checked, result_metadata=metadata)
