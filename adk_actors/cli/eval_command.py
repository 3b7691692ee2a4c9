"""``adk eval run``: evaluate a config file's agent against an evaluation set; a CI gate.

The set file is the schema-2 evaluation set, a schema-1 set, the bare v1 row list
(``[{"input", "expected", "metadata"}]``) or a google-adk eval set (``.evalset.json``,
or the older ``.test.json`` rows), recognised by its shape. Every case and sample runs
on a fresh agent spawned from ``--config`` (the default evaluation adapter). Criteria
come from ``--criteria`` (a JSON list, untrusted: a judge there cannot name a
provider or provider config), else exact-response scoring.

With ``--baseline`` (a saved result, or a report this command wrote with a baseline)
the result is compared under ``--max-pass-rate-drop`` and ``--metric-tolerances`` (a
JSON object of metric id -> allowed score drop); as in the reference, a case that
passed in the baseline and no longer passes always fails the comparison. A baseline
of another evaluation set, and a judge criterion without a Gemini API key, are
refused before anything runs.

Output: with ``--format json`` (the default) the saved result (``passed``,
``pass_rate``, ...), or with a baseline ``{"passed", "pass_rate", "evaluation_passed",
"comparison_passed", "result", "comparison"}``; ``--format markdown`` renders the same.
``--output FILE`` writes the report there and prints one summary line instead.

Exit codes (this command's own, as the evaluation gate's contract): 0 the gate
passed; 2 the evaluation completed but failed its criteria or the baseline policy; 1
anything else: an unreadable or refused file or option (click's usage errors too), an
agent that would not start, a runtime error.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

import adk_actors as adk
from adk_actors.cli.output import EXIT_ERROR, EXIT_OK, CliError, Output
from adk_actors.config_file import MISSING_KEY_HINT, api_key_configured
from adk_actors.config_file.strict_json import strict_json_loads
from adk_actors.evaluation.agent_adapter import AgentAdapter, agent_adapter_from_file
from adk_actors.evaluation.compare import (
    Comparison,
    check_comparison_options,
    compare,
    encode_comparison,
)
from adk_actors.evaluation.criteria import MetricSpec, default_metrics, load_metrics
from adk_actors.evaluation.engine import run
from adk_actors.evaluation.evalset import EvalSet, load_eval_set
from adk_actors.evaluation.google_adk import from_google_adk, is_google_adk_evalset
from adk_actors.evaluation.judge import DEFAULT_PROVIDER
from adk_actors.evaluation.limits import MAX_CONCURRENCY, MAX_SAMPLES
from adk_actors.evaluation.options import EvalOptions, eval_options
from adk_actors.evaluation.report import render, render_json
from adk_actors.evaluation.results import EvalResult, decode_result, encode_result
from providers.errors import AdkError

_T = TypeVar("_T")
EXIT_GATE_FAILED = 2
"""The evaluation completed and failed its criteria or the baseline policy."""
MAX_INPUT_BYTES = 16 * 1024 * 1024
"""A set, criteria, baseline or tolerances file is read up to this many bytes."""
MAX_JSON_DEPTH = 64
_GOOGLE_TEST_SUFFIX = ".test.json"
_GATE_KEYS = frozenset(
    {"passed", "pass_rate", "evaluation_passed", "comparison_passed", "result", "comparison"}
)


class _BadUsage(click.UsageError):
    """A command line click refused, exiting 1 (bad input) instead of click's 2."""

    exit_code = EXIT_ERROR


