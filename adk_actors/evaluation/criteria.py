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
from typing import Annotated, Any, Literal, TypeVar

import msgspec

from adk_actors.evaluation import judge
from adk_actors.evaluation.evalset import EvalCase, ExpectedToolCall
from adk_actors.evaluation.limits import MAX_ID_CHARS, MAX_METRICS, check_data
from providers.errors import AdkError, decode_options

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
_T = TypeVar("_T", bound=msgspec.Struct)


class MetricSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One checked criteria entry: a built-in criterion or the judge (`judge` set)."""

    id: str
    kind: Literal["criterion", "judge"]
    threshold: float
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


class _Entry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One criteria entry as written (decoded strictly; the config per kind below)."""

    id: str
    kind: Literal["criterion", "judge"] = "criterion"
    criterion: Criterion | None = None
    scope: Literal["case"] = "case"
    threshold: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] = 1.0
    config: dict[str, Any] = msgspec.field(default_factory=dict)


class _ResponseConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    normalization: Normalization = "exact"


class _TrajectoryConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    args: ArgsMode = "exact"


def _metric(entry: Any, index: int, trusted: bool) -> MetricSpec:
    if not isinstance(entry, Mapping):
        raise AdkError(("invalid_eval_metric", index), "a criterion is a JSON object")
    metric_id = entry.get("id")
    if not isinstance(metric_id, str) or not 1 <= len(metric_id) <= MAX_ID_CHARS:
        raise AdkError(("invalid_eval_metric_id", index), "a criterion id is a non-empty string")
    checked = _decoded(_Entry, entry, metric_id, "criterion")
    if checked.kind == "judge":
        if "criterion" in entry:
            raise AdkError(
                ("invalid_eval_metric", metric_id, "criterion"), "a judge has no criterion"
            )
        return MetricSpec(
            id=metric_id,
            kind="judge",
            threshold=checked.threshold,
            judge=judge.parse_judge_config(checked.config, trusted=trusted),
        )
    if checked.criterion is None:
        raise AdkError(
            ("invalid_eval_metric", metric_id, "criterion"),
            f"criterion is one of {', '.join(CRITERIA)}",
        )
    if checked.criterion == "exact_response":
        response = _decoded(_ResponseConfig, checked.config, metric_id, "config")
        return MetricSpec(
            id=metric_id,
            kind="criterion",
            threshold=checked.threshold,
            criterion=checked.criterion,
            normalization=response.normalization,
        )
    trajectory = _decoded(_TrajectoryConfig, checked.config, metric_id, "config")
    return MetricSpec(
        id=metric_id,
        kind="criterion",
        threshold=checked.threshold,
        criterion=checked.criterion,
        args=trajectory.args,
    )


_CONFIG_REASONS = {
    "normalization": "invalid_response_normalization",
    "args": "invalid_trajectory_args_policy",
}


def _decoded(struct_type: type[_T], data: Mapping[str, Any], metric_id: str, what: str) -> _T:
    """`data` decoded into `struct_type`; a refusal as ``("invalid_eval_metric", id,
    key | ("unknown_keys", names) | the config key's own reason)``."""
    try:
        return decode_options(
            struct_type, data, "invalid_eval_metric", what=what, field_reasons=_CONFIG_REASONS
        )
    except AdkError as error:
        reason = error.reason
        detail = reason[1] if isinstance(reason, tuple) and len(reason) > 1 else reason
        raise AdkError(("invalid_eval_metric", metric_id, detail), error.detail) from None


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
        passed = len(expected) == len(actual) and _matched(expected, actual, args) == len(expected)
    else:
        passed = _matched(expected, actual, args) == len(expected)
    return Score(
        "ok",
        1.0 if passed else 0.0,
        {
            "criterion": "tool_trajectory",
            "match_policy": mode,
            "args_policy": args,
            "expected_count": len(expected),
            "actual_count": len(actual),
            "matched_count": _matched(expected, actual, args),
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


def _matched(expected: Sequence[ExpectedToolCall], actual: list[ToolCall], args: ArgsMode) -> int:
    """How many expected calls find distinct matching actual calls, in any order: a
    maximum bipartite matching (augmenting paths), so a loose expectation (any args,
    a subset) never takes the call a stricter one needed. At most
    ``len(expected) * len(actual)`` comparisons, each made once."""
    edges = [
        [index for index, call in enumerate(actual) if _step_matches(step, call, args)]
        for step in expected
    ]
    owner: dict[int, int] = {}
    for start in range(len(expected)):
        _augment(start, edges, owner)
    return len(owner)


def _augment(start: int, edges: list[list[int]], owner: dict[int, int]) -> bool:
    """Find an augmenting path from expected call `start` (iteratively, no recursion)."""
    parent: dict[int, tuple[int, int | None]] = {}
    """actual index -> (expected index that reached it, actual index that expected held)"""
    queue: list[tuple[int, int | None]] = [(start, None)]
    seen: set[int] = set()
    while queue:
        step, via = queue.pop()
        for call in edges[step]:
            if call in seen:
                continue
            seen.add(call)
            parent[call] = (step, via)
            if call not in owner:
                node: int | None = call
                while node is not None:
                    holder, previous = parent[node]
                    owner[node] = holder
                    node = previous
                return True
            queue.append((owner[call], call))
    return False


def _step_matches(expected: ExpectedToolCall, actual: ToolCall, args: ArgsMode) -> bool:
    if expected.name != actual.name:
        return False
    if expected.args is None or args == "ignored":
        return True
    if args == "exact":
        return _json_equal(expected.args, actual.args)
    return _json_subset(expected.args, actual.args)


def _json_equal(expected: Any, actual: Any) -> bool:
    """JSON values equal with their types (the reference's ``=:=``): ``true`` is not
    ``1`` and ``1`` is not ``1.0``; object keys in any order."""
    return _json_subset(expected, actual, exact=True) and _json_subset(actual, expected, exact=True)


def _json_subset(expected: Any, actual: Any, *, exact: bool = False) -> bool:
    """`expected` is contained in `actual`: keys recursively, list prefixes item-wise
    (`exact`: lists item for item, and numbers of the same type)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return all(
            key in actual and _json_subset(value, actual[key], exact=exact)
            for key, value in expected.items()
        )
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) > len(actual) or (exact and len(expected) != len(actual)):
            return False
        return all(_json_subset(e, a, exact=exact) for e, a in zip(expected, actual, strict=False))
    if type(expected) is type(actual):
        return bool(expected == actual)
    return not exact and _numbers(expected, actual) and expected == actual


def _numbers(a: Any, b: Any) -> bool:
    return all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))
