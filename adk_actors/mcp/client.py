"""An MCP client: one supervised process that owns one MCP session.

`McpClientServer` is a GenServer (a temporary child of the MCP client supervisor).
Its `init` starts a thread running the client's own asyncio event loop, where the
official SDK's transport (``stdio_client`` or ``streamable_http_client``) and
`ClientSession` live; requests are answered later (``NoReply`` then `reply`), so the
process's mailbox never waits on the network. The process's lifetime bounds the
transport: `terminate` stops the loop, and a watchdog on the loop awaits an `Inbox`
the process owns, which closes when the process exits for any reason, ``kill``
included, so the session is closed and a stdio server process is stopped (stdin
closed, then its process tree terminated) even when `terminate` never runs.

Each request carries one absolute deadline (monotonic), checked at every step.
Session loss over Streamable HTTP (a 404 to a request carrying the session id) makes
the process open a new session; a read-only request (``tools/list``,
``resources/list``, ``resources/read``, ``prompts/list``, ``prompts/get``) is retried
once on it, a ``tools/call`` never is: ``("mcp_session_lost", "request_not_replayed")``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from adk_actors.mcp.security import (
    AuthCallback,
    Endpoint,
    GuardedTransport,
    HttpPolicy,
    Observed,
    OriginAuth,
)
from adk_actors.mcp.toolset import McpTool, McpToolResult
from providers.errors import AdkError
from supervision import (
    From,
    GenServer,
    Inbox,
    NoReply,
    Pid,
    ProcessExit,
    Reply,
    Stop,
    get_logger,
    reply,
    self_pid,
    send,
)

_log = get_logger("adk.mcp.client")

CLIENT_INFO = types.Implementation(name="adk-actors", version="1.0")
READ_ONLY = frozenset(
    {"list_tools", "list_resources", "read_resource", "list_prompts", "get_prompt", "ping"}
)
MAX_PAGES = 16
STOP_TIMEOUT = 10.0


@dataclass(frozen=True)
class ClientConfig:
    """Everything one client needs (validated by `connect`)."""

    transport: str
    command: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    endpoint: Endpoint | None = None
    policy: HttpPolicy = field(default_factory=HttpPolicy)
    auth: AuthCallback | None = None
    ssl_context: ssl.SSLContext | None = None
    connect_timeout: float = 10.0
    max_response_bytes: int = 4 * 1024 * 1024
    max_tools: int = 256
    max_schema_bytes: int = 65_536


class AwaitReady(NamedTuple):
    """Answered once the initialize handshake is over (server info) or failed."""


class Op(NamedTuple):
    """One MCP operation, to finish by `deadline` (``time.monotonic()``)."""

    name: str
    args: tuple[Any, ...]
    deadline: float


class Close(NamedTuple):
    pass


class Ended(NamedTuple):
    """From the loop: the session is over and cannot be reopened."""

    error: AdkError
    was_ready: bool


class Outcome(NamedTuple):
    ok: bool
    value: Any


class McpClientServer(GenServer):
    """The process that owns one MCP session (see the module doc)."""

    dispatcher = "thread"

    def init(self, args: Any) -> Any:
        config: ClientConfig = args
        runner = _Runner(config, self_pid(), Inbox("mcp-client-lifetime"))
        runner.start()
        return runner

    def handle_call(self, request: Any, from_: From, state: Any) -> Any:
        runner: _Runner = state
        match request:
            case AwaitReady():
                runner.submit(runner.ready(), lambda outcome: reply(from_, outcome))
                return NoReply(runner)
            case Op(name, args, deadline):
                runner.submit(
                    runner.request(name, args, deadline), lambda outcome: reply(from_, outcome)
                )
                return NoReply(runner)
            case Close():
                return Stop("normal", runner, Outcome(True, None))
        return Reply(
            Outcome(False, AdkError("unsupported_request", type(request).__name__)), runner
        )

    def handle_info(self, msg: Any, state: Any) -> Any:
        match msg:
            case Ended(error, True):
                return Stop(("mcp_session_ended", error.reason), state)
            # a session that never opened is connect's typed error (AwaitReady answers
            # it), not a crash: connect closes the process
        return state

    def terminate(self, reason: Any, state: Any) -> None:
        if isinstance(state, _Runner):
            state.stop()
            state.thread.join(STOP_TIMEOUT)


class _Runner:
    """The client's event loop thread and its session (all fields owned by the loop)."""

    def __init__(self, config: ClientConfig, owner: Pid, lifetime: Inbox) -> None:
        self.config = config
        self.owner = owner
        self.lifetime = lifetime
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="mcp-client", daemon=True)
        self.observed = Observed()
        self.session: ClientSession | None = None
        self.generation = 0
        self.server_info: dict[str, Any] = {}
        self.failure: AdkError | None = None
        self.stopping = False
        self.changed = asyncio.Condition()  # created before the loop runs: bound lazily
        self.reopen = asyncio.Event()

    def start(self) -> None:
        self.thread.start()

    def submit(self, work: Any, done: Callable[[Outcome], None]) -> None:
        """Run coroutine `work` on the loop; `done(Outcome)` runs when it ends."""

        def finished(future: Any) -> None:
            try:
                done(Outcome(True, future.result()))
            except AdkError as error:
                done(Outcome(False, error))
            except BaseException as error:  # answered, never lost
                done(Outcome(False, AdkError(("mcp_client_failed", type(error).__name__))))

        try:
            asyncio.run_coroutine_threadsafe(work, self.loop).add_done_callback(finished)
        except RuntimeError:  # the loop is closed
            work.close()
            closed = AdkError("mcp_client_closed", "the client is closed")
            done(Outcome(False, self.failure or closed))

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._stop_now)

    def _stop_now(self) -> None:
        self.stopping = True
        self.reopen.set()

    # --- the loop thread ---

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._main())
        finally:
            pending = [task for task in asyncio.all_tasks(self.loop) if not task.done()]
            if pending:  # waiters woken by the failure answer it; the rest are cancelled
                self.loop.run_until_complete(asyncio.wait(pending, timeout=1.0))
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.close()

    async def _main(self) -> None:
        watchdog = asyncio.create_task(self._watch_owner())
        errlog = open(os.devnull, "w")  # noqa: SIM115 - closed below
        try:
            while not self.stopping:
                try:
                    await self._one_session(errlog)
                except Exception as error:  # becomes the typed failure
                    leaf = _leaf(error)  # task groups wrap what their body raised
                    await self._fail(
                        leaf
                        if isinstance(leaf, AdkError)
                        else _transport_error(leaf, self.observed)
                    )
        finally:
            watchdog.cancel()
            errlog.close()
            await self._notify()

    async def _fail(self, error: AdkError) -> None:
        self.failure = error
        self.stopping = True
        with contextlib.suppress(ProcessExit):
            send(self.owner, Ended(error, self.generation > 0))

    async def _watch_owner(self) -> None:
        """Ends the session when the owning process exits, however it exits."""
        with contextlib.suppress(ProcessExit):
            while True:
                await self.lifetime.areceive()
        self._stop_now()

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def _one_session(self, errlog: Any) -> None:
        config = self.config
        async with contextlib.AsyncExitStack() as stack:
            if config.transport == "stdio":
                parameters = StdioServerParameters(
                    command=config.command[0],
                    args=list(config.command[1:]),
                    env=dict(config.env) if config.env is not None else None,
                    cwd=config.cwd,
                )
                read, write = await stack.enter_async_context(stdio_client(parameters, errlog))
            else:
                endpoint = config.endpoint
                assert endpoint is not None
                http = httpx2.AsyncClient(
                    transport=GuardedTransport(
                        endpoint,
                        config.policy,
                        self.observed,
                        config.max_response_bytes,
                        config.ssl_context,
                    ),
                    auth=OriginAuth(endpoint, config.auth, self.observed) if config.auth else None,
                    follow_redirects=False,
                    max_redirects=0,
                    trust_env=False,
                    timeout=httpx2.Timeout(config.connect_timeout, read=None),
                )
                await stack.enter_async_context(http)
                read, write = await stack.enter_async_context(
                    streamable_http_client(endpoint.url, http_client=http)
                )
            session = await stack.enter_async_context(
                ClientSession(read, write, client_info=CLIENT_INFO)
            )
            try:
                result = await asyncio.wait_for(session.initialize(), config.connect_timeout)
            except TimeoutError:
                raise AdkError("mcp_connect_timeout", "no initialize answer in time") from None
            except MCPError as error:
                if self.observed.redirects:
                    raise AdkError("redirect_rejected", "redirects are never followed") from None
                if self.observed.too_large:
                    raise AdkError("mcp_response_too_large", "past max_response_bytes") from None
                raise _protocol_error(error, self.observed, "initialize") from None
            self.server_info = {
                "protocol_version": result.protocol_version,
                "server": result.server_info.model_dump(mode="json", exclude_none=True),
            }
            self.session = session
            self.generation += 1
            self.reopen.clear()
            await self._notify()
            await self.reopen.wait()
            self.session = None

    async def _current(self, deadline: float, after: int = 0) -> tuple[ClientSession, int]:
        """The open session (one newer than generation `after`), waiting for it."""
        async with self.changed:
            while True:
                if self.failure is not None:
                    raise self.failure
                if self.stopping:
                    raise AdkError("mcp_client_closed", "the client is closing")
                if self.session is not None and self.generation > after:
                    return self.session, self.generation
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AdkError("mcp_timeout", "no session in time")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), remaining)

    async def ready(self) -> dict[str, Any]:
        await self._current(time.monotonic() + self.config.connect_timeout + 1.0)
        return dict(self.server_info)

    async def request(self, name: str, args: tuple[Any, ...], deadline: float) -> Any:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AdkError(("mcp_timeout", name), "the deadline passed")
        try:
            return await asyncio.wait_for(self._attempts(name, args, deadline), remaining)
        except TimeoutError:
            raise AdkError(("mcp_timeout", name), "the deadline passed") from None

    async def _attempts(self, name: str, args: tuple[Any, ...], deadline: float) -> Any:
        session, generation = await self._current(deadline)
        for attempt in (1, 2):
            lost, redirects, large = (
                self.observed.session_lost,
                self.observed.redirects,
                self.observed.too_large,
            )
            self.observed.refused = None
            try:
                return await self._invoke(session, name, args)
            except MCPError as error:
                if self.observed.session_lost > lost:
                    self._reopen(generation)
                    if name not in READ_ONLY:
                        raise AdkError(
                            ("mcp_session_lost", "request_not_replayed"),
                            f"the server lost the session during {name}; not replayed",
                        ) from None
                    if attempt == 1:
                        session, generation = await self._current(deadline, generation)
                        continue
                    raise AdkError(("mcp_session_lost", name), "lost twice") from None
                if self.observed.redirects > redirects:
                    raise AdkError("redirect_rejected", "redirects are never followed") from None
                if self.observed.too_large > large:
                    raise AdkError(
                        "mcp_response_too_large", "a response past max_response_bytes"
                    ) from None
                raise _protocol_error(error, self.observed, name) from None
        raise AssertionError("unreachable")

    def _reopen(self, generation: int) -> None:
        if self.generation == generation and self.session is not None:
            self.session = None
            self.reopen.set()

    async def _invoke(self, session: ClientSession, name: str, args: tuple[Any, ...]) -> Any:
        config = self.config
        match name:
            case "list_tools":
                tools: list[McpTool] = []
                cursor: str | None = None
                for _ in range(MAX_PAGES):
                    page = await session.list_tools(
                        params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    )
                    for tool in page.tools:
                        tools.append(_tool(tool, config.max_schema_bytes))
                        if len(tools) > config.max_tools:
                            raise AdkError(
                                "mcp_too_many_tools", f"more than {config.max_tools} tools"
                            )
                    cursor = page.next_cursor
                    if not cursor:
                        return tools
                raise AdkError("mcp_too_many_pages", f"more than {MAX_PAGES} pages")
            case "call_tool":
                tool_name, arguments = args
                result = await session.call_tool(tool_name, arguments)
                if not isinstance(result, types.CallToolResult):
                    raise AdkError("mcp_unexpected_result", "tools/call answered no tool result")
                dumped = _bounded(result, config.max_response_bytes)
                return McpToolResult(
                    content=list(dumped.get("content", [])),
                    is_error=bool(dumped.get("isError", False)),
                    structured_content=dumped.get("structuredContent"),
                )
            case "list_resources":
                return await self._pages(session.list_resources, "resources")
            case "list_prompts":
                return await self._pages(session.list_prompts, "prompts")
            case "read_resource":
                (uri,) = args
                return _bounded(await session.read_resource(uri), config.max_response_bytes)
            case "get_prompt":
                prompt, arguments = args
                return _bounded(
                    await session.get_prompt(prompt, arguments), config.max_response_bytes
                )
            case "ping":
                await session.send_ping()
                return None
        raise AdkError(("unsupported_mcp_operation", name))

    async def _pages(self, fetch: Any, key: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await fetch(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            dumped = _bounded(page, self.config.max_response_bytes)
            found.extend(dumped.get(key, []))
            if len(found) > self.config.max_tools * 4:
                raise AdkError(("mcp_too_many_items", key), "too many items")
            cursor = page.next_cursor
            if not cursor:
                return found
        raise AdkError("mcp_too_many_pages", f"more than {MAX_PAGES} pages")


def _bounded(result: Any, limit: int) -> dict[str, Any]:
    dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    dumped.pop("_meta", None)
    if len(json.dumps(dumped)) > limit:
        raise AdkError("mcp_response_too_large", "a response past max_response_bytes")
    return dumped


def _tool(tool: Any, max_schema_bytes: int) -> McpTool:
    schema = dict(tool.input_schema or {"type": "object"})
    output = dict(tool.output_schema) if tool.output_schema else None
    if len(json.dumps(schema)) + len(json.dumps(output)) > max_schema_bytes:
        raise AdkError(("mcp_tool_schema_too_large", str(tool.name)[:64]), "schema too large")
    annotations = (
        tool.annotations.model_dump(mode="json", exclude_none=True) if tool.annotations else {}
    )
    return McpTool(
        name=tool.name,
        description=tool.description or "",
        input_schema=schema,
        title=tool.title,
        output_schema=output,
        annotations=annotations,
    )


def _protocol_error(error: MCPError, observed: Observed, name: str) -> AdkError:
    if observed.refused is not None:
        return observed.refused
    if error.code == types.CONNECTION_CLOSED:
        return AdkError("mcp_connection_closed", f"the connection closed during {name}")
    return AdkError(("mcp_error", error.code), f"{name}: {error.message}"[:512])


def _leaf(error: BaseException) -> BaseException:
    """The first `AdkError` inside (nested) exception groups, else the first leaf."""
    if not isinstance(error, BaseExceptionGroup):
        return error
    leaves = [_leaf(inner) for inner in error.exceptions]
    return next((leaf for leaf in leaves if isinstance(leaf, AdkError)), leaves[0])


def _caused_by(error: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = error
    for _ in range(16):
        if seen is None:
            return False
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _transport_error(error: BaseException, observed: Observed) -> AdkError:
    if observed.refused is not None:
        return observed.refused
    if isinstance(error, MCPError):
        return _protocol_error(error, observed, "initialize")
    if _caused_by(error, ssl.SSLError):
        return AdkError("mcp_tls_failed", "the TLS handshake or certificate check failed")
    if isinstance(error, OSError):
        return AdkError(("mcp_transport_failed", type(error).__name__), "the server did not start")
    return AdkError(("mcp_transport_failed", type(error).__name__), "the transport failed")
