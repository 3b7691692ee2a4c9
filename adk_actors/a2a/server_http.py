"""The A2A 1.0 HTTP binding: the agent card and the JSON-RPC endpoint, as starlette routes.

`a2a_routes(store, card, auth, options)` answers two paths (mounted by `adk.a2a.serve`
and by ``adk serve --a2a``):

- ``GET`` `wire.CARD_PATH`: the agent card's JSON, public (no credential), cacheable;
- ``POST`` `wire.RPC_PATH`: JSON-RPC 2.0, checked in this order (each refusal stops):
  1. the bearer credential (`serving.auth.BearerAuth`): 401 with ``WWW-Authenticate:
     Bearer`` (``error="invalid_token"`` when one was presented and refused); every
     hook thread busy: 503;
  2. ``POST`` only (405), a JSON ``Content-Type`` (415), a body of at most
     ``max_input_bytes`` (413, read no further; a non-numeric ``Content-Length`` is 400
     ``-32600``; a client that leaves mid-body gets no answer; a body not read in full
     within ``body_timeout``, 30 s by default, is 408 and the connection closes:
     `serving.bodies`);
  3. strict JSON (`wire.loads`: UTF-8, no member name twice, no NaN; HTTP 400,
     ``-32700``; past its value-count or depth bound ``-32600``), then a JSON-RPC 2.0
     request object with a string or integer id, a method name and object params
     (HTTP 400, ``-32600``);
  4. the ``A2A-Version`` header, for every method (as the reference's
     ``dispatch_versioned``): missing or not 1.x, ``-32009`` with the supported
     versions, so a 0.3 client (no header, 0.3 names) learns what to change;
  5. the method: push-notification config methods ``-32003``, the extended card
     ``-32004``, anything not an A2A 1.0 method (0.3 names included) ``-32601``;
  6. a streaming method needs streaming in the card and an ``Accept`` that takes
     ``text/event-stream`` (``-32004``); ``SubscribeToTask`` reads ``Last-Event-ID``
     (not a non-negative integer: HTTP 400, ``-32602``);
  7. the strict parse of the params (`wire.parse_request`, ``-32602``), then the task
     store, scoped to the authenticated principal (the store keeps only its hash).

JSON-RPC errors after step 3 go back with HTTP 200. A ``ListTasks`` result always has
its four required members (``tasks``, ``nextPageToken``, ``pageSize``, ``totalSize``),
at their defaults too. The store's `RpcError` is answered
as it is; anything else it raises is ``-32603`` (logged by class, never echoed). The
principal (never the credential) is all the store sees. A streamed answer is SSE
(`server_sse`); `StreamsClosing.close` ends the open ones when the server stops, and
from then on every request is 503; a request already past that check when the server
stops is refused by the drained store (`tasks_protocol.StoreStopping`): 503 with the
JSON-RPC error ``-32603`` "server stopping" under its id.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from a2a.types import a2a_pb2 as pb
from starlette.datastructures import Headers
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from adk_actors.a2a import wire
from adk_actors.a2a.card import card_json
from adk_actors.a2a.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PUSH_NOTIFICATION_NOT_SUPPORTED,
    UNSUPPORTED_OPERATION,
    VERSION_NOT_SUPPORTED,
    RpcError,
    error_response,
    result_response,
)
from adk_actors.a2a.server_options import A2AServerOptions
from adk_actors.a2a.server_sse import (
    HEARTBEAT_SECONDS,
    StreamsClosing,
    Subscription,
    stream_subscription,
)
from adk_actors.a2a.tasks_protocol import StoreStopping
from adk_actors.serving.auth import AuthNames, BearerAuth
from adk_actors.serving.bodies import BODY_TIMEOUT, BodyStatus, read_body
from adk_actors.serving.workers import PoolNames, WorkersBusy
from supervision import get_logger

_log = get_logger("adk_actors.a2a.server")

A2A_AUTH_NAMES = AuthNames(
    token_too_short="a2a_auth_token_too_short",
    invalid_option="invalid_a2a_server_option",
    log="adk.a2a.server",
    pool=PoolNames(busy="a2a_server_busy", log="adk.a2a.server", thread="adk-a2a"),
)
"""The A2A server's names for `serving.auth.BearerAuth` (its reasons, events, threads)."""

CARD_CACHE_CONTROL = "public, max-age=300"
MAX_REQUEST_ID_CHARS = 256
_MAX_INT_ID = 1 << 63
_VERSION = re.compile(r"1(\.[0-9]{1,4})?")
_JSON_TYPES = ("application/json", "application/a2a+json")
_SSE_ACCEPTS = ("text/event-stream", "text/*", "*/*")

RequestId = str | int


