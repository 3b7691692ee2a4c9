"""An MCP client: one supervised process that owns one MCP session.

`McpClientServer` is a GenServer (a temporary child of the MCP client supervisor).
Its `init` starts a thread running the client's own asyncio event loop, where the
official SDK's `ClientSession` and the transport (our bounded `client_stdio`, or the
SDK's ``streamable_http_client`` over a guarded ``httpx2`` client) live; requests are
answered later (``NoReply`` then `reply`), so the process's mailbox never waits on the
network. Each request is one typed message (`ListTools`, `CallTool`, ...), dispatched
with ``match``.

The process's lifetime bounds the transport: the session runs as one task that stop
cancels, wherever it is (the initialize handshake included), and the transport's exit
stops a stdio server (stdin closed, then its process group terminated). Stop comes
from `terminate`, or, when the process dies without it (``kill``), from the kernel: an
`Inbox` the process owns exits with it and its waker tells the loop.

The client's lifecycle is a `Phase` with checked transitions: ``connecting`` ->
``ready`` -> (``reopening`` -> ``ready``)* -> ``stopping`` or ``failed``. A stdio
server that exits (or sends a line past ``max_response_bytes``) fails the client: the
process ends, and later calls get ``mcp_client_closed``.

Each request carries one absolute deadline (monotonic), checked at every step, and
running out of it is ``("mcp_timeout", op)`` whichever timer sees it first. Session
loss over Streamable HTTP (a 404 to a request carrying the session id) makes the
process open a new session; a read-only request (``tools/list``, ``resources/list``,
``resources/read``, ``prompts/list``, ``prompts/get``, ``ping``) is retried once on it,
a ``tools/call`` never is: ``("mcp_session_lost", "request_not_replayed")``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import os
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import anyio
import httpx2
import msgspec
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from adk_actors.mcp.client_stdio import bounded_stdio
from adk_actors.mcp.security import (
    AuthCallback,
    Endpoint,
    GuardedTransport,
    HttpPolicy,
    Observed,
    OriginAuth,
    tls_failure,
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
MAX_PAGES = 16
STOP_TIMEOUT = 10.0


class ClientConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one client needs (checked by `connect`)."""

    transport: str
    command: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    endpoint: Endpoint | None = None
    policy: HttpPolicy = HttpPolicy()
    auth: AuthCallback | None = None
    ssl_context: ssl.SSLContext | None = None
    connect_timeout: float = 10.0
    max_response_bytes: int = 4 * 1024 * 1024
    max_tools: int = 256
    max_schema_bytes: int = 65_536


# --- the process's messages ---


class AwaitReady(NamedTuple):
    """Answered once the initialize handshake is over (server info) or failed."""


class ListTools(NamedTuple):
    deadline: float
    """``time.monotonic()`` by which the request is over (each request has one)."""


class CallTool(NamedTuple):
    name: str
    arguments: dict[str, Any]
    deadline: float


class ListResources(NamedTuple):
    deadline: float


class ReadResource(NamedTuple):
    uri: str
    deadline: float


class ListPrompts(NamedTuple):
    deadline: float


class GetPrompt(NamedTuple):
    name: str
    arguments: dict[str, str]
    deadline: float


class Ping(NamedTuple):
    deadline: float


McpRequest = ListTools | CallTool | ListResources | ReadResource | ListPrompts | GetPrompt | Ping
OPERATIONS: dict[type[Any], str] = {
    ListTools: "list_tools",
    CallTool: "call_tool",
    ListResources: "list_resources",
    ReadResource: "read_resource",
    ListPrompts: "list_prompts",
    GetPrompt: "get_prompt",
    Ping: "ping",
}
"""Each request's operation name: the second element of its ``mcp_timeout`` reason."""
READ_ONLY = (ListTools, ListResources, ReadResource, ListPrompts, GetPrompt, Ping)
"""Requests replayed once on a new session when the server lost the old one."""


def operation(request: McpRequest) -> str:
    return OPERATIONS[type(request)]


def timed_out(request: McpRequest) -> AdkError:
    """The one timeout error of `request`, whichever timer ran out."""
    return AdkError(("mcp_timeout", operation(request)), "the deadline passed")


class Close(NamedTuple):
    pass


class Ended(NamedTuple):
    """From the loop: the session is over and cannot be reopened."""

    error: AdkError
    was_ready: bool


class Outcome(NamedTuple):
    ok: bool
    value: Any


class Phase(enum.Enum):
    """Where the client's session is (see `_NEXT` for the allowed transitions)."""

    CONNECTING = "connecting"
    READY = "ready"
    REOPENING = "reopening"
    STOPPING = "stopping"
    FAILED = "failed"


_NEXT: dict[Phase, frozenset[Phase]] = {
    Phase.CONNECTING: frozenset({Phase.READY, Phase.STOPPING, Phase.FAILED}),
    Phase.READY: frozenset({Phase.REOPENING, Phase.STOPPING, Phase.FAILED}),
    Phase.REOPENING: frozenset({Phase.READY, Phase.STOPPING, Phase.FAILED}),
    Phase.STOPPING: frozenset(),
    Phase.FAILED: frozenset(),
}
FINAL = frozenset({Phase.STOPPING, Phase.FAILED})


