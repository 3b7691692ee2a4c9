"""Criteria: the metrics file (`load_metrics` -> `MetricSpec`) and the built-in scorers.

Built-ins score a whole case, deterministically (no model): ``exact_response``
(the final response against ``expected_final_response``, else each turn's answer
against its ``expected_response``; normalization ``exact``, ``trim`` or
``casefold_trim``) and the tool trajectory in ``trajectory_exact``,
``trajectory_in_order``, ``trajectory_any_order`` or ``trajectory_subset`` mode, with
arguments compared ``exact``-ly, as a ``subset`` or ``ignored``. A criterion with
nothing expected to compare against is ``not_evaluated``. A ``"kind": "judge"``
metric is the rubric judge (`adk_actors.evaluation.judge`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec

from adk_actors.evaluation import judge
from adk_actors.evaluation.evalset import EvalCase, ExpectedToolCall
from adk_actors.evaluation.limits import MAX_ID_CHARS, MAX_METRICS, check_data
from providers.errors import AdkError, key_name

Criterion = Literal[
    "exact_response",
    "trajectory_exact",
    "trajectory_in_order",
    "trajectory_any_order",
    "trajectory_subset",
]
Normalization = Literal["exact", "trim", "casefold_trim"]
ArgsMode = Literal["exact", "subset", "ignored"]
CRITERIA: tuple[str, ...] = Criterion.__args__  # type: ignore[attr-defined]
DEFAULT_METRIC: dict[str, Any] = {
    "id": "exact-response",
    "criterion": "exact_response",
    "threshold": 1.0,
}
_METRIC_KEYS = frozenset({"id", "kind", "criterion", "scope", "threshold", "config"})
_RESPONSE_KEYS = frozenset({"normalization"})
_TRAJECTORY_KEYS = frozenset({"args"})


class MetricSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One checked criteria entry: a built-in criterion or the judge (`judge` set)."""

    id: str
    kind: Literal["criterion", "judge"]
    threshold: float
    config: dict[str, Any]
    criterion: Criterion | None = None
    scope: Literal["case"] = "case"
    normalization: Normalization = "exact"
    args: ArgsMode = "exact"
    judge: judge.JudgeConfig | None = None


class Score(msgspec.Struct, frozen=True):
    """A scorer's verdict: ``ok`` with a score in 0..1, or ``not_evaluated``."""

    status: Literal["ok", "not_evaluated"]
    score: float | None
    metadata: dict[str, Any]


class ScoredTurn(msgspec.Struct, frozen=True):
    """What a criterion sees of one turn: expected and actual response."""

    expected: str | None
    actual: str | None


class ToolCall(msgspec.Struct, frozen=True):
    """An actual tool call, with its arguments (always kept for scoring)."""

    name: str
    args: dict[str, Any]


def load_metrics(data: object, *, trusted: bool = False) -> list[MetricSpec]:
    """The checked criteria list (JSON-shaped). `trusted` is passed to the judge's
    config parser (provider injection is for trusted Python only). Reasons:
    ``invalid_eval_metrics`` (not a list, too many), ``("invalid_eval_metric_id",
    index)``, ``("duplicate_eval_metric_id", id)``, ``("invalid_eval_metric", id,
    what)``. An empty list loads; the engine refuses it unless told to pass."""
    check_data(data, "invalid_eval_metrics", allow_objects=trusted)
    if not isinstance(data, list):
        raise AdkError("invalid_eval_metrics", "criteria are a JSON list")
    if len(data) > MAX_METRICS:
        raise AdkError("invalid_eval_metrics", f"at most {MAX_METRICS} criteria")
    metrics: list[MetricSpec] = []
    seen: set[str] = set()
    for index, entry in enumerate(data):
        metric = _metric(entry, index, trusted)
        if metric.id in seen:
            raise AdkError(("duplicate_eval_metric_id", metric.id), "metric ids are unique")
        seen.add(metric.id)
        metrics.append(metric)
    return metrics


