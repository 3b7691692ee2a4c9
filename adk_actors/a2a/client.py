"""The A2A 1.0 client: discover a peer's Agent Card, then JSON-RPC over HTTP POST.

``connect(card_url, ...)`` fetches and validates the card (`card.validate_card`: a
JSONRPC interface of A2A 1.x on the card's origin, unless listed in
``allowed_interface_origins``) within one deadline, decides which credentials the
RPC interface may get (`client_auth`), and returns an `A2AClient`. Each of its calls
(`send`, `stream`, `subscribe`, `get_task`, `list_tasks`, `cancel`, and the async
twins ``a...``) is one POST with ``A2A-Version: 1.0`` under one absolute deadline; the
answer is strictly parsed with the SDK's protobuf types (`wire.parse`) and returned as
its JSON dict. Streams are read as bounded server-sent events (`client_sse`); a stream
past its deadline raises `StreamTimeout` holding the events received and the last event
id. The sync forms (`connect`, `send`, ...: `blocking`) run on a private loop on the
calling thread (never installed: a thread's own loop is left as it was) and refuse
inside a running event loop (``a2a_sync_call_in_event_loop``, naming the ``a...`` twin
to await), which they would freeze. Task and context ids are the peer's
(opaque: any printable string up to ``MAX_STRING_CHARS``); answers are read as strict
JSON (`wire.loads`).

Outbound rules (`adk_actors.outbound`, shared with the MCP client): https by default,
http only with ``allow_http_loopback`` and only to loopback addresses; every resolved
address validated and the validated one pinned per connection; redirects refused
(``redirect_rejected``); credentials only from ``auth()`` / ``discovery_auth()``, per
request, for the interface origin / the card origin only (``allow_undeclared_auth``: a
loopback interface only, checked on every connection); bodies bounded and never
compressed (``identity``; another encoding is ``a2a_unsupported_content_encoding``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Coroutine, Mapping
from typing import Any, ParamSpec, TypeVar, Unpack

import anyio.to_thread
from a2a.types import a2a_pb2 as pb

from adk_actors.a2a.card import validate_card
from adk_actors.a2a.client_auth import extension_headers, rpc_header_names
from adk_actors.a2a.client_http import (
    UNDECLARED_AUTH,
    Exchange,
    Route,
    Transport,
    content_type,
    read_body,
    tls_context,
)
from adk_actors.a2a.client_options import (
    A2A_REASONS,
    MAX_TIMEOUT,
    OPTION_REASON,
    ClientKeywords,
    ClientOptions,
)
from adk_actors.a2a.client_rpc import INVALID, decode_json, request_body, result_of
from adk_actors.a2a.client_sse import SseDecoder, StreamRules, ends_stream
from adk_actors.a2a.wire import (
    A2A_VERSION,
    CARD_PATH,
    INTERRUPTED_STATES,
    MAX_STRING_CHARS,
    TERMINAL_STATES,
    VERSION_HEADER,
    parse,
    render,
    state_name,
    user_message,
)
from adk_actors.outbound import (
    AuthCallback,
    Endpoint,
    HttpPolicy,
    Resolver,
    default_resolver,
    parse_endpoint,
    refuse_static_headers,
)
from providers.errors import AdkError, decode_options
from supervision import get_logger

__all__ = ["A2AClient", "StreamTimeout", "aconnect", "blocking", "connect"]

T = TypeVar("T")
P = ParamSpec("P")
Message = str | Mapping[str, Any]
"""What `send` takes: text (one text part) or the JSON form of an A2A ``Message``."""

REQUEST_REASON = "invalid_a2a_request"
ENDING_STATES = frozenset(state_name(state) for state in TERMINAL_STATES | INTERRUPTED_STATES)
_log = get_logger("adk.a2a.client")
SYNC_IN_LOOP = "a2a_sync_call_in_event_loop"


def blocking(async_twin: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The sync form of `async_twin` (``aconnect`` -> ``connect``, ``asend`` -> ``send``):
    it runs the call on a private event loop, on the calling thread, so the call's one
    deadline starts when it is made. The loop is never installed as the thread's loop (a
    loop the thread set but is not running stays its current loop) and is closed after
    the call, leftovers cancelled; Ctrl-C cancels the call (its cleanup runs) as with
    ``asyncio.run``. Inside a running event loop it refuses with
    ``("a2a_sync_call_in_event_loop", <the twin>)``: blocking there would freeze that
    loop (and any peer it serves) for the whole call; await the twin instead."""
    twin = async_twin.__name__
    name = twin.removeprefix("a")

    @functools.wraps(async_twin)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            # asyncio.run would install its loop as the thread's and then unset it
            with asyncio.Runner(loop_factory=asyncio.new_event_loop) as private:
                return private.run(async_twin(*args, **kwargs))
        raise AdkError(
            (SYNC_IN_LOOP, twin),
            f"{name}() blocks; inside a running event loop use `await {twin}(...)`",
        )

    call.__name__ = name
    call.__qualname__ = async_twin.__qualname__.removesuffix(twin) + name
    call.__doc__ = f"`{twin}`, blocking (never inside a running event loop). {async_twin.__doc__}"
    return call


