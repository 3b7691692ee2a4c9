"""What an MCP server offers, and the SDK server that answers for it.

`McpCatalog` checks what `adk.mcp.serve` (or ``adk mcp serve-stdio``) is given, once:

- tools: `adk.Tool` instances, ``@adk.tool`` functions and toolsets, in one
  `ToolCatalog` (schemas compiled once, duplicate names refused), plus agents: an
  `AgentRef` becomes `AgentAsTool`, a tool taking one ``request`` string and answering
  with the agent's reply (a fresh invocation in its own lane per call);
- resources: ``{"uri", "name", "mime_type", "description", "read": fn() -> str | bytes}``;
- prompts: ``{"name", "description", "arguments": [{"name", "required", "description"}],
  "get": fn(args) -> {"messages": [...]}}``.

`build_server` makes a low-level `mcp.server.Server` over it, the same for Streamable
HTTP and stdio. A tool call runs through our tool machinery (`ToolCatalog.call`:
argument validation, sanitized failures, results checked as JSON) under
``request_timeout``; its failure is a tool result with ``isError`` (the client and the
model see the structural error, never an exception's text), not a protocol error.
Blocking code (sync tools, resource and prompt callbacks) runs on the catalog's
`WorkerPool` (``max_workers`` threads alive at most, a timed-out call's thread counted
until it ends; past it the call is ``-32000`` "Server busy"). A result larger than
``max_response_bytes`` is refused: a tool's as the tool error
``mcp_response_too_large`` (the tool machinery's own 1 MiB bound applies first), a
resource's or a prompt's as ``-32603`` ``response_too_large``. An
unknown tool, resource or prompt, or a missing required prompt argument, is a JSON-RPC
error. A tool needing human approval fails closed (no Runner can pause here).
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from adk_actors.agents import AgentRef, invoke
from adk_actors.mcp.server_workers import WorkerPool, WorkersBusy
from adk_actors.tools import Tool, ToolCatalog, ToolContext, Toolset, ToolsetSnapshot
from adk_actors.tools.catalog import confirmation_refusal, structural_error
from adk_actors.tools.suspension import Suspension
from providers.content import Content, FunctionCallPart
from providers.errors import AdkError
from supervision import get_logger

_log = get_logger("adk_actors.mcp.server")

MAX_ITEMS = 1024
MAX_URI_CHARS = 2048
MAX_PROMPT_ARGUMENTS = 64
DEFAULT_MAX_RESPONSE_BYTES = 4 << 20
DEFAULT_MAX_WORKERS = 32
MCP_APP_NAME = "mcp"
REQUEST = "request"
RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_ERROR = -32000
_STABLE_REASON = re.compile(r"[a-z][a-z0-9_]{0,63}")


class AgentAsTool(Tool):
    """Agent `agent`, offered over MCP as a tool taking one ``request`` string."""

    def __init__(self, agent: AgentRef, timeout: float, description: str = "") -> None:
        self.agent = agent
        self.name = agent.name
        self.description = description or f"Ask the {agent.name} agent."
        self.timeout = timeout
        self.parameters = {
            "type": "object",
            "properties": {REQUEST: {"type": "string", "description": "The request."}},
            "required": [REQUEST],
            "additionalProperties": False,
        }

    def __repr__(self) -> str:
        return f"AgentAsTool({self.name!r})"

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        lane = (MCP_APP_NAME, "mcp-client", f"mcp-{uuid.uuid4().hex[:16]}")
        answer = invoke(self.agent, str(args[REQUEST]), lane, self.timeout)
        return {"result": answer.text_value() if isinstance(answer, Content) else answer}


@dataclass(frozen=True)
class Resource:
    uri: str
    name: str
    mime_type: str | None
    description: str | None
    read: Callable[[], Any]


@dataclass(frozen=True)
class Prompt:
    name: str
    description: str | None
    arguments: tuple[tuple[str, bool, str | None], ...]
    get: Callable[[dict[str, str]], Any]


class McpCatalog:
    """Everything one server offers, checked once."""

    def __init__(
        self,
        tools: Sequence[Any] = (),
        resources: Sequence[Mapping[str, Any]] = (),
        prompts: Sequence[Mapping[str, Any]] = (),
        *,
        request_timeout: float = 30.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_workers: int = DEFAULT_MAX_WORKERS,
    ) -> None:
        for what, items in (("tools", tools), ("resources", resources), ("prompts", prompts)):
            if isinstance(items, str | bytes | Mapping) or len(items) > MAX_ITEMS:
                raise AdkError(
                    ("invalid_mcp_server_option", what), f"{what} is a list of at most {MAX_ITEMS}"
                )
        self.request_timeout = request_timeout
        self.max_response_bytes = max_response_bytes
        self.workers = WorkerPool(max_workers, "calls")
        converted: list[Tool | Toolset | ToolsetSnapshot] = []
        for item in tools:
            if isinstance(item, AgentRef):
                converted.append(AgentAsTool(item, request_timeout))
            elif isinstance(item, Tool | Toolset | ToolsetSnapshot):
                converted.append(item)
            else:
                raise AdkError(
                    ("invalid_mcp_tool", type(item).__name__),
                    "MCP tools are adk.Tool, @adk.tool functions, toolsets or AgentRef",
                )
        self.tools = ToolCatalog(converted)
        self.resources: dict[str, Resource] = {}
        for item in resources:
            resource = _resource(item)
            if resource.uri in self.resources:
                raise AdkError(
                    ("duplicate_mcp_resource", resource.uri), "two resources share a uri"
                )
            self.resources[resource.uri] = resource
        self.prompts: dict[str, Prompt] = {}
        for item in prompts:
            prompt = _prompt(item)
            if prompt.name in self.prompts:
                raise AdkError(("duplicate_mcp_prompt", prompt.name), "two prompts share a name")
            self.prompts[prompt.name] = prompt

    # -- tools ---------------------------------------------------------------------------

    def list_tools(self) -> list[types.Tool]:
        return [
            types.Tool(
                name=declaration["name"],
                description=declaration.get("description") or None,
                input_schema=dict(declaration.get("parameters") or {"type": "object"}),
            )
            for declaration in self.tools.declarations()
        ]

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None
    ) -> types.CallToolResult:
        tool = self.tools.tool(name)
        if tool is None:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {name[:128]}")
        try:
            payload = await self._run_tool(tool, name, dict(arguments or {}))
        except WorkersBusy:
            raise MCPError(SERVER_ERROR, "Server busy") from None
        failed = payload.get("success") is False
        if not failed and set(payload) == {"result"} and isinstance(payload["result"], str):
            text = payload["result"]
        else:
            text = json.dumps(payload, ensure_ascii=False)
        if _size(text) > self.max_response_bytes:
            payload = structural_error("mcp_response_too_large", operation=name)
            failed, text = True, json.dumps(payload)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=None if failed else payload,
            is_error=failed,
        )

    async def _run_tool(self, tool: Tool, name: str, args: dict[str, Any]) -> dict[str, Any]:
        call_id = f"mcp-{uuid.uuid4().hex[:16]}"
        call = FunctionCallPart(name, args, call_id)
        ctx = ToolContext(app_name=MCP_APP_NAME, call_id=call_id)
        try:
            if not self.tools.is_async(name):
                response = await self.workers.run(
                    lambda: self.tools.call(call, ctx), self.request_timeout
                )
                return response.response
            with anyio.fail_after(self.request_timeout):
                refusal = self.tools.check_arguments(name, args)
                if refusal is None:
                    refusal = confirmation_refusal(tool, call, ctx)
                if refusal is not None:
                    return refusal
                outcome = await self.tools.aexecute(call, ctx, approved=True)
                if isinstance(outcome, Suspension):
                    return structural_error("tool_confirmation_requires_runner", operation=name)
                return outcome.response
        except TimeoutError:
            _log.warning("adk.mcp.server.tool_timeout", tool=name)
            return structural_error("mcp_timeout", operation=name)
        except WorkersBusy:
            raise
        except AdkError as error:
            reason = error.reason if isinstance(error.reason, str) else "tool_failed"
            if not _STABLE_REASON.fullmatch(reason):
                reason = "tool_failed"
            return structural_error(reason, operation=name)

    # -- resources and prompts -----------------------------------------------------------

    def list_resources(self) -> list[types.Resource]:
        return [
            types.Resource(uri=r.uri, name=r.name, mime_type=r.mime_type, description=r.description)
            for r in self.resources.values()
        ]

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        resource = self.resources.get(uri)
        if resource is None:
            raise MCPError(RESOURCE_NOT_FOUND, "Resource not found")
        value = await self._callback(resource.read, (), f"resource {uri[:128]}")
        if isinstance(value, str | bytes | bytearray) and _size(value) > self.max_response_bytes:
            raise MCPError(INTERNAL_ERROR, "response_too_large")
        if isinstance(value, str):
            content: types.TextResourceContents | types.BlobResourceContents = (
                types.TextResourceContents(uri=uri, mime_type=resource.mime_type, text=value)
            )
        elif isinstance(value, bytes | bytearray):
            content = types.BlobResourceContents(
                uri=uri, mime_type=resource.mime_type, blob=base64.b64encode(value).decode()
            )
        else:
            raise MCPError(INTERNAL_ERROR, "Resource read returned neither text nor bytes")
        return types.ReadResourceResult(contents=[content])

    def list_prompts(self) -> list[types.Prompt]:
        return [
            types.Prompt(
                name=p.name,
                description=p.description,
                arguments=[
                    types.PromptArgument(name=n, required=req, description=d)
                    for n, req, d in p.arguments
                ],
            )
            for p in self.prompts.values()
        ]

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None
    ) -> types.GetPromptResult:
        prompt = self.prompts.get(name)
        if prompt is None:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name[:128]}")
        args = dict(arguments or {})
        missing = [n for n, required, _ in prompt.arguments if required and n not in args]
        if missing:
            raise MCPError(INVALID_PARAMS, f"Missing required argument: {missing[0]}")
        value = await self._callback(prompt.get, (args,), f"prompt {name[:128]}")
        try:
            result = types.GetPromptResult.model_validate(value)
        except ValidationError:
            raise MCPError(INTERNAL_ERROR, "Prompt returned an invalid result") from None
        if len(result.model_dump_json(by_alias=True)) > self.max_response_bytes:
            raise MCPError(INTERNAL_ERROR, "response_too_large")
        return result

    async def _callback(self, fn: Callable[..., Any], args: tuple[Any, ...], what: str) -> Any:
        try:
            return await self.workers.run(lambda: fn(*args), self.request_timeout)
        except TimeoutError:
            raise MCPError(INTERNAL_ERROR, "mcp_timeout") from None
        except WorkersBusy:
            raise MCPError(SERVER_ERROR, "Server busy") from None
        except MCPError:
            raise
        except Exception as error:  # the callback's text stays here
            _log.warning(
                "adk.mcp.server.callback_failed", what=what, error_class=type(error).__name__
            )
            raise MCPError(INTERNAL_ERROR, "callback_failed") from None


def build_server(catalog: McpCatalog, name: str = "adk-mcp", version: str = "1") -> Server[Any]:
    """A low-level SDK server answering for `catalog`."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=catalog.list_tools())

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await catalog.call_tool(params.name, params.arguments)

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=catalog.list_resources())

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await catalog.read_resource(str(params.uri))

    async def list_prompts(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=catalog.list_prompts())

    async def get_prompt(
        ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        return await catalog.get_prompt(params.name, params.arguments)

    server: Server[Any] = Server(
        name,
        version=version,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )
    server.middleware = []  # no OpenTelemetry span per message here
    return server


def _size(value: str | bytes | bytearray) -> int:
    """The bytes `value` takes in an answer (base64 for bytes)."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    return (len(value) + 2) // 3 * 4


# -- checking the registry items ---------------------------------------------------------


def _text(item: Mapping[str, Any], key: str, what: str, *, required: bool, limit: int) -> Any:
    value = item.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value or len(value) > limit:
        raise AdkError((f"invalid_mcp_{what}", key), f"a {what}'s {key} is a string")
    return value


def _resource(item: Any) -> Resource:
    if not isinstance(item, Mapping):
        raise AdkError(("invalid_mcp_resource", "item"), "a resource is a mapping")
    read = item.get("read")
    if not callable(read):
        raise AdkError(("invalid_mcp_resource", "read"), "a resource's read is callable")
    return Resource(
        uri=_text(item, "uri", "resource", required=True, limit=MAX_URI_CHARS),
        name=_text(item, "name", "resource", required=True, limit=256),
        mime_type=_text(item, "mime_type", "resource", required=False, limit=256),
        description=_text(item, "description", "resource", required=False, limit=4096),
        read=read,
    )


def _prompt(item: Any) -> Prompt:
    if not isinstance(item, Mapping):
        raise AdkError(("invalid_mcp_prompt", "item"), "a prompt is a mapping")
    get = item.get("get")
    if not callable(get):
        raise AdkError(("invalid_mcp_prompt", "get"), "a prompt's get is callable")
    raw = item.get("arguments") or []
    if isinstance(raw, str | bytes | Mapping) or len(raw) > MAX_PROMPT_ARGUMENTS:
        raise AdkError(("invalid_mcp_prompt", "arguments"), "arguments is a list")
    arguments = []
    for argument in raw:
        if not isinstance(argument, Mapping):
            raise AdkError(("invalid_mcp_prompt", "arguments"), "an argument is a mapping")
        arguments.append(
            (
                _text(argument, "name", "prompt", required=True, limit=128),
                argument.get("required") is True,
                _text(argument, "description", "prompt", required=False, limit=4096),
            )
        )
    return Prompt(
        name=_text(item, "name", "prompt", required=True, limit=128),
        description=_text(item, "description", "prompt", required=False, limit=4096),
        arguments=tuple(arguments),
        get=get,
    )
