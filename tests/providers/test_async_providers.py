"""The async provider API: scripted, sync-only fallbacks, and Gemini on the loop.

Async tests run with `asyncio.run` inside plain test functions (no pytest-asyncio).
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from google import genai
from google.genai import types

import providers
import providers.gemini as gemini_module
from providers import content, protocol
from providers.content import (
    Content,
    FileDataPart,
    FunctionCallPart,
    FunctionResponsePart,
    InlineDataPart,
    Part,
    TextPart,
)
from providers.errors import AdkError
from providers.fake_gemini import FakeGemini, FakeResponse, candidate
from providers.gemini import requests, wire
from providers.gemini.config import check
from providers.protocol import ProviderResult, ToolCalls

HISTORY = [content.from_text("hi")]
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
RICH_TOOL = {
    "name": "rich",
    "parameters": {
        "type": "object",
        "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
        "additionalProperties": False,
    },
}


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def areason(make: Callable[[], Any]) -> Any:
    """The reason of the AdkError the coroutine `make()` raises (never with the key)."""
    with pytest.raises(AdkError) as info:
        run(make())
    assert KEY not in str(info.value) and KEY not in repr(info.value)
    return info.value.reason


# -- scripted --------------------------------------------------------------------------------


def test_scripted_async_calls_answer_like_the_sync_ones():
    image = content.new([content.inline_data("image/png", b"\x89PNG")], role="model")
    steps = [
        {"tool_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}, "id": "c1"}]},
        {"stream": ["Erlang ", "streams"]},
        {"content": image},
        {"error": "unavailable"},
    ]
    sync_scripted = providers.ScriptedProvider(steps)
    async_scripted = providers.ScriptedProvider(steps, record_histories=10)
    sync_config, async_config = {"provider": sync_scripted}, {"provider": async_scripted}
    sync_calls = providers.generate(sync_config, HISTORY)

    async def scenario() -> None:
        calls = await protocol.agenerate(async_config, HISTORY)
        assert isinstance(calls, ToolCalls) and calls == sync_calls
        deltas: list[str] = []
        assert await protocol.astream(async_config, HISTORY, (), deltas.append) == "Erlang streams"
        assert deltas == ["Erlang ", "streams"]
        frames: list[Content] = []
        assert await protocol.astream_content(async_config, HISTORY, (), frames.append) == image
        assert frames == [image]
        with pytest.raises(AdkError) as info:
            await protocol.agenerate(async_config, HISTORY)
        assert info.value.reason == "unavailable"
        with pytest.raises(AdkError) as info:
            await protocol.agenerate(async_config, HISTORY)
        assert info.value.reason == "script_exhausted"

    run(scenario())
    assert async_scripted.calls == 5 and async_scripted.histories[0] == HISTORY


def test_scripted_async_text_stream_refuses_media():
    image = content.new([content.inline_data("image/png", b"x")], role="model")
    scripted = providers.ScriptedProvider([{"content": image}])
    assert areason(
        lambda: protocol.astream({"provider": scripted}, HISTORY, (), lambda d: None)
    ) == ("unsupported_text_stream_part", "inline_data")


def test_scripted_delays_are_awaited_and_the_loop_keeps_running():
    calls = 200
    scripted = providers.ScriptedProvider(
        [{"text": f"answer {n}", "delay": 0.2} for n in range(calls)]
    )
    config = {"provider": scripted}
    in_flight = max_in_flight = finished = 0
    ticks = 0
    ticks_at_first_finish: int | None = None

    async def one() -> Any:
        nonlocal in_flight, max_in_flight, finished, ticks_at_first_finish
        in_flight += 1
        max_in_flight = max(max_in_flight, in_flight)
        try:
            return await protocol.agenerate(config, HISTORY)
        finally:
            in_flight -= 1
            finished += 1
            if ticks_at_first_finish is None:
                ticks_at_first_finish = ticks

    async def ticker() -> None:
        nonlocal ticks
        while finished < calls:
            ticks += 1
            await asyncio.sleep(0.005)

    async def scenario() -> list[Any]:
        ticking = asyncio.create_task(ticker())
        answers = await asyncio.gather(*(one() for _ in range(calls)))
        await ticking
        return answers

    answers = run(scenario())
    assert sorted(answers) == sorted(f"answer {n}" for n in range(calls))
    assert max_in_flight == calls  # every call was waiting at once: no call held the loop
    assert (
        ticks_at_first_finish is not None and ticks_at_first_finish >= 1
    )  # the loop ran meanwhile
    assert scripted.remaining() == 0


def test_scripted_fn_runs_off_the_loop_and_its_delay_is_awaited():
    """A step function is user code that may block: it runs in a kernel task on the
    pool, never on the event loop."""
    loop_threads: list[int] = []

    def answer(history: Sequence[Content], tools: Sequence[Any]) -> dict[str, Any]:
        loop_threads.append(threading.get_ident())
        return {"text": history[-1].text_value().upper(), "delay": 0.05}

    scripted = providers.ScriptedProvider(fn=answer)

    async def scenario() -> tuple[list[Any], int]:
        asked = [content.from_text(f"q{n}") for n in range(20)]
        answers = await asyncio.gather(
            *(protocol.agenerate({"provider": scripted}, [q]) for q in asked)
        )
        return list(answers), threading.get_ident()

    answers, loop_thread = run(scenario())
    assert answers == [f"Q{n}" for n in range(20)]
    assert loop_threads and loop_thread not in set(loop_threads)


def test_registered_scripted_provider_has_the_async_methods():
    script = [{"text": "one", "delay": 0.01}, {"stream": ["a", "b"]}, {"stream": ["c"]}]
    config = {"provider": "scripted", "script": script}

    async def scenario() -> None:
        assert await protocol.agenerate(config, HISTORY) == "one"
        deltas: list[str] = []
        assert await protocol.astream(config, HISTORY, (), deltas.append) == "ab"
        frames: list[Content] = []
        assert await protocol.astream_content(config, HISTORY, (), frames.append) == "c"
        assert deltas == ["a", "b"] and [f.text_value() for f in frames] == ["c"]

    run(scenario())
    scripted_provider = protocol.resolve_provider(config)
    for method in ("agenerate", "astream", "astream_content"):
        assert asyncio.iscoroutinefunction(getattr(scripted_provider, method))


def test_async_calls_check_the_history_like_the_sync_ones():
    scripted = providers.ScriptedProvider(["x"])
    assert areason(lambda: protocol.agenerate({"provider": scripted}, ["hi"])) == "invalid_history"
    assert areason(lambda: protocol.agenerate({"provider": "nope"}, HISTORY)) == "unknown_provider"


# -- sync-only providers -------------------------------------------------------------------


class SyncOnlyProvider:
    """A custom provider with only sync methods; `generate` waits for the loop's go."""

    name = "sync-only"

    def __init__(self, go: threading.Event | None = None) -> None:
        self.go = go
        self.threads: list[int] = []

    def generate(self, config: Any, history: Sequence[Content], tools: Sequence[Any]) -> str:
        self.threads.append(threading.get_ident())
        if self.go is not None:
            assert self.go.wait(10), "the loop never ran while generate blocked"
        return "sync answer"

    def stream(
        self,
        config: Any,
        history: Sequence[Content],
        tools: Sequence[Any],
        on_delta: Callable[[str], None],
    ) -> str:
        self.threads.append(threading.get_ident())
        on_delta("sync ")
        on_delta("stream")
        return "sync stream"


