"""`EvalOptions`: how many samples, how much overlap, the gates, timeouts and bounds.

Build one directly or with `eval_options(**options)`; the engine checks it again
either way (`check_options`), so a bad value fails as
``("invalid_eval_options", key)`` naming the key, before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec

from adk_actors.evaluation.limits import (
    DEFAULT_MAX_REPORT_BYTES,
    MAX_CONCURRENCY,
    MAX_PAYLOAD_DEPTH,
    MAX_REPORT_BYTES,
    MAX_SAMPLES,
    MAX_TIMEOUT,
    check_data,
)
from providers.errors import AdkError, decode_options, prune

_Rate = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
_Seconds = Annotated[float, msgspec.Meta(gt=0.0, le=MAX_TIMEOUT)]
_Concurrency = Annotated[int, msgspec.Meta(ge=1, le=MAX_CONCURRENCY)]
MAX_METADATA_BYTES = 65_536
MIN_REPORT_BYTES = 8192
"""The smallest report budget that holds the summary and one small case; the engine
also refuses one too small for the set's case count before running."""


class EvalOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One evaluation's options (times in seconds).

    `concurrency` bounds the cases running at once and `sample_concurrency` the
    samples of one case running at once (turns in a sample are always sequential).
    A case passes when at least `min_successful_samples` (default: every sample)
    succeeded and their pass rate reaches `sample_pass_rate_threshold`; the
    evaluation passes when the case pass rate reaches `pass_rate_threshold`.
    `empty_criteria="pass"` lets an evaluation without criteria pass.
    """

    sample_count: Annotated[int, msgspec.Meta(ge=1, le=MAX_SAMPLES)] = 1
    concurrency: _Concurrency = 1
    sample_concurrency: _Concurrency = 1
    pass_rate_threshold: _Rate = 1.0
    sample_pass_rate_threshold: _Rate = 1.0
    min_successful_samples: Annotated[int, msgspec.Meta(ge=1, le=MAX_SAMPLES)] | None = None
    empty_criteria: Literal["error", "pass"] = "error"
    capture_events: bool = False
    capture_tool_content: bool = False
    timeout: _Seconds = 600.0
    case_timeout: _Seconds = 60.0
    max_report_bytes: Annotated[int, msgspec.Meta(ge=MIN_REPORT_BYTES, le=MAX_REPORT_BYTES)] = (
        DEFAULT_MAX_REPORT_BYTES
    )
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def required_successes(self) -> int:
        """`min_successful_samples`, every sample when not given."""
        return (
            self.sample_count
            if self.min_successful_samples is None
            else self.min_successful_samples
        )


def eval_options(**options: Any) -> EvalOptions:
    """Checked `EvalOptions` from keyword options."""
    return check_options(options)


def check_options(options: EvalOptions | Mapping[str, Any] | None) -> EvalOptions:
    """`options` checked (bounds, the metadata size, `min_successful_samples` <=
    `sample_count`), secret-named metadata keys removed."""
    checked = decode_options(EvalOptions, options, "invalid_eval_options", what="eval option")
    check_data(
        checked.metadata,
        "invalid_eval_options",
        max_depth=MAX_PAYLOAD_DEPTH,
        max_total_string_bytes=MAX_METADATA_BYTES,
    )
    if len(msgspec.json.encode(checked.metadata)) > MAX_METADATA_BYTES:
        raise AdkError(("invalid_eval_options", "metadata"), "metadata is at most 64 KiB")
    if checked.required_successes > checked.sample_count:
        raise AdkError(
            ("invalid_eval_options", "min_successful_samples"),
            "min_successful_samples is at most sample_count",
        )
    return msgspec.structs.replace(checked, metadata=prune(checked.metadata))
