"""Evaluation v2: versioned multi-turn eval sets, criteria, samples and gated results.

eval_set = ev.load_eval_set(json.load(open("eval.json")))
adapter = ev.AgentAdapter("WeatherAgent", {"provider": "scripted", "script": [...]})
result = ev.run(adapter, eval_set, ev.load_metrics(criteria), ev.EvalOptions(sample_count=2))
saved = ev.encode_result(result)           # JSON-safe; ev.decode_result(saved) == result
"""

from adk_actors.evaluation import judge
from adk_actors.evaluation.adapter import EvalAdapter, TurnOutput
from adk_actors.evaluation.agent_adapter import AgentAdapter, agent_adapter_from_file
from adk_actors.evaluation.compare import (
    CaseDiff,
    Comparison,
    MetricDiff,
    check_comparison_options,
    compare,
    decode_comparison,
    encode_comparison,
)
from adk_actors.evaluation.criteria import (
    CRITERIA,
    DEFAULT_METRIC,
    MetricSpec,
    default_metrics,
    load_metrics,
)
from adk_actors.evaluation.engine import run, run_async, sample_id
from adk_actors.evaluation.evalset import (
    EvalCase,
    EvalSet,
    EvalTurn,
    ExpectedToolCall,
    encode_eval_set,
    load_eval_set,
)
from adk_actors.evaluation.google_adk import from_google_adk, is_google_adk_evalset
from adk_actors.evaluation.judge import (
    JudgeConfig,
    JudgeInput,
    JudgeTurn,
    JudgeVerdict,
    judge_case,
    judge_case_async,
    parse_judge_config,
)
from adk_actors.evaluation.limits import (
    MAX_CASES,
    MAX_CONCURRENCY,
    MAX_SAMPLES,
    MAX_TOTAL_SAMPLES,
    MAX_TURNS_PER_CASE,
)
from adk_actors.evaluation.options import EvalOptions, eval_options
from adk_actors.evaluation.report import render, render_json
from adk_actors.evaluation.results import (
    RESULT_SCHEMA_VERSION,
    CaseResult,
    CriterionResult,
    EvalResult,
    MetricSummary,
    SampleResult,
    Statistics,
    TrajectoryStep,
    TurnResult,
    decode_result,
    encode_result,
)

__all__ = [
    "CRITERIA",
    "DEFAULT_METRIC",
    "MAX_CASES",
    "MAX_CONCURRENCY",
    "MAX_SAMPLES",
    "MAX_TOTAL_SAMPLES",
    "MAX_TURNS_PER_CASE",
    "RESULT_SCHEMA_VERSION",
    "AgentAdapter",
    "CaseDiff",
    "CaseResult",
    "Comparison",
    "CriterionResult",
    "EvalAdapter",
    "EvalCase",
    "EvalOptions",
    "EvalResult",
    "EvalSet",
    "EvalTurn",
    "ExpectedToolCall",
    "JudgeConfig",
    "JudgeInput",
    "JudgeTurn",
    "JudgeVerdict",
    "MetricDiff",
    "MetricSpec",
    "MetricSummary",
    "SampleResult",
    "Statistics",
    "TrajectoryStep",
    "TurnOutput",
    "TurnResult",
    "agent_adapter_from_file",
    "check_comparison_options",
    "compare",
    "decode_comparison",
    "decode_result",
    "default_metrics",
    "encode_comparison",
    "encode_eval_set",
    "encode_result",
    "eval_options",
    "from_google_adk",
    "is_google_adk_evalset",
    "judge",
    "judge_case",
    "judge_case_async",
    "load_eval_set",
    "load_metrics",
    "parse_judge_config",
    "render",
    "render_json",
    "run",
    "run_async",
    "sample_id",
]
