"""Evaluation results (schema 2): checked structs, `encode_result` and `decode_result`.

A result records every turn, sample, case and metric with strict accounting: a
criterion is ``ok`` (scored), ``error`` (could not be scored: a failure, never a pass)
or ``not_evaluated`` (nothing expected to score against); a sample is ``passed``,
``failed`` or ``error``; a case aggregates its samples as ``passed``, ``failed``,
``partial`` (some samples errored) or ``error`` (none succeeded). `decode_result`
accepts only a result whose counts, rates and statuses agree with each other.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import msgspec

from adk_actors.evaluation.limits import DEFAULT_MAX_REPORT_BYTES, MAX_REPORT_BYTES, check_data
from providers.errors import AdkError

RESULT_SCHEMA_VERSION = 2
_NEAR = 1e-9

SampleStatus = Literal["passed", "failed", "error"]
CaseStatus = Literal["passed", "failed", "partial", "error"]
CriterionStatus = Literal["ok", "error", "not_evaluated", "partial"]
MetricKind = Literal["criterion", "judge"]


class TrajectoryStep(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """One tool call or tool response of a run; `args` / `response` only with
    ``capture_tool_content`` (the engine scores with them either way)."""

    kind: Literal["tool_call", "tool_response"]
    tool: str
    call_id: str | None = None
    turn_id: str | None = None
    args: dict[str, Any] | None = None
    response: dict[str, Any] | None = None


class TurnResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One turn of one sample: what was sent, expected and answered."""

    turn_id: str
    turn_index: int
    input: str
    expected: str | None
    actual: str | None
    status: Literal["ok", "error"]
    error: str | None
    duration_ms: int


class CriterionResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One metric's verdict on a sample (status ok/error/not_evaluated), or on a case
    across its samples (then also ``partial``: some scored, some did not)."""

    metric_id: str
    kind: MetricKind
    scope: Literal["case"]
    status: CriterionStatus
    score: float | None
    threshold: float
    passed: bool
    error: str | None
    metadata: dict[str, Any]


class SampleResult(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """One independent run of a case."""

    sample_id: str
    sample_index: int
    status: SampleStatus
    passed: bool
    error: str | None
    duration_ms: int
    adapter_metadata: dict[str, Any]
    trajectory: tuple[TrajectoryStep, ...]
    criteria: tuple[CriterionResult, ...]
    turns: tuple[TurnResult, ...]
    events: tuple[dict[str, Any], ...] = ()


class CaseResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A case across its samples."""

    case_id: str
    case_index: int
    status: CaseStatus
    passed: bool
    sample_count: int
    successful_sample_count: int
    passed_sample_count: int
    error_sample_count: int
    sample_pass_rate: float
    sample_pass_rate_threshold: float
    min_successful_samples: int
    duration_ms: int
    criteria: tuple[CriterionResult, ...]
    samples: tuple[SampleResult, ...]


