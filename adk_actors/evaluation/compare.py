"""Baseline comparison of two saved v2 evaluation results.

`compare(baseline, current, ...)` gates a candidate against a saved baseline: it
fails (``passed`` false) when the pass rate drops by more than ``max_pass_rate_drop``,
when a metric's average score drops by more than its tolerance (``metric_tolerances``
by metric id, default 0), when a baseline metric or case is missing from the current
result, or when a case that passed no longer passes. Metrics and cases that exist only
in the current result are listed (``new_metric``, ``new_case``) but never regress.
Results of different evaluation sets are refused (``eval_set_mismatch``).

A `Comparison` is JSON-safe (`encode_comparison`) and checked when read back
(`decode_comparison`): every diff's drop, reason and regression flag, and the overall
``passed``, must agree with its numbers, so a hand-edited or forged comparison is
refused (``invalid_eval_comparison``) rather than rendered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

import msgspec

from adk_actors.evaluation.limits import EPSILON, check_data, is_fraction, near, reason_tag
from adk_actors.evaluation.results import CaseResult, EvalResult, MetricSummary, decode_result
from providers.errors import AdkError

REPORT_SCHEMA_VERSION: Literal[1] = 1
REPORT_TYPE: Literal["baseline_comparison"] = "baseline_comparison"
MAX_TOLERANCES = 1000
"""Entries in ``metric_tolerances`` at most (``invalid_eval_comparison_options`` past it)."""
MAX_DIFFS = 10_000
"""Metric or case diffs in one comparison at most (the result's own list bound)."""
MAX_ID_BYTES = 1024

MetricReason = Literal["none", "score_drop", "missing_current_metric", "new_metric"]
CaseReason = Literal["none", "case_no_longer_passes", "missing_current_case", "new_case"]
CaseStatus = Literal["passed", "failed", "error", "partial", "missing"]

_Id = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_BYTES)]
_Fraction = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]


class MetricDiff(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One metric's average score, baseline against current (a missing or null score
    counts as 0)."""

    metric_id: _Id
    baseline_score: _Fraction
    current_score: _Fraction
    score_drop: _Fraction
    tolerance: _Fraction
    regression: bool
    reason: MetricReason


class CaseDiff(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One case's status, baseline against current; ``trajectory_changed`` when the
    tool steps its samples took differ (call ids aside)."""

    case_id: _Id
    baseline_status: CaseStatus
    current_status: CaseStatus
    trajectory_changed: bool
    regression: bool
    reason: CaseReason


