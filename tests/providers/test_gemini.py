"""Gemini REST through google-genai, against the loopback fake: the exact wire."""

from __future__ import annotations

import json
import os
import time

import pytest
from structlog.testing import capture_logs

import providers
from providers import content
from providers.content import Content, TextPart
from providers.errors import AdkError
from providers.fake_gemini import FakeGemini, FakeResponse, candidate
from providers.protocol import ProviderResult, ToolCalls

KEY = "AIzaSyTEST-secret-key-0123456789"
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


@pytest.fixture
def fake():
    with FakeGemini() as server:
        yield server


@pytest.fixture
def config(fake):
    return {
        "provider": "gemini",
        "model": "gemini-3.1-flash-lite",
        "api_key": KEY,
        "base_url": fake.base_url,
    }


def ask(text="hi"):
    return [content.from_text(text)]


def reason(fn):
    with pytest.raises(AdkError) as info:
        fn()
    assert KEY not in str(info.value) and KEY not in repr(info.value)
    return info.value.reason


def test_text_answer_and_request_shape(fake, config):
    fake.reply_text("Hello")
    history = [Content("system", (TextPart("Be brief."),)), content.from_text("hi")]
    assert (
        providers.generate({**config, "instructions": "You are helpful."}, history, [WEATHER_TOOL])
        == "Hello"
    )
    (request,) = fake.requests
    assert request.method == "POST" and request.path.endswith(
        "/models/gemini-3.1-flash-lite:generateContent"
    )
    assert request.headers["x-goog-api-key"] == KEY
    body = request.body
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert body["systemInstruction"]["parts"] == [{"text": "You are helpful.\n\nBe brief."}]
    (declarations,) = body["tools"]
    assert declarations["functionDeclarations"][0]["parameters"]["type"] == "OBJECT"
    assert KEY not in json.dumps(body)


def test_rich_schemas_go_to_parameters_json_schema_unchanged(fake, config):
    rich = {
        "type": "object",
        "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
        "additionalProperties": False,
    }
    union = {"type": ["string", "null"]}
    fake.reply_text("ok")
    providers.generate(
        config,
        ask(),
        [
            {"name": "rich", "parameters": rich},
            {"name": "union", "parameters": union},
            WEATHER_TOOL,
        ],
    )
    declarations = fake.requests[0].body["tools"][0]["functionDeclarations"]
    assert (
        declarations[0]["parameters_json_schema"] == rich
        or declarations[0].get("parametersJsonSchema") == rich
    )
    assert union in (
        declarations[1].get("parameters_json_schema"),
        declarations[1].get("parametersJsonSchema"),
    )
    assert "parameters" in declarations[2]


def test_google_search_and_function_declarations_are_separate_tools(fake, config):
    fake.reply_text("ok")
    providers.generate({**config, "builtin_tools": ["google_search"]}, ask(), [WEATHER_TOOL])
    tools = fake.requests[0].body["tools"]
    assert len(tools) == 2
    assert sum("googleSearch" in tool for tool in tools) == 1
    assert sum("functionDeclarations" in tool for tool in tools) == 1


def test_generation_options_thinking_and_safety_reach_the_wire(fake, config):
    fake.reply_text("{}")
    providers.generate(
        {
            **config,
            "generation_config": {
                "temperature": 0.2,
                "max_output_tokens": 64,
                "response_mime_type": "application/json",
                "response_schema": {"type": "object"},
                "thinking_config": {"thinking_level": "high", "include_thoughts": True},
                "safety_settings": [
                    {"category": "hate_speech", "threshold": "block_low_and_above"},
                    {"category": "harassment", "threshold": "block_only_high"},
                ],
            },
        },
        ask(),
    )
    body = fake.requests[0].body
    generation = body["generationConfig"]
    assert generation["temperature"] == 0.2 and generation["maxOutputTokens"] == 64
    assert generation["responseMimeType"] == "application/json"
    assert generation.get("responseJsonSchema", generation.get("response_json_schema")) == {
        "type": "object"
    }
    thinking = generation["thinkingConfig"]
    assert thinking.get("thinkingLevel", thinking.get("thinking_level")) == "HIGH"
    assert thinking.get("includeThoughts", thinking.get("include_thoughts")) is True
    assert body["safetySettings"] == [
        {"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_LOW_AND_ABOVE"},
        {"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"},
    ]


