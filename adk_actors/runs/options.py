"""The options of a stable run (`adk.runs.start`), as a msgspec struct.

`run_options(...)` checks them strictly through `providers.errors.decode_options`;
each bad value fails with its own stable reason (``invalid_retention``,
``invalid_max_buffered_events``), never echoing the value.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from providers.errors import decode_options
from supervision import MAX_BUFFERED_CEILING

DEFAULT_RETENTION = 60.0
MAX_RETENTION = 86_400.0
DEFAULT_MAX_BUFFERED_EVENTS = 256


class RunOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How long a terminal run stays queryable, and its replay window.

    `retention`: seconds in (0, 86400]. `max_buffered_events`: the events kept for
    late subscribers, 1 to the stream's ceiling (65536).
    """

    retention: Annotated[float, msgspec.Meta(gt=0, le=MAX_RETENTION)] = DEFAULT_RETENTION
    max_buffered_events: Annotated[int, msgspec.Meta(ge=1, le=MAX_BUFFERED_CEILING)] = (
        DEFAULT_MAX_BUFFERED_EVENTS
    )


_RUN_REASONS = {field.name: f"invalid_{field.name}" for field in msgspec.structs.fields(RunOptions)}


def run_options(**options: Any) -> RunOptions:
    """The checked `RunOptions`; omitted options take their defaults.

    A bad value raises `AdkError` with ``invalid_retention`` or
    ``invalid_max_buffered_events``; an unknown option raises
    ``("invalid_run_options", ("unknown_keys", [names...]))``.
    """
    return decode_options(
        RunOptions, options, "invalid_run_options", what="run option", field_reasons=_RUN_REASONS
    )
