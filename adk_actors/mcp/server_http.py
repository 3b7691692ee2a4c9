"""`McpHttpApp`: the Streamable HTTP endpoint, as one ASGI app.

The protocol itself (JSON-RPC dispatch, the initialize handshake, the session's
transport and server task, JSON responses to POST) is the official SDK's
`StreamableHTTPSessionManager` driving a low-level `mcp.server.Server`. This layer
sits in front of it and enforces what the SDK does not, before a message reaches it:

- only POST and DELETE on the endpoint: GET (the optional unsolicited SSE channel) and
  anything else is 405;
- an ``Origin`` header must be one of ``allowed_origins`` (403 otherwise);
- authentication (`ServerAuth`: 401 with a Bearer challenge, carrying
  ``resource_metadata`` and ``scope`` under OAuth) and, per message and per DELETE,
  authorization (403 ``insufficient_scope``);
- a body larger than ``max_body_bytes`` is 413 (read at most that many bytes);
- ``initialize`` opens a session (``max_sessions`` at most: ``-32000`` past it) and an
  unsupported requested version is negotiated down to 2025-11-25 (2025-06-18 is
  honoured); every later message needs ``mcp-protocol-version`` (400 without it or
  with a version other than the session's) and ``mcp-session-id``, bound to the
  principal's scope (`SessionTable`: 404 for an unknown, expired or foreign id); until
  ``notifications/initialized`` only ``ping`` is served (400), and it is sent once;
- a repeated request id in a session is ``-32600``; past ``max_concurrency`` requests
  in flight, a request is ``-32000`` (the ones in flight complete);
- DELETE ends the session: 204, then 404.

JSON-RPC refusals go back with HTTP 200 (they answer a request id); transport refusals
carry a JSON-RPC error body with ``id: null``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Message, Receive, Scope, Send

from adk_actors.mcp.server_auth import ServerAuth, principal_scope
from adk_actors.mcp.server_sessions import SessionTable
from supervision import get_logger

_log = get_logger("adk_actors.mcp.server")

LATEST_PROTOCOL_VERSION = "2025-11-25"
SUPPORTED_PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18")
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
INVALID_REQUEST = -32600
PARSE_ERROR = -32700
SERVER_ERROR = -32000


@dataclass(frozen=True)
class HttpOptions:
    """The endpoint's checked bounds (times in seconds)."""

    path: str
    max_body_bytes: int
    max_concurrency: int
    max_sessions: int
    session_ttl: float
    max_session_requests: int
    allowed_origins: frozenset[str]


class McpHttpApp:
    """The ASGI app of one MCP server: our checks, then the SDK's session manager.

    The SDK's manager runs in a task this app starts on its loop at the first request
    (so it works under a listener without lifespan events, or mounted in another app);
    `aclose` stops it. Served from another event loop (a restarted listener reusing the
    app), it starts over: a new manager and an empty session table (clients see 404 and
    initialize again)."""

    def __init__(self, server: Server[Any], options: HttpOptions, auth: ServerAuth) -> None:
        self.options = options
        self.auth = auth
        self._server = server
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
            max_sessions=options.max_sessions * 2,  # ours is the bound; theirs may lag expiry
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
        if path not in (self.options.path, self.options.path + "/"):
            await _error(send, 404, "not_found")
            return
        origin = headers.get("origin")
        if origin is not None and origin not in self.options.allowed_origins:
            await _error(send, 403, "origin_not_allowed")
            return
        method = scope["method"]
        if method not in ("POST", "DELETE"):
            await _error(send, 405, "method_not_allowed", {"allow": "POST, DELETE"})
            return
        principal = await self.auth.authenticate(headers.get("authorization"))
        if principal is None:
            await _error(send, 401, "unauthorized", {"www-authenticate": self.auth.challenge()})
            return
        await self._started()
        if method == "DELETE":
            if not await self.auth.authorize(principal, "sessions/delete", {"kind": "session"}):
                await self._forbidden(send)
                return
            await self._delete(scope, receive, send, headers, principal)
            return
        body = await _read_body(receive, self.options.max_body_bytes)
        if body is None:
            await _error(send, 413, "request_too_large", {"connection": "close"})
            return
        await self._post(scope, receive, send, headers, principal, body)

    async def _forbidden(self, send: Send) -> None:
        challenge = self.auth.challenge("insufficient_scope")
        await _error(send, 403, "insufficient_scope", {"www-authenticate": challenge})

    async def _delete(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str], principal: str
    ) -> None:
        session_id = headers.get(SESSION_HEADER)
        if session_id is None:
            await _error(send, 400, "missing_session_id")
            return
        record = self.sessions.find(session_id, principal_scope(principal))
        if record is None:
            await _error(send, 404, "Session not found")
            return
        self.sessions.close(session_id)  # 404 from now on, whatever the SDK answers
        await self._manager.handle_request(scope, _replay(b"", receive), _discard)
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
            if record.ready:
                await _error(send, 400, "already_initialized")
                return
            record.ready = True
        elif not record.ready and method != "ping":
            await _error(send, 400, "session_not_ready")
            return
        if not is_request:  # a notification or a response: the SDK answers 202
            await self._manager.handle_request(scope, _replay(body, receive), send)
            return
        assert isinstance(method, str) and request_id is not None
        if not self.sessions.admit(record, request_id):
            await _rpc_error(send, request_id, INVALID_REQUEST, "Duplicate or exhausted request id")
            return
        if self._in_flight >= self.options.max_concurrency:
            await _rpc_error(send, request_id, SERVER_ERROR, "Server busy")
            return
        self._in_flight += 1
        try:
            await self._manager.handle_request(scope, _replay(body, receive), send)
        finally:
            self._in_flight -= 1

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
        if self.sessions.full():
            await _rpc_error(send, request_id, SERVER_ERROR, "Session capacity reached")
            return
        body = json.dumps({**message, "params": {**params, "protocolVersion": negotiated}})
        opened: dict[str, Any] = {}

        async def watch(event: Message) -> None:
            if event["type"] == "http.response.start":
                opened["status"] = event["status"]
                for name, value in event.get("headers", []):
                    if name.decode("latin-1").lower() == SESSION_HEADER:
                        opened["session"] = value.decode("latin-1")
                if opened["status"] == 200 and "session" in opened:
                    self.sessions.open(opened["session"], scope_key, negotiated, request_id)
            await send(event)

        # the session is recorded before the answer leaves, so no later request races it
        await self._manager.handle_request(scope, _replay(body.encode(), receive), watch)


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


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, or None once it passes `limit` bytes (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


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
