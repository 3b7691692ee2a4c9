"""The LLM rubric judge against the real loopback fake Gemini server (and, for a
trusted provider instance, the scripted provider): forced structured output, the
exact ``{score, rationale}`` contract, deadlines, provider failures, secret hygiene
and independent concurrent calls."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from adk_actors.evaluation import judge
from adk_actors.evaluation.judge import JudgeInput, JudgeTurn
from providers.errors import AdkError
from providers.fake_gemini import FakeGemini, FakeResponse, candidate
from providers.scripted import ScriptedProvider

KEY = "AIzaSyJUDGE-dummy-key-0123456789"
RUBRIC = {
    "rubric": "Score 1 when the final answer satisfies the request; otherwise score 0.",
    "rubric_id": "answer-quality",
    "rubric_version": "2026-07-14",
}
CASE = JudgeInput(
    "tokyo",
    [JudgeTurn("What is the weather in Tokyo?", "Sunny in Tokyo", "It is sunny in Tokyo")],
    ["get_weather"],
)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    """The fake server, with the gemini provider pointed at it the way a CLI user
    would (environment only: an untrusted config names no base URL or key)."""
    with FakeGemini() as server:
        monkeypatch.setenv("GEMINI_API_KEY", KEY)
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base_url)
        yield server


def answer(fake: FakeGemini, body: Any, *, delay: float = 0.0) -> None:
    text = body if isinstance(body, str) else json.dumps(body)
    fake.enqueue(FakeResponse(body=candidate([{"text": text}]), delay=delay))


def config(**extra: Any) -> judge.JudgeConfig:
    return judge.parse_judge_config({**RUBRIC, **extra}, trusted=False)


def in_seconds(seconds: float) -> float:
    return time.monotonic() + seconds


def failure(fn: Any, *args: Any, **kwargs: Any) -> AdkError:
    with pytest.raises(AdkError) as info:
        fn(*args, **kwargs)
    assert KEY not in str(info.value) and KEY not in repr(info.value.reason)
    return info.value


def test_passing_judge_sends_the_schema_the_rubric_and_the_case(fake: FakeGemini) -> None:
    """Follows erlang_adk test/evaluation/adk_eval_llm_judge_test.erl:
    structured_score_and_secret_redaction_test (the forced JSON request and metadata)."""
    answer(fake, {"score": 0.9, "rationale": "direct and correct"})
    checked = config()
    verdict = judge.judge_case(checked, CASE, deadline=in_seconds(10))
    assert verdict.score == 0.9 and verdict.score > 0.8
    assert verdict.rationale == "direct and correct"
    assert verdict.metadata == {
        "judge": "llm_rubric",
        "judge_schema_version": 1,
        "rubric_id": "answer-quality",
        "rubric_version": "2026-07-14",
        "provider": "gemini",
        "model": "gemini-3.1-flash-lite",
        "rationale": "direct and correct",
    }
    (request,) = fake.requests
    assert request.path.endswith("/models/gemini-3.1-flash-lite:generateContent")
    generation = request.body["generationConfig"]
    assert generation["responseMimeType"] == "application/json"
    assert generation["responseJsonSchema"] == judge.response_schema(checked)
    assert generation["responseJsonSchema"]["required"] == ["score", "rationale"]
    assert generation["responseJsonSchema"]["additionalProperties"] is False
    assert generation["temperature"] == 0.0 and generation["maxOutputTokens"] == 512
    (user,) = request.body["contents"]
    prompt = user["parts"][0]["text"]
    payload = json.loads(prompt.split("INPUT_JSON:\n", 1)[1])
    assert payload["rubric"] == RUBRIC["rubric"]
    assert payload["rubric_id"] == "answer-quality"
    assert payload["evaluation_case"] == {
        "case_id": "tokyo",
        "turns": [
            {
                "input": "What is the weather in Tokyo?",
                "expected": "Sunny in Tokyo",
                "actual": "It is sunny in Tokyo",
            }
        ],
        "tool_names": ["get_weather"],
    }
    assert "scoring judge" in request.body["systemInstruction"]["parts"][0]["text"]
    assert KEY not in json.dumps(request.body)


def test_the_async_judge_scores_the_same(fake: FakeGemini) -> None:
    answer(fake, {"score": 1, "rationale": "exact"})
    verdict = asyncio.run(judge.judge_case_async(config(), CASE, deadline=in_seconds(10)))
    assert verdict.score == 1.0 and isinstance(verdict.score, float)


@pytest.mark.parametrize("score", [1.7, -0.1])
def test_a_score_outside_0_to_1_is_refused(fake: FakeGemini, score: float) -> None:
    """Follows adk_eval_llm_judge_test.erl: output_validation_and_provider_error_are_fail_closed
    (score 1.1); here with its own reason."""
    answer(fake, {"score": score, "rationale": "generous"})
    error = failure(judge.judge_case, config(), CASE, deadline=in_seconds(10))
    assert error.reason == "judge_score_out_of_range"


@pytest.mark.parametrize(
    "body",
    [
        {"score": 1, "rationale": "ok", "pass": True},  # an extra key
        {"score": 0.5},  # no rationale
        {"rationale": "no score"},
        {"score": "0.5", "rationale": "a string score"},
        {"score": True, "rationale": "a bool is not a number"},
        {"score": 0.5, "rationale": 7},
        [0.5, "a list"],
        "the answer is good",  # not JSON
        '{"score": 0.5, "rationale": "cut off',
        '{"score": NaN, "rationale": "not JSON either"}',
    ],
)
def test_anything_but_the_exact_object_is_an_invalid_response(fake: FakeGemini, body: Any) -> None:
    """Follows adk_eval_llm_judge_test.erl: output_validation_and_provider_error_are_fail_closed
    (the extra field case)."""
    answer(fake, body)
    error = failure(judge.judge_case, config(), CASE, deadline=in_seconds(10))
    assert error.reason == "invalid_judge_response"


def test_output_and_rationale_bounds(fake: FakeGemini) -> None:
    """Follows adk_eval_llm_judge_test.erl: output_validation (the oversized output case)."""
    answer(fake, "x" * 100)
    small = config(max_output_bytes=64, max_rationale_bytes=32)
    assert failure(judge.judge_case, small, CASE, deadline=in_seconds(10)).reason == (
        "judge_output_too_large"
    )
    answer(fake, {"score": 1, "rationale": "r" * 40})  # fits the output, not the rationale
    roomy = config(max_output_bytes=256, max_rationale_bytes=32)
    assert failure(judge.judge_case, roomy, CASE, deadline=in_seconds(10)).reason == (
        "invalid_judge_response"
    )


def test_a_slow_judge_times_out_and_its_request_is_dropped(fake: FakeGemini) -> None:
    """Follows adk_eval_llm_judge_test.erl: request_timeout_kills_provider_worker_test."""
    answer(fake, {"score": 1, "rationale": "late"}, delay=30)
    started = time.monotonic()
    error = failure(judge.judge_case, config(request_timeout_ms=200), CASE, deadline=in_seconds(30))
    assert error.reason == "judge_timeout"
    assert time.monotonic() - started < 10  # it did not wait for the 30 s answer
    assert len(fake.requests) == 1
    wait_until(lambda: fake.in_flight == 0)  # the abandoned call hung up


def test_the_callers_deadline_bounds_the_async_judge(fake: FakeGemini) -> None:
    answer(fake, {"score": 1, "rationale": "late"}, delay=30)
    started = time.monotonic()
    with pytest.raises(AdkError) as info:
        asyncio.run(judge.judge_case_async(config(), CASE, deadline=in_seconds(0.2)))
    assert info.value.reason == "judge_timeout"
    assert time.monotonic() - started < 10
    wait_until(lambda: fake.in_flight == 0)


def test_a_hung_sync_provider_is_abandoned_at_the_deadline() -> None:
    """A custom provider that blocks its thread and ignores cancellation: the judge
    still answers ``judge_timeout`` at its deadline while the model call is held.
    Follows adk_eval_llm_judge_test.erl: request_timeout_kills_provider_worker_test."""
    release = threading.Event()
    entered = threading.Event()

    def model(history: Any, tools: Any) -> dict[str, Any]:
        entered.set()
        release.wait(30)
        return {"text": json.dumps({"score": 1, "rationale": "too late"})}

    checked = judge.parse_judge_config(
        {**RUBRIC, "provider": ScriptedProvider(fn=model), "request_timeout_ms": 200},
        trusted=True,
    )
    try:
        for call in (judge.judge_case, _run_async):
            entered.clear()
            error = failure(call, checked, CASE, deadline=in_seconds(30))
            assert error.reason == "judge_timeout"
            assert entered.is_set() and not release.is_set()  # answered while still held
    finally:
        release.set()


def _run_async(config: judge.JudgeConfig, case: JudgeInput, *, deadline: float) -> Any:
    return asyncio.run(judge.judge_case_async(config, case, deadline=deadline))


def test_bad_arguments_are_typed_errors() -> None:
    checked = config()
    assert failure(judge.judge_case, {"rubric": "x"}, CASE, deadline=in_seconds(1)).reason == (
        "invalid_judge_config"
    )
    assert failure(judge.judge_case, checked, CASE, deadline=float("nan")).reason == (
        "invalid_judge_input"
    )
    bad_case = JudgeInput("c", [JudgeTurn(7)], [])  # type: ignore[arg-type]
    assert failure(judge.judge_case, checked, bad_case, deadline=in_seconds(1)).reason == (
        "invalid_judge_input"
    )
    assert failure(judge.parse_judge_config, ["not", "a", "mapping"], trusted=True).reason == (
        "invalid_judge_config"
    )


def test_a_deadline_already_past_sends_nothing(fake: FakeGemini) -> None:
    error = failure(judge.judge_case, config(), CASE, deadline=time.monotonic() - 1)
    assert error.reason == "judge_timeout"
    assert fake.requests == []


@pytest.mark.parametrize("status", [500, 429])
def test_a_provider_error_is_structural_only(fake: FakeGemini, status: int) -> None:
    """Follows adk_eval_llm_judge_test.erl: output_validation_and_provider_error_are_fail_closed
    (the provider error keeps neither the body nor the key)."""
    body_secret = "provider-body-secret-text"
    fake.reply_error(status, f"quota for {body_secret} {KEY}", headers={"x-echo": KEY})
    trusted = judge.parse_judge_config(
        {**RUBRIC, "provider_config": {"retry": {"max_attempts": 1}}}, trusted=True
    )
    error = failure(judge.judge_case, trusted, CASE, deadline=in_seconds(10))
    assert error.reason == ("judge_provider_error", "http_error")
    assert str(status) in error.detail
    assert body_secret not in str(error) and body_secret not in repr(error.reason)


def test_concurrent_judges_run_at_once(fake: FakeGemini) -> None:
    """Follows adk_eval_llm_judge_test.erl: independent_judges_are_not_serialized_test."""
    fake.delay = 1.0  # every call is held long enough for all to arrive
    count = 4
    for index in range(count):
        answer(fake, {"score": index / 10, "rationale": f"judge {index}"})
    checked = config()

    async def main() -> list[judge.JudgeVerdict]:
        return await asyncio.gather(
            *(judge.judge_case_async(checked, CASE, deadline=in_seconds(10)) for _ in range(count))
        )

    verdicts = asyncio.run(main())
    assert sorted(v.score for v in verdicts) == [0.0, 0.1, 0.2, 0.3]
    assert fake.max_in_flight == count


def test_sync_judges_on_threads_are_independent() -> None:
    """Three blocking judges are in their model call at once: the model answers only
    when all three have arrived (a barrier), so a serialized judge would fail."""
    count = 3
    arrived = threading.Barrier(count, timeout=10)

    def model(history: Any, tools: Any) -> dict[str, Any]:
        arrived.wait()
        return {"text": json.dumps({"score": 0.5, "rationale": "half"})}

    checked = judge.parse_judge_config(
        {**RUBRIC, "provider": ScriptedProvider(fn=model)}, trusted=True
    )
    results: list[float] = []

    def one() -> None:
        results.append(judge.judge_case(checked, CASE, deadline=in_seconds(20)).score)

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == [0.5] * count
    assert not arrived.broken


def test_untrusted_configs_may_not_name_a_provider() -> None:
    for extra in ({"provider": "scripted"}, {"provider_config": {"api_key": KEY}}):
        error = failure(judge.parse_judge_config, {**RUBRIC, **extra}, trusted=False)
        assert error.reason == ("untrusted_judge_option", next(iter(extra)))
    trusted = judge.parse_judge_config({**RUBRIC, "provider": "scripted"}, trusted=True)
    assert trusted.provider == "scripted"


def test_config_defaults_and_bounds() -> None:
    """Follows adk_eval_llm_judge_test.erl: strict_config_and_prompt_bounds_test."""
    checked = config()
    assert (checked.provider, checked.model) == ("gemini", "gemini-3.1-flash-lite")
    assert checked.request_timeout == 30.0 and checked.provider_config == {}
    bad: list[tuple[dict[str, Any], Any]] = [
        ({"rubric": ""}, ("invalid_judge_config", "rubric")),
        ({"rubric_id": "x" * 257}, ("invalid_judge_config", "rubric_id")),
        ({"rubric_version": 1}, ("invalid_judge_config", "rubric_version")),
        ({"request_timeout_ms": 120_001}, ("invalid_judge_config", "request_timeout_ms")),
        ({"request_timeout_ms": 0}, ("invalid_judge_config", "request_timeout_ms")),
        ({"max_prompt_bytes": 100}, ("invalid_judge_config", "max_prompt_bytes")),
        ({"max_output_tokens": 4097}, ("invalid_judge_config", "max_output_tokens")),
        (
            {"max_output_bytes": 64, "max_rationale_bytes": 65},
            ("invalid_judge_config", "max_rationale_bytes"),
        ),
        ({"unexpected": True}, ("invalid_judge_config", ("unknown_keys", ["unexpected"]))),
    ]
    for extra, reason in bad:
        assert failure(judge.parse_judge_config, {**RUBRIC, **extra}, trusted=False).reason == (
            reason
        ), extra
    missing = {key: value for key, value in RUBRIC.items() if key != "rubric"}
    assert failure(judge.parse_judge_config, missing, trusted=False).reason == (
        "invalid_judge_config",
        "rubric",
    )
    refused: list[dict[str, Any]] = [
        {"max_output_tokens": 99},
        {"generation_config": {"response_schema": {}}},
        {"request_timeout": 5},
        {"not_json": object()},
    ]
    for provider_config in refused:
        error = failure(
            judge.parse_judge_config, {**RUBRIC, "provider_config": provider_config}, trusted=True
        )
        assert error.reason == ("invalid_judge_config", "provider_config")
    error = failure(
        judge.parse_judge_config, {**RUBRIC, "provider": "no-such-provider"}, trusted=True
    )
    assert error.reason == ("invalid_judge_config", "provider")


def test_the_prompt_is_bounded(fake: FakeGemini) -> None:
    """Follows adk_eval_llm_judge_test.erl: strict_config_and_prompt_bounds_test
    (prompt_too_large)."""
    checked = config(rubric="r" * 700, max_prompt_bytes=1024)
    error = failure(judge.judge_case, checked, CASE, deadline=in_seconds(10))
    assert error.reason == "judge_prompt_too_large"
    huge = JudgeInput("big", [JudgeTurn("x" * 2000)], [])
    error = failure(judge.judge_case, config(max_prompt_bytes=1024), huge, deadline=in_seconds(10))
    assert error.reason == "judge_prompt_too_large"
    assert fake.requests == []


def test_a_trusted_provider_instance_and_secret_redaction() -> None:
    """Follows adk_eval_llm_judge_test.erl: structured_score_and_secret_redaction_test
    (a provider-config secret never reaches the prompt and is redacted from the
    rationale)."""
    secret = "judge-test-secret-value"
    scripted = ScriptedProvider(
        [json.dumps({"score": 0.75, "rationale": f"passed; {secret}"})], record_histories=10
    )
    checked = judge.parse_judge_config(
        {**RUBRIC, "provider": scripted, "provider_config": {"api_key": secret}}, trusted=True
    )
    case = JudgeInput("c", [JudgeTurn("say ERLANG", None, f"ERLANG {secret}")], [])
    verdict = judge.judge_case(checked, case, deadline=in_seconds(10))
    assert verdict.score == 0.75
    assert verdict.rationale == "passed; [redacted]"
    assert verdict.metadata["provider"] == "scripted"
    assert secret not in repr(verdict)
    (history,) = scripted.histories
    prompt = "".join(item.text_value() for item in history)
    assert secret not in prompt and "ERLANG" in prompt


def test_a_tool_call_or_a_too_deep_answer_is_an_invalid_response() -> None:
    scripted = ScriptedProvider(
        [
            {"tool_calls": [{"name": "lookup", "args": {}}]},
            "[" * 20_000 + "]" * 20_000,  # JSON nested past the decoder's depth
        ]
    )
    checked = judge.parse_judge_config({**RUBRIC, "provider": scripted}, trusted=True)
    for _ in range(2):
        error = failure(judge.judge_case, checked, CASE, deadline=in_seconds(10))
        assert error.reason == "invalid_judge_response"
    assert scripted.remaining() == 0


def test_a_failing_custom_provider_is_a_provider_error() -> None:
    scripted = ScriptedProvider([{"error": "quota_exhausted"}])
    checked = judge.parse_judge_config({**RUBRIC, "provider": scripted}, trusted=True)
    error = failure(judge.judge_case, checked, CASE, deadline=in_seconds(10))
    assert error.reason == ("judge_provider_error", "quota_exhausted")
    assert "quota_exhausted" in error.detail


def wait_until(check: Any, timeout: float = 10.0) -> None:
    stop = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < stop, "condition not reached"
        time.sleep(0.01)


def test_a_judge_answer_with_a_lone_surrogate_is_a_typed_failure() -> None:
    """A provider's text can hold a lone surrogate (no encoder writes one): a typed
    failure (the provider layer's ``invalid_utf8``), never an untyped
    UnicodeEncodeError, and the next call is unaffected."""
    scripted = ScriptedProvider(
        [
            {"text": '{"score": 1, "rationale": "\ud800"}'},
            {"text": '{"score": 1, "rationale": "x"}'},
        ]
    )
    checked = judge.parse_judge_config({**RUBRIC, "provider": scripted}, trusted=True)
    error = failure(judge.judge_case, checked, CASE, deadline=in_seconds(10))
    assert error.reason == ("judge_provider_error", "invalid_utf8")
    assert judge.judge_case(checked, CASE, deadline=in_seconds(10)).score == 1.0


def test_a_judge_config_repr_never_shows_its_provider_config() -> None:
    secret = "sk-judge-repr-secret"
    checked = judge.parse_judge_config(
        {**RUBRIC, "provider_config": {"api_key": secret}}, trusted=True
    )
    assert secret not in repr(checked) and "answer-quality" in repr(checked)


@pytest.mark.skipif(
    not (os.environ.get("ADK_GEMINI_REST") == "1" and os.environ.get("GEMINI_API_KEY")),
    reason="paid test: set ADK_GEMINI_REST=1 and GEMINI_API_KEY",
)
def test_real_gemini_rubric_judge() -> None:
    """The spec's opt-in paid case: the real rubric judge on gemini-3.1-flash-lite over
    REST scores a clearly correct answer high and a clearly wrong one low, within the
    ``{score, rationale}`` contract (skipped, so never counted as a pass, without
    ``ADK_GEMINI_REST=1`` and ``GEMINI_API_KEY``)."""
    checked = config(model="gemini-3.1-flash-lite", request_timeout_ms=60_000)
    right = judge.judge_case(checked, CASE, deadline=in_seconds(90))
    wrong = judge.judge_case(
        checked,
        JudgeInput(
            "tokyo",
            [JudgeTurn("What is the weather in Tokyo?", "Sunny in Tokyo", "I like turtles.")],
            [],
        ),
        deadline=in_seconds(90),
    )
    assert 0.0 <= wrong.score < right.score <= 1.0
    assert right.metadata["model"] == "gemini-3.1-flash-lite" and right.rationale
