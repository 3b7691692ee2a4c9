"""Span attributes: the pinned gen-AI mapping, metadata only."""

from __future__ import annotations

import adk_actors as adk
from adk_actors.observability import semconv

SECRETS = (
    "PROMPT-MARKER",
    "OUTPUT-MARKER",
    "ARGUMENT-MARKER",
    "RESULT-MARKER",
    "AIzaSyCREDENTIALMARKER0123456789abcdefg",
)


def test_builders_use_the_pinned_keys():
    assert semconv.MAPPING_VERSION == "gen-ai-semconv-development-2026-07-14"
    assert semconv.span_name(semconv.CHAT, "gemini-3") == "chat gemini-3"
    attrs = semconv.invocation("Weather", invocation_id="inv-1", session_id="s-1")
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "Weather"
    assert attrs["adk.invocation.id"] == "inv-1" and attrs["gen_ai.conversation.id"] == "s-1"
    assert "adk.run.id" not in attrs  # None is left out
    # each fact once (issue 16): no adk.* copy of a gen-AI key, no version on the span
    assert set(attrs) == {
        "gen_ai.operation.name",
        "gen_ai.agent.name",
        "adk.invocation.id",
        "gen_ai.conversation.id",
    }
    model = semconv.model_call("Weather", "gemini", "gemini-3-flash")
    assert model["gen_ai.operation.name"] == "chat"
    assert model["gen_ai.provider.name"] == "gemini"
    assert model["gen_ai.request.model"] == "gemini-3-flash"
    assert set(model) == {
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.agent.name",
    }
    tool = semconv.tool_call("Weather", "get_weather", "call-1")
    assert tool["gen_ai.operation.name"] == "execute_tool"
    assert tool["gen_ai.tool.name"] == "get_weather"
    assert tool["gen_ai.tool.call.id"] == "call-1"
    assert set(tool) == {
        "gen_ai.operation.name",
        "gen_ai.tool.name",
        "gen_ai.tool.call.id",
        "gen_ai.tool.type",
        "gen_ai.agent.name",
    }
    assert semconv.SCOPE_ATTRIBUTES == {"adk.semconv.version": semconv.MAPPING_VERSION}
    assert semconv.usage(12, 3) == {
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 3,
    }
    assert semconv.usage(-1, "3") == {}
    assert semconv.error(("tool_failed", "detail with PROMPT-MARKER")) == {
        "error.type": "tool_failed"
    }
    assert semconv.error(ValueError("RESULT-MARKER")) == {"error.type": "ValueError"}


def test_checked_keeps_only_short_scalars():
    attrs = semconv.checked(
        {
            "ok": "x" * 1000,
            "n": 3,
            "f": 1.5,
            "b": True,
            "dict": {"prompt": "PROMPT-MARKER"},
            "list": ["ARGUMENT-MARKER"],
            "bytes": b"RESULT-MARKER",
            "none": None,
        }
    )
    assert set(attrs) == {"ok", "n", "f", "b"}
    assert len(attrs["ok"]) == semconv.MAX_VALUE_CHARS
    many = semconv.checked({f"k{n}": n for n in range(100)})
    assert len(many) == semconv.MAX_ATTRIBUTES


def test_no_prompt_output_argument_result_or_credential_reaches_a_span(spans):
    @adk.tool
    def lookup(query: str) -> dict:
        """Look something up."""
        return {"answer": "RESULT-MARKER", "key": SECRETS[4]}

    def model(history, tools):
        if history[-1].role == "tool":
            return {"text": "OUTPUT-MARKER " + SECRETS[4]}
        return {"tool_calls": [{"name": "lookup", "args": {"query": "ARGUMENT-MARKER"}}]}

    agent = adk.spawn_agent(
        "NoContent", {"provider": adk.ScriptedProvider(fn=model)}, tools=[lookup]
    )
    runner = adk.Runner(agent, "obs", adk.sessions.InMemorySessionService())
    output = runner.run("u", "nc", "PROMPT-MARKER " + SECRETS[4])
    assert "OUTPUT-MARKER" in output
    finished = spans.get_finished_spans()
    assert any(s.attributes.get("gen_ai.agent.name") == "NoContent" for s in finished)
    for span in finished:
        values = [str(v) for v in span.attributes.values()] + [span.name]
        values += [str(v) for event in span.events for v in event.attributes.values()]
        for value in values:
            for secret in SECRETS:
                assert secret not in value, (span.name, value)


def test_provider_and_model_from_an_agents_config():
    class Named:
        name = "gemini"

    attrs = semconv.model_call_from_config(
        "A", {"provider": Named(), "model": "gemini-3-flash", "api_key": "AIzaSySECRET"}
    )
    assert attrs["gen_ai.provider.name"] == "gemini"
    assert attrs["gen_ai.request.model"] == "gemini-3-flash"
    assert "AIzaSySECRET" not in str(attrs)
    scripted = semconv.model_call_from_config("A", {"provider": adk.ScriptedProvider(["x"])})
    assert scripted["gen_ai.provider.name"] == "scripted"
    assert "gen_ai.request.model" not in scripted
    assert semconv.provider_name("vertex") == "vertex"