class _EvalCommand(click.Command):
    """A click command whose usage errors exit 1 (bad input), not click's 2: here 2
    means the gate failed."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as error:
            raise _BadUsage(error.format_message(), error.ctx) from None


@click.group("eval")
def eval_group() -> None:
    """Evaluate agents: run an evaluation set, gate on criteria and a baseline."""


@eval_group.command("run", cls=_EvalCommand)
@click.option("--config", "config_path", required=True, help="The agent config file.")
@click.option("--eval-set", "eval_set_path", required=True, help="The evaluation set file.")
@click.option("--criteria", "criteria_path", default=None, help="Criteria JSON (a list).")
@click.option("--baseline", "baseline_path", default=None, help="A saved result to compare.")
@click.option(
    "--max-pass-rate-drop",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help=(
        "Allowed pass-rate drop against the baseline (default 0). A case that passed in the"
        " baseline and no longer passes fails the comparison whatever this allows."
    ),
)
@click.option(
    "--metric-tolerances",
    "tolerances_path",
    default=None,
    help="JSON object: metric id -> allowed average-score drop.",
)
@click.option("--samples", type=click.IntRange(1, MAX_SAMPLES), default=1, show_default=True)
@click.option(
    "--concurrency", type=click.IntRange(1, MAX_CONCURRENCY), default=1, show_default=True
)
@click.option(
    "--sample-concurrency",
    type=click.IntRange(1, MAX_CONCURRENCY),
    default=1,
    show_default=True,
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "markdown"]),
    default="json",
    show_default=True,
)
@click.option("--output", "output_path", default=None, help="Write the report to this file.")
def run_command(
    config_path: str,
    eval_set_path: str,
    criteria_path: str | None,
    baseline_path: str | None,
    max_pass_rate_drop: float | None,
    tolerances_path: str | None,
    samples: int,
    concurrency: int,
    sample_concurrency: int,
    fmt: str,
    output_path: str | None,
) -> None:
    """Run an evaluation set against the config file's agent; exit 0 pass, 2 fail, 1 error."""
    output = Output(json_mode=True)
    try:
        if baseline_path is None and (max_pass_rate_drop is not None or tolerances_path):
            raise CliError(
                "baseline_required_for_comparison_options",
                "--max-pass-rate-drop and --metric-tolerances need --baseline",
            )
        eval_set = _eval_set(eval_set_path)
        metrics = _metrics(criteria_path)
        baseline = None if baseline_path is None else _baseline(baseline_path)
        if baseline is not None and baseline.eval_set_id != eval_set.id:
            raise CliError(
                "eval_set_mismatch",
                "the baseline is a result of another evaluation set",
                details=[baseline.eval_set_id[:256], eval_set.id],
            )
        tolerances = None if tolerances_path is None else _tolerances(tolerances_path)
        drop = 0.0 if max_pass_rate_drop is None else max_pass_rate_drop
        _checked(lambda: check_comparison_options(drop, tolerances))
        options = _checked(
            lambda: eval_options(
                sample_count=samples,
                concurrency=concurrency,
                sample_concurrency=sample_concurrency,
            )
        )
        _check_judge_credentials(metrics)
        adapter = _adapter(config_path)
        result = _evaluate(adapter, eval_set, metrics, options)
        comparison = (
            None
            if baseline is None
            else _checked(
                lambda: compare(
                    baseline, result, max_pass_rate_drop=drop, metric_tolerances=tolerances
                )
            )
        )
        passed = result.passed and (comparison is None or comparison.passed)
        text = _report(result, comparison, fmt)
        if output_path is None:
            output.stdout.write(text if text.endswith("\n") else text + "\n")
            output.stdout.flush()
        else:
            _write(output_path, text)
            output.json(
                {
                    "status": "passed" if passed else "failed",
                    "passed": passed,
                    "pass_rate": result.pass_rate,
                    "format": fmt,
                    "output": output_path,
                }
            )
        raise SystemExit(EXIT_OK if passed else EXIT_GATE_FAILED)
    except CliError as error:
        output.fail(error)


# -- inputs ------------------------------------------------------------------------------------


def _checked(call: Callable[[], _T]) -> _T:
    """`call()`, its `AdkError` as the CLI's error (exit 1)."""
    try:
        return call()
    except AdkError as error:
        raise CliError.from_adk(error, EXIT_ERROR) from None