class SyncContentProvider(SyncOnlyProvider):
    def stream_content(
        self,
        config: Any,
        history: Sequence[Content],
        tools: Sequence[Any],
        on_delta: Callable[[Content], None],
    ) -> str:
        self.threads.append(threading.get_ident())
        on_delta(content.from_text("frame", role="model"))
        return "frame"


def test_a_sync_only_provider_runs_on_a_worker_thread_without_blocking_the_loop():
    go = threading.Event()
    provider = SyncContentProvider(go)
    config = {"provider": provider}

    async def scenario() -> tuple[Any, int, list[int], list[int]]:
        call = asyncio.ensure_future(protocol.agenerate(config, HISTORY))
        await asyncio.sleep(0)  # generate is now blocked on `go`, on its own thread
        go.set()  # only possible because the loop is free
        answer = await call
        delta_threads: list[int] = []
        deltas: list[str] = []

        def on_delta(delta: str) -> None:
            delta_threads.append(threading.get_ident())
            deltas.append(delta)

        assert await protocol.astream(config, HISTORY, (), on_delta) == "sync stream"
        assert deltas == ["sync ", "stream"]
        frame_threads: list[int] = []
        assert (
            await protocol.astream_content(
                config, HISTORY, (), lambda f: frame_threads.append(threading.get_ident())
            )
            == "frame"
        )
        return answer, threading.get_ident(), delta_threads, frame_threads

    answer, loop_thread, delta_threads, frame_threads = run(scenario())
    assert answer == "sync answer"
    assert loop_thread not in provider.threads  # every sync method ran off the loop
    assert set(delta_threads) | set(frame_threads) <= set(provider.threads)  # documented


