"""Node helpers for event-based legacy graphs (the spec's ``adk_graph_node``).

The state carries the conversation as ``state["events"]``, a list of event dicts
(`adk.events.to_dict`), so it stays JSON and checkpointable:

* `function_node(fn)`: ``fn`` itself (a node is a function of the state);
* `agent_node(name, config, tools)`: one model call on the events' contents, with the
  config's ``instructions`` (default ``"You are a helpful assistant."``) and its
  ``before_model`` / ``after_model`` callbacks (the agent callback contract); it
  appends the model's event and sets ``last_agent``, plus ``pending_tools`` (``[{"name",
  "args", "id"}]``) when the model asked for tools, or ``error`` (a structural
  failure) when the model call failed;
* `tool_node(tools)`: runs ``state["pending_tools"]`` against `tools` (validated
  arguments; a tool needing approval fails closed, as outside any Runner), appends one
  tool event per call (``{"success": false, "error": "Tool not found"}`` for an unknown
  one) and clears ``pending_tools``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from adk_actors.agents.callbacks import run_callback
from adk_actors.agents.spec import compile_spec
from adk_actors.events import Event, from_dict, to_dict
from adk_actors.tools import Tool, ToolContext
from adk_actors.tools.catalog import ToolCatalog
from providers import content as content_model
from providers import protocol
from providers.content import Content, FunctionCallPart, FunctionResponsePart
from providers.errors import AdkError
from providers.outputs import ToolCalls

DEFAULT_INSTRUCTIONS = "You are a helpful assistant."
INVOCATION_ID = "legacy-graph"
TOOL_AUTHOR = "tool"
NOT_FOUND = "Tool not found"

NodeFn = Callable[[dict[str, Any]], dict[str, Any]]


def function_node(fn: NodeFn) -> NodeFn:
    """`fn` as a node: ``fn(state) -> delta``."""
    if not callable(fn):
        raise AdkError("invalid_node_function", "a node is a function of the state")
    return fn


def tool_node(tools: Sequence[Tool]) -> NodeFn:
    """A node running the pending tool calls (see the module doc). Async tools are
    refused here (``("async_tool_in_graph", name)``): a legacy node is a plain function."""
    catalog = ToolCatalog(tools)
    for name in catalog.names():
        found = catalog.tool(name)
        if found is not None and found.is_async:
            raise AdkError(("async_tool_in_graph", name), "tool_node runs sync tools only")

    def run_tools(state: dict[str, Any]) -> dict[str, Any]:
        calls = state.get("pending_tools") or []
        if not calls:
            return {}
        if not isinstance(calls, list):
            raise AdkError("invalid_pending_tools", "pending_tools is a list of calls")
        context = ToolContext(invocation_id=INVOCATION_ID, state=MappingProxyType(dict(state)))
        events = [*_events(state)]
        for call in calls:
            response = _run_call(catalog, _call_part(call), context)
            reply = Content(TOOL_AUTHOR, (response,))
            events.append(to_dict(Event.new(TOOL_AUTHOR, INVOCATION_ID, reply)))
        return {"events": events, "pending_tools": []}

    return run_tools


def agent_node(name: str, config: Mapping[str, Any], tools: Sequence[Tool] = ()) -> NodeFn:
    """A node making one model call as agent `name` (see the module doc). `config` is
    an agent config (``provider``, ``instructions``, ``callbacks``, ...), checked now."""
    if not isinstance(config, Mapping):
        raise AdkError("invalid_config", "an agent config is a mapping")
    instructions = config.get("instructions", DEFAULT_INSTRUCTIONS)
    if not isinstance(instructions, str):
        raise AdkError("invalid_instructions", "an agent node's instructions are a string")
    spec = compile_spec(name, {**config, "instructions": instructions}, tools)

    def run_agent(state: dict[str, Any]) -> dict[str, Any]:
        events = _events(state)
        history = [from_dict(event).content for event in events]
        contents = [item for item in history if item is not None]
        context = ToolContext(agent_name=name, state=MappingProxyType(dict(state)))
        try:
            output = _generate(spec, context, contents)
        except AdkError as error:
            failure = _failure(error)
            failed = Event.new(
                name, INVOCATION_ID, content_model.from_text("Model execution failed", "model")
            )
            return {"events": [*events, to_dict(failed)], "error": failure}
        if isinstance(output, ToolCalls):
            event = Event.new(name, INVOCATION_ID, output.content)
            pending = [
                {"name": call.name, "args": call.args, "id": call.id} for call in output.calls
            ]
            return {
                "events": [*events, to_dict(event)],
                "pending_tools": pending,
                "last_agent": name,
            }
        answer = output if isinstance(output, Content) else content_model.from_text(output, "model")
        final = Event.new(name, INVOCATION_ID, answer, is_final=True)
        return {"events": [*events, to_dict(final)], "last_agent": name}

    return run_agent


def _generate(
    spec: Any, context: ToolContext, contents: list[Content]
) -> str | Content | ToolCalls:
    """``before_model`` (a replacement skips the provider), the provider, ``after_model``."""
    replaced = run_callback(spec, "before_model", context, contents)
    if replaced is not None:
        output: Any = replaced
    else:
        result = protocol.generate(spec.provider_config, contents, spec.catalog.declarations())
        output, _ = protocol.unwrap(result)
    after = run_callback(spec, "after_model", context, output)
    output = after if after is not None else output
    if not isinstance(output, str | Content | ToolCalls):
        raise AdkError("invalid_model_output", "a model answers text, content or tool calls")
    return output


def _events(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    events = state.get("events") or []
    if not isinstance(events, list):
        raise AdkError("invalid_events", "state['events'] is a list of event dicts")
    return list(events)


def _call_part(call: Any) -> FunctionCallPart:
    if not (isinstance(call, Mapping) and isinstance(call.get("name"), str)):
        raise AdkError("invalid_pending_tools", "a pending call is {'name', 'args', 'id'}")
    args = call.get("args") or {}
    call_id = call.get("id")
    return FunctionCallPart(call["name"], dict(args), call_id if isinstance(call_id, str) else None)


def _run_call(
    catalog: ToolCatalog, call: FunctionCallPart, context: ToolContext
) -> FunctionResponsePart:
    if catalog.tool(call.name) is None:
        return FunctionResponsePart(call.name, {"success": False, "error": NOT_FOUND}, call.id)
    try:
        return catalog.call(call, context)
    except AdkError as error:  # a tool that needs approval: no Runner here to pause
        reason = error.reason if isinstance(error.reason, str) else "tool_failed"
        return FunctionResponsePart(
            call.name, {"success": False, "error": {"kind": reason}}, call.id
        )


def _failure(error: AdkError) -> dict[str, Any]:
    reason = error.reason
    tag = (
        reason
        if isinstance(reason, str)
        else reason[0]
        if isinstance(reason, tuple) and reason
        else None
    )
    return {
        "component": "graph_node",
        "operation": "model_generate",
        "reason": tag if isinstance(tag, str) else "model_failed",
    }