class Statistics(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Mean, extremes and (population) standard deviation of the ``ok`` scores."""

    mean: float
    minimum: float
    maximum: float
    standard_deviation: float


class MetricSummary(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One metric across every sample of every case."""

    metric_id: str
    kind: MetricKind
    scope: Literal["case"]
    average_score: float | None
    threshold: float
    passed: bool
    evaluated_count: int
    error_count: int
    not_evaluated_count: int
    statistics: Statistics | None


class EvalResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A whole evaluation: the gate (`passed`), its rate and every case."""

    result_schema_version: int
    eval_set_schema_version: int
    eval_set_id: str
    eval_set_version: str
    passed: bool
    pass_rate: float
    pass_rate_threshold: float
    case_count: int
    passed_case_count: int
    error_case_count: int
    partial_case_count: int
    sample_count: int
    duration_ms: int
    metadata: dict[str, Any]
    metrics: tuple[MetricSummary, ...]
    cases: tuple[CaseResult, ...]


def ratio(numerator: int, denominator: int) -> float:
    """`numerator / denominator`, 0.0 for an empty denominator."""
    return numerator / denominator if denominator else 0.0


def case_status(passed: bool, successful: int, errors: int) -> CaseStatus:
    """A case's status from its gate and its sample counts (the reference's rule)."""
    if successful == 0:
        return "error"
    if errors > 0:
        return "partial"
    return "passed" if passed else "failed"


def statistics(scores: list[float]) -> Statistics | None:
    """The statistics of `scores`, None when there are none."""
    if not scores:
        return None
    mean = sum(scores) / len(scores)
    variance = sum((score - mean) ** 2 for score in scores) / len(scores)
    return Statistics(
        mean=mean, minimum=min(scores), maximum=max(scores), standard_deviation=math.sqrt(variance)
    )


def encode_result(result: EvalResult) -> dict[str, Any]:
    """`result` as JSON-safe data (checked first, so only a consistent result is saved)."""
    if not isinstance(result, EvalResult):
        raise AdkError("invalid_eval_result", "encode an EvalResult")
    _check(result)
    encoded: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(result))
    return encoded


def decode_result(data: object, *, max_bytes: int = DEFAULT_MAX_REPORT_BYTES) -> EvalResult:
    """The checked `EvalResult` for saved JSON-shaped data, or `AdkError`:
    ``unsupported_eval_result_schema_version``, ``invalid_eval_result`` (with the limit
    or the broken rule) or ``eval_report_too_large``."""
    if isinstance(data, EvalResult):
        _check(data)
        return data
    check_data(data, "invalid_eval_result", max_total_string_bytes=MAX_REPORT_BYTES)
    if not isinstance(data, dict):
        raise AdkError("invalid_eval_result", "a result is a JSON object")
    version = data.get("result_schema_version")
    if version != RESULT_SCHEMA_VERSION or isinstance(version, bool):
        raise AdkError(
            (
                "unsupported_eval_result_schema_version",
                version if isinstance(version, int) else None,
            ),
            f"result_schema_version is {RESULT_SCHEMA_VERSION}",
        )
    if len(msgspec.json.encode(data)) > max_bytes:
        raise AdkError("eval_report_too_large", f"a result is at most {max_bytes} bytes")
    try:
        result = msgspec.convert(data, EvalResult, strict=True)
    except msgspec.ValidationError as error:
        raise AdkError(("invalid_eval_result", "schema"), str(error)[:200]) from None
    _check(result)
    return result


def _check(result: EvalResult) -> None:
    """Refuse a result whose numbers disagree (``("invalid_eval_result", rule)``)."""
    _require(result.result_schema_version == RESULT_SCHEMA_VERSION, "result_schema_version")
    _require(result.case_count == len(result.cases), "case_count")
    _require(_score(result.pass_rate) and _score(result.pass_rate_threshold), "pass_rate")
    passed_cases = sum(case.passed for case in result.cases)
    _require(result.passed_case_count == passed_cases, "passed_case_count")
    _require(
        result.error_case_count == sum(case.status == "error" for case in result.cases),
        "error_case_count",
    )
    _require(
        result.partial_case_count == sum(case.status == "partial" for case in result.cases),
        "partial_case_count",
    )
    _require(_near(result.pass_rate, ratio(passed_cases, len(result.cases))), "pass_rate")
    _require(result.passed == (result.pass_rate >= result.pass_rate_threshold), "passed")
    _require(result.sample_count >= 1 and result.duration_ms >= 0, "sample_count")
    seen: set[str] = set()
    for index, case in enumerate(result.cases):
        _require(case.case_id not in seen and case.case_index == index, "case_id")
        seen.add(case.case_id)
        _require(case.sample_count == result.sample_count, "sample_count")
        _check_case(case)
    for metric in result.metrics:
        _check_metric(metric)


def _check_case(case: CaseResult) -> None:
    samples = case.samples
    _require(case.sample_count == len(samples), "case_sample_count")
    errors = sum(sample.status == "error" for sample in samples)
    successful = len(samples) - errors
    passed_samples = sum(sample.passed for sample in samples)
    _require(case.error_sample_count == errors, "error_sample_count")
    _require(case.successful_sample_count == successful, "successful_sample_count")
    _require(case.passed_sample_count == passed_samples, "passed_sample_count")
    _require(_near(case.sample_pass_rate, ratio(passed_samples, successful)), "sample_pass_rate")
    _require(_score(case.sample_pass_rate_threshold), "sample_pass_rate_threshold")
    _require(1 <= case.min_successful_samples <= max(1, len(samples)), "min_successful_samples")
    gate = (
        successful >= case.min_successful_samples
        and case.sample_pass_rate >= case.sample_pass_rate_threshold
    )
    _require(case.passed == gate, "case_passed")
    _require(case.status == case_status(gate, successful, errors), "case_status")
    _require(case.duration_ms >= 0, "duration_ms")
    for index, sample in enumerate(samples):
        _require(sample.sample_index == index, "sample_index")
        _require(
            (sample.status == "passed") == sample.passed and sample.duration_ms >= 0,
            "sample_status",
        )
        _require(sample.status != "error" or sample.error is not None, "sample_error")
        for criterion in sample.criteria:
            _require(criterion.status != "partial", "criterion_status")
            _check_criterion(criterion)
        for turn_index, turn in enumerate(sample.turns):
            _require(turn.turn_index == turn_index and turn.duration_ms >= 0, "turn_index")
    for criterion in case.criteria:
        _check_criterion(criterion)


def _check_criterion(criterion: CriterionResult) -> None:
    _require(_score(criterion.threshold), "criterion_threshold")
    if criterion.status in ("ok", "partial"):
        _require(criterion.score is not None and _score(criterion.score), "criterion_score")
    else:
        _require(criterion.score is None, "criterion_score")
    gate = (
        criterion.status == "ok"
        and criterion.score is not None
        and criterion.score >= criterion.threshold
    )
    _require(criterion.passed == gate, "criterion_passed")


def _check_metric(metric: MetricSummary) -> None:
    _require(_score(metric.threshold), "metric_threshold")
    counts = (metric.evaluated_count, metric.error_count, metric.not_evaluated_count)
    _require(all(count >= 0 for count in counts), "metric_counts")
    if metric.evaluated_count:
        _require(
            metric.average_score is not None
            and _score(metric.average_score)
            and metric.statistics is not None,
            "metric_average",
        )
    else:
        _require(metric.average_score is None and metric.statistics is None, "metric_average")
    gate = (
        metric.average_score is not None
        and metric.error_count == 0
        and metric.not_evaluated_count == 0
        and metric.average_score >= metric.threshold
    )
    _require(metric.passed == gate, "metric_passed")


def _score(value: float) -> bool:
    return 0.0 <= value <= 1.0


def _near(a: float, b: float) -> bool:
    return abs(a - b) <= _NEAR


def _require(condition: bool, rule: str) -> None:
    if not condition:
        raise AdkError(("invalid_eval_result", rule), f"inconsistent result: {rule}")