class McpClientServer(GenServer):
    """The process that owns one MCP session (see the module doc)."""

    dispatcher = "thread"

    def init(self, args: Any) -> Any:
        config: ClientConfig = args
        runner = _Runner(config, self_pid())
        runner.start(Inbox("mcp-client-lifetime"))
        return runner

    def handle_call(self, request: Any, from_: From, state: Any) -> Any:
        runner: _Runner = state
        match request:
            case AwaitReady():
                runner.submit(runner.ready(), lambda outcome: reply(from_, outcome))
                return NoReply(runner)
            case (
                ListTools()
                | CallTool()
                | ListResources()
                | ReadResource()
                | ListPrompts()
                | GetPrompt()
                | Ping()
            ):
                runner.submit(runner.request(request), lambda outcome: reply(from_, outcome))
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

    def __init__(self, config: ClientConfig, owner: Pid) -> None:
        self.config = config
        self.owner = owner
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="mcp-client", daemon=True)
        self.observed = Observed()
        self.phase = Phase.CONNECTING
        self.session: ClientSession | None = None
        self.session_task: asyncio.Task[None] | None = None
        self.generation = 0
        self.server_info: dict[str, Any] = {}
        self.failure: AdkError | None = None
        self.changed = asyncio.Condition()  # created before the loop runs: bound lazily
        self.reopen = asyncio.Event()

    def start(self, lifetime: Inbox) -> None:
        """Run the loop; `lifetime` (an inbox of the process) exits with the process,
        and its waker stops the session however the process ended."""
        self.thread.start()

        def wake() -> None:
            if lifetime.closed:
                self.stop()

        lifetime.set_waker(wake)
        wake()  # the process may be gone already

    def submit(self, work: Any, done: Callable[[Outcome], None]) -> None:
        """Run coroutine `work` on the loop; `done(Outcome)` runs when it ends."""

        def finished(future: Any) -> None:
            try:
                done(Outcome(True, future.result()))
            except AdkError as error:
                done(Outcome(False, error))
            except BaseException:  # answered, never lost
                done(Outcome(False, AdkError("mcp_client_failed", "an unexpected error")))

        try:
            asyncio.run_coroutine_threadsafe(work, self.loop).add_done_callback(finished)
        except RuntimeError:  # the loop is closed
            work.close()
            closed = AdkError("mcp_client_closed", "the client is closed")
            done(Outcome(False, self.failure or closed))

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._stop_now)

    def _enter(self, phase: Phase) -> None:
        """Move to `phase`; a transition `_NEXT` does not allow is a bug."""
        if phase not in _NEXT[self.phase]:
            raise RuntimeError(f"mcp client: no transition {self.phase.value} -> {phase.value}")
        self.phase = phase

    def _stop_now(self) -> None:
        if self.phase in FINAL:
            return
        self._enter(Phase.STOPPING)
        self.session = None
        if self.session_task is not None:  # interrupts the handshake too
            self.session_task.cancel()
        self.loop.create_task(self._notify())

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
            for _ in range(3):  # callbacks already scheduled (answers to callers) run
                self.loop.run_until_complete(asyncio.sleep(0))
            self.loop.close()

    async def _main(self) -> None:
        errlog = open(os.devnull, "w")  # noqa: SIM115 - closed below
        try:
            while self.phase not in FINAL:
                self.session_task = asyncio.create_task(self._one_session(errlog))
                try:
                    await self.session_task
                except asyncio.CancelledError:
                    if self.phase is not Phase.STOPPING:
                        raise
                except Exception as error:  # becomes the typed failure
                    leaf = _leaf(error)  # task groups wrap what their body raised
                    await self._fail(
                        leaf
                        if isinstance(leaf, AdkError)
                        else _transport_error(leaf, self.observed)
                    )
                finally:
                    self.session_task = None
        finally:
            errlog.close()
            await self._notify()

    async def _fail(self, error: AdkError) -> None:
        if self.phase in FINAL:
            return
        was_ready = self.generation > 0
        self._enter(Phase.FAILED)
        self.failure = error
        self.session = None
        with contextlib.suppress(ProcessExit):
            send(self.owner, Ended(error, was_ready))

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def _one_session(self, errlog: Any) -> None:
        config = self.config
        ended = anyio.Event()  # set when the transport ends on its own (stdio)
        read: Any  # the transport's streams (the SDK's stream protocols)
        write: Any
        async with contextlib.AsyncExitStack() as stack:
            if config.transport == "stdio":
                read, write = await stack.enter_async_context(
                    bounded_stdio(
                        config.command,
                        config.env,
                        config.cwd,
                        errlog,
                        config.max_response_bytes,
                        self.observed,
                        ended,
                    )
                )
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
            large = self.observed.too_large
            try:
                result = await asyncio.wait_for(session.initialize(), config.connect_timeout)
            except TimeoutError:
                raise AdkError("mcp_connect_timeout", "no initialize answer in time") from None
            except MCPError as error:
                if self.observed.redirects:
                    raise AdkError("redirect_rejected", "redirects are never followed") from None
                if self.observed.too_large > large:
                    raise AdkError("mcp_response_too_large", "past max_response_bytes") from None
                raise _protocol_error(error, self.observed, "initialize") from None
            self.server_info = {
                "protocol_version": result.protocol_version,
                "server": result.server_info.model_dump(mode="json", exclude_none=True),
            }
            self._enter(Phase.READY)
            self.session = session
            self.generation += 1
            self.reopen.clear()
            await self._notify()
            await _first(self.reopen.wait(), ended.wait())
            self.session = None
            if not self.reopen.is_set():  # the transport ended: the server is gone
                if self.observed.too_large > large:
                    raise AdkError("mcp_response_too_large", "a line past max_response_bytes")
                raise AdkError("mcp_connection_closed", "the server closed the connection")

    async def _current(
        self, deadline: float, late: AdkError, after: int = 0
    ) -> tuple[ClientSession, int]:
        """The open session (one newer than generation `after`), waiting for it until
        `deadline` (then `late` is raised)."""
        async with self.changed:
            while True:
                if self.phase is Phase.FAILED:
                    assert self.failure is not None
                    raise self.failure
                if self.phase is Phase.STOPPING:
                    raise AdkError("mcp_client_closed", "the client is closing")
                if (
                    self.phase is Phase.READY
                    and self.session is not None
                    and self.generation > after
                ):
                    return self.session, self.generation
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise late
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), remaining)

    async def ready(self) -> dict[str, Any]:
        late = AdkError("mcp_connect_timeout", "no initialize answer in time")
        await self._current(time.monotonic() + self.config.connect_timeout + 1.0, late)
        return dict(self.server_info)

    async def request(self, request: McpRequest) -> Any:
        remaining = request.deadline - time.monotonic()
        if remaining <= 0:
            raise timed_out(request)
        try:
            return await asyncio.wait_for(self._attempts(request), remaining)
        except TimeoutError:
            raise timed_out(request) from None

    async def _attempts(self, request: McpRequest) -> Any:
        session, generation = await self._current(request.deadline, timed_out(request))
        name = operation(request)
        for attempt in (1, 2):
            lost, redirects, large = (
                self.observed.session_lost,
                self.observed.redirects,
                self.observed.too_large,
            )
            self.observed.refused = None
            try:
                return await self._invoke(session, request)
            except MCPError as error:
                if self.observed.session_lost > lost:
                    self._reopen(generation)
                    if not isinstance(request, READ_ONLY):
                        raise AdkError(
                            ("mcp_session_lost", "request_not_replayed"),
                            f"the server lost the session during {name}; not replayed",
                        ) from None
                    if attempt == 1:
                        session, generation = await self._current(
                            request.deadline, timed_out(request), generation
                        )
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
        if self.phase is Phase.READY and self.generation == generation:
            self._enter(Phase.REOPENING)
            self.session = None
            self.reopen.set()

    async def _invoke(self, session: ClientSession, request: McpRequest) -> Any:
        config = self.config
        match request:
            case ListTools():
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
            case CallTool(tool_name, arguments):
                result = await session.call_tool(tool_name, arguments)
                if not isinstance(result, types.CallToolResult):
                    raise AdkError("mcp_unexpected_result", "tools/call answered no tool result")
                dumped = _bounded(result, config.max_response_bytes)
                return McpToolResult(
                    content=list(dumped.get("content", [])),
                    is_error=bool(dumped.get("isError", False)),
                    structured_content=dumped.get("structuredContent"),
                )
            case ListResources():
                return await self._pages(session.list_resources, "resources")
            case ListPrompts():
                return await self._pages(session.list_prompts, "prompts")
            case ReadResource(uri):
                return _bounded(await session.read_resource(uri), config.max_response_bytes)
            case GetPrompt(prompt, arguments):
                return _bounded(
                    await session.get_prompt(prompt, arguments), config.max_response_bytes
                )
            case Ping():
                await session.send_ping()
                return None

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
        raise AdkError(
            "mcp_tool_schema_too_large", f"tool {str(tool.name)[:64]!r}: schema too large"
        )
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


def _transport_error(error: BaseException, observed: Observed) -> AdkError:
    if observed.refused is not None:
        return observed.refused
    if isinstance(error, MCPError):
        return _protocol_error(error, observed, "initialize")
    if (tls := tls_failure(error)) is not None:
        return tls
    if isinstance(error, OSError):
        return AdkError(("mcp_transport_failed", "start_failed"), "the server did not start")
    return AdkError(("mcp_transport_failed", "transport_error"), "the transport failed")


async def _first(*waits: Any) -> None:
    """Wait until the first of the coroutines `waits` returns; cancel the others."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
