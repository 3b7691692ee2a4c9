"""The Runner: stored events, budgets, timeouts, temp state, text streaming."""

from __future__ import annotations

import time

import pytest

import adk_actors as adk


def always_tool(history, tools):
    return {"tool_calls": [{"name": "ping", "args": {}}]}


@adk.tool
def ping() -> str:
    """Ping."""
    return "pong"


@pytest.fixture
def sessions():
    service = adk.sessions.InMemorySessionService()
    yield service
    service.close()


def kinds(session):
    out = []
    for event in session.events:
        if event.author == "user":
            out.append("user")
        elif event.partial:
            out.append("partial")
        elif event.is_final:
            out.append("final")
        elif event.error is not None:
            out.append("error")
        elif event.content is not None and event.content.role == "tool":
            out.append("tool")
        else:
            out.append("agent")
    return out


def test_single_turn_stores_exactly_user_and_agent(sessions):
    agent = adk.spawn_agent("R1", {"provider": adk.ScriptedProvider(["Hello back"])})
    runner = adk.Runner(agent, "app", sessions)
    assert runner.run("u", "s", "Hello") == "Hello back"
    session = sessions.get_session("app", "u", "s")
    assert kinds(session) == ["user", "final"]
    assert (
        session.events[1].text() == "Hello back"
        and session.events[1].invocation_id == session.events[0].invocation_id
    )


def test_tool_round_events_and_run_async(sessions):
    agent = adk.spawn_agent(
        "R2", {"provider": adk.ScriptedProvider([always_tool(None, None), "done"])}, tools=[ping]
    )
    events = list(adk.Runner(agent, "app", sessions).run_async("u", "s", "go"))
    assert [e.author for e in events] == ["user", "R2", "R2", "R2"]
    assert kinds(sessions.get_session("app", "u", "s")) == ["user", "agent", "tool", "final"]


def test_max_llm_calls_and_max_tool_rounds(sessions):
    agent = adk.spawn_agent(
        "Loopy", {"provider": adk.ScriptedProvider(fn=always_tool)}, tools=[ping]
    )
    with pytest.raises(adk.AdkError) as info:
        adk.Runner(agent, "app", sessions, max_llm_calls=2).run("u", "a", "go")
    assert info.value.reason == "max_llm_calls_exceeded"
    assert kinds(sessions.get_session("app", "u", "a")) == [
        "user",
        "agent",
        "tool",
        "agent",
        "tool",
        "error",
    ]
    with pytest.raises(adk.AdkError) as info:
        adk.Runner(agent, "app", sessions, max_tool_rounds=1).run("u", "b", "go")
    assert info.value.reason == "max_tool_rounds_exceeded"
    assert kinds(sessions.get_session("app", "u", "b")) == [
        "user",
        "agent",
        "tool",
        "agent",
        "error",
    ]


def test_invalid_options_fail_construction(sessions):
    agent = adk.spawn_agent("R3", {"provider": adk.ScriptedProvider(["x"])})
    for options, reason in (
        ({"run_timeout": 0}, "invalid_run_timeout"),
        ({"max_llm_calls": 0}, "invalid_max_llm_calls"),
        ({"max_tool_rounds": -1}, "invalid_max_tool_rounds"),
        ({"streaming_mode": "video"}, "invalid_streaming_mode"),
    ):
        with pytest.raises(adk.AdkError) as info:
            adk.Runner(agent, "app", sessions, **options)
        assert info.value.reason == reason


def test_run_timeout(sessions):
    agent = adk.spawn_agent(
        "Sleepy", {"provider": adk.ScriptedProvider([{"text": "late", "delay": 3}])}
    )
    with pytest.raises(adk.AdkError) as info:
        adk.Runner(agent, "app", sessions, run_timeout=0.3).run("u", "s", "go")
    assert info.value.reason == "timeout"
    assert kinds(sessions.get_session("app", "u", "s")) == ["user", "error"]


def test_temp_state_is_cleared_at_the_end_but_survives_during(sessions):
    seen = {}

    @adk.tool
    def peek(ctx: adk.ToolContext = None) -> str:
        seen.update(ctx.state)
        return "ok"

    sessions.create_session("app", "u", "s", {"temp:token_budget": 5, "plain": 1})
    agent = adk.spawn_agent(
        "Temp",
        {"provider": adk.ScriptedProvider([{"tool_calls": [{"name": "peek", "args": {}}]}, "ok"])},
        tools=[peek],
    )
    adk.Runner(agent, "app", sessions).run("u", "s", "go")
    assert seen == {"temp:token_budget": 5, "plain": 1}
    assert sessions.get_session("app", "u", "s").state == {"plain": 1}


