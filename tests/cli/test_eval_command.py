"""``adk eval run``: the real command against scripted agent config files.

Exit codes are the gate's: 0 the evaluation (and the baseline policy) passed, 2 it
completed and failed, 1 bad input or a runtime error. Most tests run the click command
in this process (`CliRunner`); one runs it as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from adk_actors import evaluation as ev
from adk_actors.cli.eval_command import eval_group

REPO = Path(__file__).resolve().parents[2]
GOOGLE_ADK_SET = REPO / "tests/adk_actors/evaluation/fixtures/weather.evalset.json"

Write = Callable[[str, Any], str]


@pytest.fixture
def write(tmp_path: Path) -> Write:
    def write_file(name: str, value: Any) -> str:
        path = tmp_path / name
        path.write_text(value if isinstance(value, str) else json.dumps(value))
        return str(path)

    return write_file


def agent(write: Write, answer: str, name: str = "agent.json") -> str:
    return write(
        name,
        {
            "name": "EvalAgent",
            "provider": "scripted",
            "script": [{"text": answer}],
            "script_repeat": True,
        },
    )


def eval_set(write: Write, *expected: str) -> str:
    return write(
        "set.json",
        {
            "schema_version": 2,
            "id": "greetings",
            "version": "2026-12-01",
            "cases": [
                {"id": f"case-{n}", "turns": [{"id": "t1", "input": "hi", "expected_response": e}]}
                for n, e in enumerate(expected)
            ],
        },
    )


def invoke(*args: str) -> Result:
    return CliRunner().invoke(eval_group, ["run", *args], catch_exceptions=False)


def error_line(result: Result) -> dict[str, Any]:
    line: dict[str, Any] = json.loads(result.stderr.strip().splitlines()[-1])
    assert line["status"] == "error"
    return line


def test_passing_evaluation_exits_0_with_the_saved_result(write: Write) -> None:
    result = invoke("--config", agent(write, "hello"), "--eval-set", eval_set(write, "hello"))
    assert result.exit_code == 0, result.stderr
    saved = json.loads(result.stdout)
    assert saved["passed"] is True and saved["pass_rate"] == 1.0
    assert saved["eval_set_id"] == "greetings" and saved["eval_set_version"] == "2026-12-01"
    assert [metric["metric_id"] for metric in saved["metrics"]] == ["exact-response"]
    assert ev.decode_result(saved).passed  # the output is a saved result (a baseline)


def test_failing_criteria_exit_2(write: Write) -> None:
    result = invoke(
        "--config",
        agent(write, "hello"),
        "--eval-set",
        eval_set(write, "hello", "bye"),
        "--samples",
        "2",
        "--concurrency",
        "2",
        "--sample-concurrency",
        "2",
    )
    assert result.exit_code == 2, result.stderr
    saved = json.loads(result.stdout)
    assert saved["passed"] is False and saved["pass_rate"] == 0.5
    assert saved["sample_count"] == 2
    assert [case["status"] for case in saved["cases"]] == ["passed", "failed"]


def test_regression_against_a_baseline_exits_2_unless_tolerated(write: Write) -> None:
    lenient = write(
        "criteria.json",
        [{"id": "exact-response", "criterion": "exact_response", "threshold": 0.0}],
    )
    the_set = eval_set(write, "hello")
    first = invoke("--config", agent(write, "hello"), "--eval-set", the_set, "--criteria", lenient)
    assert first.exit_code == 0, first.stderr
    baseline = write("baseline.json", first.stdout)

    worse = agent(write, "goodbye", "worse.json")
    common = ["--config", worse, "--eval-set", the_set, "--criteria", lenient]
    regressed = invoke(*common, "--baseline", baseline)
    assert regressed.exit_code == 2, regressed.stderr
    gate = json.loads(regressed.stdout)
    assert gate["passed"] is False and gate["evaluation_passed"] is True
    assert gate["comparison_passed"] is False and gate["pass_rate"] == 1.0
    assert gate["comparison"]["metric_diffs"][0]["reason"] == "score_drop"
    assert ev.decode_result(gate["result"]).passed

    tolerances = write("tolerances.json", {"exact-response": 1.0})
    tolerated = invoke(*common, "--baseline", baseline, "--metric-tolerances", tolerances)
    assert tolerated.exit_code == 0, tolerated.stderr
    assert json.loads(tolerated.stdout)["comparison"]["passed"] is True

    # a gate report written with a baseline is itself accepted as the next baseline
    chained = invoke(*common, "--baseline", write("gate.json", tolerated.stdout))
    assert chained.exit_code == 0, chained.stderr


def test_markdown_report_to_a_file(write: Write, tmp_path: Path) -> None:
    the_set = eval_set(write, "hello", "bye")
    first = invoke("--config", agent(write, "hello"), "--eval-set", the_set)
    baseline = write("baseline.json", first.stdout)
    target = tmp_path / "report.md"
    result = invoke(
        "--config",
        agent(write, "hello"),
        "--eval-set",
        the_set,
        "--baseline",
        baseline,
        "--max-pass-rate-drop",
        "0.1",
        "--format",
        "markdown",
        "--output",
        str(target),
    )
    assert result.exit_code == 2  # the evaluation itself fails one case
    summary = json.loads(result.stdout)
    assert summary == {
        "status": "failed",
        "passed": False,
        "pass_rate": 0.5,
        "format": "markdown",
        "output": str(target),
    }
    text = target.read_text()
    assert text.startswith("# Evaluation report\n")
    assert "# Evaluation baseline comparison" in text
    assert "| case-1 | failed | 0 | 1 | 0 |" in text
    assert not list(tmp_path.glob(".report.md.*"))  # no temporary file left behind


def test_google_adk_evalset_is_recognised(write: Write) -> None:
    result = invoke("--config", agent(write, "sunny"), "--eval-set", str(GOOGLE_ADK_SET))
    assert result.exit_code == 2, result.stderr  # the greeting turn expects a greeting
    saved = json.loads(result.stdout)
    assert saved["eval_set_id"] == "weather"
    assert [case["case_id"] for case in saved["cases"]] == ["weather-tokyo-0", "weather-paris-1"]
    assert [case["status"] for case in saved["cases"]] == ["failed", "passed"]


def test_v1_bare_list_set(write: Write) -> None:
    rows = write("rows.json", [{"input": "hi", "expected": "hello", "metadata": {}}])
    result = invoke("--config", agent(write, "hello"), "--eval-set", rows)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["cases"][0]["case_id"] == "case-1"


def test_bad_input_exits_1(write: Write, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = agent(write, "hello")
    the_set = eval_set(write, "hello")
    judge_with_provider = write(
        "judge.json",
        [
            {
                "id": "rubric",
                "kind": "judge",
                "threshold": 0.5,
                "config": {
                    "rubric": "Score 1.",
                    "rubric_id": "r",
                    "rubric_version": "1",
                    "provider": "scripted",
                },
            }
        ],
    )
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    gemini = write("gemini.json", {"name": "G", "provider": "gemini", "model": "gemini-x"})
    cases: list[tuple[list[str], str | None]] = [
        (
            ["--config", config, "--eval-set", str(tmp_path / "none.json")],
            "eval_file_unreadable",
        ),
        (["--config", config, "--eval-set", write("bad.json", "{not json")], "invalid_eval_json"),
        (
            ["--config", config, "--eval-set", write("unknown.json", {"id": "x", "oops": 1})],
            "invalid_eval_set",
        ),
        (
            ["--config", config, "--eval-set", the_set, "--criteria", write("e.json", [])],
            "empty_eval_criteria",
        ),
        (
            ["--config", config, "--eval-set", the_set, "--criteria", judge_with_provider],
            "untrusted_judge_option",
        ),
        (
            ["--config", config, "--eval-set", the_set, "--baseline", write("b.json", {"a": 1})],
            "invalid_eval_baseline",
        ),
        (
            ["--config", config, "--eval-set", the_set, "--max-pass-rate-drop", "0.1"],
            "baseline_required_for_comparison_options",
        ),
        (
            ["--config", write("agent-bad.json", {"nme": "x"}), "--eval-set", the_set],
            "unknown_agent_config_keys",
        ),
        (["--config", gemini, "--eval-set", the_set], "missing_api_key"),
        (["--config", config, "--eval-set", the_set, "--samples", "0"], "usage"),
        (["--config", config, "--eval-set", the_set, "--format", "html"], "usage"),
        (["--eval-set", the_set], "usage"),
    ]
    for args, reason in cases:
        result = invoke(*args)
        assert result.exit_code == 1, (args, result.stdout, result.stderr)
        assert result.stdout == ""
        if reason == "usage":
            assert "Usage:" in result.stderr
        elif reason is not None:
            assert error_line(result)["reason"] == reason, result.stderr
        else:
            error_line(result)


def test_bad_tolerances_exit_1(write: Write) -> None:
    config = agent(write, "hello")
    the_set = eval_set(write, "hello")
    baseline = write("baseline.json", invoke("--config", config, "--eval-set", the_set).stdout)
    for tolerances in ([1], {"exact-response": 2}, {"exact-response": "0.1"}):
        result = invoke(
            "--config",
            config,
            "--eval-set",
            the_set,
            "--baseline",
            baseline,
            "--metric-tolerances",
            write("t.json", tolerances),
        )
        assert result.exit_code == 1, result.stderr
        assert error_line(result)["reason"] in (
            "invalid_metric_tolerances",
            "invalid_eval_comparison_options",
        )


def test_exit_codes_of_a_real_process(write: Write) -> None:
    """The command as its own process: stdout is the report, the exit code the gate."""
    command = [
        sys.executable,
        "-c",
        "from adk_actors.cli.eval_command import eval_group; eval_group(prog_name='adk eval')",
        "run",
        "--config",
        agent(write, "hello"),
    ]
    for expected, code in ((("hello",), 0), (("hello", "bye"), 2)):
        done = subprocess.run(
            [*command, "--eval-set", eval_set(write, *expected)],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
            check=False,
        )
        assert done.returncode == code, done.stderr
        assert json.loads(done.stdout)["passed"] is (code == 0)


def test_google_adk_test_json_rows_are_named_after_the_file(write: Write) -> None:
    rows = write(
        "greeting.test.json", [{"query": "hi", "expected_tool_use": [], "reference": "hello"}]
    )
    result = invoke("--config", agent(write, "hello"), "--eval-set", rows)
    assert result.exit_code == 0, result.stderr
    saved = json.loads(result.stdout)
    assert saved["eval_set_id"] == "greeting" and saved["cases"][0]["case_id"] == "case-1"


def test_a_judge_without_an_api_key_exits_1_before_running(
    write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judge criterion needing Gemini without a key is a configuration error (exit 1,
    ``missing_api_key``), found before any agent runs, not a failed criterion (2)."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    judged = write(
        "judge.json",
        [
            {
                "id": "rubric",
                "kind": "judge",
                "config": {
                    "rubric": "Score 1 when polite.",
                    "rubric_id": "polite",
                    "rubric_version": "1",
                },
            }
        ],
    )
    never_runs = write("never.json", {"name": "Never", "provider": "scripted", "script": []})
    result = invoke(
        "--config", never_runs, "--eval-set", eval_set(write, "hello"), "--criteria", judged
    )
    assert result.exit_code == 1, result.stdout
    line = error_line(result)
    assert line["reason"] == "missing_api_key" and "rubric" in line["message"]
    assert result.stdout == ""


def test_a_baseline_of_another_set_is_refused_before_running(write: Write) -> None:
    first = invoke("--config", agent(write, "hello"), "--eval-set", eval_set(write, "hello"))
    assert first.exit_code == 0, first.stderr
    other = json.loads(first.stdout)
    other["eval_set_id"] = "another-set"
    baseline = write("baseline.json", other)
    # an agent that cannot even load proves the refusal comes first
    broken = write("broken.json", {"name": "Broken", "provider": "scripted", "script": "x"})
    result = invoke(
        "--config", broken, "--eval-set", eval_set(write, "hello"), "--baseline", baseline
    )
    assert result.exit_code == 1
    line = error_line(result)
    assert line["reason"] == "eval_set_mismatch" and line["details"] == ["another-set", "greetings"]


def test_a_lone_surrogate_in_a_set_exits_1_with_the_reason(write: Write) -> None:
    """JSON text may spell ``\\ud800``; the command answers with its one error line."""
    spelled = write(
        "surrogate.json", '[{"input": "hi \\ud800", "expected": "hello", "metadata": {}}]'
    )
    result = invoke("--config", agent(write, "hello"), "--eval-set", spelled)
    assert result.exit_code == 1
    line = error_line(result)
    assert line["reason"] == "invalid_eval_set" and line["details"] == ["eval_data_not_json"]
