"""Criteria: the criteria file's validation and the built-in scorers' tables."""

from __future__ import annotations

from typing import Any

import pytest

from adk_actors import evaluation as ev
from adk_actors.evaluation import judge
from adk_actors.evaluation.criteria import ScoredTurn, ToolCall, score
from adk_actors.evaluation.limits import MAX_METRICS
from providers import AdkError, ScriptedProvider

RUBRIC = {"rubric": "Score 1 when correct.", "rubric_id": "correct", "rubric_version": "1"}


def metric(criterion: str, threshold: float = 1.0, **config: Any) -> ev.MetricSpec:
    entry: dict[str, Any] = {"id": "m", "criterion": criterion, "threshold": threshold}
    if config:
        entry["config"] = config
    return ev.load_metrics([entry])[0]


def case(**fields: Any) -> ev.EvalCase:
    data = {"id": "c", "turns": [{"id": "t1", "input": "x"}], **fields}
    loaded = ev.load_eval_set({"id": "s", "version": "1", "cases": [data]})
    return loaded.cases[0]


def turns(*pairs: tuple[str | None, str | None]) -> list[ScoredTurn]:
    return [ScoredTurn(expected=e, actual=a) for e, a in pairs]


# -- loading ------------------------------------------------------------------------------


def test_default_metric_is_exact_response() -> None:
    [only] = ev.default_metrics()
    assert (only.id, only.kind, only.criterion, only.threshold) == (
        "exact-response",
        "criterion",
        "exact_response",
        1.0,
    )
    assert (only.normalization, only.args, only.scope) == ("exact", "exact", "case")


def test_every_builtin_criterion_loads_with_its_config() -> None:
    loaded = ev.load_metrics(
        [
            {
                "id": "r",
                "criterion": "exact_response",
                "threshold": 0.5,
                "config": {"normalization": "casefold_trim"},
            },
            *({"id": c, "criterion": c, "config": {"args": "subset"}} for c in ev.CRITERIA[1:]),
        ]
    )
    assert [m.criterion for m in loaded] == list(ev.CRITERIA)
    assert loaded[0].normalization == "casefold_trim" and loaded[0].threshold == 0.5
    assert {m.args for m in loaded[1:]} == {"subset"}


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"id": "m"}, "invalid_eval_metrics"),
        ([{"id": "m", "criterion": "exact_response"}] * (MAX_METRICS + 1), "invalid_eval_metrics"),
        (["m"], ("invalid_eval_metric", 0)),
        ([{"criterion": "exact_response"}], ("invalid_eval_metric_id", 0)),
        ([{"id": "", "criterion": "exact_response"}], ("invalid_eval_metric_id", 0)),
        (
            [
                {"id": "m", "criterion": "exact_response"},
                {"id": "m", "criterion": "exact_response"},
            ],
            ("duplicate_eval_metric_id", "m"),
        ),
        ([{"id": "m", "criterion": "bleu"}], ("invalid_eval_metric", "m", "criterion")),
        ([{"id": "m"}], ("invalid_eval_metric", "m", "criterion")),
        (
            [{"id": "m", "criterion": "exact_response", "module": "x"}],
            ("invalid_eval_metric", "m", ("unknown_keys", ["module"])),
        ),
        (
            [{"id": "m", "criterion": "exact_response", "threshold": 1.5}],
            ("invalid_eval_metric", "m", "threshold"),
        ),
        (
            [{"id": "m", "criterion": "exact_response", "threshold": True}],
            ("invalid_eval_metric", "m", "threshold"),
        ),
        (
            [{"id": "m", "criterion": "exact_response", "scope": "turn"}],
            ("invalid_eval_metric", "m", "scope"),
        ),
        (
            [{"id": "m", "kind": "metric", "criterion": "exact_response"}],
            ("invalid_eval_metric", "m", "kind"),
        ),
        (
            [{"id": "m", "criterion": "exact_response", "config": {"normalization": "lower"}}],
            ("invalid_eval_metric", "m", "invalid_response_normalization"),
        ),
        (
            [{"id": "m", "criterion": "trajectory_exact", "config": {"args": "fuzzy"}}],
            ("invalid_eval_metric", "m", "invalid_trajectory_args_policy"),
        ),
        (
            [{"id": "m", "criterion": "exact_response", "config": {"args": "exact"}}],
            ("invalid_eval_metric", "m", ("unknown_keys", ["args"])),
        ),
        (
            [{"id": "m", "criterion": "exact_response", "config": []}],
            ("invalid_eval_metric", "m", "config"),
        ),
        (
            [{"id": "j", "kind": "judge", "criterion": "exact_response", "config": RUBRIC}],
            ("invalid_eval_metric", "j", "criterion"),
        ),
    ],
)
def test_invalid_criteria_are_refused_with_their_reason(data: Any, reason: Any) -> None:
    with pytest.raises(AdkError) as caught:
        ev.load_metrics(data)
    assert caught.value.reason == reason