class TaskStore(Protocol):
    """What the endpoint needs of `adk_actors.a2a.tasks.TaskStore`."""

    async def send(self, principal: str, request: pb.SendMessageRequest) -> pb.Task: ...

    async def send_streaming(
        self, principal: str, request: pb.SendMessageRequest, *, max_queue: int | None = None
    ) -> Subscription: ...

    async def get(
        self, principal: str, task_id: str, history_length: int | None = None
    ) -> pb.Task: ...

    async def list(self, principal: str, request: pb.ListTasksRequest) -> pb.ListTasksResponse: ...

    async def cancel(self, principal: str, task_id: str) -> pb.Task: ...

    async def subscribe(
        self, principal: str, task_id: str, *, after: int | None = None
    ) -> Subscription: ...


class CardSlot:
    """The card a server publishes: set at once, or once the listener's URL is known
    (a port picked at bind time); until then the card path answers 503."""

    def __init__(self, card: pb.AgentCard | None = None) -> None:
        self.card: pb.AgentCard | None = None
        self.body: bytes | None = None
        if card is not None:
            self.publish(card)

    def publish(self, card: pb.AgentCard) -> None:
        self.body = json.dumps(card_json(card), separators=(",", ":")).encode()
        self.card = card

    @property
    def streaming(self) -> bool:
        return self.card is None or self.card.capabilities.streaming


def a2a_routes(
    store: TaskStore,
    card: pb.AgentCard | CardSlot,
    auth: BearerAuth,
    options: A2AServerOptions,
    *,
    heartbeat: float = HEARTBEAT_SECONDS,
    closing: StreamsClosing | None = None,
    body_timeout: float = BODY_TIMEOUT,
) -> list[BaseRoute]:
    """The card route and the JSON-RPC route of one served agent (see the module doc);
    an idle stream carries an SSE comment every `heartbeat` seconds, every stream ends
    once `closing` is closed, and a request body must arrive within `body_timeout`."""
    slot = card if isinstance(card, CardSlot) else CardSlot(card)
    rpc = RpcEndpoint(store, slot, auth, options, heartbeat, closing, body_timeout)
    return [
        Route(wire.CARD_PATH, CardEndpoint(slot), methods=None),
        Route(wire.RPC_PATH, rpc, methods=None),
    ]


class CardEndpoint:
    """``GET`` the agent card (public)."""

    def __init__(self, slot: CardSlot) -> None:
        self.slot = slot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _respond(
                send, 405, _transport_error(INVALID_REQUEST, "method not allowed"), {"allow": "GET"}
            )
            return
        body = self.slot.body
        if body is None:
            await _respond(
                send, 503, _transport_error(INTERNAL_ERROR, "starting"), {"retry-after": "1"}
            )
            return
        await _respond(
            send,
            200,
            body if scope["method"] == "GET" else b"",
            {"cache-control": CARD_CACHE_CONTROL},
            length=len(body),
        )