class Comparison(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A checked baseline comparison; ``passed`` is false on any regression."""

    report_schema_version: Literal[1]
    report_type: Literal["baseline_comparison"]
    eval_set_id: _Id
    baseline_version: _Id
    current_version: _Id
    passed: bool
    baseline_pass_rate: _Fraction
    current_pass_rate: _Fraction
    pass_rate_drop: _Fraction
    max_pass_rate_drop: _Fraction
    metric_diffs: Annotated[list[MetricDiff], msgspec.Meta(max_length=MAX_DIFFS)]
    case_diffs: Annotated[list[CaseDiff], msgspec.Meta(max_length=MAX_DIFFS)]


def compare(
    baseline: EvalResult | Mapping[str, Any],
    current: EvalResult | Mapping[str, Any],
    *,
    max_pass_rate_drop: float = 0.0,
    metric_tolerances: Mapping[str, float] | None = None,
) -> Comparison:
    """Compare `current` with the saved `baseline` (results, or their saved JSON).

    A drop equal to its allowance passes (up to float rounding, `EPSILON`). As in the
    reference, every case that passed in the baseline and no longer passes is a
    regression whatever `max_pass_rate_drop` allows: the allowance forgives only a
    lower rate from cases that are new or were already failing.

    Raises `AdkError`: ``invalid_eval_comparison_options`` (a drop or tolerance outside
    0..1, an empty metric id, too many tolerances), ``invalid_baseline`` /
    ``invalid_current_result`` (not a valid result), ``eval_set_mismatch``.
    """
    tolerances = check_comparison_options(max_pass_rate_drop, metric_tolerances)
    base = _checked_result(baseline, "invalid_baseline")
    cur = _checked_result(current, "invalid_current_result")
    if base.eval_set_id != cur.eval_set_id:
        raise AdkError("eval_set_mismatch", "the results are of different evaluation sets")
    drop = max(0.0, base.pass_rate - cur.pass_rate)
    metric_diffs = _metric_diffs(base.metrics, cur.metrics, tolerances)
    case_diffs = _case_diffs(base.cases, cur.cases)
    regression = (
        drop > max_pass_rate_drop + EPSILON
        or any(diff.regression for diff in metric_diffs)
        or any(diff.regression for diff in case_diffs)
    )
    return Comparison(
        report_schema_version=REPORT_SCHEMA_VERSION,
        report_type=REPORT_TYPE,
        eval_set_id=base.eval_set_id,
        baseline_version=base.eval_set_version,
        current_version=cur.eval_set_version,
        passed=not regression,
        baseline_pass_rate=base.pass_rate,
        current_pass_rate=cur.pass_rate,
        pass_rate_drop=drop,
        max_pass_rate_drop=float(max_pass_rate_drop),
        metric_diffs=metric_diffs,
        case_diffs=case_diffs,
    )


def encode_comparison(comparison: Comparison) -> dict[str, Any]:
    """`comparison` as JSON builtins (keys in declaration order)."""
    encoded: dict[str, Any] = msgspec.to_builtins(comparison)
    return encoded


def decode_comparison(data: object) -> Comparison:
    """A saved comparison, checked: exact keys and types, and every flag consistent
    with its numbers; else ``AdkError("invalid_eval_comparison")``."""
    check_data(data, "invalid_eval_comparison")
    try:
        comparison = msgspec.convert(data, Comparison, strict=True)
    except msgspec.ValidationError as error:
        raise AdkError("invalid_eval_comparison", f"not a baseline comparison: {error}") from None
    problem = _inconsistency(comparison)
    if problem is not None:
        raise AdkError("invalid_eval_comparison", problem)
    return comparison


def is_comparison_json(data: object) -> bool:
    """True when `data` says it is a saved comparison (``report_type`` or
    ``report_schema_version``), before it is checked."""
    return isinstance(data, Mapping) and ("report_type" in data or "report_schema_version" in data)


# -- building ----------------------------------------------------------------------------------


def check_comparison_options(
    max_pass_rate_drop: float, metric_tolerances: Mapping[str, float] | None
) -> dict[str, float]:
    """The tolerances, checked (``invalid_eval_comparison_options`` naming the option);
    what `compare` checks first, for a caller that refuses bad options before running."""
    if not is_fraction(max_pass_rate_drop):
        raise AdkError(
            ("invalid_eval_comparison_options", "max_pass_rate_drop"), "must be within 0..1"
        )
    if metric_tolerances is None:
        return {}
    if not isinstance(metric_tolerances, Mapping) or len(metric_tolerances) > MAX_TOLERANCES:
        raise AdkError(
            ("invalid_eval_comparison_options", "metric_tolerances"),
            f"must be an object of at most {MAX_TOLERANCES} metric ids",
        )
    checked: dict[str, float] = {}
    for metric_id, tolerance in metric_tolerances.items():
        if (
            not isinstance(metric_id, str)
            or not metric_id
            or len(metric_id.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES
            or not is_fraction(tolerance)
        ):
            raise AdkError(
                ("invalid_eval_comparison_options", "metric_tolerances"),
                "each key must be a metric id and each tolerance within 0..1",
            )
        checked[metric_id] = float(tolerance)
    return checked


def _checked_result(value: EvalResult | Mapping[str, Any], reason: str) -> EvalResult:
    """The checked result (decoded first when given as JSON)."""
    try:
        return decode_result(value)
    except AdkError as error:
        raise AdkError(reason, f"not a valid evaluation result ({reason_tag(error)})") from None


def _metric_diffs(
    baseline: Sequence[MetricSummary],
    current: Sequence[MetricSummary],
    tolerances: Mapping[str, float],
) -> list[MetricDiff]:
    base = {metric.metric_id: metric.average_score or 0.0 for metric in baseline}
    cur = {metric.metric_id: metric.average_score or 0.0 for metric in current}
    diffs: list[MetricDiff] = []
    for metric_id in sorted(base.keys() | cur.keys()):
        tolerance = tolerances.get(metric_id, 0.0)
        before, after = base.get(metric_id, 0.0), cur.get(metric_id, 0.0)
        drop = max(0.0, before - after)
        if metric_id not in cur:
            regressed, reason = True, "missing_current_metric"
        elif metric_id not in base:
            drop, regressed, reason = 0.0, False, "new_metric"
        else:
            regressed = drop > tolerance + EPSILON
            reason = "score_drop" if regressed else "none"
        diffs.append(
            MetricDiff(
                metric_id=metric_id,
                baseline_score=before,
                current_score=after,
                score_drop=drop,
                tolerance=tolerance,
                regression=regressed,
                reason=reason,  # type: ignore[arg-type]
            )
        )
    return diffs


def _case_diffs(baseline: Sequence[CaseResult], current: Sequence[CaseResult]) -> list[CaseDiff]:
    base = {case.case_id: case for case in baseline}
    cur = {case.case_id: case for case in current}
    diffs: list[CaseDiff] = []
    for case_id in sorted(base.keys() | cur.keys()):
        before, after = base.get(case_id), cur.get(case_id)
        if after is None or before is None:
            diffs.append(
                CaseDiff(
                    case_id=case_id,
                    baseline_status="missing" if before is None else before.status,
                    current_status="missing" if after is None else after.status,
                    trajectory_changed=True,
                    regression=after is None,
                    reason="missing_current_case" if after is None else "new_case",
                )
            )
            continue
        regressed = before.passed and not after.passed
        diffs.append(
            CaseDiff(
                case_id=case_id,
                baseline_status=before.status,
                current_status=after.status,
                trajectory_changed=_trajectories(before) != _trajectories(after),
                regression=regressed,
                reason="case_no_longer_passes" if regressed else "none",
            )
        )
    return diffs


def _trajectories(case: CaseResult) -> list[list[tuple[Any, ...]]]:
    """The tool steps of each sample, in order, without their (per-run) call ids."""
    return [
        [
            (step.kind, step.tool, step.turn_id, msgspec.json.encode(step.args, order="sorted"))
            for step in sample.trajectory
        ]
        for sample in case.samples
    ]


# -- checking a saved comparison -------------------------------------------------------------


def _inconsistency(comparison: Comparison) -> str | None:
    """Why the comparison's flags disagree with its numbers, or None."""
    c = comparison
    if not near(c.pass_rate_drop, max(0.0, c.baseline_pass_rate - c.current_pass_rate)):
        return "pass_rate_drop disagrees with the pass rates"
    problem = _metric_problem(c.metric_diffs) or _case_problem(c.case_diffs)
    if problem is not None:
        return problem
    regression = (
        c.pass_rate_drop > c.max_pass_rate_drop + EPSILON
        or any(diff.regression for diff in c.metric_diffs)
        or any(diff.regression for diff in c.case_diffs)
    )
    if c.passed == regression:
        return "passed disagrees with the regressions"
    return None


def _unique(ids: Sequence[str]) -> bool:
    return len(set(ids)) == len(ids)


def _metric_problem(diffs: Sequence[MetricDiff]) -> str | None:
    if not _unique([diff.metric_id for diff in diffs]):
        return "a metric id is listed twice"
    for diff in diffs:
        if not near(diff.score_drop, max(0.0, diff.baseline_score - diff.current_score)):
            return "a metric's score_drop disagrees with its scores"
        consistent = {
            "none": not diff.regression and diff.score_drop <= diff.tolerance + EPSILON,
            "score_drop": diff.regression and diff.score_drop > diff.tolerance + EPSILON,
            "missing_current_metric": diff.regression
            and near(diff.current_score, 0.0)
            and near(diff.score_drop, diff.baseline_score),
            "new_metric": not diff.regression and near(diff.baseline_score, 0.0),
        }[diff.reason]
        if not consistent:
            return "a metric's reason disagrees with its numbers"
    return None


def _case_problem(diffs: Sequence[CaseDiff]) -> str | None:
    if not _unique([diff.case_id for diff in diffs]):
        return "a case id is listed twice"
    for diff in diffs:
        before, after = diff.baseline_status, diff.current_status
        consistent = {
            "none": not diff.regression
            and "missing" not in (before, after)
            and (before != "passed" or after == "passed"),
            "case_no_longer_passes": diff.regression
            and before == "passed"
            and after not in ("passed", "missing"),
            "missing_current_case": diff.regression
            and after == "missing"
            and before != "missing"
            and diff.trajectory_changed,
            "new_case": not diff.regression and before == "missing" and after != "missing",
        }[diff.reason]
        if not consistent:
            return "a case's reason disagrees with its statuses"
    return None
