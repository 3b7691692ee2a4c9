"""`connect(transport, target, ...)`: a supervised MCP client, initialized, as a Toolset.

``connect("stdio", command)`` launches `command` (argv list, or a string split like a
shell would, never run through one) with a minimal environment (the SDK's safe
defaults plus `env`); ``connect("streamable_http", url, auth=..., ...)`` checks the
URL and the addresses it resolves to (see `adk_actors.mcp.security`) before starting
anything. Either way the client process starts under the MCP client supervisor and
`connect` returns only once the initialize handshake is over.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import shlex
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, TypedDict, Unpack

import msgspec

from adk_actors.mcp.client import (
    STOP_TIMEOUT,
    AwaitReady,
    CallTool,
    ClientConfig,
    Close,
    GetPrompt,
    ListPrompts,
    ListResources,
    ListTools,
    McpClientServer,
    McpRequest,
    Outcome,
    Ping,
    ReadResource,
    timed_out,
)
from adk_actors.mcp.client_supervisor import MCP_CLIENT_SUPERVISOR
from adk_actors.mcp.security import (
    DEFAULT_MAX_RESOLVED_ADDRESSES,
    MAX_RESOLVED_ADDRESSES,
    AuthCallback,
    Endpoint,
    HttpPolicy,
    Resolver,
    default_resolver,
    parse_endpoint,
    refuse_static_headers,
)
from adk_actors.mcp.toolset import Confirmation, McpTool, McpToolResult, remote_tools
from adk_actors.tools import Tool, Toolset
from providers.errors import AdkError, decode_options
from supervision import (
    CallTimeout,
    ChildSpec,
    DynamicSupervisor,
    KernelError,
    MaxChildrenReached,
    Pid,
    ProcessExit,
    aio,
    call,
    exit,
    whereis,
)

DEFAULT_REQUEST_TIMEOUT = 30.0
DEFAULT_CONNECT_TIMEOUT = 10.0
MAX_TIMEOUT = 120.0
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_TOOLS = 256
MAX_TOOLS = 4096
DEFAULT_MAX_SCHEMA_BYTES = 65_536
MAX_ARGV = 256
MAX_ARG_BYTES = 4096
MAX_ENV = 256
MAX_HOSTS = 256
REASON = "invalid_mcp_client_options"
_REPLY_GRACE = 2.0
_numbers = itertools.count(1)

Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_TIMEOUT)]
Host = Annotated[str, msgspec.Meta(min_length=1, max_length=253)]


class ConnectOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`connect`'s plain options, decoded with `decode_options`: a bad one raises
    ``AdkError(("invalid_mcp_client_options", key))``."""

    request_timeout: Seconds = DEFAULT_REQUEST_TIMEOUT
    """Each call's budget in seconds (one absolute deadline), unless the call passes one."""
    connect_timeout: Seconds = DEFAULT_CONNECT_TIMEOUT
    """Start, resolution and the initialize handshake."""
    max_response_bytes: Annotated[int, msgspec.Meta(ge=1024, le=MAX_RESPONSE_BYTES)] = (
        DEFAULT_MAX_RESPONSE_BYTES
    )
    """One response body (HTTP) or line (stdio)."""
    max_tools: Annotated[int, msgspec.Meta(ge=1, le=MAX_TOOLS)] = DEFAULT_MAX_TOOLS
    max_schema_bytes: Annotated[int, msgspec.Meta(ge=256, le=MAX_RESPONSE_BYTES)] = (
        DEFAULT_MAX_SCHEMA_BYTES
    )
    max_resolved_addresses: Annotated[int, msgspec.Meta(ge=1, le=MAX_RESOLVED_ADDRESSES)] = (
        DEFAULT_MAX_RESOLVED_ADDRESSES
    )
    allow_http_loopback: bool = False
    allowed_hosts: Annotated[list[Host], msgspec.Meta(max_length=MAX_HOSTS)] | None = None
    allowed_private_hosts: Annotated[list[Host], msgspec.Meta(max_length=MAX_HOSTS)] = []
    env: (
        Annotated[
            dict[
                Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ARG_BYTES)],
                Annotated[str, msgspec.Meta(max_length=MAX_ARG_BYTES)],
            ],
            msgspec.Meta(max_length=MAX_ENV),
        ]
        | None
    ) = None
    cwd: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ARG_BYTES)] | None = None
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=256)] | None = None


