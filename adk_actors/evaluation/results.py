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

from adk_actors.evaluation.limits import (
    DEFAULT_MAX_REPORT_BYTES,
    MAX_REPORT_BYTES,
    check_data,
    is_fraction,
    near,
    result_max_nodes,
)
from providers.errors import AdkError

RESULT_SCHEMA_VERSION = 2
LEGACY_RESULT_SCHEMA_VERSION = 1

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


MetricKey = tuple[str, MetricKind, float]
"""A metric as results record it: id, kind, threshold."""


def _tally(results: list[CriterionResult]) -> tuple[list[float], int, int]:
    """The ``ok`` scores, the error count and the not-evaluated count of `results`."""
    scores = [r.score for r in results if r.status == "ok" and r.score is not None]
    errors = sum(r.status == "error" for r in results)
    skipped = sum(r.status == "not_evaluated" for r in results)
    return scores, errors, skipped


def _criterion_of(
    metric: MetricKey, status: CriterionStatus, value: float | None, metadata: dict[str, Any]
) -> CriterionResult:
    metric_id, kind, threshold = metric
    return CriterionResult(
        metric_id=metric_id,
        kind=kind,
        scope="case",
        status=status,
        score=value,
        threshold=threshold,
        passed=status == "ok" and value is not None and value >= threshold,
        error=None,
        metadata=metadata,
    )


def case_criteria(
    metrics: list[MetricKey], samples: list[SampleResult] | tuple[SampleResult, ...]
) -> tuple[CriterionResult, ...]:
    """Each metric across a case's samples (the reference's aggregate status), for the
    metrics some sample was scored on, in `metrics` order."""
    aggregated = []
    for metric in metrics:
        results = [c for s in samples for c in s.criteria if c.metric_id == metric[0]]
        if not results:
            continue
        scores, errors, skipped = _tally(results)
        status: CriterionStatus
        if not scores:
            status = "error" if errors else "not_evaluated"
        else:
            status = "ok" if errors == 0 and skipped == 0 else "partial"
        stats = statistics(scores)
        metadata = {
            "sample_count": len(results),
            "error_count": errors,
            "not_evaluated_count": skipped,
            "statistics": None if stats is None else msgspec.to_builtins(stats),
        }
        average = sum(scores) / len(scores) if scores else None
        aggregated.append(_criterion_of(metric, status, average, metadata))
    return tuple(aggregated)


