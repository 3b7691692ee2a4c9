"""`ScriptedProvider` keeps no histories unless a test opts in (issue 20 §2).

A long run, a daemon's repeating script and the stress harness call the scripted model
without end: by default it keeps nothing; ``record_histories=n`` keeps the newest `n`,
in call order, bounded by `MAX_RECORDED_HISTORIES`.
"""

from __future__ import annotations

import asyncio
import threading
import tracemalloc
from collections.abc import Sequence
from typing import Any

import pytest

from providers import content, protocol
from providers.content import Content
from providers.errors import AdkError
from providers.scripted import MAX_RECORDED_HISTORIES, ScriptedProvider


def _asked(word: str) -> list[Content]:
    return [content.from_text(word)]


def _echo(history: Sequence[Content], tools: Sequence[Any]) -> dict[str, Any]:
    return {"text": history[-1].text_value()}


def _ignore(delta: str) -> None:
    """An `on_delta` that drops the text deltas."""


def _last_words(provider: ScriptedProvider) -> list[str]:
    return [history[-1].text_value() for history in provider.histories]


def test_by_default_nothing_is_kept_over_ten_thousand_calls():
    """issue 20 §2: the default record is empty however many calls there were, and the
    calls' histories are not retained (traced memory stays flat)."""
    provider = ScriptedProvider(fn=_echo, inline=True)
    long_history = [content.from_text(f"message {n}") for n in range(50)]
    provider.generate({}, long_history, [])  # warm up any lazily built state
    tracemalloc.start()
    try:
        before, _peak = tracemalloc.get_traced_memory()
        for _ in range(10_000):
            assert provider.generate({}, long_history, []) == "message 49"
        after, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert provider.calls == 10_001
    assert provider.histories == []
    # keeping a 50-item list per call would hold more than 4 MB here
    assert after - before < 256 * 1024


def test_a_script_of_steps_keeps_nothing_by_default_either():
    provider = ScriptedProvider(["one", {"stream": ["t", "wo"]}, "three"])
    assert provider.generate({}, _asked("a"), []) == "one"
    assert provider.stream({}, _asked("b"), [], lambda delta: None) == "two"
    assert provider.stream_content({}, _asked("c"), [], lambda frame: None) == "three"
    assert (provider.calls, provider.histories) == (3, [])


def test_opting_in_keeps_the_newest_n_in_call_order():
    """Every sync call kind is recorded; past `n` the oldest are dropped."""
    provider = ScriptedProvider(["1", {"stream": ["2"]}, "3", "4", "5"], record_histories=3)
    provider.generate({}, _asked("a"), [])
    provider.stream({}, _asked("b"), [], lambda delta: None)
    assert _last_words(provider) == ["a", "b"]
    provider.stream_content({}, _asked("c"), [], lambda frame: None)
    provider.generate({}, _asked("d"), [])
    provider.generate({}, _asked("e"), [])
    assert provider.calls == 5
    assert _last_words(provider) == ["c", "d", "e"]


def test_a_call_that_fails_is_recorded_too():
    """An exhausted script or an error step still saw its history."""
    provider = ScriptedProvider([{"error": "unavailable"}], record_histories=5)
    for word in ("a", "b"):
        with pytest.raises(AdkError):
            provider.generate({}, _asked(word), [])
    assert _last_words(provider) == ["a", "b"]


def test_histories_is_a_copy_of_the_record():
    """Changing the returned list (or a history the caller passed) changes nothing kept."""
    provider = ScriptedProvider(fn=_echo, record_histories=2)
    asked = _asked("a")
    provider.generate({}, asked, [])
    asked.append(content.from_text("later"))
    provider.histories.clear()
    provider.histories[0].clear()
    assert _last_words(provider) == ["a"]
    assert len(provider.histories[0]) == 1


@pytest.mark.parametrize("count", [-1, MAX_RECORDED_HISTORIES + 1, True, False, 1.5, "3", None])
def test_a_bad_record_histories_is_refused_typed(count: Any):
    with pytest.raises(AdkError) as refused:
        ScriptedProvider(["x"], record_histories=count)
    assert refused.value.reason == "invalid_record_histories"
    with pytest.raises(AdkError) as refused_fn:
        ScriptedProvider(fn=_echo, record_histories=count)
    assert refused_fn.value.reason == "invalid_record_histories"