class RpcEndpoint:
    """``POST`` JSON-RPC 2.0 (see the module doc for the order of the checks)."""

    def __init__(
        self,
        store: TaskStore,
        slot: CardSlot,
        auth: BearerAuth,
        options: A2AServerOptions,
        heartbeat: float = HEARTBEAT_SECONDS,
        closing: StreamsClosing | None = None,
        body_timeout: float = BODY_TIMEOUT,
    ) -> None:
        self.store = store
        self.slot = slot
        self.auth = auth
        self.options = options
        self.heartbeat = heartbeat
        self.closing = closing
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.closing is not None and self.closing.closed:  # the server stops
            stopping = _transport_error(INTERNAL_ERROR, "server stopping")
            await _respond(send, 503, stopping, {"retry-after": "1", "connection": "close"})
            return
        headers = Headers(scope=scope)
        admitted = await self._admit(scope, receive, send, headers)
        if admitted is None:
            return
        principal, request_id, method, params = admitted
        refusal = self._refusal(method, headers)
        if refusal is not None:
            status = 400 if refusal.code == INVALID_PARAMS else 200  # a bad Last-Event-ID
            await _respond(send, status, _encode(error_response(request_id, refusal)))
            return
        try:
            request = wire.parse_request(
                method, params, max_parts=self.options.max_parts_per_message
            )
            if method in wire.STREAMING_METHODS:
                subscription = await self._subscribe(principal, request, headers)
            else:
                result = await self._call(principal, request)
        except StoreStopping as error:  # admitted before stop(), refused by the store
            refused = _encode(error_response(request_id, error))
            await _respond(send, 503, refused, {"retry-after": "1", "connection": "close"})
            return
        except RpcError as error:
            await _respond(send, 200, _encode(error_response(request_id, error)))
            return
        except Exception as error:
            _log.warning(
                "adk.a2a.server.request_failed", method=method, error_class=type(error).__name__
            )
            failure = RpcError(INTERNAL_ERROR, "internal error")
            await _respond(send, 200, _encode(error_response(request_id, failure)))
            return
        if method in wire.STREAMING_METHODS:
            await stream_subscription(
                send,
                receive,
                request_id,
                subscription,
                heartbeat=self.heartbeat,
                closing=self.closing,
            )
        else:
            await _respond(send, 200, _encode(result_response(request_id, result)))

    async def _admit(
        self, scope: Scope, receive: Receive, send: Send, headers: Headers
    ) -> tuple[str, RequestId, str, Any] | None:
        """Steps 1 to 3: (principal, id, method, params), or None once refused."""
        authorization = headers.get("authorization")
        try:
            principal = await self.auth.authenticate(authorization)
        except WorkersBusy:
            busy = _transport_error(INTERNAL_ERROR, "server busy")
            await _respond(send, 503, busy, {"retry-after": "1"})
            return None
        if principal is None:
            challenge = "Bearer" if authorization is None else 'Bearer error="invalid_token"'
            unauthorized = _transport_error(INVALID_REQUEST, "unauthorized")
            await _respond(send, 401, unauthorized, {"www-authenticate": challenge})
            return None
        if scope["method"] != "POST":
            not_allowed = _transport_error(INVALID_REQUEST, "method not allowed")
            await _respond(send, 405, not_allowed, {"allow": "POST"})
            return None
        if not _json_content(headers.get("content-type")):
            not_json = _transport_error(INVALID_REQUEST, "content type must be application/json")
            await _respond(send, 415, not_json)
            return None
        body = await read_body(
            receive,
            self.options.max_input_bytes,
            content_length=headers.get("content-length"),
            timeout=self.body_timeout,
        )
        match body.status:
            case BodyStatus.TOO_LARGE:
                too_large = _transport_error(INVALID_REQUEST, "request body too large")
                await _respond(send, 413, too_large, {"connection": "close"})  # the rest is unread
                return None
            case BodyStatus.INVALID_LENGTH:
                bad_length = _transport_error(INVALID_REQUEST, "invalid Content-Length")
                await _respond(send, 400, bad_length, {"connection": "close"})
                return None
            case BodyStatus.DISCONNECTED:
                return None  # the client left mid-body: nothing is parsed, no one to answer
            case BodyStatus.TIMED_OUT:  # declared more than it sent, or trickles (Review2 6)
                too_slow = _transport_error(INVALID_REQUEST, "request body timed out")
                await _respond(send, 408, too_slow, {"connection": "close"})
                return None
        try:
            message = wire.loads(body.data, max_bytes=self.options.max_input_bytes)
        except RpcError as error:  # not strict JSON (-32700) or past a document bound (-32600)
            await _respond(send, 400, _encode(error_response(None, error)))
            return None
        checked = _request(message)
        if isinstance(checked, RpcError):
            await _respond(send, 400, _encode(error_response(_echo_id(message), checked)))
            return None
        request_id, method, params = checked
        return principal, request_id, method, params

    def _refusal(self, method: str, headers: Headers) -> RpcError | None:
        """Steps 4 to 6: the version header (first, whatever the method), the method,
        what a stream needs."""
        version = headers.get(wire.VERSION_HEADER)
        if version is None or not _VERSION.fullmatch(version.strip()):
            return RpcError(
                VERSION_NOT_SUPPORTED,
                "A2A protocol version not supported",
                {"supportedVersions": [wire.A2A_VERSION]},
            )
        if method in wire.PUSH_CONFIG_METHODS:
            return RpcError(PUSH_NOTIFICATION_NOT_SUPPORTED, "push notifications are not supported")
        if method == wire.EXTENDED_CARD_METHOD:
            return RpcError(UNSUPPORTED_OPERATION, "no extended agent card")
        if method not in wire.METHODS:
            return RpcError(METHOD_NOT_FOUND, "method not found")
        if method in wire.STREAMING_METHODS:
            if not self.slot.streaming:
                return RpcError(UNSUPPORTED_OPERATION, "streaming is not supported")
            if not _accepts_sse(headers.get("accept")):
                return RpcError(UNSUPPORTED_OPERATION, "streaming needs Accept: text/event-stream")
            if method == "SubscribeToTask":
                try:
                    _last_event_id(headers)
                except RpcError as error:
                    return error
        return None

    async def _call(self, principal: str, request: wire.Request) -> dict[str, Any]:
        """A unary method's result, rendered."""
        match request:
            case pb.SendMessageRequest():
                task = await self.store.send(principal, request)
                return wire.render(pb.SendMessageResponse(task=task))
            case pb.GetTaskRequest():
                length = request.history_length if request.HasField("history_length") else None
                return wire.render(await self.store.get(principal, request.id, length))
            case pb.ListTasksRequest():
                return _list_result(await self.store.list(principal, request))
            case pb.CancelTaskRequest():
                return wire.render(await self.store.cancel(principal, request.id))
        raise RpcError(METHOD_NOT_FOUND, "method not found")

    async def _subscribe(
        self, principal: str, request: wire.Request, headers: Headers
    ) -> Subscription:
        """A streaming method's subscription (its refusals raise before the answer starts)."""
        match request:
            case pb.SendMessageRequest():
                return await self.store.send_streaming(principal, request)
            case pb.SubscribeToTaskRequest():
                after = _last_event_id(headers)
                return await self.store.subscribe(principal, request.id, after=after)
        raise RpcError(METHOD_NOT_FOUND, "method not found")


