"""The Runner's own options, as msgspec structs decoded by `providers.errors.decode_options`.

`runner_options(...)` checks the budgets and the streaming settings of a `Runner`
(each bad value fails with its own stable reason, e.g. ``invalid_run_timeout``);
`runner_admission(...)` checks its ``admission_control`` mapping (reason
``("invalid_admission_control", key)``). Both are strict: a bool is never a number
and unknown keys are named.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Annotated, Any, Literal

import msgspec

from adk_actors.admission import NAME as ADMISSION_NAME
from providers.errors import AdkError, decode_options
from supervision import Pid

StreamingMode = Literal["none", "text", "content"]

MAX_RUN_TIMEOUT = 86_400.0
MAX_ROUNDS = 10_000
"""Ceiling for `max_llm_calls` and `max_tool_rounds`."""
DEFAULT_MAX_STREAM_OUTPUT_BYTES = 16 << 20
DEFAULT_MAX_PARTIAL_EVENTS = 64
MAX_PARTIAL_EVENTS = 10_000
MAX_STREAM_OUTPUT_BYTES = 64 << 20
MAX_SERVER_NAME_CHARS = 256

Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_RUN_TIMEOUT)]
"""Seconds in (0, 86400]: infinities and NaN are refused."""
Rounds = Annotated[int, msgspec.Meta(ge=1, le=MAX_ROUNDS)]


class RunnerOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A Runner's budgets and streaming settings (build one with `runner_options`)."""

    run_timeout: Seconds = 120.0
    max_llm_calls: Rounds = 32
    max_tool_rounds: Rounds = 16
    streaming_mode: StreamingMode = "none"
    max_stream_output_bytes: Annotated[int, msgspec.Meta(ge=1, le=MAX_STREAM_OUTPUT_BYTES)] = (
        DEFAULT_MAX_STREAM_OUTPUT_BYTES
    )
    max_partial_events: Annotated[int, msgspec.Meta(ge=1, le=MAX_PARTIAL_EVENTS)] = (
        DEFAULT_MAX_PARTIAL_EVENTS
    )
    """Stored partial events per model round; past it adjacent deltas are coalesced."""


_RUNNER_REASONS = {
    field.name: f"invalid_{field.name}" for field in msgspec.structs.fields(RunnerOptions)
}


def runner_options(**options: Any) -> RunnerOptions:
    """The checked `RunnerOptions`; omitted options take their defaults.

    A bad value raises `AdkError` with the option's reason: ``invalid_run_timeout``,
    ``invalid_max_llm_calls``, ``invalid_max_tool_rounds``, ``invalid_streaming_mode``,
    ``invalid_max_stream_output_bytes`` or ``invalid_max_partial_events``; an unknown option raises
    ``("invalid_runner_options", ("unknown_keys", [names...]))``.
    """
    return decode_options(
        RunnerOptions,
        options,
        "invalid_runner_options",
        what="Runner option",
        field_reasons=_RUNNER_REASONS,
    )


class RunnerAdmission(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A Runner's ``admission_control``: how its invocations ask for a permit.

    `overflow` is the per-call mode; `queue_timeout` bounds the wait for a queued
    permit (and the run's own deadline bounds it too); `server` is the controller, a
    registered name or a pid (None: the application's, ``adk.admission``).
    """

    overflow: Literal["reject", "queue"] = "reject"
    queue_timeout: Seconds = 30.0
    server: Any = None

    @property
    def controller(self) -> Pid | Hashable:
        """Where to send permit requests: `server`, or the application's controller."""
        server: Pid | Hashable = ADMISSION_NAME if self.server is None else self.server
        return server


def runner_admission(
    options: Mapping[str, Any] | RunnerAdmission | None,
) -> RunnerAdmission | None:
    """The checked admission settings, or None when the Runner uses no admission control.

    Raises ``AdkError(("invalid_admission_control", key))`` for a bad value and
    ``AdkError(("invalid_admission_control", ("unknown_keys", [names...])))`` for
    unknown keys.
    """
    if options is None:
        return None
    checked = decode_options(
        RunnerAdmission, options, "invalid_admission_control", what="admission_control"
    )
    server = checked.server
    if server is not None and not (
        isinstance(server, Pid)
        or (isinstance(server, str) and 0 < len(server) <= MAX_SERVER_NAME_CHARS)
    ):
        raise AdkError(
            ("invalid_admission_control", "server"),
            "admission_control 'server' must be a registered name (a non-empty string) or a pid",
        )
    return checked