def test_thought_signatures_and_call_ids_survive_the_round_trip(fake, config):
    fake.reply_parts(
        [
            {
                "functionCall": {"id": "call_1", "name": "get_weather", "args": {"city": "Paris"}},
                "thoughtSignature": "c2lnbmF0dXJl",
            }
        ]
    )
    calls = providers.generate(config, ask("weather?"), [WEATHER_TOOL])
    assert isinstance(calls, ToolCalls)
    (call,) = calls.calls
    assert (call.id, call.name, call.args, call.thought_signature) == (
        "call_1",
        "get_weather",
        {"city": "Paris"},
        "c2lnbmF0dXJl",
    )
    fake.reply_text("Sunny in Paris.")
    history = [
        *ask("weather?"),
        calls.content,
        content.new(
            [content.function_response("get_weather", {"sky": "sunny"}, id="call_1")], role="tool"
        ),
    ]
    assert providers.generate(config, history, [WEATHER_TOOL]) == "Sunny in Paris."
    sent = fake.requests[1].body["contents"]
    model_turn = sent[1]
    assert model_turn["role"] == "model"
    assert model_turn["parts"][0]["functionCall"] == {
        "id": "call_1",
        "name": "get_weather",
        "args": {"city": "Paris"},
    }
    assert model_turn["parts"][0]["thoughtSignature"] in (
        "c2lnbmF0dXJl",
        "c2lnbmF0dXJl".replace("+", "-"),
    )
    assert sent[2]["parts"][0]["functionResponse"] == {
        "id": "call_1",
        "name": "get_weather",
        "response": {"sky": "sunny"},
    }


def test_thoughts_stay_out_of_the_visible_answer(fake, config):
    fake.reply_parts(
        [{"text": "Let me think...", "thought": True}, {"text": "Supervisors isolate failures."}]
    )
    result = providers.generate(config, ask())
    assert isinstance(result, Content)
    assert result.text_value() == "Supervisors isolate failures."
    assert result.parts[0] == TextPart("Let me think...", thought=True)
    assert content.validate(content.to_dict(result)) == result


def test_text_stream_emits_only_visible_deltas(fake, config):
    fake.reply_stream(
        [
            candidate([{"text": "hmm", "thought": True}]),
            candidate([{"text": "Erlang "}]),
            candidate([{"text": "streams"}]),
        ]
    )
    deltas: list[str] = []
    result = providers.stream(config, ask(), (), deltas.append)
    assert deltas == ["Erlang ", "streams"]
    assert isinstance(result, Content) and result.text_value() == "Erlang streams"
    request = fake.requests[0]
    assert request.path.endswith(":streamGenerateContent") and request.query == {"alt": ["sse"]}


def test_media_in_a_text_stream_is_refused_and_content_stream_keeps_every_frame(fake, config):
    image = {"inlineData": {"mimeType": "image/png", "data": "iVBORw=="}}
    fake.reply_stream([candidate([{"text": "Here"}]), candidate([image])])
    assert reason(lambda: providers.stream(config, ask(), (), lambda d: None)) == (
        "unsupported_text_stream_part",
        "inline_data",
    )
    fake.reply_stream([candidate([{"text": "Here"}]), candidate([image])])
    frames: list[Content] = []
    final = providers.stream_content(config, ask(), (), frames.append)
    assert [
        f.parts[0].type if hasattr(f.parts[0], "type") else type(f.parts[0]).__name__
        for f in frames
    ] == ["TextPart", "InlineDataPart"]
    assert isinstance(final, Content) and len(final.parts) == 2


def test_grounding_metadata_travels_in_the_envelope(fake, config):
    grounding = {
        "webSearchQueries": ["latest OTP release"],
        "groundingChunks": [{"web": {"uri": "https://example.com", "title": "example.com"}}],
    }
    fake.reply_parts([{"text": "OTP 28."}], groundingMetadata=grounding)
    result = providers.generate({**config, "builtin_tools": ["google_search"]}, ask())
    assert isinstance(result, ProviderResult)
    assert result.output == "OTP 28."
    envelope = result.metadata
    assert envelope["schema_version"] == 1 and envelope["provider"] == "gemini"
    assert envelope["type"] == "google_search_grounding"
    assert envelope["metadata"]["webSearchQueries"] == ["latest OTP release"]
    fake.reply_text("plain")
    assert providers.generate(config, ask()) == "plain"  # no metadata: the plain value, unchanged


