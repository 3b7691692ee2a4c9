"""POST /dev/v1/evaluation/render and /compare over real HTTP: behind the token, bounded
bodies and answers, checked results and comparisons, JSON and Markdown.

Follows erlang_adk test/evaluation/adk_eval_dev_view_test.erl (classify and render,
strict comparison, discriminator, option, comparison and size errors)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from adk_actors import evaluation as ev
from adk_actors.daemon import routes_evaluation
from adk_actors.daemon.listener import stop_listener
from adk_actors.evaluation.limits import MAX_CASES
from tests.daemon.conftest import DevServer, start_dev_server

RENDER = routes_evaluation.RENDER_PATH
COMPARE = routes_evaluation.COMPARE_PATH


@pytest.fixture
def server() -> Iterator[DevServer]:
    """The daemon's own app, as `adk serve` builds it: no extra routes, so these tests
    fail if the production wiring of the evaluation routes goes away."""
    dev, listener = start_dev_server()
    yield dev
    dev.client.close()
    stop_listener(listener)


def result(answer: str, set_id: str = "dev-view", threshold: float = 1.0) -> dict[str, Any]:
    """A real saved result: one case expecting ``expected``, a scripted agent."""
    eval_set = ev.load_eval_set(
        {
            "schema_version": 2,
            "id": set_id,
            "version": "1",
            "cases": [
                {
                    "id": "case",
                    "turns": [{"id": "t", "input": "hi", "expected_response": "expected"}],
                }
            ],
        }
    )
    adapter = ev.AgentAdapter("DevView", {"provider": "scripted", "script": [{"text": answer}]})
    metrics = ev.load_metrics(
        [{"id": "response", "criterion": "exact_response", "threshold": threshold}]
    )
    return ev.encode_result(ev.run(adapter, eval_set, metrics))


def refusal(answer: Any) -> tuple[int, str, str | None]:
    error = answer.json()["error"]
    return answer.status_code, error["code"], error.get("reason")


def test_render_json_and_markdown(server: DevServer) -> None:
    baseline = json.loads(json.dumps(result("expected")))
    first = server.client.post(RENDER, json={"report": baseline, "format": "json"})
    assert first.status_code == 200
    assert first.headers["content-type"] == "application/json"
    assert first.headers["cache-control"] == "no-store"
    second = server.client.post(RENDER, json={"report": baseline, "format": "json"})
    assert first.text == second.text  # deterministic
    assert first.json() == baseline
    markdown = server.client.post(RENDER, json={"report": baseline, "format": "markdown"})
    assert markdown.status_code == 200
    assert markdown.headers["content-type"] == "text/markdown; charset=utf-8"
    assert markdown.text.startswith("# Evaluation report\n")
    assert "Status: **PASS**" in markdown.text


def test_routes_are_behind_the_token_and_origin_guards(server: DevServer) -> None:
    body = {"report": result("expected"), "format": "json"}
    with server.anonymous() as anonymous:
        assert anonymous.post(RENDER, json=body).status_code == 401
        assert anonymous.post(COMPARE, json={}).status_code == 401
    foreign = server.client.post(RENDER, json=body, headers={"origin": "http://evil.example"})
    assert foreign.status_code == 403
    assert server.client.get(RENDER).status_code == 405


def test_compare_regression_and_tolerance(server: DevServer) -> None:
    baseline = result("expected")
    failing = result("other")
    answer = server.client.post(COMPARE, json={"baseline": baseline, "current": failing})
    assert answer.status_code == 200
    comparison = answer.json()
    assert comparison["passed"] is False
    assert comparison["report_type"] == "baseline_comparison"
    assert comparison["case_diffs"][0]["reason"] == "case_no_longer_passes"
    rendered = server.client.post(RENDER, json={"report": comparison, "format": "markdown"})
    assert rendered.status_code == 200
    assert "# Evaluation baseline comparison" in rendered.text

    # a metric that drops with every case still passing: within its tolerance
    lenient_base = result("expected", threshold=0.0)
    lenient_now = result("other", threshold=0.0)
    options = {"max_pass_rate_drop": 0.0, "metric_tolerances": {"response": 1.0}}
    accepted = server.client.post(
        COMPARE, json={"baseline": lenient_base, "current": lenient_now, "options": options}
    )
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["passed"] is True
    assert accepted.json()["metric_diffs"][0]["tolerance"] == 1.0
    strict = server.client.post(COMPARE, json={"baseline": lenient_base, "current": lenient_now})
    assert strict.json()["passed"] is False


def test_discriminator_and_request_errors(server: DevServer) -> None:
    baseline = result("expected")
    comparison = server.client.post(
        COMPARE, json={"baseline": baseline, "current": result("other")}
    ).json()
    cases: list[tuple[Any, tuple[int, str, str | None]]] = [
        (
            {"report": {**baseline, "report_type": "baseline_comparison"}, "format": "json"},
            (400, "invalid_evaluation_report", "ambiguous_report_kind"),
        ),
        (
            {"report": {"module": "os"}, "format": "json"},
            (400, "invalid_evaluation_report", "unknown_report_kind"),
        ),
        (
            {"report": {"report_schema_version": 1, "report_type": "other"}, "format": "json"},
            (400, "invalid_evaluation_report", "unsupported_report_type"),
        ),
        (
            {"report": {**comparison, "passed": True}, "format": "json"},
            (400, "invalid_evaluation_report", "invalid_eval_comparison"),
        ),
        (
            {"report": {**baseline, "pass_rate": 0.5}, "format": "json"},
            (400, "invalid_evaluation_report", "invalid_eval_result"),
        ),
        (
            {"report": baseline, "format": "html"},
            (400, "invalid_evaluation_report", "invalid_format"),
        ),
        (
            {"report": baseline, "format": "json", "options": {"unknown": True}},
            (400, "invalid_evaluation_report", "invalid_options"),
        ),
        (
            {"report": baseline, "format": "json", "options": {"max_output_bytes": 0}},
            (400, "invalid_evaluation_report", "invalid_output_limit"),
        ),
        (
            {"report": baseline, "format": "json", "options": {"max_output_bytes": 1}},
            (400, "invalid_evaluation_report", "output_limit_exceeded"),
        ),
        ({"report": baseline}, (400, "invalid_evaluation_request", None)),
        ({"report": [], "format": "json"}, (400, "invalid_evaluation_request", None)),
        ({"report": baseline, "format": 1}, (400, "invalid_evaluation_request", None)),
        (
            {"report": baseline, "format": "json", "extra": 1},
            (400, "invalid_evaluation_request", None),
        ),
    ]
    for body, expected in cases:
        assert refusal(server.client.post(RENDER, json=body)) == expected, body


def test_comparison_errors(server: DevServer) -> None:
    baseline = result("expected")
    failing = result("other")
    comparison = server.client.post(COMPARE, json={"baseline": baseline, "current": failing}).json()
    other = result("other", set_id="other-set")
    mismatch = server.client.post(COMPARE, json={"baseline": baseline, "current": other})
    assert refusal(mismatch) == (409, "evaluation_set_mismatch", None)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"baseline": comparison, "current": failing}, "baseline_must_be_eval_result"),
        ({"baseline": baseline, "current": comparison}, "current_must_be_eval_result"),
        (
            {"baseline": baseline, "current": failing, "options": {"max_pass_rate_drop": 1.1}},
            "invalid_comparison_options",
        ),
        (
            {
                "baseline": baseline,
                "current": failing,
                "options": {"metric_tolerances": {"response": -0.1}},
            },
            "invalid_comparison_options",
        ),
        (
            {"baseline": baseline, "current": baseline, "options": {"max_output_bytes": 1}},
            "output_limit_exceeded",
        ),
        ({"baseline": {"result_schema_version": 2}, "current": failing}, "invalid_eval_result"),
    ]
    for body, reason in cases:
        assert refusal(server.client.post(COMPARE, json=body)) == (
            400,
            "invalid_evaluation_report",
            reason,
        ), body
    assert refusal(server.client.post(COMPARE, json={"baseline": baseline})) == (
        400,
        "invalid_evaluation_request",
        None,
    )


def test_bodies_are_bounded(server: DevServer) -> None:
    too_large = b'{"report": "' + b"x" * routes_evaluation.MAX_BODY_BYTES + b'"}'
    answer = server.client.post(
        RENDER, content=too_large, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "payload_too_large"
    text = server.client.post(RENDER, content=b"{}", headers={"content-type": "text/plain"})
    assert text.status_code == 415
    oversized_string = {
        "report": {"result_schema_version": 2, "value": "x" * 1_048_577},
        "format": "json",
    }
    assert refusal(server.client.post(RENDER, json=oversized_string)) == (
        400,
        "invalid_evaluation_report",
        "invalid_eval_result",
    )


def test_a_schema_1_result_renders_and_cannot_be_compared(server: DevServer) -> None:
    """Follows the spec's /dev routes table ("Validate and render one supplied v1/v2
    evaluation result") and erlang_adk src/evaluation/adk_eval_set.erl
    validate_saved_result (the legacy shape)."""
    legacy = {
        "result_schema_version": 1,
        "eval_set_id": "legacy",
        "eval_set_version": "1",
        "passed": True,
        "cases": [{"case_id": "a", "status": "passed", "passed": True}],
    }
    rendered = server.client.post(RENDER, json={"report": legacy, "format": "json"})
    assert rendered.status_code == 200 and rendered.json() == legacy
    markdown = server.client.post(RENDER, json={"report": legacy, "format": "markdown"})
    assert markdown.status_code == 200 and "Status: **PASS**" in markdown.text
    broken = server.client.post(RENDER, json={"report": {**legacy, "cases": 1}, "format": "json"})
    assert refusal(broken) == (400, "invalid_evaluation_report", "invalid_eval_result")
    compared = server.client.post(COMPARE, json={"baseline": legacy, "current": legacy})
    assert refusal(compared) == (
        400,
        "invalid_evaluation_report",
        "unsupported_eval_result_schema_version",
    )


def test_a_lone_surrogate_is_a_400_not_a_500(server: DevServer) -> None:
    """A body may spell ``"\\ud800"`` (valid JSON text, not UTF-8 data): refused."""
    baseline = result("expected")
    spelled = json.dumps({"report": {**baseline, "eval_set_version": "\ud800"}, "format": "json"})
    assert "\\ud800" in spelled
    for path, body in (
        (RENDER, spelled),
        (
            COMPARE,
            json.dumps({"baseline": {**baseline, "eval_set_id": "\udc00"}, "current": baseline}),
        ),
    ):
        answer = server.client.post(
            path, content=body.encode(), headers={"content-type": "application/json"}
        )
        assert refusal(answer) == (400, "invalid_evaluation_report", "invalid_eval_result"), path


class Echo:
    def open_sample(self, case: ev.EvalCase, sample_index: int) -> str:
        return case.id

    def run_turn(self, handle: str, turn: ev.EvalTurn, deadline: float) -> ev.TurnOutput:
        return ev.TurnOutput(text=turn.input)

    def close_sample(self, handle: str) -> None:
        return None


def test_a_result_at_the_case_ceiling_renders_and_compares(server: DevServer) -> None:
    """Any result the engine writes (here `MAX_CASES` cases) is accepted by the routes."""
    eval_set = ev.load_eval_set(
        [{"input": f"q{i}", "expected": f"q{i}", "metadata": {}} for i in range(MAX_CASES)]
    )
    saved = ev.encode_result(
        ev.run(Echo(), eval_set, ev.default_metrics(), ev.EvalOptions(concurrency=64))
    )
    options = {"max_output_bytes": routes_evaluation.MAX_OUTPUT_BYTES}
    rendered = server.client.post(
        RENDER, json={"report": saved, "format": "json", "options": options}
    )
    assert rendered.status_code == 200, rendered.text[:200]
    assert rendered.json() == saved
    compared = server.client.post(COMPARE, json={"baseline": saved, "current": saved})
    assert compared.status_code == 200 and compared.json()["passed"] is True
