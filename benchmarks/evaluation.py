"""Evaluation throughput: ours against google-adk's `AgentEvaluator`, side by side.

The same eval set on both: google-adk's own `EvalSet` (`_adk_peer_app/weather_evalset.py`:
one question per case about a city's weather, the first case also greeting first),
read by ours through `from_google_adk`. The same agent on both: one tool
(``get_weather``) and an offline model taking the same steps (`eval_agent.agent.reply`:
greet, or call the tool for the city, then answer ``sunny``). The same checks: the
final response and the tool trajectory of every invocation; google-adk's
``response_match_score`` and ``tool_trajectory_avg_score`` at threshold 1, ours
``exact_response`` and ``trajectory_exact`` (arguments compared exactly). Every case
passes on both sides (checked).

google-adk: `AgentEvaluator.evaluate_eval_set` (its `LocalEvalService`: inference
then metric evaluation, 4 cases at a time, its default). Ours: `ev.run` with the
default `AgentAdapter` (a fresh agent, Runner and session per case), one case at a
time and 4 at a time. Reported: evaluation cases per second, best of the rounds.

Needs google-adk with its eval extra (`make bench` installs it in `.venv-bench`).
Usage: ``python benchmarks/evaluation.py [--quick]``
"""

from __future__ import annotations

import asyncio
import datetime
import importlib.metadata
import logging
import sys
import time
import warnings
from pathlib import Path
from typing import Any

PEER_APP = Path(__file__).resolve().parent / "_adk_peer_app"
sys.path.insert(0, str(PEER_APP))

from eval_agent.agent import get_weather, reply  # noqa: E402
from google.adk.evaluation.agent_evaluator import AgentEvaluator  # noqa: E402
from google.adk.evaluation.eval_config import EvalConfig  # noqa: E402
from weather_evalset import weather_eval_set  # noqa: E402
from weather_workload import quiet_options  # noqa: E402

import adk_actors as adk  # noqa: E402
from adk_actors import evaluation as ev  # noqa: E402
from adk_actors.evaluation.google_adk import from_google_adk  # noqa: E402

PEER_CONFIG = EvalConfig(criteria={"response_match_score": 1.0, "tool_trajectory_avg_score": 1.0})
CRITERIA = [
    {"id": "response", "criterion": "exact_response", "threshold": 1.0},
    {"id": "tools", "criterion": "trajectory_exact", "threshold": 1.0, "config": {"args": "exact"}},
]
PEER_PARALLELISM = 4
"""`LocalEvalService`'s default parallelism for inference and for evaluation."""


def our_model(history: Any, tools: Any) -> dict[str, Any]:
    """Our offline model: `reply` on our history."""
    last = history[-1]
    step = reply(last.text_value() or None, last.role == "tool")
    if "call" in step:
        return {"tool_calls": [step["call"]]}
    return {"text": step["text"]}


def peer_rate(cases: int) -> float:
    eval_set = weather_eval_set(cases)

    async def evaluate() -> None:
        await AgentEvaluator.evaluate_eval_set(
            agent_module="eval_agent.agent",
            eval_set=eval_set,
            eval_config=PEER_CONFIG,
            num_runs=1,
            print_detailed_results=False,
        )  # raises AssertionError when a case fails

    started = time.perf_counter()
    asyncio.run(evaluate())
    return cases / (time.perf_counter() - started)


def our_rate(cases: int, concurrency: int) -> float:
    eval_set = ev.load_eval_set(from_google_adk(weather_eval_set(cases).model_dump(mode="json")))
    adapter = ev.AgentAdapter(
        "Weather",
        {"provider": adk.ScriptedProvider(fn=our_model, inline=True)},
        [adk.tool(get_weather)],
    )
    metrics = ev.load_metrics(CRITERIA)
    options = ev.EvalOptions(concurrency=concurrency)
    started = time.perf_counter()
    result = ev.run(adapter, eval_set, metrics, options)
    elapsed = time.perf_counter() - started
    assert result.passed and result.case_count == cases, ev.encode_result(result)["metrics"]
    return cases / elapsed


def best(fn: Any, rounds: int) -> float:
    return max(fn() for _ in range(rounds))


def main() -> None:
    options = quiet_options(__doc__.splitlines()[0])
    warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]")
    for name in ("google_adk", "google.adk", "absl"):
        logging.getLogger(name).setLevel(logging.ERROR)
    cases, rounds = (32, 1) if options.quick else (256, 3)
    print(
        f"# evaluation benchmark  {datetime.date.today()}  "
        f"google-adk {importlib.metadata.version('google-adk')}"
    )
    adk.start()
    peer_rate(4)  # warm up both sides: imports, the agent module, metric registries
    our_rate(4, 1)
    print(
        f"\nevaluation cases/s, {cases:,} cases (one tool round each), "
        f"response + trajectory checked, best of {rounds}"
    )
    peer = best(lambda: peer_rate(cases), rounds)
    print(f"  google-adk AgentEvaluator ({PEER_PARALLELISM} at a time) {peer:10,.0f}")
    for label, concurrency in (("one at a time", 1), (f"{PEER_PARALLELISM} at a time", 4)):
        ours = best(lambda concurrency=concurrency: our_rate(cases, concurrency), rounds)
        print(f"  ours, {label:28s}      {ours:10,.0f}   {ours / peer:5.2f}x google-adk")
    adk.stop()


if __name__ == "__main__":
    main()