def test_a_provider_without_a_content_stream_refuses_astream_content():
    config = {"provider": SyncOnlyProvider()}
    assert (
        areason(lambda: protocol.astream_content(config, HISTORY, (), lambda f: None))
        == "unsupported_operation"
    )


def test_a_partly_async_provider_uses_what_it_has():
    class Partly(SyncOnlyProvider):
        async def agenerate(
            self, config: Any, history: Sequence[Content], tools: Sequence[Any]
        ) -> str:
            self.threads.append(threading.get_ident())
            return "async answer"

    provider = Partly()

    async def scenario() -> int:
        assert await protocol.agenerate({"provider": provider}, HISTORY) == "async answer"
        assert await protocol.astream({"provider": provider}, HISTORY, (), lambda d: None) == (
            "sync stream"
        )
        return threading.get_ident()

    loop_thread = run(scenario())
    assert provider.threads[0] == loop_thread and provider.threads[1] != loop_thread


# -- Gemini ----------------------------------------------------------------------------------


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


def rich_history() -> list[Content]:
    """Every part kind, thought signatures, call ids, a system turn and a tool turn."""
    return [
        Content("system", (TextPart("Be brief."),)),
        content.from_text("weather in Paris and a picture?"),
        content.new(
            [
                content.text("thinking about it", thought=True),
                content.function_call(
                    "get_weather",
                    {"city": "Paris", "n": [1, 2.5, None]},
                    id="call_1",
                    thought_signature="c2lnbmF0dXJl+/8=",
                ),
                content.function_call("rich", {}),
            ],
            role="model",
        ),
        content.new(
            [
                content.function_response("get_weather", {"sky": "sunny", "x": None}, id="call_1"),
                content.function_response("rich", {}),
            ],
            role="tool",
        ),
        Content(
            "model",
            (TextPart("Sunny.", thought_signature="YWJj"), TextPart("")),
        ),
        content.new(
            [
                content.inline_data("image/png", b"\x89PNG\xfb\xff"),
                content.file_data("https://example.com/a.pdf", "application/pdf"),
                "and this",
            ]
        ),
    ]


def rich_config(config: dict[str, Any]) -> dict[str, Any]:
    return {
        **config,
        "instructions": "You are helpful.",
        "builtin_tools": ["google_search"],
        "generation_config": {
            "temperature": 0.2,
            "thinking_config": {"thinking_level": "high", "include_thoughts": True},
            "safety_settings": [{"category": "harassment", "threshold": "block_only_high"}],
        },
    }


def _old_way_part(part: Part) -> types.Part:
    """google-genai types built the way the provider built them before prebuilt JSON."""

    def signature(value: str | None) -> bytes | None:
        return base64.b64decode(value) if value else None

    if isinstance(part, TextPart):
        return types.Part(
            text=part.text,
            thought=part.thought or None,
            thought_signature=signature(part.thought_signature),
        )
    if isinstance(part, InlineDataPart):
        return types.Part(
            inline_data=types.Blob(mime_type=part.mime_type, data=base64.b64decode(part.data))
        )
    if isinstance(part, FileDataPart):
        return types.Part(
            file_data=types.FileData(file_uri=part.file_uri, mime_type=part.mime_type)
        )
    if isinstance(part, FunctionCallPart):
        return types.Part(
            function_call=types.FunctionCall(id=part.id, name=part.name, args=part.args),
            thought_signature=signature(part.thought_signature),
        )
    assert isinstance(part, FunctionResponsePart)
    return types.Part(
        function_response=types.FunctionResponse(id=part.id, name=part.name, response=part.response)
    )