def test_an_empty_list_loads_and_the_engine_decides() -> None:
    assert ev.load_metrics([]) == []


def test_judge_metrics_parse_through_the_judge_and_pass_trusted_through() -> None:
    [rubric] = ev.load_metrics(
        [{"id": "rubric", "kind": "judge", "threshold": 0.8, "config": RUBRIC}]
    )
    assert rubric.kind == "judge" and rubric.criterion is None
    assert isinstance(rubric.judge, judge.JudgeConfig)
    assert rubric.judge.rubric_id == "correct"
    provider = ScriptedProvider(['{"score": 1, "rationale": "ok"}'])
    entry = {"id": "rubric", "kind": "judge", "config": {**RUBRIC, "provider": provider}}
    with pytest.raises(AdkError) as caught:
        ev.load_metrics([entry])  # untrusted (the CLI): provider injection refused
    assert caught.value.reason[0] in ("invalid_eval_metrics", "invalid_judge_config")
    [trusted] = ev.load_metrics([entry], trusted=True)
    assert trusted.judge is not None and trusted.judge.provider is provider


# -- exact_response -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected", "actual", "matches"),
    [
        ("exact", "ERLANG", "ERLANG", True),
        ("exact", "ERLANG", " ERLANG\n", False),
        ("exact", "ERLANG", "erlang", False),
        ("trim", "ERLANG", " ERLANG\n", True),
        ("trim", "ERLANG", "erlang", False),
        ("casefold_trim", "ERLANG", "  erlang ", True),
        ("casefold_trim", "Straße", "STRASSE", True),
        ("casefold_trim", "ERLANG", "elixir", False),
        ("trim", "ERLANG", None, False),
    ],
)
def test_exact_response_normalization(
    mode: str, expected: str, actual: str | None, matches: bool
) -> None:
    """Follows erlang_adk test/evaluation/adk_eval_criteria_test.erl:
    exact_response_and_normalization_test."""
    verdict = score(
        metric("exact_response", normalization=mode), case(), turns((expected, actual)), []
    )
    assert verdict.status == "ok"
    assert verdict.score == (1.0 if matches else 0.0)
    assert verdict.metadata["normalization"] == mode


def test_exact_response_scores_each_expected_turn() -> None:
    verdict = score(
        metric("exact_response"),
        case(),
        turns(("a", "a"), (None, "ignored"), ("b", "nope"), ("c", "c"), ("d", "d")),
        [],
    )
    assert verdict.status == "ok"
    assert verdict.score == 0.75
    assert (verdict.metadata["matched_count"], verdict.metadata["expected_count"]) == (3, 4)


def test_expected_final_response_compares_only_the_last_turn() -> None:
    final = case(expected_final_response="done")
    assert (
        score(metric("exact_response"), final, turns(("x", "y"), (None, "done")), []).score == 1.0
    )
    assert (
        score(metric("exact_response"), final, turns(("x", "x"), (None, "nope")), []).score == 0.0
    )


