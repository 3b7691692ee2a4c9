"""`McpHttpApp`: the Streamable HTTP endpoint, as one ASGI app.

The protocol itself (JSON-RPC dispatch, the initialize handshake, the session's
transport and server task, JSON responses to POST) is the official SDK's
`StreamableHTTPSessionManager` driving a low-level `mcp.server.Server`. This layer
sits in front of it and enforces what the SDK does not, before a message reaches it:

- only POST and DELETE on the endpoint: GET (the optional unsolicited SSE channel) and
  anything else is 405;
- an ``Origin`` header must be one of ``allowed_origins`` (403 otherwise);
- authentication (`ServerAuth`: 401 with a Bearer challenge, carrying
  ``error="invalid_token"`` when a credential was refused, and ``resource_metadata``
  and ``scope`` under OAuth) and, per message and per DELETE, authorization (403
  ``insufficient_scope``); with every hook thread busy, 503 (no thread is added);
- a body larger than ``max_body_bytes`` is 413 (read at most that many bytes; a declared
  ``Content-Length`` past it is refused unread), a non-numeric ``Content-Length`` 400;
  a body not in full within 30 s is 408; a client that leaves mid-body gets no answer
  (`serving.bodies.read_body`);
- ``initialize`` opens a session (``max_sessions`` at most, initializes in progress
  included, the SDK's own cap the same: ``-32000`` "Session capacity reached" past it,
  whoever notices) and an
  unsupported requested version is negotiated down to 2025-11-25 (2025-06-18 is
  honoured); every later message needs ``mcp-protocol-version`` (400 without it or
  with a version other than the session's) and ``mcp-session-id``, bound to the
  principal's scope (`SessionTable`: 404 for an unknown, expired or foreign id); until
  ``notifications/initialized`` only ``ping`` is served (400), and it is sent once;
- a request id is a string of at most 128 characters or a 64-bit integer (400
  ``-32600`` otherwise); an id repeated among the session's recent ids is ``-32600``;
  once the session has admitted ``max_session_requests`` requests it is closed in both
  tables and the next request gets 404 (the client initializes again); past
  ``max_concurrency`` requests in flight (counting timed-out calls whose threads still
  run), a request is ``-32000`` (the ones in flight complete);
- an answer larger than ``max_response_bytes`` (encoded) is replaced by ``-32603``
  "Response exceeds limit";
- DELETE ends the session: 204, then 404.

JSON-RPC refusals go back with HTTP 200 (they answer a request id); transport refusals
carry a JSON-RPC error body with ``id: null``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Message, Receive, Scope, Send

from adk_actors.mcp.server_auth import ServerAuth, principal_scope
from adk_actors.mcp.server_options import ServerOptions
from adk_actors.mcp.server_sessions import Admission, SessionPhase, SessionTable
from adk_actors.serving.bodies import BodyStatus, read_body
from adk_actors.serving.workers import WorkerPool, WorkersBusy
from supervision import get_logger

_log = get_logger("adk_actors.mcp.server")

LATEST_PROTOCOL_VERSION = "2025-11-25"
SUPPORTED_PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18")
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
INVALID_REQUEST = -32600
PARSE_ERROR = -32700
INTERNAL_ERROR = -32603
SERVER_ERROR = -32000
MAX_REQUEST_ID_CHARS = 128
_MAX_INT_ID = 1 << 63
CAPACITY_REACHED = "Session capacity reached"


class McpHttpApp:
    """The ASGI app of one MCP server: our checks, then the SDK's session manager.

    The SDK's manager runs in a task this app starts on its loop at the first request
    (so it works under a listener without lifespan events, or mounted in another app);
    `aclose` stops it. Served from another event loop (a restarted listener reusing the
    app), it starts over: a new manager and an empty session table (clients see 404 and
    initialize again)."""

    def __init__(
        self, server: Server[Any], options: ServerOptions, auth: ServerAuth, workers: WorkerPool
    ) -> None:
        self.options = options
        self.auth = auth
        self.workers = workers
        """The catalog's pool: its abandoned threads count against ``max_concurrency``."""
        self._server = server
        self._path = options.endpoint_path
        self._origins = frozenset(options.allowed_origins)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fresh()

    def _fresh(self) -> None:
        options = self.options
        self.sessions = SessionTable(
            options.max_sessions, options.session_ttl, options.max_session_requests
        )
        self._manager = StreamableHTTPSessionManager(
            app=self._server,
            json_response=True,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            session_idle_timeout=options.session_ttl,
            max_request_body_size=options.max_body_bytes,
            max_sessions=options.max_sessions,  # ours closes theirs, so they agree
        )
        self._in_flight = 0
        self._ready: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    # -- the SDK manager's task ----------------------------------------------------------

    async def _started(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            if self._loop is not None:
                self._fresh()
            self._loop = loop
        if self._ready is None:
            self._ready, self._stop = asyncio.Event(), asyncio.Event()
            self._task = loop.create_task(self._run_manager())
        await self._ready.wait()

    async def _run_manager(self) -> None:
        assert self._ready is not None and self._stop is not None
        async with self._manager.run():
            self._ready.set()
            await self._stop.wait()

    async def aclose(self) -> None:
        if self._stop is not None and self._task is not None:
            self._stop.set()
            await self._task
        self.workers.release_idle()
        self.auth.hooks.release_idle()

    # -- requests ------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = _headers(scope)
        path = scope.get("path", "")
        oauth = self.auth.oauth
        if oauth is not None and path == oauth.metadata_path:
            if scope["method"] in ("GET", "HEAD"):
                await _respond(send, 200, oauth.document(), {"cache-control": "max-age=300"})
            else:
                await _respond(send, 405, b"", {"allow": "GET"})
            return
        if path not in (self._path, self._path + "/"):
            await _error(send, 404, "not_found")
            return
        origin = headers.get("origin")
        if origin is not None and origin not in self._origins:
            await _error(send, 403, "origin_not_allowed")
            return
        method = scope["method"]
        if method not in ("POST", "DELETE"):
            await _error(send, 405, "method_not_allowed", {"allow": "POST, DELETE"})
            return
        try:
            await self._authenticated(scope, receive, send, headers, method)
        except WorkersBusy:
            await _error(send, 503, "server_busy", {"retry-after": "1"}, code=SERVER_ERROR)

    async def _authenticated(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str], method: str
    ) -> None:
        authorization = headers.get("authorization")
        principal = await self.auth.authenticate(authorization)
        if principal is None:
            challenge = self.auth.challenge(None if authorization is None else "invalid_token")
            await _error(send, 401, "unauthorized", {"www-authenticate": challenge})
            return
        await self._started()
        await self._expire()
        if method == "DELETE":
            if not await self.auth.authorize(principal, "sessions/delete", {"kind": "session"}):
                await self._forbidden(send)
                return
            await self._delete(send, headers, principal)
            return
        body = await read_body(
            receive, self.options.max_body_bytes, content_length=headers.get("content-length")
        )
        match body.status:
            case BodyStatus.TOO_LARGE:
                await _error(send, 413, "request_too_large", {"connection": "close"})
            case BodyStatus.INVALID_LENGTH:
                await _error(send, 400, "invalid_content_length", {"connection": "close"})
            case BodyStatus.COMPLETE:
                await self._post(scope, receive, send, headers, principal, body.data)
            case BodyStatus.TIMED_OUT:
                await _error(send, 408, "request_timeout", {"connection": "close"})
            case BodyStatus.DISCONNECTED:
                pass  # the client left mid-body: nothing to parse, no one to answer

    async def _expire(self) -> None:
        """End in the SDK the sessions our table let go idle."""
        for session_id in self.sessions.expire():
            await self._end_sdk_session(session_id)

    async def _end_sdk_session(self, session_id: str) -> None:
        """Terminate the SDK's session `session_id` (a DELETE of our own; its answer is
        dropped)."""
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "DELETE",
            "scheme": "http",
            "path": self._path,
            "raw_path": self._path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(SESSION_HEADER.encode(), session_id.encode("latin-1"))],
            "client": None,
            "server": None,
        }
        await self._manager.handle_request(scope, _no_body, _discard)

    async def _forbidden(self, send: Send) -> None:
        challenge = self.auth.challenge("insufficient_scope")
        await _error(send, 403, "insufficient_scope", {"www-authenticate": challenge})

    async def _delete(self, send: Send, headers: dict[str, str], principal: str) -> None:
        session_id = headers.get(SESSION_HEADER)
        if session_id is None:
            await _error(send, 400, "missing_session_id")
            return
        record = self.sessions.find(session_id, principal_scope(principal))
        if record is None:
            await _error(send, 404, "Session not found")
            return
        self.sessions.close(session_id)  # 404 from now on, whatever the SDK answers
        await self._end_sdk_session(session_id)
        await _respond(send, 204, b"", {})

    async def _post(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        principal: str,
        body: bytes,
    ) -> None:
        try:
            message = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            await _error(send, 400, "parse_error", code=PARSE_ERROR)
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            await _error(send, 400, "invalid_request", code=INVALID_REQUEST)
            return
        method = message.get("method")
        request_id = message.get("id")
        is_request = isinstance(method, str) and "id" in message
        if (is_request and not isinstance(request_id, str | int)) or isinstance(request_id, bool):
            await _error(send, 400, "invalid_request", code=INVALID_REQUEST)
            return
        if not _bounded_id(request_id):
            await _error(send, 400, "invalid_request_id", code=INVALID_REQUEST)
            return
        if isinstance(method, str) and not 0 < len(method) <= 128:
            await _error(send, 400, "invalid_request", code=INVALID_REQUEST)
            return
        operation = method if isinstance(method, str) else "response"
        resource = _resource(operation, message.get("params"))
        if not await self.auth.authorize(principal, operation, resource):
            await self._forbidden(send)
            return
        scope_key = principal_scope(principal)
        if method == "initialize" and is_request:
            await self._initialize(scope, receive, send, headers, message, scope_key)
            return
        version = headers.get(VERSION_HEADER)
        if version is None or version not in SUPPORTED_PROTOCOL_VERSIONS:
            await _error(send, 400, "missing_or_unsupported_protocol_version")
            return
        session_id = headers.get(SESSION_HEADER)
        if session_id is None:
            await _error(send, 400, "missing_session_id")
            return
        record = self.sessions.find(session_id, scope_key)
        if record is None:
            await _error(send, 404, "Session not found")
            return
        if version != record.version:
            await _error(send, 400, "protocol_version_mismatch")
            return
        confirming = method == "notifications/initialized" and not is_request
        if confirming:
            if record.phase is not SessionPhase.AWAITING_INITIALIZED:
                await _error(send, 400, "already_initialized")
                return
            record.move(SessionPhase.READY)
        elif not record.ready and method != "ping":
            await _error(send, 400, "session_not_ready")
            return
        if not is_request:  # a notification or a response: the SDK answers 202
            await self._manager.handle_request(scope, _replay(body, receive), send)
            return
        assert isinstance(method, str) and request_id is not None
        admission = self.sessions.admit(session_id, record, request_id)
        if admission is Admission.EXHAUSTED:
            if record.in_flight == 0:  # else the last request in flight ends it
                await self._end_sdk_session(session_id)
            await _error(send, 404, "Session not found")
            return
        if admission is Admission.REPEATED:
            await _rpc_error(send, request_id, INVALID_REQUEST, "Duplicate request id")
            return
        if self._in_flight + self.workers.abandoned >= self.options.max_concurrency:
            await _rpc_error(send, request_id, SERVER_ERROR, "Server busy")
            return
        self.sessions.count(record, request_id)
        self._in_flight += 1
        record.in_flight += 1
        try:
            bounded = _BoundedAnswer(send, request_id, self.options.max_response_bytes)
            await self._manager.handle_request(scope, _replay(body, receive), bounded)
            await bounded.flush()
        finally:
            self._in_flight -= 1
            record.in_flight -= 1
        if record.phase is SessionPhase.EXHAUSTED and record.in_flight == 0:
            await self._end_sdk_session(session_id)

    async def _initialize(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        message: dict[str, Any],
        scope_key: str,
    ) -> None:
        request_id = message["id"]
        if SESSION_HEADER in headers:
            await _error(send, 400, "initialize_inside_session")
            return
        params = message.get("params")
        if not isinstance(params, dict):
            await _rpc_error(send, request_id, -32602, "Invalid initialize parameters")
            return
        requested = params.get("protocolVersion")
        negotiated = (
            requested if requested in SUPPORTED_PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION
        )
        if not self.sessions.reserve():
            await _rpc_error(send, request_id, SERVER_ERROR, CAPACITY_REACHED)
            return
        body = json.dumps({**message, "params": {**params, "protocolVersion": negotiated}})
        refused = False

        async def watch(event: Message) -> None:
            nonlocal refused
            if event["type"] == "http.response.start":
                status = event["status"]
                session = next(
                    (
                        value.decode("latin-1")
                        for name, value in event.get("headers", [])
                        if name.decode("latin-1").lower() == SESSION_HEADER
                    ),
                    None,
                )
                if status == 200 and session is not None:
                    self.sessions.open(session, scope_key, negotiated, request_id)
                refused = status == 503  # the SDK's cap: answered as ours below
            if not refused:
                await send(event)

        try:
            # recorded before the answer leaves, so no later request races it
            await self._manager.handle_request(scope, _replay(body.encode(), receive), watch)
        finally:
            self.sessions.release()
        if refused:
            await _rpc_error(send, request_id, SERVER_ERROR, CAPACITY_REACHED)