def old_way_body(
    fake: FakeGemini, config: dict[str, Any], history: list[Content], tools: list[Any]
) -> dict[str, Any]:
    """The request body plain google-genai sends for types built the old way."""
    settings = check(config)
    system = [settings.instructions] if settings.instructions else []
    contents = []
    for message in history:
        if message.role == "system":
            system.append(message.text_value(include_thoughts=True))
        else:
            contents.append(
                types.Content(
                    role="model" if message.role == "model" else "user",
                    parts=[_old_way_part(p) for p in message.parts],
                )
            )
    request = wire.generate_config(settings, tools, "\n\n".join(system) if system else None)
    client = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=fake.base_url))
    fake.reply_text("old")
    client.models.generate_content(model=settings.model, contents=contents, config=request)
    return fake.requests[-1].body


def test_async_request_is_the_sync_request_and_the_old_sdk_request(fake, config):
    history, tools, rich = rich_history(), [WEATHER_TOOL, RICH_TOOL], rich_config(config)
    expected = old_way_body(fake, rich, history, tools)
    fake.reply_text("sync")
    assert providers.generate(rich, history, tools) == "sync"
    fake.reply_text("async")
    assert run(protocol.agenerate(rich, history, tools)) == "async"
    fake.reply_stream([candidate([{"text": "streamed"}])])
    assert run(protocol.astream(rich, history, tools, lambda d: None)) == "streamed"
    _old, sync, async_, streamed = fake.requests[-4:]
    assert json.dumps(sync.body) == json.dumps(expected)  # same keys, values and order
    assert json.dumps(async_.body) == json.dumps(expected)
    assert json.dumps(streamed.body) == json.dumps(expected)
    assert async_.path == sync.path and async_.headers["x-goog-api-key"] == KEY
    assert streamed.path.endswith(":streamGenerateContent") and streamed.query == {"alt": ["sse"]}
    body = async_.body  # spot checks of what the old tests assert, on the async path
    assert body["systemInstruction"]["parts"] == [{"text": "You are helpful.\n\nBe brief."}]
    call = body["contents"][1]["parts"][1]
    assert call["functionCall"] == {
        "id": "call_1",
        "args": {"city": "Paris", "n": [1, 2.5, None]},
        "name": "get_weather",
    }
    assert call["thoughtSignature"] == "c2lnbmF0dXJl-_8="
    declarations = body["tools"][1]["functionDeclarations"]
    assert RICH_TOOL["parameters"] in (  # the SDK's spelling, as in test_gemini
        declarations[1].get("parametersJsonSchema"),
        declarations[1].get("parameters_json_schema"),
    )


