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
import math
import shlex
import ssl
import time
from collections.abc import Mapping, Sequence
from typing import Any

from adk_actors.mcp.client import (
    STOP_TIMEOUT,
    AwaitReady,
    ClientConfig,
    Close,
    McpClientServer,
    Op,
    Outcome,
)
from adk_actors.mcp.client_supervisor import MCP_CLIENT_SUPERVISOR
from adk_actors.mcp.security import (
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
from providers.errors import AdkError
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
_REPLY_GRACE = 2.0
_numbers = itertools.count(1)


def connect(
    transport: str,
    target: str | Sequence[str],
    *,
    auth: AuthCallback | None = None,
    allow_http_loopback: bool = False,
    allowed_hosts: Sequence[str] | None = None,
    allowed_private_hosts: Sequence[str] = (),
    resolver: Resolver | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_resolved_addresses: int = 64,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    max_tools: int = DEFAULT_MAX_TOOLS,
    max_schema_bytes: int = DEFAULT_MAX_SCHEMA_BYTES,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    name: str | None = None,
    require_confirmation: Confirmation = None,
    **unsupported: Any,
) -> McpClient:
    """A connected MCP client (see the module doc). Bad input is a typed `AdkError`."""
    refuse_static_headers(unsupported)
    if unsupported:
        raise AdkError(("invalid_mcp_client_options", sorted(unsupported)[:8]), "unknown options")
    request_timeout = _seconds("request_timeout", request_timeout)
    connect_timeout = _seconds("connect_timeout", connect_timeout)
    _bound("max_response_bytes", max_response_bytes, 1024, MAX_RESPONSE_BYTES)
    _bound("max_tools", max_tools, 1, MAX_TOOLS)
    _bound("max_schema_bytes", max_schema_bytes, 256, MAX_RESPONSE_BYTES)
    _bound("max_resolved_addresses", max_resolved_addresses, 1, 256)
    if not (
        require_confirmation is None
        or isinstance(require_confirmation, bool | Mapping)
        or callable(require_confirmation)
    ):
        raise AdkError(
            ("invalid_mcp_client_options", "require_confirmation"),
            "a bool, a callable (args, ctx) or a mapping tool name -> rule",
        )
    if ssl_context is not None and not isinstance(ssl_context, ssl.SSLContext):
        raise AdkError(("invalid_mcp_client_options", "ssl_context"), "an ssl.SSLContext")
    if auth is not None and not callable(auth):
        raise AdkError(("invalid_mcp_client_options", "auth"), "auth is a callable")
    common: dict[str, Any] = {
        "connect_timeout": connect_timeout,
        "max_response_bytes": max_response_bytes,
        "max_tools": max_tools,
        "max_schema_bytes": max_schema_bytes,
    }
    if transport == "stdio":
        if auth is not None:
            raise AdkError(("invalid_mcp_client_options", "auth"), "stdio takes no auth")
        config = ClientConfig(
            "stdio", command=_argv(target), env=_env(env), cwd=_cwd(cwd), **common
        )
        label = f"stdio {config.command[0].rsplit('/', 1)[-1]}"
    elif transport == "streamable_http":
        endpoint = parse_endpoint(target)
        policy = HttpPolicy(
            allow_http_loopback=allow_http_loopback is True,
            allowed_hosts=None if allowed_hosts is None else frozenset(allowed_hosts),
            allowed_private_hosts=frozenset(allowed_private_hosts),
            resolver=resolver or default_resolver,
            max_resolved_addresses=max_resolved_addresses,
        )
        _check_in_time(policy, endpoint, connect_timeout)
        config = ClientConfig(
            "streamable_http",
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
        raise AdkError(("unsupported_transport", str(transport)[:32]), "stdio or streamable_http")
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
    except KernelError as error:
        raise AdkError(("mcp_client_start_failed", str(error.reason)[:64])) from None
    assert pid is not None
    try:
        info = _unwrap(call(pid, AwaitReady(), connect_timeout + 2 * _REPLY_GRACE))
    except AdkError:
        _close(pid)
        raise
    except CallTimeout:
        exit(pid, "kill")
        raise AdkError("mcp_connect_timeout", "no initialize answer in time") from None
    except BaseException:
        exit(pid, "kill")
        raise
    return McpClient(pid, name or f"mcp {label}", request_timeout, info, require_confirmation)


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

    def _call(self, op: str, *args: Any, timeout: float | None = None) -> Any:
        budget = self.request_timeout if timeout is None else _seconds("timeout", timeout)
        deadline = time.monotonic() + budget
        try:
            return _unwrap(call(self.pid, Op(op, args, deadline), budget + _REPLY_GRACE))
        except CallTimeout:
            raise AdkError(("mcp_timeout", op), "no answer by the deadline") from None
        except ProcessExit:
            raise AdkError("mcp_client_closed", "the client process is gone") from None

    def list_tools(self, *, timeout: float | None = None) -> list[McpTool]:
        return list(self._call("list_tools", timeout=timeout))

    def call_tool(
        self, name: str, args: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> McpToolResult:
        return self._call("call_tool", _name(name), dict(args or {}), timeout=timeout)  # type: ignore[no-any-return]

    def list_resources(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return list(self._call("list_resources", timeout=timeout))

    def read_resource(self, uri: str, *, timeout: float | None = None) -> dict[str, Any]:
        return dict(self._call("read_resource", _name(uri, "uri"), timeout=timeout))

    def list_prompts(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return list(self._call("list_prompts", timeout=timeout))

    def get_prompt(
        self,
        name: str,
        args: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        arguments = dict(args or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in arguments.items()):
            raise AdkError(("invalid_mcp_request", "prompt_arguments"), "string arguments")
        return dict(self._call("get_prompt", _name(name), arguments, timeout=timeout))

    def ping(self, *, timeout: float | None = None) -> None:
        self._call("ping", timeout=timeout)

    def close(self) -> None:
        """Close the session (a stdio server is stopped); idempotent."""
        _close(self.pid)

    # --- Toolset ---

    def fetch(self) -> list[Tool]:
        return remote_tools(
            self.list_tools(), self.call_tool, f"toolset {self.name}", self.require_confirmation
        )

    async def acall_tool(self, name: str, args: dict[str, Any]) -> McpToolResult:
        """`call_tool` for asyncio code (the agent's tools): no thread waits."""
        deadline = time.monotonic() + self.request_timeout
        try:
            outcome = await aio.call(
                self.pid, Op("call_tool", (name, args), deadline), self.request_timeout + 1.0
            )
        except CallTimeout:
            raise AdkError(("mcp_timeout", "call_tool"), "no answer by the deadline") from None
        except ProcessExit:
            raise AdkError("mcp_client_closed", "the client process is gone") from None
        return _unwrap(outcome)  # type: ignore[no-any-return]


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


def _seconds(key: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= MAX_TIMEOUT
    ):
        raise AdkError(("invalid_mcp_client_options", key), f"seconds in (0, {MAX_TIMEOUT}]")
    return float(value)


def _bound(key: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise AdkError(("invalid_mcp_client_options", key), f"an integer in [{low}, {high}]")


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


def _env(env: Any) -> dict[str, str] | None:
    if env is None:
        return None
    if not isinstance(env, Mapping) or len(env) > 256:
        raise AdkError(("invalid_mcp_client_options", "env"), "a mapping of strings")
    for key, value in env.items():
        if not isinstance(key, str) or not isinstance(value, str) or "\0" in key + value:
            raise AdkError(("invalid_mcp_client_options", "env"), "a mapping of strings")
    return dict(env)


def _cwd(cwd: Any) -> str | None:
    if cwd is not None and (not isinstance(cwd, str) or not cwd):
        raise AdkError(("invalid_mcp_client_options", "cwd"), "a directory path")
    return cwd