# -- request checks --------------------------------------------------------------------


def _request(message: Any) -> tuple[RequestId, str, Any] | RpcError:
    """(id, method, params) of a JSON-RPC 2.0 request object, else the -32600 to answer."""
    invalid = RpcError(INVALID_REQUEST, "invalid JSON-RPC request")
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return invalid
    request_id = message.get("id")
    if not isinstance(request_id, str | int) or not _valid_id(request_id):
        return invalid
    method = message.get("method")
    if not isinstance(method, str) or not 0 < len(method) <= 256:
        return invalid
    params = message.get("params", {})
    if not isinstance(params, dict):
        return invalid
    return request_id, method, params


def _valid_id(request_id: Any) -> bool:
    if isinstance(request_id, bool):
        return False
    if isinstance(request_id, str):
        return len(request_id) <= MAX_REQUEST_ID_CHARS
    if isinstance(request_id, int):
        return -_MAX_INT_ID <= request_id < _MAX_INT_ID
    return False


def _echo_id(message: Any) -> RequestId | None:
    """The id of a refused request when it is a valid one, else null."""
    if isinstance(message, dict) and _valid_id(message.get("id")):
        request_id: RequestId = message["id"]
        return request_id
    return None


def _json_content(content_type: str | None) -> bool:
    if content_type is None:
        return False
    return content_type.split(";", 1)[0].strip().lower() in _JSON_TYPES


def _accepts_sse(accept: str | None) -> bool:
    """Does an ``Accept`` header (absent: anything) take SSE? A range with ``q=0``
    refuses it."""
    if accept is None:
        return True
    for item in accept.split(","):
        kind, *parameters = (piece.strip().lower() for piece in item.split(";"))
        if kind in _SSE_ACCEPTS and not any(_refused(p) for p in parameters):
            return True
    return False


def _refused(parameter: str) -> bool:
    """Is this media-range parameter a zero quality (``q=0``, ``q=0.000``)?"""
    name, _, value = parameter.partition("=")
    if name.strip() != "q":
        return False
    try:
        return float(value.strip()) == 0.0
    except ValueError:
        return False


def _last_event_id(headers: Headers) -> int | None:
    """The ``Last-Event-ID`` cursor, None when absent or empty; anything but a
    non-negative integer is ``-32602`` (answered with HTTP 400)."""
    value = (headers.get("last-event-id") or "").strip()
    if not value:
        return None
    if not value.isascii() or not value.isdigit() or len(value) > 19:
        raise RpcError(INVALID_PARAMS, "invalid params", {"reason": "Last-Event-ID"})
    return int(value)


# -- answers ---------------------------------------------------------------------------


def _list_result(response: pb.ListTasksResponse) -> dict[str, Any]:
    """A ``ListTasks`` result with the four members the 1.0 proto marks REQUIRED, at
    their defaults too (the JSON mapping leaves defaults out; the SDK's server prints
    them, and schema-checking peers need them)."""
    result = wire.render(response)
    result.setdefault("tasks", [])
    result.setdefault("nextPageToken", response.next_page_token)
    result.setdefault("pageSize", response.page_size)
    result.setdefault("totalSize", response.total_size)
    return result


def _encode(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _transport_error(code: int, message: str) -> bytes:
    """A refusal before a request id is known: a JSON-RPC error with ``id: null``."""
    return _encode(error_response(None, RpcError(code, message)))


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    headers: dict[str, str] | None = None,
    *,
    length: int | None = None,
) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    raw.append((b"content-type", b"application/json"))
    raw.append((b"content-length", str(len(body) if length is None else length).encode()))
    if not any(name == b"cache-control" for name, _ in raw):
        raw.append((b"cache-control", b"no-store"))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