async def aconnect(
    card_url: str,
    *,
    auth: AuthCallback | None = None,
    discovery_auth: AuthCallback | None = None,
    resolver: Resolver | None = None,
    ssl_context: ssl.SSLContext | None = None,
    **options: Unpack[ClientKeywords],
) -> A2AClient:
    """An `A2AClient` for the agent whose card is at `card_url` (or under the base URL
    `card_url`); `options` are `ClientOptions`' fields. Bad input is a typed `AdkError`."""
    refuse_static_headers(options)
    checked = decode_options(ClientOptions, options, OPTION_REASON, what="A2A client option")
    for key, value in (("auth", auth), ("discovery_auth", discovery_auth), ("resolver", resolver)):
        if value is not None and not callable(value):
            raise AdkError((OPTION_REASON, key), f"{key} is a callable")
    if ssl_context is not None and not isinstance(ssl_context, ssl.SSLContext):
        raise AdkError((OPTION_REASON, "ssl_context"), "an ssl.SSLContext")
    card_endpoint = parse_endpoint(discovery_url(card_url), A2A_REASONS)
    policy = HttpPolicy(
        reasons=A2A_REASONS,
        allow_http_loopback=checked.allow_http_loopback,
        allowed_hosts=None if checked.allowed_hosts is None else frozenset(checked.allowed_hosts),
        allowed_private_hosts=frozenset(checked.allowed_private_hosts),
        resolver=resolver or default_resolver,
        max_resolved_addresses=checked.max_resolved_addresses,
    )
    transport = Transport(
        policy, checked.max_response_bytes, checked.auth_timeout, tls_context(ssl_context)
    )
    discovery = Route(card_endpoint, discovery_auth)

    async def discover() -> A2AClient:
        card, interface = await _discover(discovery, transport, checked.allowed_interface_origins)
        endpoint = parse_endpoint(interface.url, A2A_REASONS)
        names = rpc_header_names(
            card,
            has_auth=auth is not None,
            auth_scheme=checked.auth_scheme,
            allow_undeclared_auth=checked.allow_undeclared_auth,
        )
        undeclared = names is not None and not card.security_requirements
        if undeclared:  # fail fast here; each RPC connection is checked again (Route)
            await _require_loopback(policy, endpoint)
        extensions = extension_headers(
            card,
            max_extensions=checked.max_extensions,
            max_header_bytes=checked.max_extension_header_bytes,
        )
        rpc = Route(
            endpoint,
            auth if names is not None else None,
            names or frozenset(),
            loopback_only=undeclared,
        )
        return A2AClient(card, interface, rpc, transport, checked, extensions)

    client = await _bounded("discover", checked.request_timeout, discover())
    _log.info("a2a.client.connected", host=card_endpoint.host, port=card_endpoint.port)
    return client