def test_streamed_grounding_lists_accumulate_in_arrival_order(fake, config):
    fake.reply_stream(
        [
            candidate([{"text": "A"}], groundingMetadata={"webSearchQueries": ["q1"]}),
            candidate(
                [{"text": "B"}],
                groundingMetadata={
                    "webSearchQueries": ["q2"],
                    "groundingChunks": [{"web": {"uri": "https://a.example"}}],
                },
            ),
        ]
    )
    result = providers.stream(
        {**config, "builtin_tools": ["google_search"]}, ask(), (), lambda d: None
    )
    assert isinstance(result, ProviderResult)
    assert result.metadata["metadata"]["webSearchQueries"] == ["q1", "q2"]
    assert result.output == "AB"


def test_oversized_grounding_metadata_fails_explicitly(fake, config):
    huge = {"webSearchQueries": ["x" * 1000] * 300}
    fake.reply_parts([{"text": "A"}], groundingMetadata=huge)
    assert reason(lambda: providers.generate(config, ask())) == "grounding_metadata_too_large"


def test_missing_api_key_fails_before_any_http(fake, config, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    no_key = {k: v for k, v in config.items() if k != "api_key"}
    assert reason(lambda: providers.generate(no_key, ask())) == "missing_api_key"
    assert fake.requests == []
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    fake.reply_text("from env")
    assert providers.generate(no_key, ask()) == "from env"


@pytest.mark.parametrize(
    ("status", "status_text"),
    [
        (400, "INVALID_ARGUMENT"),
        (403, "PERMISSION_DENIED"),
        (429, "RESOURCE_EXHAUSTED"),
        (503, "UNAVAILABLE"),
    ],
)
def test_http_errors_map_to_typed_reasons(fake, config, status, status_text):
    quick = {**config, "retry": {"max_attempts": 2, "initial_delay": 1, "max_delay": 1}}
    attempts = 2 if status in (429, 503) else 1  # retryable ones are tried again
    for _ in range(attempts):
        fake.reply_error(status, f"the key {KEY} is bad", status_text)
    assert reason(lambda: providers.generate(quick, ask())) == ("http_error", status, status_text)
    assert len(fake.requests) == attempts


def test_safety_blocks_and_malformed_or_oversized_responses(fake, config, monkeypatch):
    fake.enqueue(FakeResponse.json({"promptFeedback": {"blockReason": "SAFETY"}}))
    assert reason(lambda: providers.generate(config, ask())) == ("blocked", "SAFETY")
    fake.enqueue(
        FakeResponse.json(
            {"candidates": [{"finishReason": "SAFETY", "content": {"role": "model", "parts": []}}]}
        )
    )
    assert reason(lambda: providers.generate(config, ask())) == ("blocked", "SAFETY")
    fake.enqueue(FakeResponse(raw=b"{this is not json"))
    assert reason(lambda: providers.generate(config, ask())) == "malformed_response"
    fake.enqueue(FakeResponse(raw=b'{"candidates": "not a list"}'))
    assert reason(lambda: providers.generate(config, ask())) == "empty_response"
    fake.enqueue(FakeResponse.json({"candidates": []}))
    assert reason(lambda: providers.generate(config, ask())) == "empty_response"
    import providers.gemini as gemini_module

    monkeypatch.setattr(gemini_module, "MAX_RESPONSE_BYTES", 1024)
    fresh = {**config, "request_timeout": 5000}  # a new client, built with the lowered cap
    fake.reply_text("x" * 5000)
    assert reason(lambda: providers.generate(fresh, ask())) == "response_too_large"


def test_request_timeout_bounds_the_call(fake, config):
    def slow(request):
        time.sleep(1.0)
        return FakeResponse.json(candidate([{"text": "late"}]))

    fake.handler = slow
    started = time.monotonic()
    assert (
        reason(lambda: providers.generate({**config, "request_timeout": 200}, ask())) == "timeout"
    )
    assert time.monotonic() - started < 0.9


def test_the_key_never_appears_in_errors_logs_or_reprs(fake, config):
    fake.reply_error(401, f"API key {KEY} not valid", "UNAUTHENTICATED")
    with capture_logs() as logs, pytest.raises(AdkError) as info:
        providers.generate(config, ask())
    error = info.value
    assert KEY not in str(error) and KEY not in repr(error) and KEY not in str(logs)
    from providers.gemini.config import check

    assert KEY not in repr(check(config))
    assert KEY not in repr(providers.resolve_provider(config))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"temprature": 1}, ("unknown_config_keys", ("temprature",))),
        ({"generation_config": {"topp": 1}}, ("unknown_generation_config_keys", ("topp",))),
        (
            {"thinking_config": {"thinking_level": "high", "thinking_budget": 100}},
            "thinking_level_and_budget",
        ),
        ({"thinking_config": {"thinking_level": "max"}}, "invalid_thinking_level"),
        (
            {"safety_settings": [{"category": "civic_integrity", "threshold": "off"}]},
            "unsupported_safety_category",
        ),
        (
            {"safety_settings": [{"category": "harassment", "threshold": "off"}] * 2},
            "duplicate_safety_category",
        ),
        (
            {"safety_settings": [{"category": "harassment", "threshold": "block_all"}]},
            "invalid_safety_threshold",
        ),
        (
            {"safety_settings": [{"category": "harassment", "threshold": "off", "x": 1}]},
            "invalid_safety_settings",
        ),
        ({"builtin_tools": ["url_context"]}, "invalid_builtin_tools"),
        ({"request_timeout": -1}, "invalid_request_timeout"),
        ({"request_timeout": "soon"}, "invalid_request_timeout"),
        ({"response_schema": {"type": "object"}}, ("invalid_generation_config", "response_schema")),
        ({"temperature": 9}, ("invalid_generation_config", "temperature")),
        ({"model": ""}, "invalid_model"),
    ],
)
def test_strict_config_validation(config, fake, change, expected):
    assert reason(lambda: providers.validate_config({**config, **change})) == expected
    assert reason(lambda: providers.generate({**config, **change}, ask())) == expected
    assert fake.requests == []