def test_the_ceiling_itself_is_accepted_and_bounds_the_record():
    provider = ScriptedProvider(fn=_echo, inline=True, record_histories=MAX_RECORDED_HISTORIES)
    for n in range(MAX_RECORDED_HISTORIES + 5):
        provider.generate({}, _asked(str(n)), [])
    kept = _last_words(provider)
    assert len(kept) == MAX_RECORDED_HISTORIES
    assert kept[0] == "5" and kept[-1] == str(MAX_RECORDED_HISTORIES + 4)


def test_the_old_unbounded_keyword_is_gone():
    """`max_histories=None` meant keep everything: it no longer exists."""
    with pytest.raises(TypeError):
        ScriptedProvider(["x"], max_histories=None)  # type: ignore[call-arg]


@pytest.mark.parametrize("by", ["steps", "fn"])
def test_fresh_keeps_the_setting_and_starts_an_empty_record(by: str):
    recording = (
        ScriptedProvider(["a", "b", "c"], record_histories=2)
        if by == "steps"
        else ScriptedProvider(fn=_echo, record_histories=2)
    )
    recording.generate({}, _asked("first"), [])
    fresh = recording.fresh()
    assert fresh.histories == [] and fresh.calls == 0
    for word in ("x", "y", "z"):
        fresh.generate({}, _asked(word), [])
    assert _last_words(fresh) == ["y", "z"]
    assert _last_words(recording) == ["first"]

    silent = (ScriptedProvider(["a", "b"]) if by == "steps" else ScriptedProvider(fn=_echo)).fresh()
    silent.generate({}, _asked("x"), [])
    assert (silent.calls, silent.histories) == (1, [])


def _async_calls(provider: ScriptedProvider, words: Sequence[str]) -> list[Any]:
    """`agenerate`, `astream` and `astream_content` in turn, one per word, in order."""

    async def scenario() -> list[Any]:
        config = {"provider": provider}
        answers = []
        for index, word in enumerate(words):
            match index % 3:
                case 0:
                    answers.append(await protocol.agenerate(config, _asked(word)))
                case 1:
                    answers.append(await protocol.astream(config, _asked(word), (), _ignore))
                case _:
                    frames: list[Content] = []
                    answers.append(
                        await protocol.astream_content(config, _asked(word), (), frames.append)
                    )
        return answers

    return asyncio.run(scenario())


@pytest.mark.parametrize("kind", ["steps", "fn_in_a_task", "fn_inline"])
def test_the_async_calls_keep_nothing_by_default(kind: str):
    provider = _provider(kind, record_histories=0)
    assert len(_async_calls(provider, ["a", "b", "c", "d"])) == 4
    assert (provider.calls, provider.histories) == (4, [])


@pytest.mark.parametrize("kind", ["steps", "fn_in_a_task", "fn_inline"])
def test_the_async_calls_keep_the_newest_n_when_opted_in(kind: str):
    provider = _provider(kind, record_histories=3)
    _async_calls(provider, ["a", "b", "c", "d", "e"])
    assert provider.calls == 5
    assert _last_words(provider) == ["c", "d", "e"]


def _provider(kind: str, *, record_histories: int) -> ScriptedProvider:
    match kind:
        case "steps":
            return ScriptedProvider(["s"] * 5, record_histories=record_histories)
        case "fn_in_a_task":
            return ScriptedProvider(fn=_echo, record_histories=record_histories)
        case _:
            return ScriptedProvider(fn=_echo, inline=True, record_histories=record_histories)


def test_concurrent_callers_keep_exactly_n():
    """Many threads at once: every call is counted and the record never exceeds `n`."""
    provider = ScriptedProvider(fn=_echo, record_histories=7)

    def caller(index: int) -> None:
        for n in range(50):
            provider.generate({}, _asked(f"{index}-{n}"), [])

    threads = [threading.Thread(target=caller, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert provider.calls == 400
    kept = _last_words(provider)
    assert len(kept) == 7 and len(set(kept)) == 7