def test_async_answers_and_streams_deliver_like_the_sync_path(fake, config):
    fake.reply_parts(
        [
            {
                "functionCall": {"id": "call_1", "name": "get_weather", "args": {"city": "Paris"}},
                "thoughtSignature": "c2lnbmF0dXJl",
            }
        ]
    )
    calls = run(protocol.agenerate(config, HISTORY, [WEATHER_TOOL]))
    assert isinstance(calls, ToolCalls)
    assert calls.calls[0].thought_signature == "c2lnbmF0dXJl" and calls.calls[0].id == "call_1"
    frames = [
        candidate([{"text": "hmm", "thought": True}]),
        candidate([{"text": "Erlang "}], groundingMetadata={"webSearchQueries": ["q1"]}),
        candidate([{"text": "streams"}], groundingMetadata={"webSearchQueries": ["q2"]}),
    ]
    fake.reply_stream(frames)
    deltas: list[str] = []
    result = run(protocol.astream(config, HISTORY, (), deltas.append))
    assert deltas == ["Erlang ", "streams"]
    assert isinstance(result, ProviderResult)
    assert result.metadata["metadata"]["webSearchQueries"] == ["q1", "q2"]
    fake.reply_stream(frames)
    sync_result = providers.stream(config, HISTORY, (), lambda d: None)
    assert sync_result == result
    image = {"inlineData": {"mimeType": "image/png", "data": "iVBORw=="}}
    fake.reply_stream([candidate([{"text": "Here"}]), candidate([image])])
    assert areason(lambda: protocol.astream(config, HISTORY, (), lambda d: None)) == (
        "unsupported_text_stream_part",
        "inline_data",
    )
    fake.reply_stream([candidate([{"text": "Here"}]), candidate([image])])
    content_frames: list[Content] = []
    final = run(protocol.astream_content(config, HISTORY, (), content_frames.append))
    assert [type(f.parts[0]).__name__ for f in content_frames] == ["TextPart", "InlineDataPart"]
    assert isinstance(final, Content) and len(final.parts) == 2


@pytest.mark.parametrize(
    ("status", "status_text"),
    [
        (400, "INVALID_ARGUMENT"),
        (403, "PERMISSION_DENIED"),
        (429, "RESOURCE_EXHAUSTED"),
        (503, "UNAVAILABLE"),
    ],
)
def test_async_http_errors_map_to_the_same_reasons(fake, config, status, status_text):
    quick = {**config, "retry": {"max_attempts": 2, "initial_delay": 1, "max_delay": 1}}
    attempts = 2 if status in (429, 503) else 1  # retryable ones are tried again
    for _ in range(attempts):
        fake.reply_error(status, f"the key {KEY} is bad", status_text)
    assert areason(lambda: protocol.agenerate(quick, HISTORY)) == (
        "http_error",
        status,
        status_text,
    )
    for _ in range(attempts):
        fake.reply_error(status, f"the key {KEY} is bad", status_text)
    assert areason(lambda: protocol.astream(quick, HISTORY, (), lambda d: None)) == (
        "http_error",
        status,
        status_text,
    )
    assert len(fake.requests) == 2 * attempts


def test_async_blocked_malformed_timeout_and_missing_key(fake, config, monkeypatch):
    fake.enqueue(FakeResponse(body={"promptFeedback": {"blockReason": "SAFETY"}}))
    assert areason(lambda: protocol.agenerate(config, HISTORY)) == ("blocked", "SAFETY")
    fake.enqueue(FakeResponse(raw=b"{this is not json"))
    assert areason(lambda: protocol.agenerate(config, HISTORY)) == "malformed_response"
    fake.enqueue(FakeResponse(body=candidate([{"text": "late"}]), delay=1.0))
    assert areason(lambda: protocol.agenerate({**config, "request_timeout": 200}, HISTORY)) == (
        "timeout"
    )
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    seen = len(fake.requests)
    no_key = {k: v for k, v in config.items() if k != "api_key"}
    assert areason(lambda: protocol.agenerate(no_key, HISTORY)) == "missing_api_key"
    assert areason(lambda: protocol.astream(no_key, HISTORY, (), lambda d: None)) == (
        "missing_api_key"
    )
    assert len(fake.requests) == seen  # refused before any HTTP


def test_async_responses_are_capped(fake, config, monkeypatch):
    monkeypatch.setattr(gemini_module, "MAX_RESPONSE_BYTES", 1024)
    fake.reply_text("x" * 5000)
    assert areason(lambda: protocol.agenerate(config, HISTORY)) == "response_too_large"
    fake.reply_stream([candidate([{"text": "x" * 600}]), candidate([{"text": "y" * 600}])])
    assert areason(lambda: protocol.astream(config, HISTORY, (), lambda d: None)) == (
        "response_too_large"
    )