class _BoundedAnswer:
    """A `send` holding one JSON answer of the SDK; past `limit` bytes it is replaced by
    ``-32603`` "Response exceeds limit" (what was held is dropped)."""

    def __init__(self, send: Send, request_id: str | int, limit: int) -> None:
        self._send = send
        self._request_id = request_id
        self._limit = limit
        self._start: Message | None = None
        self._chunks: list[bytes] = []
        self._size = 0
        self._complete = False
        self._done = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._start = message
            return
        if message["type"] != "http.response.body" or self._done:
            await self._send(message)
            return
        body = message.get("body", b"")
        self._size += len(body)
        if self._size <= self._limit:
            self._chunks.append(body)
        else:
            self._chunks.clear()
        if not message.get("more_body", False):
            self._complete = True
            await self.flush()

    async def flush(self) -> None:
        """Send what is held (once the body is complete, or when the SDK is done: an
        answer it left unfinished becomes ``-32603``)."""
        if self._done or self._start is None:
            return
        self._done = True
        if self._size > self._limit:
            _log.warning("adk.mcp.server.response_too_large", limit=self._limit)
            await _rpc_error(self._send, self._request_id, INTERNAL_ERROR, "Response exceeds limit")
            return
        if not self._complete:
            await _rpc_error(self._send, self._request_id, INTERNAL_ERROR, "Internal error")
            return
        await self._send(self._start)
        await self._send({"type": "http.response.body", "body": b"".join(self._chunks)})