def default_metrics() -> list[MetricSpec]:
    """The exact-response criterion used when no criteria are given."""
    return load_metrics([DEFAULT_METRIC])


def _metric(entry: Any, index: int, trusted: bool) -> MetricSpec:
    if not isinstance(entry, Mapping):
        raise AdkError(("invalid_eval_metric", index), "a criterion is a JSON object")
    metric_id = entry.get("id")
    if not isinstance(metric_id, str) or not 1 <= len(metric_id) <= MAX_ID_CHARS:
        raise AdkError(("invalid_eval_metric_id", index), "a criterion id is a non-empty string")
    unknown = sorted({key_name(key) for key in entry if key not in _METRIC_KEYS})
    if unknown:
        raise AdkError(
            ("invalid_eval_metric", metric_id, ("unknown_keys", unknown[:16])),
            f"unknown criterion keys: {', '.join(unknown[:16])}",
        )
    kind = entry.get("kind", "criterion")
    if kind not in ("criterion", "judge"):
        raise AdkError(("invalid_eval_metric", metric_id, "kind"), "kind is criterion or judge")
    if entry.get("scope", "case") != "case":
        raise AdkError(("invalid_eval_metric", metric_id, "scope"), "scope is case")
    threshold = entry.get("threshold", 1.0)
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not 0.0 <= threshold <= 1.0
    ):
        raise AdkError(("invalid_eval_metric", metric_id, "threshold"), "threshold is in 0..1")
    config = entry.get("config", {})
    if not isinstance(config, Mapping):
        raise AdkError(("invalid_eval_metric", metric_id, "config"), "config is a JSON object")
    if kind == "judge":
        if "criterion" in entry:
            raise AdkError(
                ("invalid_eval_metric", metric_id, "criterion"), "a judge has no criterion"
            )
        return MetricSpec(
            id=metric_id,
            kind="judge",
            threshold=float(threshold),
            config=dict(config),
            judge=judge.parse_judge_config(config, trusted=trusted),
        )
    criterion = entry.get("criterion")
    if criterion not in CRITERIA:
        raise AdkError(
            ("invalid_eval_metric", metric_id, "criterion"),
            f"criterion is one of {', '.join(CRITERIA)}",
        )
    allowed = _RESPONSE_KEYS if criterion == "exact_response" else _TRAJECTORY_KEYS
    unknown = sorted({key_name(key) for key in config if key not in allowed})
    if unknown:
        raise AdkError(
            ("invalid_eval_metric", metric_id, ("unknown_keys", unknown[:16])),
            f"unknown config keys for {criterion}: {', '.join(unknown[:16])}",
        )
    normalization = config.get("normalization", "exact")
    if normalization not in ("exact", "trim", "casefold_trim"):
        raise AdkError(
            ("invalid_eval_metric", metric_id, "invalid_response_normalization"),
            "normalization is exact, trim or casefold_trim",
        )
    args = config.get("args", "exact")
    if args not in ("exact", "subset", "ignored"):
        raise AdkError(
            ("invalid_eval_metric", metric_id, "invalid_trajectory_args_policy"),
            "args is exact, subset or ignored",
        )
    return MetricSpec(
        id=metric_id,
        kind="criterion",
        threshold=float(threshold),
        config=dict(config),
        criterion=criterion,
        normalization=normalization,
        args=args,
    )


def score(
    metric: MetricSpec, case: EvalCase, turns: Sequence[ScoredTurn], calls: Sequence[ToolCall]
) -> Score:
    """A built-in criterion's verdict on one sample of `case`."""
    if metric.criterion == "exact_response":
        return _exact_response(metric.normalization, case, turns)
    if metric.criterion is None:
        raise AdkError("invalid_eval_metric", "a judge is not a built-in criterion")
    return _trajectory(metric.criterion.removeprefix("trajectory_"), metric.args, case, calls)