def test_concurrent_async_calls_overlap_on_one_loop_without_threads(fake, config):
    def slow(request: Any) -> FakeResponse:
        return FakeResponse(body=candidate([{"text": "ok"}]), delay=0.3)

    fake.handler = slow
    calls = 50
    in_flight = max_in_flight = 0
    threads_seen: list[int] = []

    async def one() -> Any:
        nonlocal in_flight, max_in_flight
        in_flight += 1
        max_in_flight = max(max_in_flight, in_flight)
        threads_seen.append(threading.active_count())
        try:
            return await protocol.agenerate(config, HISTORY)
        finally:
            in_flight -= 1

    async def scenario() -> list[Any]:
        await protocol.agenerate(config, HISTORY)  # load the provider and the client first
        before = threading.active_count()
        answers = await asyncio.gather(*(one() for _ in range(calls)))
        assert threading.active_count() <= before  # waiting cost no thread
        return list(answers)

    assert run(scenario()) == ["ok"] * calls
    assert max_in_flight == calls


def test_each_event_loop_gets_its_own_http_client(config):
    config = {**config, "max_connections": gemini_module.SHARD_CONNECTIONS}  # one client
    provider = protocol.resolve_provider(config)
    settings = check(config)

    async def clients() -> tuple[Any, Any, Any, list[Any]]:
        first = provider._async_client(settings)
        again = provider._async_client(settings)
        other = provider._async_client(check({**config, "request_timeout": 1234}))
        return first, again, other, http_clients(asyncio.get_running_loop())

    def http_clients(loop: asyncio.AbstractEventLoop) -> list[Any]:
        # this loop's clients only: the shared provider may hold other live loops' (the
        # kernel reactor's, from earlier tests)
        return [
            http for shards in provider._loop_clients[loop].values() for _, http in shards.clients
        ]

    first, again, other, first_http = run(clients())
    second, _, _, second_http = run(clients())
    assert first is again and first is not other  # cached per loop and per settings
    assert second is not first
    assert first_http and not set(map(id, first_http)) & set(map(id, second_http))  # none shared
    assert all(type(http) is gemini_module.httpx.AsyncClient for http in first_http)
    assert not any(loop.is_closed() for loop in list(provider._loop_clients))  # closed: dropped

    async def closing() -> bool:
        provider._async_client(settings)
        entries = provider._loop_clients[asyncio.get_running_loop()].values()
        (http,) = [http for shards in entries for _, http in shards.clients]
        await provider.aclose()
        return http.is_closed and asyncio.get_running_loop() not in provider._loop_clients

    assert run(closing())


def test_connection_limits_come_from_config_or_environment(config, monkeypatch):
    monkeypatch.delenv("ADK_GEMINI_MAX_CONNECTIONS", raising=False)
    assert check(config).max_connections == 1024
    assert check({**config, "max_connections": 8}).max_connections == 8
    monkeypatch.setenv("ADK_GEMINI_MAX_CONNECTIONS", "16")
    assert check(config).max_connections == 16
    assert check({**config, "max_connections": 8}).max_connections == 8
    for bad in ("0", "65537", "many", "-3", "²"):
        monkeypatch.setenv("ADK_GEMINI_MAX_CONNECTIONS", bad)
        with pytest.raises(AdkError) as info:
            check(config)
        assert info.value.reason == "invalid_config"
        assert "ADK_GEMINI_MAX_CONNECTIONS" in info.value.detail
    monkeypatch.delenv("ADK_GEMINI_MAX_CONNECTIONS")
    for bad_value in (0, 65_537, True, 2.0, "8"):
        with pytest.raises(AdkError) as info:
            providers.validate_config({**config, "max_connections": bad_value})
        assert info.value.reason == "invalid_config" and "max_connections" in info.value.detail
    settings = check({**config, "max_connections": 7})
    provider = protocol.resolve_provider(config)

    async def pool_limit() -> int:
        provider._async_client(settings)
        entries = provider._loop_clients[asyncio.get_running_loop()].values()
        (http,) = [http for shards in entries for _, http in shards.clients]
        return int(http._transport._pool._max_connections)

    assert run(pool_limit()) == 7
    provider._client(settings)
    (sync_http,) = [http for key, (_, http) in provider._clients.items() if key[3] == 7]
    assert sync_http._transport._pool._max_connections == 7