def metric_summary(
    metric_id: str,
    kind: MetricKind,
    threshold: float,
    cases: list[CaseResult] | tuple[CaseResult, ...],
) -> MetricSummary:
    """One metric across every sample of every case."""
    results = [
        c
        for case in cases
        for sample in case.samples
        for c in sample.criteria
        if c.metric_id == metric_id
    ]
    scores, errors, skipped = _tally(results)
    average = sum(scores) / len(scores) if scores else None
    return MetricSummary(
        metric_id=metric_id,
        kind=kind,
        scope="case",
        average_score=average,
        threshold=threshold,
        passed=average is not None and errors == 0 and skipped == 0 and average >= threshold,
        evaluated_count=len(scores),
        error_count=errors,
        not_evaluated_count=skipped,
        statistics=statistics(scores),
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
    _check_bounds(data, max_bytes)
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
    try:
        result = msgspec.convert(data, EvalResult, strict=True)
    except msgspec.ValidationError as error:
        raise AdkError(("invalid_eval_result", "schema"), str(error)[:200]) from None
    _check(result)
    return result


class LegacyResult(msgspec.Struct, frozen=True, kw_only=True):
    """A schema-1 (v1) result, checked as far as the reference defines it: its set id
    and version, a ``passed`` flag and a list of cases; other keys are kept as they are.
    It can be rendered, never compared."""

    result_schema_version: Literal[1]
    eval_set_id: str
    eval_set_version: str
    passed: bool
    cases: list[Any]


def is_legacy_result(data: object) -> bool:
    """True when `data` says it is a schema-1 result (before it is checked)."""
    if not isinstance(data, dict):
        return False
    version = data.get("result_schema_version")
    return version == LEGACY_RESULT_SCHEMA_VERSION and not isinstance(version, bool)


def decode_legacy_result(
    data: object, *, max_bytes: int = DEFAULT_MAX_REPORT_BYTES
) -> dict[str, Any]:
    """A saved schema-1 result as its checked JSON (the same bounds as schema 2), or
    ``("invalid_eval_result", limit | "schema")`` / ``eval_report_too_large``."""
    _check_bounds(data, max_bytes)
    if not isinstance(data, dict):
        raise AdkError("invalid_eval_result", "a result is a JSON object")
    try:
        msgspec.convert(data, LegacyResult, strict=True)
    except msgspec.ValidationError as error:
        raise AdkError(("invalid_eval_result", "schema"), str(error)[:200]) from None
    return dict(data)


def _check_bounds(data: object, max_bytes: int) -> None:
    """The JSON bounds of a saved result: as large as any the engine writes (nodes and
    string bytes scale with `max_bytes`), then its encoded size."""
    check_data(
        data,
        "invalid_eval_result",
        max_nodes=result_max_nodes(max_bytes),
        max_total_string_bytes=max(max_bytes, MAX_REPORT_BYTES),
    )
    if len(msgspec.json.encode(data)) > max_bytes:
        raise AdkError("eval_report_too_large", f"a result is at most {max_bytes} bytes")


def _check(result: EvalResult) -> None:
    """Refuse a result whose numbers disagree (``("invalid_eval_result", rule)``)."""
    _require(result.result_schema_version == RESULT_SCHEMA_VERSION, "result_schema_version")
    _require(result.case_count == len(result.cases), "case_count")
    _require(is_fraction(result.pass_rate) and is_fraction(result.pass_rate_threshold), "pass_rate")
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
    _require(near(result.pass_rate, ratio(passed_cases, len(result.cases))), "pass_rate")
    _require(result.passed == (result.pass_rate >= result.pass_rate_threshold), "passed")
    _require(result.sample_count >= 1 and result.duration_ms >= 0, "sample_count")
    metrics: list[MetricKey] = [(m.metric_id, m.kind, m.threshold) for m in result.metrics]
    known = {metric[0]: metric for metric in metrics}
    _require(len(known) == len(metrics), "duplicate_metric_id")
    seen: set[str] = set()
    for index, case in enumerate(result.cases):
        _require(case.case_id not in seen and case.case_index == index, "case_id")
        seen.add(case.case_id)
        _require(case.sample_count == result.sample_count, "sample_count")
        _check_case(case, known)
        _require(case.criteria == case_criteria(metrics, case.samples), "case_criteria")
    for metric in result.metrics:
        _check_metric(metric)
        recomputed = metric_summary(metric.metric_id, metric.kind, metric.threshold, result.cases)
        _require(metric == recomputed, "metric_summary")


def _check_case(case: CaseResult, known: dict[str, MetricKey]) -> None:
    samples = case.samples
    _require(case.sample_count == len(samples), "case_sample_count")
    errors = sum(sample.status == "error" for sample in samples)
    successful = len(samples) - errors
    passed_samples = sum(sample.passed for sample in samples)
    _require(case.error_sample_count == errors, "error_sample_count")
    _require(case.successful_sample_count == successful, "successful_sample_count")
    _require(case.passed_sample_count == passed_samples, "passed_sample_count")
    _require(near(case.sample_pass_rate, ratio(passed_samples, successful)), "sample_pass_rate")
    _require(is_fraction(case.sample_pass_rate_threshold), "sample_pass_rate_threshold")
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
        _require((sample.status == "error") == (sample.error is not None), "sample_error")
        _require(
            sample.status == "error" or sample.passed == all(c.passed for c in sample.criteria),
            "sample_passed",
        )
        for criterion in sample.criteria:
            _require(criterion.status != "partial", "criterion_status")
            metric = known.get(criterion.metric_id)
            _require(
                metric is not None
                and (criterion.kind, criterion.threshold) == (metric[1], metric[2]),
                "unknown_metric_id",
            )
            _check_criterion(criterion)
        for turn_index, turn in enumerate(sample.turns):
            _require(turn.turn_index == turn_index and turn.duration_ms >= 0, "turn_index")
    for criterion in case.criteria:
        _check_criterion(criterion)


def _check_criterion(criterion: CriterionResult) -> None:
    _require(is_fraction(criterion.threshold), "criterion_threshold")
    if criterion.status in ("ok", "partial"):
        _require(criterion.score is not None and is_fraction(criterion.score), "criterion_score")
    else:
        _require(criterion.score is None, "criterion_score")
    gate = (
        criterion.status == "ok"
        and criterion.score is not None
        and criterion.score >= criterion.threshold
    )
    _require(criterion.passed == gate, "criterion_passed")


def _check_metric(metric: MetricSummary) -> None:
    _require(is_fraction(metric.threshold), "metric_threshold")
    counts = (metric.evaluated_count, metric.error_count, metric.not_evaluated_count)
    _require(all(count >= 0 for count in counts), "metric_counts")
    if metric.evaluated_count:
        _require(
            metric.average_score is not None
            and is_fraction(metric.average_score)
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


def _require(condition: bool, rule: str) -> None:
    if not condition:
        raise AdkError(("invalid_eval_result", rule), f"inconsistent result: {rule}")