def _bounded_id(request_id: Any) -> bool:
    """Is `request_id` (absent, a string or an int) within the id bounds?"""
    if isinstance(request_id, str):
        return len(request_id) <= MAX_REQUEST_ID_CHARS
    if isinstance(request_id, int):
        return -_MAX_INT_ID <= request_id < _MAX_INT_ID
    return True


def _resource(method: str, params: Any) -> Mapping[str, Any]:
    """The bounded resource descriptor an authorization hook sees."""
    if not isinstance(params, dict):
        return {}
    key, field = {
        "tools/call": ("tool", "name"),
        "resources/read": ("uri", "uri"),
        "prompts/get": ("prompt", "name"),
    }.get(method, ("", ""))
    value = params.get(field) if key else None
    return {key: value[:2048]} if isinstance(value, str) else {}


def _headers(scope: Scope) -> dict[str, str]:
    return {
        name.decode("latin-1").lower(): value.decode("latin-1")
        for name, value in scope.get("headers", [])
    }


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands over `body` once, then waits on the real one."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _discard(message: Message) -> None:
    return None


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _respond(send: Send, status: int, body: bytes, headers: Mapping[str, str]) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    if status != 204:
        raw.append((b"content-type", b"application/json"))
        raw.append((b"content-length", str(len(body)).encode()))
    raw.append((b"cache-control", b"no-store"))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body if status != 204 else b""})


async def _error(
    send: Send,
    status: int,
    reason: str,
    headers: Mapping[str, str] | None = None,
    *,
    code: int = INVALID_REQUEST,
) -> None:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": reason}}
    await _respond(send, status, json.dumps(body).encode(), headers or {})


async def _rpc_error(send: Send, request_id: str | int, code: int, message: str) -> None:
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    await _respond(send, 200, json.dumps(body).encode(), {})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]