def test_text_streaming_stores_partials_but_the_next_model_call_sees_only_the_final(sessions):
    model = adk.ScriptedProvider(
        [{"stream": ["Erlang ", "streams"]}, "second"], record_histories=10
    )
    agent = adk.spawn_agent("Streamer", {"provider": model})
    runner = adk.Runner(agent, "app", sessions, streaming_mode="text")
    assert runner.run("u", "s", "go") == "Erlang streams"
    session = sessions.get_session("app", "u", "s")
    assert kinds(session) == ["user", "partial", "partial", "final"]
    assert [e.text() for e in session.events] == ["go", "Erlang ", "streams", "Erlang streams"]
    runner.run("u", "s", "again")
    assert [c.text_value() for c in model.histories[1]] == ["go", "Erlang streams", "again"]


def test_provider_failure_is_recorded_and_raised(sessions):
    agent = adk.spawn_agent("Down", {"provider": adk.ScriptedProvider([{"error": "unavailable"}])})
    with pytest.raises(adk.AdkError) as info:
        adk.Runner(agent, "app", sessions).run("u", "s", "go")
    assert info.value.reason == "unavailable"
    error_event = sessions.get_session("app", "u", "s").events[-1]
    assert error_event.error.reason == "unavailable"


def test_lmdb_sessions_work_the_same(tmp_path):
    store = adk.sessions.LmdbSessionService(tmp_path / "s")
    agent = adk.spawn_agent("Durable", {"provider": adk.ScriptedProvider(["stored"])})
    assert adk.Runner(agent, "app", store).run("u", "s", "hi") == "stored"
    assert kinds(store.get_session("app", "u", "s")) == ["user", "final"]
    store.close()


def test_a_thousand_runs_over_a_hundred_sessions_from_many_threads(sessions):
    import threading

    def echo(history, tools):
        return {"text": f"re:{history[-1].text_value()}"}

    agents = [
        adk.spawn_agent(f"Many{n}", {"provider": adk.ScriptedProvider(fn=echo)}) for n in range(10)
    ]
    runners = [adk.Runner(agent, "app", sessions) for agent in agents]
    results: dict[tuple[int, int], str] = {}
    lock = threading.Lock()

    def worker(session_index: int) -> None:
        runner = runners[session_index % 10]
        for turn in range(10):
            answer = runner.run("u", f"s{session_index}", f"{session_index}-{turn}")
            with lock:
                results[(session_index, turn)] = answer

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(results) == 1000
    assert all(answer == f"re:{s}-{t}" for (s, t), answer in results.items())
    for n in range(100):
        texts = [e.text() for e in sessions.get_session("app", "u", f"s{n}").events]
        expected = [text for t in range(10) for text in (f"{n}-{t}", f"re:{n}-{t}")]
        assert texts == expected  # each session's events, exactly and in order


def test_output_key_is_committed_in_the_final_event(sessions):
    agent = adk.spawn_agent(
        "Keyed", {"provider": adk.ScriptedProvider(["42"]), "output_key": "user:last_answer"}
    )
    adk.Runner(agent, "app", sessions).run("u", "s", "answer?")
    session = sessions.get_session("app", "u", "s")
    assert session.events[-1].is_final and session.events[-1].actions.state_delta == {
        "user:last_answer": "42"
    }
    assert sessions.create_session("app", "u", "other").state == {"user:last_answer": "42"}


def test_stream_output_limit_fails_with_no_partial_persisted(sessions):
    model = adk.ScriptedProvider([{"stream": ["x" * 600, "y" * 600]}])
    agent = adk.spawn_agent("Chatty", {"provider": model})
    runner = adk.Runner(agent, "app", sessions, streaming_mode="text", max_stream_output_bytes=1000)
    with pytest.raises(adk.AdkError) as info:
        runner.run("u", "s", "go")
    assert info.value.reason == "stream_output_limit_exceeded"
    assert kinds(sessions.get_session("app", "u", "s")) == ["user", "error"]
    with pytest.raises(adk.AdkError) as info:
        adk.Runner(agent, "app", sessions, max_stream_output_bytes=(64 << 20) + 1)
    assert info.value.reason == "invalid_max_stream_output_bytes"