def test_nothing_expected_is_not_evaluated() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_criteria_test.erl:
    missing_expectation_is_not_evaluated_test."""
    verdict = score(metric("exact_response"), case(), turns((None, "a")), [])
    assert (verdict.status, verdict.score) == ("not_evaluated", None)
    assert verdict.metadata == {"reason": "missing_expected_response"}
    verdict = score(metric("trajectory_exact"), case(), turns((None, "a")), [ToolCall("x", {})])
    assert (verdict.status, verdict.metadata["reason"]) == (
        "not_evaluated",
        "missing_expected_trajectory",
    )


# -- trajectories ----------------------------------------------------------------------------

EXPECTED = [
    {"name": "search", "args": {"q": "tokyo", "opts": {"units": "c"}}},
    {"name": "book", "args": {"day": 1}},
]
SAME = [ToolCall("search", {"q": "tokyo", "opts": {"units": "c"}}), ToolCall("book", {"day": 1})]
SWAPPED = [SAME[1], SAME[0]]
EXTRA_BETWEEN = [SAME[0], ToolCall("log", {}), SAME[1]]
MISSING = [SAME[0]]
MORE_ARGS = [
    ToolCall("search", {"q": "tokyo", "opts": {"units": "c", "lang": "en"}, "page": 2}),
    ToolCall("book", {"day": 1, "seat": "A"}),
]
OTHER_ARGS = [ToolCall("search", {"q": "osaka"}), ToolCall("book", {"day": 2})]

# (actual, {mode: {args_mode: passes}})
TABLE: list[tuple[str, list[ToolCall], dict[str, dict[str, bool]]]] = [
    (
        "same",
        SAME,
        {
            m: {"exact": True, "subset": True, "ignored": True}
            for m in ("exact", "in_order", "any_order", "subset")
        },
    ),
    (
        "swapped",
        SWAPPED,
        {
            "exact": {"exact": False, "subset": False, "ignored": False},
            "in_order": {"exact": False, "subset": False, "ignored": False},
            "any_order": {"exact": True, "subset": True, "ignored": True},
            "subset": {"exact": True, "subset": True, "ignored": True},
        },
    ),
    (
        "extra-between",
        EXTRA_BETWEEN,
        {
            "exact": {"exact": False, "subset": False, "ignored": False},
            "in_order": {"exact": True, "subset": True, "ignored": True},
            "any_order": {"exact": False, "subset": False, "ignored": False},
            "subset": {"exact": True, "subset": True, "ignored": True},
        },
    ),
    (
        "missing",
        MISSING,
        {
            m: {"exact": False, "subset": False, "ignored": False}
            for m in ("exact", "in_order", "any_order", "subset")
        },
    ),
    (
        "more-args",
        MORE_ARGS,
        {
            m: {"exact": False, "subset": True, "ignored": True}
            for m in ("exact", "in_order", "any_order", "subset")
        },
    ),
    (
        "other-args",
        OTHER_ARGS,
        {
            m: {"exact": False, "subset": False, "ignored": True}
            for m in ("exact", "in_order", "any_order", "subset")
        },
    ),
]


@pytest.mark.parametrize(("label", "actual", "outcomes"), TABLE, ids=[row[0] for row in TABLE])
@pytest.mark.parametrize("mode", ["exact", "in_order", "any_order", "subset"])
@pytest.mark.parametrize("args", ["exact", "subset", "ignored"])
def test_trajectory_modes_by_args_modes(
    label: str, actual: list[ToolCall], outcomes: dict[str, dict[str, bool]], mode: str, args: str
) -> None:
    """Follows erlang_adk test/evaluation/adk_eval_criteria_test.erl:
    trajectory_policy_matrix_test and trajectory_argument_policies_test."""
    verdict = score(
        metric(f"trajectory_{mode}", args=args), case(expected_trajectory=EXPECTED), turns(), actual
    )
    assert verdict.status == "ok"
    assert verdict.score == (1.0 if outcomes[mode][args] else 0.0), (label, mode, args)
    assert (verdict.metadata["match_policy"], verdict.metadata["args_policy"]) == (mode, args)
    assert verdict.metadata["actual_count"] == len(actual)


def test_turn_trajectories_are_concatenated_and_bare_names_ignore_args() -> None:
    two_turns = ev.load_eval_set(
        {
            "id": "s",
            "version": "1",
            "cases": [
                {
                    "id": "c",
                    "turns": [
                        {"id": "a", "input": "x", "expected_trajectory": ["search"]},
                        {
                            "id": "b",
                            "input": "y",
                            "expected_trajectory": [{"name": "book", "args": {"day": 1}}],
                        },
                    ],
                }
            ],
        }
    ).cases[0]
    assert (
        score(metric("trajectory_exact"), two_turns, turns(), MORE_ARGS).score == 0.0
    )  # book args
    assert score(metric("trajectory_exact"), two_turns, turns(), SAME).score == 1.0
    assert score(metric("trajectory_exact"), two_turns, turns(), SWAPPED).score == 0.0


def test_an_empty_expected_trajectory_expects_no_calls() -> None:
    none_expected = case(expected_trajectory=[])
    assert score(metric("trajectory_exact"), none_expected, turns(), []).score == 1.0
    assert score(metric("trajectory_exact"), none_expected, turns(), SAME).score == 0.0
    assert score(metric("trajectory_subset"), none_expected, turns(), SAME).score == 1.0


def test_subset_args_compare_lists_by_prefix_and_types_strictly() -> None:
    listed = case(expected_trajectory=[{"name": "f", "args": {"xs": [1, 2]}}])
    subset = metric("trajectory_exact", args="subset")
    assert score(subset, listed, turns(), [ToolCall("f", {"xs": [1, 2, 3]})]).score == 1.0
    assert score(subset, listed, turns(), [ToolCall("f", {"xs": [2, 1]})]).score == 0.0
    assert score(subset, listed, turns(), [ToolCall("f", {"xs": ["1", "2"]})]).score == 0.0


def test_duplicate_steps_are_multiset_matched() -> None:
    """Follows erlang_adk test/evaluation/adk_eval_criteria_test.erl:
    duplicate_steps_are_multiset_matched_test."""
    twice = case(expected_trajectory=["a", "a"])
    once = [ToolCall("a", {})]
    assert score(metric("trajectory_subset", args="ignored"), twice, turns(), once).score == 0.0
    assert (
        score(metric("trajectory_any_order", args="ignored"), twice, turns(), once * 2).score == 1.0
    )
    assert score(metric("trajectory_in_order", args="ignored"), twice, turns(), once).score == 0.0


@pytest.mark.parametrize(
    ("expected", "actual", "equal"),
    [
        ({"flag": 1}, {"flag": True}, False),
        ({"flag": True}, {"flag": 1}, False),
        ({"n": [1, 0]}, {"n": [True, False]}, False),
        ({"n": 1}, {"n": 1.0}, False),
        ({"n": 1.0}, {"n": 1}, False),
        ({"n": [1, 2]}, {"n": [1, 2, 3]}, False),
        ({"a": {"b": [1, "x"]}, "c": None}, {"c": None, "a": {"b": [1, "x"]}}, True),
    ],
)
def test_exact_args_compare_json_types_strictly(
    expected: dict[str, Any], actual: dict[str, Any], equal: bool
) -> None:
    """Follows erlang_adk src/evaluation/adk_eval_criteria.erl args_match/3 (exact is
    ``Expected =:= Actual``): true is not 1 and 1 is not 1.0, keys in any order."""
    expecting = case(expected_trajectory=[{"name": "f", "args": expected}])
    for mode in ("exact", "in_order", "any_order", "subset"):
        verdict = score(
            metric(f"trajectory_{mode}", args="exact"), expecting, turns(), [ToolCall("f", actual)]
        )
        assert verdict.score == (1.0 if equal else 0.0), mode


@pytest.mark.parametrize("mode", ["any_order", "subset"])
def test_a_loose_expectation_never_takes_the_call_a_stricter_one_needs(mode: str) -> None:
    """Unordered matching is a maximum matching, not first come first served: an
    expectation with any args (or subset args) must not consume the only call that a
    later, more specific expectation matches."""
    loose_first = case(expected_trajectory=["f", {"name": "f", "args": {"a": 1}}])
    calls = [ToolCall("f", {"a": 1}), ToolCall("f", {"b": 1})]
    for args in ("exact", "subset"):
        verdict = score(metric(f"trajectory_{mode}", args=args), loose_first, turns(), calls)
        assert (verdict.score, verdict.metadata["matched_count"]) == (1.0, 2), args
    subset_first = case(
        expected_trajectory=[{"name": "f", "args": {}}, {"name": "f", "args": {"a": 1, "b": 2}}]
    )
    wide = [ToolCall("f", {"a": 1, "b": 2}), ToolCall("f", {"c": 3})]
    verdict = score(metric(f"trajectory_{mode}", args="subset"), subset_first, turns(), wide)
    assert verdict.score == 1.0
    no_room = [ToolCall("f", {"a": 1}), ToolCall("g", {})]
    verdict = score(metric(f"trajectory_{mode}", args="exact"), loose_first, turns(), no_room)
    assert (verdict.score, verdict.metadata["matched_count"]) == (0.0, 1)


def test_metric_specs_never_show_a_judge_secret() -> None:
    """A trusted judge's provider_config can hold a key; the parsed criterion keeps no
    copy of the raw config, so neither its repr nor its fields show it."""
    secret = "sk-metric-spec-secret"
    [spec] = ev.load_metrics(
        [
            {
                "id": "j",
                "kind": "judge",
                "config": {**RUBRIC, "provider_config": {"api_key": secret}},
            }
        ],
        trusted=True,
    )
    assert secret not in repr(spec)
    assert not hasattr(spec, "config")
