"""A failure's message never reaches a span: only `error.type` and an ERROR status."""

from __future__ import annotations

import adk_actors as adk
from providers.errors import AdkError
from tests.adk_actors.observability.spans import kind

SECRET = "sk-live-SECRET123"
PROMPT = "my medical history"
MESSAGE = f"provider said: invalid key {SECRET} for prompt '{PROMPT}'"


def _texts(span) -> list[str]:
    """Everything a span exports as text: attributes, events, links, status."""
    out = [span.name, str(span.status.description or "")]
    out += [f"{k}={v}" for k, v in span.attributes.items()]
    for event in span.events:
        out.append(event.name)
        out += [f"{k}={v}" for k, v in event.attributes.items()]
    for link in span.links:
        out += [f"{k}={v}" for k, v in (link.attributes or {}).items()]
    return out


def _assert_no_content(found) -> None:
    assert found
    for span in found:
        assert not span.events, (span.name, [e.name for e in span.events])
        assert span.status.description is None
        for text in _texts(span):
            assert SECRET not in text and PROMPT not in text, (span.name, text)


def _theirs(spans, agent: str):
    return [s for s in spans.get_finished_spans() if s.attributes.get("gen_ai.agent.name") == agent]


def _run(agent) -> object:
    runner = adk.Runner(agent, "obs", adk.sessions.InMemorySessionService())
    return adk.runs.wait(adk.runs.start(runner, "u", "s", f"hello, {PROMPT}"), 10)


def test_a_model_exception_leaves_only_its_class_in_the_spans(spans):
    def model(history, tools):
        raise RuntimeError(MESSAGE)

    _run(adk.spawn_agent("LeakyModel", {"provider": adk.ScriptedProvider(fn=model)}))
    ours = _theirs(spans, "LeakyModel")
    _assert_no_content(ours)
    failed = {kind(s): s for s in ours}
    for operation in ("chat", "invoke_agent"):
        span = failed[operation]
        assert span.status.status_code.name == "ERROR"
        assert span.attributes["error.type"] == "RuntimeError"


def test_a_model_adk_error_gives_its_reason_code(spans):
    def model(history, tools):
        raise AdkError(("provider_auth_failed", "401"), MESSAGE)

    _run(adk.spawn_agent("LeakyReason", {"provider": adk.ScriptedProvider(fn=model)}))
    ours = _theirs(spans, "LeakyReason")
    _assert_no_content(ours)
    chat = next(s for s in ours if kind(s) == "chat")
    assert chat.status.status_code.name == "ERROR"
    assert chat.attributes["error.type"] == "provider_auth_failed"


@adk.tool
def leaky_lookup(query: str) -> dict:
    """Looks something up, and fails saying too much."""
    raise RuntimeError(f"{MESSAGE}; query={query}")


@adk.tool
async def leaky_async_lookup(query: str) -> dict:
    """The async twin."""
    raise ValueError(f"{MESSAGE}; query={query}")


def _tool_model(tool: str):
    def model(history, tools):
        if history[-1].role == "tool":
            return {"text": "done"}
        return {"tool_calls": [{"name": tool, "args": {"query": PROMPT}}]}

    return model


def test_a_tool_exception_leaves_only_its_class_in_the_spans(spans):
    for name, tool, error in (
        ("LeakyTool", leaky_lookup, "RuntimeError"),
        ("LeakyAsyncTool", leaky_async_lookup, "ValueError"),
    ):
        agent = adk.spawn_agent(
            name, {"provider": adk.ScriptedProvider(fn=_tool_model(tool.name))}, tools=[tool]
        )
        assert getattr(_run(agent), "output", None) == "done"
        ours = _theirs(spans, name)
        _assert_no_content(ours)
        executed = next(s for s in ours if kind(s) == "execute_tool")
        assert executed.attributes["adk.tool.success"] is False
        assert executed.status.status_code.name == "ERROR"
        assert executed.attributes["error.type"] == error
        turn = next(s for s in ours if kind(s) == "invoke_agent")
        assert turn.status.status_code.name == "UNSET"  # the turn itself went on