def _exact_response(mode: Normalization, case: EvalCase, turns: Sequence[ScoredTurn]) -> Score:
    if case.expected_final_response is not None:
        pairs = [(case.expected_final_response, turns[-1].actual)] if turns else []
    else:
        pairs = [(turn.expected, turn.actual) for turn in turns if turn.expected is not None]
    if not pairs:
        return Score("not_evaluated", None, {"reason": "missing_expected_response"})
    matched = sum(
        _normalized(expected, mode) == _normalized(actual, mode)
        for expected, actual in pairs
        if expected is not None
    )
    return Score(
        "ok",
        matched / len(pairs),
        {
            "criterion": "exact_response",
            "normalization": mode,
            "matched_count": matched,
            "expected_count": len(pairs),
        },
    )


def _normalized(text: str | None, mode: Normalization) -> str | None:
    if text is None or mode == "exact":
        return text
    if mode == "trim":
        return text.strip()
    return text.strip().casefold()


def expected_trajectory(case: EvalCase) -> tuple[ExpectedToolCall, ...] | None:
    """The case's expected calls: its own, else every turn's in order, else None."""
    if case.expected_trajectory is not None:
        return case.expected_trajectory
    steps = [step for turn in case.turns for step in (turn.expected_trajectory or ())]
    if not steps and all(turn.expected_trajectory is None for turn in case.turns):
        return None
    return tuple(steps)


def _trajectory(mode: str, args: ArgsMode, case: EvalCase, calls: Sequence[ToolCall]) -> Score:
    expected = expected_trajectory(case)
    if expected is None:
        return Score("not_evaluated", None, {"reason": "missing_expected_trajectory"})
    actual = list(calls)
    if mode == "exact":
        passed = len(expected) == len(actual) and all(
            _step_matches(e, a, args) for e, a in zip(expected, actual, strict=True)
        )
    elif mode == "in_order":
        passed = _in_order(expected, actual, args)
    elif mode == "any_order":
        passed = len(expected) == len(actual) and _consumed(expected, actual, args) == len(expected)
    else:
        passed = _consumed(expected, actual, args) == len(expected)
    return Score(
        "ok",
        1.0 if passed else 0.0,
        {
            "criterion": "tool_trajectory",
            "match_policy": mode,
            "args_policy": args,
            "expected_count": len(expected),
            "actual_count": len(actual),
            "matched_count": _consumed(expected, actual, args),
        },
    )


def _in_order(expected: Sequence[ExpectedToolCall], actual: list[ToolCall], args: ArgsMode) -> bool:
    """Every expected call appears in `actual` in this order (others may come between)."""
    position = 0
    for step in expected:
        while position < len(actual) and not _step_matches(step, actual[position], args):
            position += 1
        if position == len(actual):
            return False
        position += 1
    return True


def _consumed(expected: Sequence[ExpectedToolCall], actual: list[ToolCall], args: ArgsMode) -> int:
    """How many expected calls find a distinct matching actual call (any order)."""
    left = list(actual)
    matched = 0
    for step in expected:
        for index, call in enumerate(left):
            if _step_matches(step, call, args):
                del left[index]
                matched += 1
                break
    return matched


def _step_matches(expected: ExpectedToolCall, actual: ToolCall, args: ArgsMode) -> bool:
    if expected.name != actual.name:
        return False
    if expected.args is None or args == "ignored":
        return True
    if args == "exact":
        return expected.args == actual.args
    return _json_subset(expected.args, actual.args)


def _json_subset(expected: Any, actual: Any) -> bool:
    """`expected` is contained in `actual`: keys recursively, list prefixes item-wise."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return all(
            key in actual and _json_subset(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) <= len(actual) and all(
            _json_subset(e, a) for e, a in zip(expected, actual, strict=False)
        )
    return bool(expected == actual and type(expected) is type(actual)) or (
        _numbers(expected, actual) and expected == actual
    )


def _numbers(a: Any, b: Any) -> bool:
    return all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))
