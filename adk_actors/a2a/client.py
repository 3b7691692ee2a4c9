"""The A2A 1.0 client: discover a peer's Agent Card, then JSON-RPC over HTTP POST.

``connect(card_url, ...)`` fetches and validates the card (`card.validate_card`: a
JSONRPC interface of A2A 1.x on the card's origin, unless listed in
``allowed_interface_origins``) within one deadline, decides which credentials the
RPC interface may get (`client_auth`), and returns an `A2AClient`. Each of its calls
(`send`, `stream`, `subscribe`, `get_task`, `list_tasks`, `cancel`, and the async
twins ``a...``) is one POST with ``A2A-Version: 1.0`` under one absolute deadline; the
answer is strictly parsed with the SDK's protobuf types (`wire.parse`) and returned as
its JSON dict. Streams are read as bounded server-sent events (`client_sse`).

Outbound rules (`adk_actors.outbound`, shared with the MCP client): https by default,
http only with ``allow_http_loopback`` and only to loopback addresses; every resolved
address validated and the validated one pinned per connection; redirects refused
(``redirect_rejected``); credentials only from ``auth()`` / ``discovery_auth()``, per
request, for the interface origin / the card origin only; bodies bounded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping
from typing import Any, TypeVar, Unpack

import anyio.to_thread
from a2a.types import a2a_pb2 as pb

from adk_actors.a2a.card import validate_card
from adk_actors.a2a.client_auth import extension_headers, rpc_header_names
from adk_actors.a2a.client_http import (
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
    ID_PATTERN,
    INTERRUPTED_STATES,
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
    is_loopback_destination,
    parse_endpoint,
    refuse_static_headers,
)
from providers.errors import AdkError, decode_options
from supervision import get_logger

__all__ = ["A2AClient", "aconnect", "connect"]

T = TypeVar("T")
Message = str | Mapping[str, Any]
"""What `send` takes: text (one text part) or the JSON form of an A2A ``Message``."""

REQUEST_REASON = "invalid_a2a_request"
ENDING_STATES = frozenset(state_name(state) for state in TERMINAL_STATES | INTERRUPTED_STATES)
_log = get_logger("adk.a2a.client")
_sync_calls = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="a2a-client")
"""Where a sync call runs its event loop when the calling thread already runs one."""


def connect(
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
    return _blocking(
        lambda: aconnect(
            card_url,
            auth=auth,
            discovery_auth=discovery_auth,
            resolver=resolver,
            ssl_context=ssl_context,
            **options,
        )
    )


async def aconnect(
    card_url: str,
    *,
    auth: AuthCallback | None = None,
    discovery_auth: AuthCallback | None = None,
    resolver: Resolver | None = None,
    ssl_context: ssl.SSLContext | None = None,
    **options: Unpack[ClientKeywords],
) -> A2AClient:
    """`connect`, awaitable."""
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
        allowed_hosts=None if checked.allowed_hosts is None else _hosts(checked.allowed_hosts),
        allowed_private_hosts=_hosts(checked.allowed_private_hosts),
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
        if names is not None and not card.security_requirements:
            await _require_loopback(policy, endpoint)
        extensions = extension_headers(
            card,
            max_extensions=checked.max_extensions,
            max_header_bytes=checked.max_extension_header_bytes,
        )
        rpc = Route(endpoint, auth if names is not None else None, names or frozenset())
        return A2AClient(card, interface, rpc, transport, checked, extensions)

    client = await _bounded("discover", checked.request_timeout, discover())
    _log.info("a2a.client.connected", host=card_endpoint.host, port=card_endpoint.port)
    return client


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

    # -- sync ---------------------------------------------------------------------------

    def send(
        self,
        message: Message,
        *,
        context_id: str | None = None,
        task_id: str | None = None,
        return_immediately: bool = False,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """``SendMessage``: ``{"task": {...}}`` or ``{"message": {...}}``."""
        return _blocking(
            lambda: self.asend(
                message,
                context_id=context_id,
                task_id=task_id,
                return_immediately=return_immediately,
                timeout=timeout,
            )
        )

    def stream(
        self,
        message: Message,
        *,
        context_id: str | None = None,
        task_id: str | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """``SendStreamingMessage``: the events, ``[{"seq": int | None, "event": {...}}]``."""
        return _blocking(
            lambda: self.astream(message, context_id=context_id, task_id=task_id, timeout=timeout)
        )

    def subscribe(
        self, task_id: str, *, last_event_id: int | None = None, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """``SubscribeToTask`` (from ``last_event_id`` when given): the events, as `stream`."""
        return _blocking(
            lambda: self.asubscribe(task_id, last_event_id=last_event_id, timeout=timeout)
        )

    def get_task(
        self, task_id: str, *, history_length: int | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """``GetTask``: the task."""
        return _blocking(
            lambda: self.aget_task(task_id, history_length=history_length, timeout=timeout)
        )

    def list_tasks(
        self,
        *,
        context_id: str | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """``ListTasks``: ``{"tasks": [...], "nextPageToken", ...}`` (newest first)."""
        return _blocking(
            lambda: self.alist_tasks(
                context_id=context_id, page_size=page_size, page_token=page_token, timeout=timeout
            )
        )

    def cancel(self, task_id: str, *, timeout: float | None = None) -> dict[str, Any]:
        """``CancelTask``: the canceled task."""
        return _blocking(lambda: self.acancel(task_id, timeout=timeout))

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
        params = self._message_params(message, context_id, task_id)
        return await self._stream("stream", "SendStreamingMessage", params, timeout)

    async def asubscribe(
        self, task_id: str, *, last_event_id: int | None = None, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        params = {"id": _task_id(task_id)}
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
        params: dict[str, Any] = {"id": _task_id(task_id)}
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
        params: dict[str, Any] = {}
        if context_id is not None:
            params["contextId"] = _identifier(context_id, "context_id")
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
        params = {"id": _task_id(task_id)}
        return await self._call("cancel", "CancelTask", params, pb.Task, timeout)

    # -- the exchange -------------------------------------------------------------------

    def _message_params(
        self, message: Message, context_id: str | None, task_id: str | None
    ) -> dict[str, Any]:
        if context_id is not None:
            _identifier(context_id, "context_id")
        if task_id is not None:
            _task_id(task_id)
        built = user_message(message, context_id=context_id, task_id=task_id)
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
                return await _events(response.aiter_bytes(), request_id, call, self._options)

        return await _bounded(op, seconds, exchange())


async def _events(
    chunks: Any, request_id: int, call: Exchange, options: ClientOptions
) -> list[dict[str, Any]]:
    """The stream's events, each strictly parsed, until the one that ends the task's
    turn (or the server closes the stream)."""
    decoder, rules = SseDecoder(), StreamRules(options.max_stream_events)
    events: list[dict[str, Any]] = []
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
    """Credentials for a card that declares no security go to loopback only."""
    addresses = await anyio.to_thread.run_sync(policy.addresses, endpoint, abandon_on_cancel=True)
    if not all(is_loopback_destination(address) for address in addresses):
        raise AdkError(
            "a2a_undeclared_auth_not_allowed",
            "the card declares no security: credentials go to a loopback interface only",
        )


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


def _blocking(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a call's coroutine to the end from sync code (on a worker thread's own loop
    when this thread already runs an event loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    return _sync_calls.submit(lambda: asyncio.run(factory())).result()


def _hosts(hosts: Collection[str]) -> frozenset[str]:
    return frozenset(host.lower().rstrip(".").strip("[]") for host in hosts)


def _identifier(value: Any, key: str) -> str:
    if not isinstance(value, str) or ID_PATTERN.fullmatch(value) is None:
        raise AdkError((REQUEST_REASON, key), "an id: [A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
    return value


def _task_id(value: Any) -> str:
    return _identifier(value, "task_id")


def _count(value: Any, key: str, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= 10_000:
        raise AdkError((REQUEST_REASON, key), f"an integer in [{low}, 10000]")
    return value