class ConnectKeywords(TypedDict, total=False):
    """`connect`'s plain keyword options, for type checkers (`ConnectOptions` holds
    their defaults and bounds and checks them at run time)."""

    request_timeout: float
    connect_timeout: float
    max_response_bytes: int
    max_tools: int
    max_schema_bytes: int
    max_resolved_addresses: int
    allow_http_loopback: bool
    allowed_hosts: Sequence[str] | None
    allowed_private_hosts: Sequence[str]
    env: Mapping[str, str] | None
    cwd: str | None
    name: str | None


def connect(
    transport: str,
    target: str | Sequence[str],
    *,
    auth: AuthCallback | None = None,
    resolver: Resolver | None = None,
    ssl_context: ssl.SSLContext | None = None,
    require_confirmation: Confirmation = None,
    **options: Unpack[ConnectKeywords],
) -> McpClient:
    """A connected MCP client (see the module doc). Bad input is a typed `AdkError`;
    `options` are `ConnectOptions`' fields."""
    refuse_static_headers(options)
    unknown = sorted(
        str(key)[:64] for key in options if key not in ConnectOptions.__struct_fields__
    )
    if unknown:
        raise AdkError((REASON, "unknown_option"), f"unknown options: {', '.join(unknown[:8])}")
    checked = decode_options(ConnectOptions, options, REASON, what="MCP client option")
    if checked.env is not None and any("\0" in key + value for key, value in checked.env.items()):
        raise AdkError((REASON, "env"), "env keys and values hold no NUL")
    if not (
        require_confirmation is None
        or isinstance(require_confirmation, bool | Mapping)
        or callable(require_confirmation)
    ):
        raise AdkError(
            (REASON, "require_confirmation"),
            "a bool, a callable (args, ctx) or a mapping tool name -> rule",
        )
    if ssl_context is not None and not isinstance(ssl_context, ssl.SSLContext):
        raise AdkError((REASON, "ssl_context"), "an ssl.SSLContext")
    if auth is not None and not callable(auth):
        raise AdkError((REASON, "auth"), "auth is a callable")
    if resolver is not None and not callable(resolver):
        raise AdkError((REASON, "resolver"), "resolver is a callable (host, port) -> addresses")
    common: dict[str, Any] = {
        "connect_timeout": checked.connect_timeout,
        "max_response_bytes": checked.max_response_bytes,
        "max_tools": checked.max_tools,
        "max_schema_bytes": checked.max_schema_bytes,
    }
    if transport == "stdio":
        if auth is not None:
            raise AdkError((REASON, "auth"), "stdio takes no auth")
        config = ClientConfig(
            transport="stdio", command=_argv(target), env=checked.env, cwd=checked.cwd, **common
        )
        label = f"stdio {config.command[0].rsplit('/', 1)[-1]}"
    elif transport == "streamable_http":
        endpoint = parse_endpoint(target)
        policy = HttpPolicy(
            allow_http_loopback=checked.allow_http_loopback,
            allowed_hosts=(
                None if checked.allowed_hosts is None else frozenset(checked.allowed_hosts)
            ),
            allowed_private_hosts=frozenset(checked.allowed_private_hosts),
            resolver=resolver or default_resolver,
            max_resolved_addresses=checked.max_resolved_addresses,
        )
        _check_in_time(policy, endpoint, checked.connect_timeout)
        config = ClientConfig(
            transport="streamable_http",
            endpoint=endpoint,
            policy=policy,
            auth=auth,
            ssl_context=ssl_context,
            **common,
        )
        label = f"http {endpoint.host}:{endpoint.port}"
    elif transport == "sse":
        raise AdkError(
            ("unsupported_transport", "sse_deprecated_use_streamable_http"),
            "the HTTP+SSE transport is deprecated; use streamable_http",
        )
    else:
        raise AdkError(("unsupported_transport", "unknown"), "stdio or streamable_http")
    supervisor = whereis(MCP_CLIENT_SUPERVISOR)
    if supervisor is None:
        raise AdkError("mcp_client_supervisor_not_running", "start the application (adk.start())")
    number = next(_numbers)
    spec = ChildSpec(
        ("mcp_client", number),
        lambda: McpClientServer.start_link(config),
        restart="temporary",
        shutdown=STOP_TIMEOUT + 5.0,
    )
    try:
        pid = DynamicSupervisor.start_child(supervisor, spec)
    except MaxChildrenReached:
        raise AdkError("too_many_mcp_clients", "the MCP client supervisor is full") from None
    except KernelError:
        raise AdkError("mcp_client_start_failed", "the client process did not start") from None
    assert pid is not None
    try:
        info = _unwrap(call(pid, AwaitReady(), checked.connect_timeout + 2 * _REPLY_GRACE))
    except AdkError:
        _close(pid)
        raise
    except CallTimeout:
        exit(pid, "kill")
        raise AdkError("mcp_connect_timeout", "no initialize answer in time") from None
    except ProcessExit:  # closed or killed during the handshake
        raise AdkError("mcp_client_closed", "the client process ended during connect") from None
    except BaseException:
        exit(pid, "kill")
        raise
    return McpClient(
        pid,
        checked.name or f"mcp {label}",
        checked.request_timeout,
        info,
        require_confirmation,
    )