def test_valid_configs_and_capabilities(config):
    providers.validate_config(
        {**config, "request_timeout": "infinity", "thinking_config": {"thinking_budget": 1024}}
    )
    providers.validate_config(
        {"provider": "gemini", "model": "gemini-3.1-flash-lite"}
    )  # the key may come later
    caps = providers.capabilities("gemini")
    assert caps["streaming"] and caps["function_calling"] and caps["structured_output"]
    assert caps["multimodal"] and caps["thinking"] and caps["safety_settings"]
    assert caps["google_search_grounding"] and caps["builtin_tools"] == ["google_search"]
    assert caps["content_schema_version"] == 1 and caps["live"] is False


def test_fake_server_serves_cached_contents_to_the_sdk(fake):
    from google import genai
    from google.genai import types

    client = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=fake.base_url))
    cache = client.caches.create(
        model="gemini-3.1-flash-lite",
        config=types.CreateCachedContentConfig(display_name="docs", ttl="60s"),
    )
    assert cache.name.startswith("cachedContents/")
    assert client.caches.get(name=cache.name).name == cache.name
    client.caches.delete(name=cache.name)
    from google.genai import errors as genai_errors

    with pytest.raises(genai_errors.ClientError):
        client.caches.get(name=cache.name)
    assert [r.method for r in fake.requests] == ["POST", "GET", "DELETE", "GET"]


@pytest.mark.skipif(
    not (os.environ.get("ADK_GEMINI_REST") == "1" and os.environ.get("GEMINI_API_KEY")),
    reason="paid test: set ADK_GEMINI_REST=1 and GEMINI_API_KEY",
)
def test_real_gemini_rest_round_trip():
    config = {
        "provider": "gemini",
        "model": os.environ.get("ADK_GEMINI_MODEL", "gemini-3.1-flash-lite"),
    }
    answer = providers.generate(config, ask("Reply with the single word: pong"))
    text = answer if isinstance(answer, str) else providers.unwrap(answer)[0]
    assert "pong" in str(text).lower()