# -- the conversion cache --------------------------------------------------------------------


def test_the_conversion_cache_is_bounded_and_returns_equal_wire_json():
    cache = requests.WireCache(max_entries=8, max_bytes=4096, max_entry_bytes=1024)
    history = rich_history()[1:] + [content.from_text(f"message {n}") for n in range(50)]
    cold = [requests.content_wire(message) for message in history]
    first, _ = requests.request_contents(history, None, cache)
    assert len(cache) <= 8 and cache.size_bytes <= 4096
    assert first == cold
    recent, _ = requests.request_contents(history[-4:], None, cache)
    assert recent == cold[-4:] and cache.hits == 4  # the last messages are still cached
    big = content.from_text("x" * 2000)
    requests.request_contents([big], None, cache)
    requests.request_contents([big], None, cache)
    assert cache.hits == 4 and cache.misses == len(history) + 2  # too big: never cached
    cache_by_bytes = requests.WireCache(max_entries=1000, max_bytes=300)
    requests.request_contents(
        [content.from_text(f"m{n}" * 10) for n in range(40)], None, cache_by_bytes
    )
    assert 0 < cache_by_bytes.size_bytes <= 300 and len(cache_by_bytes) < 40


def test_cached_wire_json_shares_nothing_with_the_callers_content():
    cache = requests.WireCache()
    args = {"city": "Paris"}
    message = Content("model", (FunctionCallPart("get_weather", args, "c1"),))
    (before,), _ = requests.request_contents([message], None, cache)
    args["city"] = "Rome"  # a caller mutating its dict after the call
    assert before["parts"][0]["functionCall"]["args"] == {"city": "Paris"}
    (after,), _ = requests.request_contents([message], None, cache)
    assert after["parts"][0]["functionCall"]["args"] == {"city": "Rome"}
    assert cache.misses == 2


def test_repeated_calls_send_the_same_body_warm_or_cold(fake, config):
    history = rich_history()
    requests.DEFAULT_CACHE.clear()
    fake.reply_text("cold")
    fake.reply_text("warm")
    run(protocol.agenerate(config, history))
    run(protocol.agenerate(config, history))
    cold, warm = fake.requests[-2:]
    assert json.dumps(cold.body) == json.dumps(warm.body)


def test_an_inline_scripted_fn_runs_on_the_loop():
    """`inline=True` is for quick, pure step functions: no pool task per model call."""
    threads: list[int] = []

    def answer(history: Sequence[Content], tools: Sequence[Any]) -> dict[str, Any]:
        threads.append(threading.get_ident())
        return {"text": "ok"}

    scripted = providers.ScriptedProvider(fn=answer, inline=True)

    async def scenario() -> int:
        assert await protocol.agenerate({"provider": scripted}, HISTORY) == "ok"
        return threading.get_ident()

    assert threads == [run(scenario())]


def test_many_connections_are_spread_over_clients_of_eight(config):
    """httpcore scans every connection of a pool per request: 2 x 8 + 2 connections are
    up to 3 clients (of 8, 8 and 8), a new one made only when no existing one is idle,
    and once all exist the least busy one is used (session 27 review F2: the first idle
    client, so a sequential caller keeps reusing one connection)."""
    shard = gemini_module.SHARD_CONNECTIONS
    settings = check({**config, "max_connections": 2 * shard + 2})
    provider = protocol.resolve_provider(config)

    async def picks() -> tuple[list[Any], list[int], Any]:
        leases = [provider._async_lease(settings) for _ in range(4)]  # none released
        (shards,) = provider._loop_clients[asyncio.get_running_loop()].values()
        chosen = [shards.clients[index][0] for _, index in leases]
        limits = [int(http._transport._pool._max_connections) for _, http in shards.clients]
        for _, index in leases:
            shards.release(index)
        return chosen, limits, provider._async_client(settings)

    chosen, limits, idle = run(picks())
    assert len({id(c) for c in chosen[:3]}) == 3 and chosen[3] is chosen[0]
    assert limits == [shard, shard, shard]
    assert idle is chosen[0]  # all idle again: the first