connect = blocking(aconnect)


class StreamTimeout(AdkError):
    """``("a2a_timeout", op)`` for a stream past its deadline, with what arrived before
    it: `events` (as the stream would have returned them) and `last_event_id` (the last
    event's sequence id, to resubscribe from; None if no event carried one)."""

    def __init__(self, op: str, events: list[dict[str, Any]]) -> None:
        super().__init__(("a2a_timeout", op), f"{op} did not finish in time")
        self.events = events
        self.last_event_id: int | None = next(
            (event["seq"] for event in reversed(events) if event["seq"] is not None), None
        )


class A2AClient:
    """A connected peer: its validated `card` (JSON) and `rpc_url`; every call is
    independent (its own connections, credentials and deadline)."""

    def __init__(
        self,
        card: pb.AgentCard,
        interface: pb.AgentInterface,
        rpc: Route,
        transport: Transport,
        options: ClientOptions,
        extensions: Mapping[str, str],
    ) -> None:
        self.card: dict[str, Any] = render(card)
        self.rpc_url: str = interface.url
        self._tenant = interface.tenant
        self._rpc = rpc
        self._transport = transport
        self._options = options
        self._extensions = dict(extensions)
        self._ids = itertools.count(1)
        self._closed = False

    def __repr__(self) -> str:
        return f"A2AClient({self.card.get('name', '')!r}, {self.rpc_url!r})"

    def close(self) -> None:
        """Refuse further calls (``a2a_client_closed``); nothing is held between calls."""
        self._closed = True

    async def aclose(self) -> None:
        self.close()

    def __enter__(self) -> A2AClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> A2AClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # -- async --------------------------------------------------------------------------

    async def asend(
        self,
        message: Message,
        *,
        context_id: str | None = None,
        task_id: str | None = None,
        return_immediately: bool = False,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """``SendMessage``: ``{"task": {...}}`` or ``{"message": {...}}``."""
        params = self._message_params(message, context_id, task_id)
        if return_immediately:
            params["configuration"] = {"returnImmediately": True}
        return await self._call("send", "SendMessage", params, pb.SendMessageResponse, timeout)

    async def astream(
        self,
        message: Message,
        *,
        context_id: str | None = None,
        task_id: str | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """``SendStreamingMessage``: the events, ``[{"seq": int | None, "event": {...}}]``
        (past the deadline: `StreamTimeout`, holding the events received)."""
        params = self._message_params(message, context_id, task_id)
        return await self._stream("stream", "SendStreamingMessage", params, timeout)

    async def asubscribe(
        self, task_id: str, *, last_event_id: int | None = None, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """``SubscribeToTask`` (from ``last_event_id`` when given): the events, as `astream`."""
        params = {"id": peer_id(task_id, "task_id")}
        if last_event_id is not None and (
            not isinstance(last_event_id, int)
            or isinstance(last_event_id, bool)
            or last_event_id < 0
        ):
            raise AdkError((REQUEST_REASON, "last_event_id"), "a non-negative integer")
        return await self._stream("subscribe", "SubscribeToTask", params, timeout, last_event_id)

    async def aget_task(
        self, task_id: str, *, history_length: int | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """``GetTask``: the task."""
        params: dict[str, Any] = {"id": peer_id(task_id, "task_id")}
        if history_length is not None:
            params["historyLength"] = _count(history_length, "history_length", 0)
        return await self._call("get_task", "GetTask", params, pb.Task, timeout)

    async def alist_tasks(
        self,
        *,
        context_id: str | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """``ListTasks``: ``{"tasks": [...], "nextPageToken", ...}`` (newest first)."""
        params: dict[str, Any] = {}
        if context_id is not None:
            params["contextId"] = peer_id(context_id, "context_id")
        if page_size is not None:
            params["pageSize"] = _count(page_size, "page_size", 1)
        if page_token is not None:
            if not isinstance(page_token, str) or not 0 < len(page_token) <= 512:
                raise AdkError((REQUEST_REASON, "page_token"), "the token a page answered")
            params["pageToken"] = page_token
        listed = await self._call("list_tasks", "ListTasks", params, pb.ListTasksResponse, timeout)
        listed.setdefault("tasks", [])  # the JSON mapping leaves an empty list out
        return listed

    async def acancel(self, task_id: str, *, timeout: float | None = None) -> dict[str, Any]:
        """``CancelTask``: the canceled task."""
        params = {"id": peer_id(task_id, "task_id")}
        return await self._call("cancel", "CancelTask", params, pb.Task, timeout)

    # -- sync twins (from sync code only; inside a running event loop await the a... form)

    send = blocking(asend)
    stream = blocking(astream)
    subscribe = blocking(asubscribe)
    get_task = blocking(aget_task)
    list_tasks = blocking(alist_tasks)
    cancel = blocking(acancel)

    # -- the exchange -------------------------------------------------------------------

    def _message_params(
        self, message: Message, context_id: str | None, task_id: str | None
    ) -> dict[str, Any]:
        built = user_message(message)
        if context_id is not None:  # the peer's ids: opaque (wire's pattern is our server's)
            built.context_id = peer_id(context_id, "context_id")
        if task_id is not None:
            built.task_id = peer_id(task_id, "task_id")
        return {"message": render(built)}

    def _headers(self, accept: str) -> dict[str, str]:
        return {
            "Accept": accept,
            "Content-Type": "application/json",
            VERSION_HEADER: A2A_VERSION,
            **self._extensions,
        }

    def _seconds(self, timeout: float | None) -> float:
        """The call's budget: ``timeout`` or ``request_timeout`` (a closed client refuses)."""
        if self._closed:
            raise AdkError("a2a_client_closed", "the client is closed")
        if timeout is None:
            return self._options.request_timeout
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= MAX_TIMEOUT
        ):
            raise AdkError((REQUEST_REASON, "timeout"), f"seconds in (0, {MAX_TIMEOUT}]")
        return float(timeout)

    def _with_tenant(self, params: dict[str, Any]) -> dict[str, Any]:
        if self._tenant:
            params["tenant"] = self._tenant
        return params

    async def _call(
        self, op: str, method: str, params: dict[str, Any], shape: type[Any], timeout: float | None
    ) -> dict[str, Any]:
        seconds = self._seconds(timeout)
        body_params = self._with_tenant(params)

        async def exchange() -> dict[str, Any]:
            request_id = next(self._ids)
            call = Exchange(self._rpc, self._transport)
            body = request_body(request_id, method, body_params)
            async with call.open(
                "POST", self._headers("application/json"), body, request_id
            ) as response:
                if content_type(response) != "application/json":
                    raise AdkError(
                        (INVALID, "content_type"), "a JSON-RPC answer is application/json"
                    )
                answer = await read_body(response)
            result = result_of(decode_json(answer), request_id, call.sent)
            return render(parse(shape, result, reason=INVALID))

        return await _bounded(op, seconds, exchange())

    async def _stream(
        self,
        op: str,
        method: str,
        params: dict[str, Any],
        timeout: float | None,
        last_event_id: int | None = None,
    ) -> list[dict[str, Any]]:
        seconds = self._seconds(timeout)
        body_params = self._with_tenant(params)
        headers = self._headers("text/event-stream")
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)

        received: list[dict[str, Any]] = []

        async def exchange() -> list[dict[str, Any]]:
            request_id = next(self._ids)
            call = Exchange(self._rpc, self._transport)
            body = request_body(request_id, method, body_params)
            async with call.open("POST", headers, body, request_id) as response:
                kind = content_type(response)
                if kind == "application/json":  # an error before the stream started
                    result_of(decode_json(await read_body(response)), request_id, call.sent)
                    raise AdkError((INVALID, "content_type"), "a stream answered with JSON")
                if kind != "text/event-stream":
                    raise AdkError((INVALID, "content_type"), "a stream is text/event-stream")
                chunks = response.aiter_bytes()
                return await _events(chunks, request_id, call, self._options, received)

        try:
            return await _bounded(op, seconds, exchange())
        except AdkError as error:
            if error.reason == ("a2a_timeout", op):
                raise StreamTimeout(op, received) from None
            raise


async def _events(
    chunks: AsyncIterator[bytes],
    request_id: int,
    call: Exchange,
    options: ClientOptions,
    events: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The stream's events (appended to `events` as they arrive, so a timeout keeps
    them), each strictly parsed, until the one that ends the task's turn (or the server
    closes the stream)."""
    decoder, rules = SseDecoder(), StreamRules(options.max_stream_events)
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            seq = rules.sequence(event.event_id)
            result = result_of(decode_json(event.data), request_id, call.sent)
            parsed = render(parse(pb.StreamResponse, result, reason=INVALID))
            rules.admit(parsed)
            events.append({"seq": seq, "event": parsed})
            if ends_stream(parsed, ENDING_STATES):
                return events
    if not events:
        raise AdkError((INVALID, "empty_stream"), "the stream ended without an event")
    return events


async def _discover(
    route: Route, transport: Transport, allowed_origins: Collection[str]
) -> tuple[pb.AgentCard, pb.AgentInterface]:
    call = Exchange(route, transport)
    async with call.open("GET", {"Accept": "application/json"}) as response:
        if content_type(response) != "application/json":
            raise AdkError(("a2a_invalid_agent_card", "content_type"), "a card is application/json")
        body = await read_body(response)
    try:
        data = decode_json(body)
    except AdkError:
        raise AdkError(("a2a_invalid_agent_card", "json"), "the card is not JSON") from None
    return validate_card(
        data, card_url=route.endpoint.url, allowed_interface_origins=allowed_origins
    )


async def _require_loopback(policy: HttpPolicy, endpoint: Endpoint) -> None:
    """Credentials for a card that declares no security go to loopback only (checked
    here once, and again on every RPC connection: `Route.loopback_only`)."""
    loopback = dataclasses.replace(policy, loopback_only=UNDECLARED_AUTH)
    await anyio.to_thread.run_sync(loopback.addresses, endpoint, abandon_on_cancel=True)


def discovery_url(card_url: Any) -> Any:
    """`card_url`, or the well-known card path under it when it is a base URL."""
    if not isinstance(card_url, str):
        return card_url  # parse_endpoint refuses it
    try:
        parts = urllib.parse.urlsplit(card_url)
    except ValueError:
        return card_url
    if parts.path in ("", "/") and not parts.query and not parts.fragment:
        return f"{parts.scheme}://{parts.netloc}{CARD_PATH}"
    return card_url


async def _bounded(op: str, seconds: float, work: Awaitable[T]) -> T:
    """`work` under one absolute deadline: ``("a2a_timeout", op)`` past it."""
    try:
        async with asyncio.timeout(seconds):
            return await work
    except TimeoutError:
        raise AdkError(("a2a_timeout", op), f"{op} did not finish in time") from None


def peer_id(value: Any, key: str) -> str:
    """A peer's task or context id: opaque to us (A2A gives it no grammar; the peer
    chose it), so any non-empty printable string of at most MAX_STRING_CHARS."""
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= MAX_STRING_CHARS
        or not value.isprintable()
    ):
        raise AdkError(
            (REQUEST_REASON, key), f"an id: a printable string of 1-{MAX_STRING_CHARS} chars"
        )
    return value


def _count(value: Any, key: str, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= 10_000:
        raise AdkError((REQUEST_REASON, key), f"an integer in [{low}, 10000]")
    return value
