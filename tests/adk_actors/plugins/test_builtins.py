"""The four built-in plugins, on their own and in a Runner."""

from __future__ import annotations

import json
import re

import adk_actors as adk
from adk_actors import plugins as pl
from adk_actors.plugins import PhaseKind
from providers import content as content_model


def text(role, value):
    return content_model.from_text(value, role=role)


def test_global_instruction_amends_system_message():
    """Ported: adk_plugin_builtin_test global_instruction_amends_system_message_test."""
    pipeline = pl.Pipeline.compile([pl.global_instruction("global", failure_policy="closed")])
    result = pipeline.run("before_model", {}, [text("system", "local"), text("user", "hello")])
    assert result.kind is PhaseKind.AMEND
    assert result.value[0].role == "system" and result.value[0].text_value() == "global\n\nlocal"
    result = pipeline.run("before_model", {}, [text("user", "hello")])
    assert [(item.role, item.text_value()) for item in result.value] == [
        ("system", "global"),
        ("user", "hello"),
    ]
    appended = pl.Pipeline.compile([pl.global_instruction("global", position="append")])
    result = appended.run("before_model", {}, [text("system", "local"), text("user", "hi")])
    assert result.value[0].text_value() == "local\n\nglobal"


def test_context_filter_preserves_system_and_latest_user():
    """Ported: adk_plugin_builtin_test context_filter_preserves_system_and_latest_user_test."""
    contents = [
        text("system", "system"),
        text("user", "old"),
        text("model", "answer"),
        text("user", "latest"),
    ]
    pipeline = pl.Pipeline.compile(
        [pl.context_filter(max_messages=1, include_roles=["model"], failure_policy="closed")]
    )
    result = pipeline.run("before_model", {}, contents)
    assert [item.text_value() for item in result.value] == ["system", "answer", "latest"]
    none_kept = pl.Pipeline.compile([pl.context_filter(max_messages=0)])
    result = none_kept.run("before_model", {}, contents)
    assert [item.text_value() for item in result.value] == ["system", "latest"]


def test_context_filter_keeps_calls_with_their_responses():
    call = content_model.new([content_model.function_call("ping", {}, id="c1")], role="model")
    response = content_model.new(
        [content_model.function_response("ping", {"result": "pong"}, id="c1")], role="tool"
    )
    contents = [text("user", "old"), call, response, text("user", "latest")]
    pipeline = pl.Pipeline.compile([pl.context_filter(max_messages=1)])
    result = pipeline.run("before_model", {}, contents)
    assert [item.role for item in result.value] == ["user"]  # the pair does not fit in 1
    pipeline = pl.Pipeline.compile([pl.context_filter(max_messages=2)])
    result = pipeline.run("before_model", {}, contents)
    assert [item.role for item in result.value] == ["model", "tool", "user"]


def test_metadata_logger_emits_no_content():
    """Ported: adk_plugin_builtin_test metadata_logger_emits_no_content_test and
    metadata_logger_hook_and_value_type_contract_test."""
    records = []
    pipeline = pl.Pipeline.compile([pl.metadata_logger(records.append)])
    secret = "private content AIzaSECRET"
    result = pipeline.run("before_run", {"invocation_id": "run-1", "api_key": "AIzaSECRET"}, secret)
    assert result.kind is PhaseKind.CONTINUE and result.value == secret
    pipeline.run("before_model", {"agent_name": "A"}, [text("user", secret)])
    pipeline.run("after_tool", {"tool": "lookup"}, {"result": secret})
    dumped = json.dumps(records)
    assert "private" not in dumped and "AIza" not in dumped
    assert records[0] == {
        "hook": "before_run",
        "value_type": "text",
        "size": None,
        "invocation_id": "run-1",
    }
    assert records[1]["value_type"] == "list" and records[1]["size"] == 1
    assert records[2]["value_type"] == "map" and records[2]["tool"] == "lookup"
    assert pl.MetadataLogger().implemented_hooks() == frozenset(pl.HOOKS) - {"on_error"}


def test_reflect_retry_returns_bounded_guidance():
    """Ported: adk_plugin_builtin_test reflect_retry_returns_bounded_guidance_test."""
    pipeline = pl.Pipeline.compile(
        [pl.reflect_retry(max_attempts=2, guidance="fix arguments", failure_policy="closed")]
    )
    failure = {
        "success": False,
        "error": {"component": "tool", "operation": "lookup", "reason": "tool_failed"},
        "detail": "secret body",
    }
    result = pipeline.run("on_tool_error", {"retry_attempt": 0}, failure)
    assert result.kind is PhaseKind.RETURN
    retry = result.value["adk_retry"]
    assert retry["retryable"] is True and retry["attempt"] == 1 and retry["max_attempts"] == 2
    assert retry["guidance"] == "fix arguments"
    assert "secret body" not in json.dumps(result.value)
    assert pipeline.run("on_tool_error", {"retry_attempt": 2}, failure).kind is PhaseKind.CONTINUE


def test_reflect_retry_bounds_and_sanitises_the_error_tags():
    """Review L4: the failure's tags reaching the model are bounded identifiers."""
    failure = {
        "success": False,
        "error": {
            "component": "tool",
            "operation": "x" * 100_000,
            "reason": "boom: the prompt said 'my medical history'\n" + "y" * 5000,
        },
    }
    pipeline = pl.Pipeline.compile([pl.reflect_retry(failure_policy="closed")])
    error = pipeline.run("on_tool_error", {}, failure).value["adk_retry"]["error"]
    assert len(json.dumps(error)) <= pl.builtins.DEFAULT_ERROR_CHARS + 100
    assert error["component"] == "tool"
    assert all(re.fullmatch(r"[A-Za-z0-9_.:/-]+", item) for item in error.values())
    small = pl.Pipeline.compile([pl.reflect_retry(max_error_chars=30, failure_policy="closed")])
    error = small.run("on_tool_error", {}, failure).value["adk_retry"]["error"]
    assert max(len(item) for item in error.values()) <= 10
    ceiling = pl.builtins.MAX_ERROR_CHARS + 1
    too_big = pl.Pipeline.compile(
        [pl.reflect_retry(max_error_chars=ceiling, failure_policy="closed")]
    )
    outcome = too_big.run("on_tool_error", {}, failure)
    assert outcome.kind is PhaseKind.ERROR


def test_reflect_retry_in_a_runner_tells_the_model_once_per_tool():
    @adk.tool
    def flaky(city: str) -> dict:
        """Always fails."""
        raise RuntimeError("backend down, token=abc")

    model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "flaky", "args": {"city": "a"}}]},
            {"tool_calls": [{"name": "flaky", "args": {"city": "b"}}]},
            {"text": "gave up"},
        ],
        record_histories=10,
    )
    agent = adk.spawn_agent("Retrying", {"provider": model}, tools=[flaky])
    sessions = adk.sessions.InMemorySessionService()
    runner = adk.Runner(agent, "app", sessions, plugins=[pl.reflect_retry(max_attempts=1)])
    assert runner.run("u", "s", "go") == "gave up"
    first = model.histories[1][-1].parts[0].response
    second = model.histories[2][-1].parts[0].response
    assert first["adk_retry"]["attempt"] == 1 and first["success"] is False
    assert "adk_retry" not in second and second["success"] is False
    assert "backend down" not in json.dumps(first)
