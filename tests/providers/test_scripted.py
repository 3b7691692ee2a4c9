"""The scripted provider and the provider protocol's dispatch."""

from __future__ import annotations

import threading
import time

import pytest

import providers
from providers import content
from providers.content import Content
from providers.errors import AdkError
from providers.protocol import ToolCalls

HISTORY = [content.from_text("hi")]


def test_steps_are_consumed_in_order_then_exhausted():
    scripted = providers.ScriptedProvider(["one", {"text": "two"}], record_histories=3)
    config = {"provider": scripted}
    assert providers.generate(config, HISTORY) == "one"
    assert providers.generate(config, HISTORY) == "two"
    with pytest.raises(AdkError) as info:
        providers.generate(config, HISTORY)
    assert info.value.reason == "script_exhausted"
    assert scripted.calls == 3 and scripted.histories[0] == HISTORY


def test_fresh_starts_the_script_over_and_keeps_the_original_where_it_was():
    scripted = providers.ScriptedProvider(["one", "two"], record_histories=1)
    assert providers.generate({"provider": scripted}, HISTORY) == "one"
    fresh = scripted.fresh()
    assert fresh is not scripted and fresh.calls == 0 and fresh.histories == []
    assert providers.generate({"provider": fresh}, HISTORY) == "one"
    assert providers.generate({"provider": scripted}, HISTORY) == "two"
    by_function = providers.ScriptedProvider(fn=lambda history, tools: {"text": "same"})
    assert providers.generate({"provider": by_function.fresh()}, HISTORY) == "same"


def test_every_step_kind():
    image = content.new([content.inline_data("image/png", b"\x89PNG")], role="model")
    scripted = providers.ScriptedProvider(
        [
            {"tool_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}, "id": "c1"}]},
            {"stream": ["Erlang ", "streams"]},
            {"content": image},
            {"error": "unavailable"},
        ]
    )
    config = {"provider": scripted}
    calls = providers.generate(config, HISTORY)
    assert isinstance(calls, ToolCalls)
    assert [(c.name, c.args, c.id) for c in calls.calls] == [
        ("get_weather", {"city": "Tokyo"}, "c1")
    ]
    deltas: list[str] = []
    assert providers.stream(config, HISTORY, (), deltas.append) == "Erlang streams"
    assert deltas == ["Erlang ", "streams"]
    frames: list[Content] = []
    assert providers.stream_content(config, HISTORY, (), frames.append) == image
    assert frames == [image]
    with pytest.raises(AdkError) as info:
        providers.generate(config, HISTORY)
    assert info.value.reason == "unavailable"


def test_text_stream_refuses_media_parts():
    image = content.new([content.inline_data("image/png", b"x")], role="model")
    scripted = providers.ScriptedProvider([{"content": image}])
    with pytest.raises(AdkError) as info:
        providers.stream({"provider": scripted}, HISTORY, (), lambda d: None)
    assert info.value.reason == ("unsupported_text_stream_part", "inline_data")


def test_function_mode_is_deterministic_under_concurrency():
    def answer(history, tools):
        return {"text": history[-1].text_value().upper(), "delay": 0.01}

    scripted = providers.ScriptedProvider(fn=answer)
    results: dict[int, str] = {}

    def call(n: int) -> None:
        results[n] = providers.generate({"provider": scripted}, [content.from_text(f"q{n}")])

    threads = [threading.Thread(target=call, args=(n,)) for n in range(20)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {n: f"Q{n}" for n in range(20)}
    assert (
        time.monotonic() - started < 1.0
    )  # the delays overlapped: no global lock held while waiting


def test_registered_scripted_provider_runs_the_config_script():
    config = {"provider": "scripted", "script": ["first", "second"]}
    assert providers.generate(config, HISTORY) == "first"
    assert providers.generate(config, HISTORY) == "second"
    providers.validate_config(config)
    with pytest.raises(AdkError) as info:
        providers.validate_config({"provider": "scripted", "script": ["x"], "temprature": 1})
    assert info.value.reason == ("unknown_config_keys", ("temprature",))


def test_invalid_steps_and_configs_are_typed_errors():
    for bad in ([{"text": "a", "error": "b"}], [{"nope": 1}], [{"text": "a", "delay": -1}], [42]):
        with pytest.raises(AdkError) as info:
            providers.ScriptedProvider(bad)
        assert info.value.reason == "invalid_script_step"
    for not_a_list in (False, 3, "text", b"bytes", {"text": "a"}):  # found by test_fuzz
        with pytest.raises(AdkError) as info:
            providers.ScriptedProvider(not_a_list)  # type: ignore[arg-type]
        assert info.value.reason == "invalid_script"
    with pytest.raises(AdkError):
        providers.generate({"provider": "no-such-provider"}, HISTORY)
    with pytest.raises(AdkError) as info:
        providers.generate({"provider": providers.ScriptedProvider(["x"])}, ["not content"])
    assert info.value.reason == "invalid_history"


def test_capabilities_are_honest():
    caps = providers.capabilities(providers.ScriptedProvider(["x"]))
    assert caps["streaming"] and caps["function_calling"] and not caps["live"]
    assert caps["content_schema_version"] == 1 and caps["builtin_tools"] == []


def test_record_histories_keeps_the_newest_histories_only():
    """`record_histories` bounds the record a test opts into (0, the default, keeps
    none); a negative bound is refused."""
    kept = providers.ScriptedProvider(fn=lambda history, tools: {"text": "ok"}, record_histories=2)
    for word in ("one", "two", "three"):
        kept.generate({}, [content.from_text(word)], [])
    assert kept.calls == 3
    assert [history[0].parts[0].text for history in kept.histories] == ["two", "three"]
    none_kept = providers.ScriptedProvider(["a"], record_histories=0)
    none_kept.generate({}, [content.from_text("x")], [])
    assert (none_kept.calls, none_kept.histories) == (1, [])
    with pytest.raises(AdkError) as refused:
        providers.ScriptedProvider(["a"], record_histories=-1)
    assert refused.value.reason == "invalid_record_histories"
