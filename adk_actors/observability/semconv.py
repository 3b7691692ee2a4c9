"""Span names and attributes: the gen-AI semantic conventions, metadata only.

The mapping is pinned to `MAPPING_VERSION`, said once on the runtime tracer's
instrumentation scope (`SCOPE_ATTRIBUTES`), not on every span. Spans are named
``"{operation} {agent|model|tool}"`` with `gen_ai.operation.name` one of
``invoke_agent`` (an invocation or an agent turn), ``chat`` (one model call) and
``execute_tool`` (one tool call). Every builder here takes identifiers, names, counts
and durations only: there is no parameter for a prompt, an output, a tool's arguments
or result, media, or a credential, and `checked` drops any value that is not a short
scalar, so nothing but metadata can reach a span.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from opentelemetry.util.types import AttributeValue

MAPPING_VERSION: Final = "gen-ai-semconv-development-2026-07-14"

INVOKE_AGENT: Final = "invoke_agent"
CHAT: Final = "chat"
EXECUTE_TOOL: Final = "execute_tool"

# gen-AI attribute keys (the pinned mapping)
OPERATION_NAME: Final = "gen_ai.operation.name"
PROVIDER_NAME: Final = "gen_ai.provider.name"
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_MODEL: Final = "gen_ai.response.model"
AGENT_NAME: Final = "gen_ai.agent.name"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
ERROR_TYPE: Final = "error.type"

# the runtime's own keys: only what no gen-AI key already says (the agent's name is
# `gen_ai.agent.name`, the tool's `gen_ai.tool.name`, the session's
# `gen_ai.conversation.id`, a duration the span's own start and end times)
ADK_INVOCATION_ID: Final = "adk.invocation.id"
ADK_RUN_ID: Final = "adk.run.id"
ADK_TOOL_SUCCESS: Final = "adk.tool.success"
ADK_OUTCOME: Final = "adk.outcome"
ADK_SEMCONV: Final = "adk.semconv.version"

SCOPE_ATTRIBUTES: Final[Mapping[str, AttributeValue]] = {ADK_SEMCONV: MAPPING_VERSION}
"""The runtime tracer's instrumentation-scope attributes: the mapping version is said
once, on the scope every runtime span is exported under, not on each span."""

MAX_VALUE_CHARS: Final = 256
MAX_ATTRIBUTES: Final = 32
_NUMBERS: Final = (bool, int, float)


def span_name(operation: str, target: str) -> str:
    """``"{operation} {target}"`` (the agent, model or tool name, bounded)."""
    return f"{operation} {str(target)[:MAX_VALUE_CHARS]}"


def checked(attributes: Mapping[str, object]) -> dict[str, AttributeValue]:
    """Only scalar metadata: None is dropped, a string is cut to `MAX_VALUE_CHARS`,
    and anything else (a mapping, a list, bytes, an object) is dropped, so a payload
    can never become an attribute. At most `MAX_ATTRIBUTES` keys."""
    out: dict[str, AttributeValue] = {}
    for key, value in attributes.items():
        if type(value) is str:  # the common case first: every span is built through here
            out[key] = value if len(value) <= MAX_VALUE_CHARS else value[:MAX_VALUE_CHARS]
        elif isinstance(value, _NUMBERS):
            out[key] = value
        elif isinstance(value, str):
            out[key] = value[:MAX_VALUE_CHARS]
        else:
            continue
        if len(out) >= MAX_ATTRIBUTES:
            break
    return out


def _put(out: dict[str, AttributeValue], key: str, value: object) -> None:
    """``out[key] = value`` as `checked` keeps it: a string cut to `MAX_VALUE_CHARS`, a
    number or bool as it is, anything else (None, a payload) left out."""
    if type(value) is str:
        out[key] = value if len(value) <= MAX_VALUE_CHARS else value[:MAX_VALUE_CHARS]
    elif isinstance(value, _NUMBERS):
        out[key] = value
    elif isinstance(value, str):
        out[key] = value[:MAX_VALUE_CHARS]


def invocation(
    agent: str,
    *,
    invocation_id: str | None = None,
    session_id: str | None = None,
    run_id: str | None = None,
) -> dict[str, AttributeValue]:
    """An ``invoke_agent`` span: one invocation (or one agent's turn in it).

    The builders put each value as `checked` would (same keys, order and values) without
    building a mapping to check first: they run for every span the runtime records."""
    out: dict[str, AttributeValue] = {OPERATION_NAME: INVOKE_AGENT}
    _put(out, AGENT_NAME, agent)
    _put(out, ADK_INVOCATION_ID, invocation_id)
    _put(out, CONVERSATION_ID, session_id)
    _put(out, ADK_RUN_ID, run_id)
    return out


def provider_name(provider: object) -> str:
    """`gen_ai.provider.name` for an agent's configured provider: a name as given,
    else the provider object's ``name`` (a string), else its class name, lower case."""
    if isinstance(provider, str):
        return provider[:MAX_VALUE_CHARS]
    name = getattr(provider, "name", None)
    if isinstance(name, str) and name:
        return name[:MAX_VALUE_CHARS]
    return type(provider).__name__.lower()[:MAX_VALUE_CHARS]


def model_call_from_config(agent: str, config: Mapping[str, object]) -> dict[str, AttributeValue]:
    """`model_call` from an agent's provider config (its ``provider`` and ``model``
    keys only: nothing else of the config is read)."""
    model = config.get("model")
    return model_call(
        agent, provider_name(config.get("provider")), model if isinstance(model, str) else None
    )


def model_call(agent: str, provider: str | None, model: str | None) -> dict[str, AttributeValue]:
    """A ``chat`` span's attributes known before the call."""
    out: dict[str, AttributeValue] = {OPERATION_NAME: CHAT}
    _put(out, PROVIDER_NAME, provider)
    _put(out, REQUEST_MODEL, model)
    _put(out, AGENT_NAME, agent)
    return out


def usage(input_tokens: object, output_tokens: object) -> dict[str, AttributeValue]:
    """Token counts (non-negative ints; anything else is left out)."""
    out: dict[str, AttributeValue] = {}
    for key, value in ((INPUT_TOKENS, input_tokens), (OUTPUT_TOKENS, output_tokens)):
        if type(value) is int and value >= 0:
            out[key] = value
    return out


def tool_call(agent: str, tool: str, call_id: str | None = None) -> dict[str, AttributeValue]:
    """An ``execute_tool`` span's attributes: the tool's name and the call's id."""
    out: dict[str, AttributeValue] = {OPERATION_NAME: EXECUTE_TOOL}
    _put(out, TOOL_NAME, tool)
    _put(out, TOOL_CALL_ID, call_id)
    out[TOOL_TYPE] = "function"
    _put(out, AGENT_NAME, agent)
    return out


def error(reason: object) -> dict[str, AttributeValue]:
    """`error.type`: a failure's stable reason code, never its message."""
    code = reason[0] if isinstance(reason, tuple) and reason else reason
    return checked({ERROR_TYPE: code if isinstance(code, str) else type(reason).__name__})