def _read_json(path: str, what: str) -> Any:
    """The strict JSON in the file at `path` (at most `MAX_INPUT_BYTES`)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_INPUT_BYTES + 1)
    except OSError as error:
        raise CliError(
            "eval_file_unreadable",
            f"cannot read the {what} file: {error.strerror or type(error).__name__}",
            details=[what],
        ) from None
    if len(data) > MAX_INPUT_BYTES:
        raise CliError(
            "eval_file_too_large",
            f"the {what} file is over {MAX_INPUT_BYTES} bytes",
            details=[what],
        )
    try:
        return strict_json_loads(data, max_depth=MAX_JSON_DEPTH)
    except AdkError as error:
        raise CliError(
            "invalid_eval_json",
            f"the {what} file is not valid JSON ({error.detail})",
            details=[what],
        ) from None


def _eval_set(path: str) -> EvalSet:
    data = _read_json(path, "eval set")
    if is_google_adk_evalset(data):
        name = Path(path).name
        set_id = name[: -len(_GOOGLE_TEST_SUFFIX)] if name.endswith(_GOOGLE_TEST_SUFFIX) else None
        data = _checked(lambda: from_google_adk(data, set_id=(set_id or None)))
    return _checked(lambda: load_eval_set(data))


def _metrics(path: str | None) -> list[MetricSpec]:
    if path is None:
        return _checked(default_metrics)
    data = _read_json(path, "criteria")
    return _checked(lambda: load_metrics(data, trusted=False))


def _baseline(path: str) -> EvalResult:
    """A saved result, or the result inside a gate report this command wrote."""
    data = _read_json(path, "baseline")
    if isinstance(data, Mapping) and set(data) == _GATE_KEYS:
        data = data["result"]
    try:
        result: EvalResult = decode_result(data)
    except AdkError as error:
        raise CliError(
            "invalid_eval_baseline",
            f"the baseline is not a saved evaluation result ({error})",
            details=[error.reason],
        ) from None
    return result


def _tolerances(path: str) -> dict[str, float]:
    data = _read_json(path, "metric tolerances")
    if not isinstance(data, dict):
        raise CliError(
            "invalid_metric_tolerances", "metric tolerances are a JSON object of metric id: drop"
        )
    return data


def _adapter(path: str) -> AgentAdapter:
    """The default adapter for the config file's agent (its key checked on loading)."""
    return _checked(lambda: agent_adapter_from_file(path))


def _check_judge_credentials(metrics: list[MetricSpec]) -> None:
    """``missing_api_key`` before anything runs when a judge needs Gemini and the
    environment has no key (a configuration error, not a failed criterion)."""
    for metric in metrics:
        if (
            metric.judge is not None
            and metric.judge.provider == DEFAULT_PROVIDER
            and not api_key_configured()
        ):
            raise CliError(
                "missing_api_key",
                f"the judge criterion {metric.id!r} needs a Gemini API key: {MISSING_KEY_HINT}",
            )


def _evaluate(
    adapter: AgentAdapter, eval_set: EvalSet, metrics: list[MetricSpec], options: EvalOptions
) -> EvalResult:
    """The evaluation on this process's runtime, started for it and stopped after."""
    adk.start()
    try:
        return run(adapter, eval_set, metrics, options)
    except AdkError as error:
        raise CliError.from_adk(error, EXIT_ERROR) from None
    finally:
        adk.stop()


# -- output ------------------------------------------------------------------------------------


def _report(result: EvalResult, comparison: Comparison | None, fmt: str) -> str:
    if comparison is None:
        return _checked(lambda: render(result, fmt))
    if fmt == "markdown":
        return _checked(lambda: render(result, fmt) + "\n" + render(comparison, fmt))
    gate = {
        "passed": result.passed and comparison.passed,
        "pass_rate": result.pass_rate,
        "evaluation_passed": result.passed,
        "comparison_passed": comparison.passed,
        "result": _checked(lambda: encode_result(result)),
        "comparison": encode_comparison(comparison),
    }
    return _checked(lambda: render_json(gate))


def _write(path: str, text: str) -> None:
    """Write the report through a temporary file in the same directory, then rename."""
    target = Path(path)
    try:
        descriptor, temporary = tempfile.mkstemp(
            prefix=f".{target.name}.", dir=target.parent if str(target.parent) else "."
        )
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(text if text.endswith("\n") else text + "\n")
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as error:
        raise CliError(
            "eval_output_unwritable",
            f"cannot write the report: {error.strerror or type(error).__name__}",
        ) from None
