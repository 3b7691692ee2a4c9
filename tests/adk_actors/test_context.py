"""The Runner's context policy and request envelope budget (behaviours §3)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from structlog.testing import capture_logs

import adk_actors as adk
from adk_actors.events import Event
from adk_actors.runner.context import ContextPolicy
from providers import content
from providers.content import Content, FunctionCallPart, FunctionResponsePart
from supervision import self_pid
from supervision.tasks import Task
from tests.helpers import wait_until

WORD = "w" * 100  # every past message is one 100-character word


@pytest.fixture
def sessions():
    service = adk.sessions.InMemorySessionService()
    yield service
    service.close()


def user(invocation: str, text: str, at: float = 0.0) -> Event:
    event = Event.new("user", invocation, content.from_text(text))
    return event if not at else _at(event, at)


def _at(event: Event, timestamp: float) -> Event:
    import msgspec

    return msgspec.structs.replace(event, timestamp=timestamp)


def answer(invocation: str, text: str, at: float = 0.0) -> Event:
    event = Event.new("Agent", invocation, content.from_text(text, role="model"), is_final=True)
    return event if not at else _at(event, at)


def exchange(invocation: str, call_id: str, secret: str = "") -> list[Event]:
    args = {"city": "Oslo"} | ({"api_key": secret} if secret else {})
    call = Content("model", (FunctionCallPart("weather", args, call_id),))
    response = {"temp": 3} | ({"access_token": secret} if secret else {})
    reply = Content("tool", (FunctionResponsePart("weather", response, call_id),))
    return [Event.new("Agent", invocation, call), Event.new("Agent", invocation, reply)]


def seed(sessions, events, session_id="s"):
    sessions.create_session("app", "u", session_id)
    for event in events:
        sessions.add_event("app", "u", session_id, event)


def runner_with(sessions, policy, script=None, name="Agent"):
    model = adk.ScriptedProvider(script or ["ok"], record_histories=10)
    agent = adk.spawn_agent(name, {"provider": model})
    return adk.Runner(agent, "app", sessions, context_policy=policy), model


def seen_texts(model, call=0):
    return [c.text_value() for c in model.histories[call]]


def test_unknown_and_invalid_options_fail_construction(sessions):
    agent = adk.spawn_agent("Agent", {"provider": adk.ScriptedProvider(["ok"])})
    cases = [
        ({"max_bytes": 10, "colour": 1, "size": 2}, ("unknown_keys", ["colour", "size"])),
        ({"overflow": "drop"}, "overflow"),
        ({"overflow": "compress"}, "compressor"),
        ({"max_bytes": 0}, "max_bytes"),
        ({"max_input_events": 10**9}, "max_input_events"),
        ({"content_types": ["text", "video"]}, "content_types"),
        ({"authors": "user"}, "authors"),
    ]
    for policy, detail in cases:
        with pytest.raises(adk.AdkError) as failure:
            adk.Runner(agent, "app", sessions, context_policy=policy)
        assert failure.value.reason == ("invalid_context_policy", detail), policy


@pytest.mark.parametrize(
    ("policy", "key"),
    [
        ({"max_bytes": True}, "max_bytes"),
        ({"max_tokens": 1.5}, "max_tokens"),
        ({"max_request_bytes": 0}, "max_request_bytes"),
        ({"max_request_tokens": (1 << 30) + 1}, "max_request_tokens"),
        ({"since": -1}, "since"),
        ({"until": True}, "until"),
        ({"include_partial": 1}, "include_partial"),
        ({"final_only": "yes"}, "final_only"),
        ({"exclude_authors": ["a", ""]}, "exclude_authors"),
        ({"invocations": [1]}, "invocations"),
        ({"compressor": "summarize"}, "compressor"),
        (
            {"overflow": "compress", "compressor": lambda e: e, "compressor_timeout": 0},
            "compressor_timeout",
        ),
        ({"max_compressor_events": 0}, "max_compressor_events"),
        ({"max_input_events": 0}, "max_input_events"),
    ],
)
def test_compile_names_the_bad_key_without_echoing_it(policy: dict[str, Any], key: str) -> None:
    with pytest.raises(adk.AdkError) as failure:
        ContextPolicy.compile(policy)
    assert failure.value.reason == ("invalid_context_policy", key)
    assert f"'{key}" in failure.value.detail


def test_compile_defaults_and_normalized_values() -> None:
    assert ContextPolicy.compile(None) == ContextPolicy() == ContextPolicy.compile({})
    policy = ContextPolicy.compile(
        {"authors": ("user", "Agent"), "content_types": {"text"}, "since": 1, "max_bytes": 10}
    )
    assert policy.authors == frozenset({"user", "Agent"})
    assert policy.content_types == frozenset({"text"})
    assert policy.since == 1.0 and isinstance(policy.since, float)
    assert ContextPolicy.compile(policy) is policy
    with pytest.raises(adk.AdkError) as failure:
        ContextPolicy.compile(["max_bytes"])  # type: ignore[arg-type]
    assert failure.value.reason == "invalid_context_policy"


def test_overflow_error_fails_before_anything_is_stored(sessions):
    seed(sessions, [user("i1", WORD), answer("i1", WORD)])
    runner, model = runner_with(sessions, {"max_bytes": 150, "overflow": "error"})
    with pytest.raises(adk.AdkError) as failure:
        runner.run("u", "s", "now")
    reason, details = failure.value.reason
    assert reason == "context_budget_exceeded" and details["max_bytes"] == 150
    assert details["bytes"] > 150 and model.calls == 0
    assert len(sessions.get_session("app", "u", "s").events) == 2


def test_truncate_keeps_the_newest_exchanges_that_fit_exactly(sessions):
    past = [user(f"i{n}", f"{n}" + WORD[1:]) for n in range(5)]
    seed(sessions, past)
    size = len(content.encode(past[0].content))
    current = len(content.encode(content.from_text("now")))
    runner, model = runner_with(
        sessions, {"max_bytes": 2 * size + current, "overflow": "truncate"}, ["a", "b"]
    )
    with capture_logs() as logs:
        runner.run("u", "s", "now")
    assert seen_texts(model) == [past[3].text(), past[4].text(), "now"]  # a limit equal passes
    (build,) = [log for log in logs if log["event"] == "adk.context.build"]
    assert build["dropped_events"] == 3 and build["overflow_action"] == "truncated"
    runner.context_policy = ContextPolicy.compile(
        {"max_bytes": 2 * size + current - 1, "overflow": "truncate"}
    )
    seed(sessions, past, "s2")
    runner.run("u", "s2", "now")  # one byte less: one exchange fewer
    assert seen_texts(model, 1) == [past[4].text(), "now"]


def test_truncation_never_splits_a_call_from_its_response(sessions):
    events = [user("i1", WORD), *exchange("i1", "c1"), answer("i1", "done")]
    seed(sessions, events)
    whole = sum(len(content.encode(e.content)) for e in events[1:])
    current = len(content.encode(content.from_text("now")))
    tail = len(content.encode(events[3].content)) + len(content.encode(events[2].content))
    runner, model = runner_with(
        sessions, {"max_bytes": current + tail, "overflow": "truncate"}, ["ok", "ok"]
    )
    runner.run("u", "s", "now")
    assert seen_texts(model) == ["done", "now"]  # the response alone would fit; it is not cut
    runner.context_policy = ContextPolicy.compile(
        {"max_bytes": current + whole, "overflow": "truncate"}
    )
    seed(sessions, events, "s2")
    runner.run("u", "s2", "now")
    roles = [c.role for c in model.histories[1]]
    assert roles[:3] == ["model", "tool", "model"]  # the whole exchange, with its answer


def test_truncate_fails_when_the_current_input_alone_is_too_big(sessions):
    runner, model = runner_with(sessions, {"max_tokens": 2, "overflow": "truncate"})
    with pytest.raises(adk.AdkError) as failure:
        runner.run("u", "s", "this input is longer than eight bytes")
    assert failure.value.reason[0] == "context_budget_exceeded" and model.calls == 0


def test_filters_drop_whole_exchanges(sessions):
    events = [
        user("i1", "early", at=1000.0),
        *exchange("i1", "c1"),
        answer("i1", "one", at=time.time()),
        user("i2", "second"),
        answer("i2", "two"),
    ]
    seed(sessions, events)
    runner, model = runner_with(sessions, {"content_types": ["text"]}, ["ok"] * 6)
    runner.run("u", "s", "now")
    assert all(c.role != "tool" for c in model.histories[0])  # the response went with its call
    assert seen_texts(model)[0] == "early"

    runner.context_policy = ContextPolicy.compile({"since": 2000.0})
    runner.run("u", "s", "now")
    assert "early" not in seen_texts(model, 1)

    runner.context_policy = ContextPolicy.compile({"exclude_invocations": ["i1"]})
    runner.run("u", "s", "now")
    assert seen_texts(model, 2)[:2] == ["second", "two"]

    runner.context_policy = ContextPolicy.compile({"final_only": True, "authors": ["Agent"]})
    runner.run("u", "s", "now")
    assert seen_texts(model, 3)[:2] == ["one", "two"]  # the current input is always kept
    assert seen_texts(model, 3)[-1] == "now"


def test_too_many_input_events(sessions):
    seed(sessions, [user(f"i{n}", "x") for n in range(5)])
    runner, _model = runner_with(sessions, {"max_input_events": 5})
    with pytest.raises(adk.AdkError) as failure:
        runner.run("u", "s", "now")
    assert failure.value.reason == ("context_input_too_many_events", 6)


def summary_compressor(events):
    """Replace everything before the current event with one summary."""
    current = events[-1]
    summary = Event.new("Agent", "summary", content.from_text("SUMMARY", role="model"))
    return [_at(summary, current.timestamp - 1), current]


def test_compress_uses_checked_compressor_output(sessions):
    seed(sessions, [user(f"i{n}", WORD) for n in range(4)])
    policy = {"max_bytes": 200, "overflow": "compress", "compressor": summary_compressor}
    runner, model = runner_with(sessions, policy)
    runner.run("u", "s", "now")
    assert seen_texts(model) == ["SUMMARY", "now"]


@pytest.mark.parametrize(
    ("compressor", "reason"),
    [
        (lambda events: [events[0], events[0], events[-1]], "duplicate_event_id"),
        (lambda events: [events[1], events[0], events[-1]], "non_chronological_events"),
        (lambda events: list(events[:-1]), "current_event_missing"),
        (
            lambda events: [_at(events[0], events[0].timestamp - 5), events[-1]],
            "retained_event_modified",
        ),
        (lambda events: [events[1], events[-1]], "partial_tool_exchange"),
        (lambda events: "not events", "invalid_compressor_output"),
        (lambda events: 1 / 0, "compressor_crashed"),
    ],
)
def test_compressor_output_is_checked(sessions, compressor, reason):
    seed(sessions, [user("i1", WORD), *exchange("i1", "c1"), answer("i1", WORD)])
    policy = {"max_bytes": 100, "overflow": "compress", "compressor": compressor}
    runner, model = runner_with(sessions, policy)
    with pytest.raises(adk.AdkError) as failure:
        runner.run("u", "s", "now")
    assert failure.value.reason == reason and model.calls == 0


def test_a_slow_compressor_is_killed_at_its_timeout(sessions):
    seed(sessions, [user("i1", WORD)])
    release = threading.Event()
    compressor_pids = []

    def slow(events):
        compressor_pids.append(self_pid())
        release.wait(10)
        return list(events)

    policy = {
        "max_bytes": 50,
        "overflow": "compress",
        "compressor": slow,
        "compressor_timeout": 0.2,
    }
    runner, _model = runner_with(sessions, policy)
    with pytest.raises(adk.AdkError) as failure:
        runner.run("u", "s", "now")
    assert failure.value.reason == "compressor_timeout"
    wait_until(lambda: not compressor_pids[0].is_alive())
    release.set()


def test_the_compressor_dies_with_its_owner(sessions):
    seed(sessions, [user("i1", WORD)])
    started = threading.Event()
    release = threading.Event()
    compressor_pids = []

    def blocking(events):
        compressor_pids.append(self_pid())
        started.set()
        release.wait(10)
        return list(events)

    policy = {"max_bytes": 50, "overflow": "compress", "compressor": blocking}
    runner, _model = runner_with(sessions, policy)
    owner = Task.start(runner.run, "u", "s", "now")
    assert started.wait(5)
    owner.kill()
    wait_until(lambda: not compressor_pids[0].is_alive())
    release.set()


def test_request_envelope_budget_fails_before_provider_io(sessions):
    tools_model = adk.ScriptedProvider(["never"])

    @adk.tool
    def lookup(city: str) -> str:
        """Look a city up in a very long description that takes room in the envelope."""
        return city

    agent = adk.spawn_agent(
        "Enveloped", {"provider": tools_model, "instructions": "I" * 300}, tools=[lookup]
    )
    runner = adk.Runner(agent, "app", sessions, context_policy={"max_request_bytes": 300})
    with capture_logs() as logs, pytest.raises(adk.AdkError) as failure:
        runner.run("u", "s", "hi")
    reason, details = failure.value.reason
    assert reason == "request_context_budget_exceeded" and details["bytes"] > 300
    assert tools_model.calls == 0  # the provider was never called
    (envelope,) = [log for log in logs if log["event"] == "adk.context.envelope"]
    assert "I" * 300 not in str(envelope) and "hi" not in str(envelope.values())
    roomy = adk.Runner(agent, "app", sessions, context_policy={"max_request_tokens": 10_000})
    assert roomy.run("u", "s2", "hi") == "never"


def test_telemetry_is_content_free_and_deterministic(sessions):
    seed(sessions, [user("i1", "private words"), answer("i1", "more private words")])
    runner, _model = runner_with(sessions, {"max_bytes": 10_000}, ["ok", "ok"])
    with capture_logs() as logs:
        runner.run("u", "s", "secret question")
    (build,) = [log for log in logs if log["event"] == "adk.context.build"]
    assert "private" not in str(build) and "secret" not in str(build)
    assert build["selected_events"] == 3 and len(build["fingerprint"]) == 16


def test_history_is_canonical_and_secret_pruned(sessions):
    two_parts = Content("model", (content.text("Hello, "), content.text("world")))
    seed(
        sessions,
        [
            user("i1", "q"),
            *exchange("i1", "c1", secret="sk-live-123"),
            Event.new("A", "i1", two_parts),
        ],
    )
    runner, model = runner_with(sessions, None)
    runner.run("u", "s", "next")
    history = model.histories[0]
    assert "sk-live-123" not in str(history)
    call = history[1].parts[0]
    assert call.args == {"city": "Oslo"} and history[2].parts[0].response == {"temp": 3}
    assert [p.text for p in history[3].parts] == ["Hello, world"]
    stored = sessions.get_session("app", "u", "s").events[1]
    # stored events never hold a credential value (Event.new redacts calls and responses)
    assert stored.content.parts[0].args["api_key"] == "[redacted]"