def test_content_streaming_keeps_media_frames(sessions):
    from providers import content

    image = content.new(
        [content.text("Here:"), content.inline_data("image/png", b"\x89PNG")], role="model"
    )
    model = adk.ScriptedProvider([{"content": image}])
    agent = adk.spawn_agent("Painter", {"provider": model})
    result = adk.Runner(agent, "app", sessions, streaming_mode="content").run("u", "s", "draw")
    assert result == image
    session = sessions.get_session("app", "u", "s")
    assert kinds(session) == ["user", "partial", "final"]
    assert session.events[1].content == image and session.events[2].content == image


def test_run_async_works_with_async_for_and_raises_at_the_end(sessions):
    import asyncio

    agent = adk.spawn_agent("Async", {"provider": "scripted", "script": [{"stream": ["a", "b"]}]})
    runner = adk.Runner(agent, "app", sessions, streaming_mode="text")

    async def collect(session_id):
        return [(e.partial, e.text()) async for e in runner.run_async("u", session_id, "hi")]

    assert asyncio.run(collect("s")) == [(False, "hi"), (True, "a"), (True, "b"), (False, "ab")]
    failing = adk.spawn_agent("AsyncFail", {"provider": "scripted", "script": [{"error": "boom"}]})
    failing_runner = adk.Runner(failing, "app", sessions)

    async def fail():
        return [e async for e in failing_runner.run_async("u", "f", "hi")]

    with pytest.raises(adk.AdkError) as failure:
        asyncio.run(fail())
    assert failure.value.reason == "boom"


def test_leaving_run_async_early_cancels_the_invocation(sessions):
    import threading

    gate = threading.Event()
    entered = threading.Event()

    def slow(history, tools):
        entered.set()
        gate.wait(10)
        return {"text": "late"}

    agent = adk.spawn_agent("Leaver", {"provider": adk.ScriptedProvider(fn=slow)})
    sessions.create_session("app", "u", "s", {"temp:scratch": 1})
    runner = adk.Runner(agent, "app", sessions)
    for event in runner.run_async("u", "s", "hi"):
        assert event.author == "user"
        assert entered.wait(5)
        break
    gate.set()
    session = sessions.get_session("app", "u", "s")
    assert [e.error.reason for e in session.events if e.error] == ["consumer_closed"]
    assert "temp:scratch" not in session.state
    assert not any(e.is_final for e in session.events)


def test_leaving_after_the_worker_finished_still_records_the_end(sessions):
    import threading

    answered = threading.Event()

    def model(history, tools):
        answered.set()
        return {"text": "done"}

    agent = adk.spawn_agent("Finished", {"provider": adk.ScriptedProvider(fn=model)})
    sessions.create_session("app", "u", "s", {"temp:scratch": 1})
    runner = adk.Runner(agent, "app", sessions)
    for _event in runner.run_async("u", "s", "hi"):
        assert answered.wait(5)
        time.sleep(0.5)  # the worker returns meanwhile: leaving now must still record its end
        break
    session = sessions.get_session("app", "u", "s")
    assert [(e.author, e.is_final) for e in session.events] == [("user", False), ("Finished", True)]
    assert "temp:scratch" not in session.state
    internal = sessions.get_session("app", "u", "s", include_internal=True).state
    assert not any(key.startswith("_adk:") for key in internal)  # nothing left open


def test_a_crash_stores_its_kind_never_its_message(sessions):
    def model(history, tools):
        raise RuntimeError("upstream 502: Authorization: Bearer sk-LEAKED-123")

    agent = adk.spawn_agent("Crashy", {"provider": adk.ScriptedProvider(fn=model)})
    runner = adk.Runner(agent, "app", sessions)
    with pytest.raises(adk.AdkError) as failure:
        runner.run("u", "s", "hi")
    assert failure.value.reason == ("invocation_worker_exit", "RuntimeError")
    assert "LEAKED" not in str(sessions.get_session("app", "u", "s").events)


def test_no_step_is_stored_after_the_end(sessions):
    import threading

    release = threading.Event()

    @adk.tool
    def stall() -> str:
        """Stall."""
        release.wait(10)
        return "late"

    model = adk.ScriptedProvider([{"tool_calls": [{"name": "stall", "args": {}}]}, "never"])
    agent = adk.spawn_agent("Stalled", {"provider": model}, tools=[stall])
    runner = adk.Runner(agent, "app", sessions, run_timeout=0.3)
    with pytest.raises(adk.AdkError, match="timeout"):
        runner.run("u", "s", "go")
    ended = sessions.get_session("app", "u", "s").events
    release.set()  # the killed turn finishes its tool now; its step must go nowhere
    time.sleep(0.3)
    assert sessions.get_session("app", "u", "s").events == ended
    assert ended[-1].error.reason == "timeout"