class McpClient(Toolset):
    """A handle on one MCP client process; pass it in an agent's tools."""

    def __init__(
        self,
        pid: Pid,
        name: str,
        request_timeout: float,
        server_info: dict[str, Any],
        require_confirmation: Confirmation = None,
    ) -> None:
        self.require_confirmation = require_confirmation
        self.pid = pid
        self.name = name
        self.request_timeout = request_timeout
        self.server_info = server_info

    def __repr__(self) -> str:
        return f"<McpClient {self.name} {self.pid}>"

    def _request(
        self, make: Callable[[float], McpRequest], timeout: float | None
    ) -> tuple[McpRequest, float]:
        """The request (its deadline from now) and the budget its caller waits for."""
        budget = self.request_timeout if timeout is None else _seconds(timeout)
        return make(time.monotonic() + budget), budget + _REPLY_GRACE

    def _call(self, make: Callable[[float], McpRequest], timeout: float | None) -> Any:
        request, wait = self._request(make, timeout)
        try:
            return _unwrap(call(self.pid, request, wait))
        except (CallTimeout, ProcessExit) as error:
            raise _unanswered(request, error) from None

    def list_tools(self, *, timeout: float | None = None) -> list[McpTool]:
        return list(self._call(ListTools, timeout))

    def call_tool(
        self, name: str, args: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> McpToolResult:
        tool, arguments = _name(name), _arguments(args)
        result = self._call(lambda deadline: CallTool(tool, arguments, deadline), timeout)
        assert isinstance(result, McpToolResult)
        return result

    async def acall_tool(
        self, name: str, args: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> McpToolResult:
        """`call_tool` for asyncio code: no thread waits."""
        tool, arguments = _name(name), _arguments(args)
        request, wait = self._request(lambda deadline: CallTool(tool, arguments, deadline), timeout)
        try:
            result = _unwrap(await aio.call(self.pid, request, wait))
        except (CallTimeout, ProcessExit) as error:
            raise _unanswered(request, error) from None
        assert isinstance(result, McpToolResult)
        return result

    def list_resources(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return list(self._call(ListResources, timeout))

    def read_resource(self, uri: str, *, timeout: float | None = None) -> dict[str, Any]:
        checked = _name(uri, "uri")
        return dict(self._call(lambda deadline: ReadResource(checked, deadline), timeout))

    def list_prompts(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return list(self._call(ListPrompts, timeout))

    def get_prompt(
        self,
        name: str,
        args: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        prompt, arguments = _name(name), dict(args or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in arguments.items()):
            raise AdkError(("invalid_mcp_request", "prompt_arguments"), "string arguments")
        return dict(self._call(lambda deadline: GetPrompt(prompt, arguments, deadline), timeout))

    def ping(self, *, timeout: float | None = None) -> None:
        self._call(Ping, timeout)

    def close(self) -> None:
        """Close the session (a stdio server is stopped); idempotent."""
        _close(self.pid)

    # --- Toolset ---

    def fetch(self) -> list[Tool]:
        return remote_tools(
            self.list_tools(), self.acall_tool, f"toolset {self.name}", self.require_confirmation
        )


def _unanswered(request: McpRequest, error: BaseException) -> AdkError:
    if isinstance(error, CallTimeout):
        return timed_out(request)
    return AdkError("mcp_client_closed", "the client process is gone")


_resolving = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="mcp-resolve")
"""Where `connect` resolves and checks an endpoint, so a hung resolver costs the caller
no more than its connect timeout (a hung lookup holds one of these few threads)."""


def _check_in_time(policy: HttpPolicy, endpoint: Endpoint, timeout: float) -> None:
    """Refuse before anything starts (each connection checks again, see `security`)."""
    checking = _resolving.submit(policy.addresses, endpoint)
    try:
        checking.result(timeout)
    except concurrent.futures.TimeoutError:
        checking.cancel()
        raise AdkError("mcp_connect_timeout", "the host did not resolve in time") from None


def _close(pid: Pid) -> None:
    try:
        call(pid, Close(), STOP_TIMEOUT + 5.0)
    except (ProcessExit, CallTimeout):
        pass


def _unwrap(outcome: Any) -> Any:
    if isinstance(outcome, Outcome):
        if outcome.ok:
            return outcome.value
        raise outcome.value
    raise AdkError("mcp_client_failed", "unexpected answer")


def _seconds(value: Any) -> float:
    """A call's ``timeout=``: seconds in (0, MAX_TIMEOUT]."""
    try:
        return msgspec.convert(value, Seconds, strict=True)
    except msgspec.ValidationError:
        raise AdkError(
            ("invalid_mcp_request", "timeout"), f"seconds in (0, {MAX_TIMEOUT}]"
        ) from None


def _arguments(args: Any) -> dict[str, Any]:
    if args is None:
        return {}
    if not isinstance(args, Mapping) or not all(isinstance(key, str) for key in args):
        raise AdkError(("invalid_mcp_request", "arguments"), "a mapping with string keys")
    return dict(args)


def _name(value: Any, what: str = "name") -> str:
    if not isinstance(value, str) or not value or len(value) > 2048:
        raise AdkError(("invalid_mcp_request", what), f"{what} is a non-empty string")
    return value


def _argv(target: Any) -> tuple[str, ...]:
    if isinstance(target, str):
        try:
            argv = shlex.split(target)
        except ValueError:
            raise AdkError(("invalid_mcp_command", "unparsable"), "unbalanced quotes") from None
    elif isinstance(target, Sequence):
        argv = list(target)
    else:
        raise AdkError(("invalid_mcp_command", "type"), "argv list or command string")
    if (
        not argv
        or len(argv) > MAX_ARGV
        or not all(
            isinstance(arg, str) and len(arg) <= MAX_ARG_BYTES and "\0" not in arg for arg in argv
        )
        or not argv[0]
    ):
        raise AdkError(("invalid_mcp_command", "argv"), "a non-empty list of bounded strings")
    return tuple(argv)
