"""The daemon's ASGI app: the /dev/v1 routes, the console page, and their guards.

`build_app(state)` assembles the routes of every area (and the legacy
``POST /a2a/prompt`` when the settings enable it) behind `Guards`, a pure ASGI
middleware that applies to every request, in this order:

1. the ``Host`` header must name this listener on loopback (``127.0.0.1``, ``[::1]``
   or ``localhost`` with its port), else 421 ``misdirected_request``: a page that
   reaches the daemon through DNS rebinding sends its own host name;
2. while the daemon drains, 503 ``developer_api_unavailable`` (and the connection
   closes); the check and the count of requests in flight are one step
   (`DevState.admit_request`), so a drain sees every request it must wait for;
3. on ``/dev/v1``: the bearer token (401 ``unauthorized`` with ``WWW-Authenticate``,
   403 ``forbidden``); the console page, its assets and the legacy endpoint need no
   token; then on every path the same-origin check (a request with an ``Origin`` from
   elsewhere is 403 ``forbidden``);
4. a deadline of ``request_timeout`` until the answer is sent (503
   ``request_timeout`` if nothing was sent yet; routes read it at `DEADLINE_KEY`); an
   SSE stream is free of it once it starts, ends at its own bounds, and is ended
   cleanly when the drain starts;
5. ``Cache-Control: no-store`` and the security headers on every API answer, and a
   500 ``internal_error`` (logged by type, never with a traceback or a message) for
   anything a route did not expect.

Inside the guards, `TraceContextMiddleware` makes a valid ``traceparent`` (and
``tracestate``) the parent of the spans the request's work opens (a run's invocation,
turns, model and tool calls); an invalid one is ignored. A refused request costs
nothing.

A ``websocket`` scope passes the same checks (no route takes one yet): the Host, then
the drain, the token on ``/dev/v1`` and the Origin, a refusal closing the handshake
with 1008 (policy violation; 1013 while draining) before the app sees it. ``lifespan``
passes through; any other scope type is refused.

Starlette's own 404 and 405 become the JSON error body (``not_found``,
``method_not_allowed`` with ``Allow``). The router never redirects to add or remove a
trailing slash (``redirect_slashes`` is off): a path names a route as sent, or it is a
404 (or a 400 for an empty, ``.`` or ``..`` segment, `views.DotSegmentRoute`). An id is
one segment: a ``/dev/v1`` path sent with an encoded slash (``%2F``, any case) is 400
before any route sees its decoded form (``invalid_run_id`` under ``/dev/v1/runs``,
``invalid_path_parameter`` elsewhere), so ``a%2Fb`` never names ``a`` then ``b``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Sequence

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adk_actors.daemon import (
    auth,
    legacy,
    routes_agents,
    routes_ambient,
    routes_console,
    routes_evaluation,
    routes_observability,
    routes_runs,
    routes_sessions,
)
from adk_actors.daemon.bodies import DEADLINE_KEY
from adk_actors.daemon.errors import ApiError, error_response
from adk_actors.daemon.state import DevState
from adk_actors.daemon.views import DotSegmentRoute
from adk_actors.observability.asgi import TraceContextMiddleware
from supervision import get_logger

API_PREFIX = "/dev/v1"

API_HEADERS: dict[bytes, bytes] = {
    b"cache-control": b"no-store",
    b"x-content-type-options": b"nosniff",
    b"referrer-policy": b"no-referrer",
    b"x-frame-options": b"DENY",
}
"""Set on every /dev/v1 answer unless the route set the header itself (SSE sets its
own ``Cache-Control``)."""

WS_POLICY_VIOLATION = 1008
"""The close code of a refused WebSocket handshake (Host, token or Origin)."""
WS_TRY_AGAIN_LATER = 1013
"""The close code of a WebSocket handshake refused while the daemon drains."""

_log = get_logger("adk_actors.daemon")


def build_app(state: DevState, extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """The app serving `state`'s agents, runs and sessions (plus `extra_routes`)."""
    routes: list[BaseRoute] = [
        *routes_runs.ROUTES,  # each area refuses an encoded slash with its own code first
        *routes_sessions.ROUTES,
        *routes_ambient.ROUTES,
        DotSegmentRoute(  # then any other /dev/v1 path (agents, extra routes) does
            API_PREFIX,
            "invalid_path_parameter",
            "A path segment cannot hold an encoded '/'",
            dot_segments=False,
        ),
        *routes_agents.ROUTES,
        *routes_observability.ROUTES,
        *routes_evaluation.ROUTES,
        *routes_console.ROUTES,
        *(legacy.routes(state.settings) if state.settings.legacy_a2a else ()),
        *extra_routes,
    ]
    app = Starlette(
        routes=routes,
        # inside the guards: a refused request never becomes a trace's child
        middleware=[Middleware(Guards, state=state), Middleware(TraceContextMiddleware)],
        exception_handlers={
            ApiError: _api_error,
            HTTPException: _http_error,
            Exception: _internal_error,
        },
    )
    app.router.redirect_slashes = False  # a path is matched as sent, or it is a 404
    app.state.dev = state
    return app


def is_api_path(path: str) -> bool:
    """True for ``/dev/v1`` and everything under it (the paths that need the token)."""
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


class Guards:
    """The checks every request passes before a route sees it (see the module doc)."""

    def __init__(self, app: ASGIApp, state: DevState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match scope["type"]:
            case "http":
                pass
            case "websocket":
                await self._websocket(scope, receive, send)
                return
            case "lifespan":
                await self.app(scope, receive, send)
                return
            case _:
                return  # no other kind of connection is served
        api = is_api_path(scope["path"])
        if api:
            send = _with_api_headers(send)
        refusal = _misdirected(scope)
        if refusal is None and not self.state.admit_request():
            refusal = ApiError(
                503,
                "developer_api_unavailable",
                "The daemon is stopping",
                headers={"connection": "close"},
            )
        if refusal is not None:
            await error_response(refusal)(scope, receive, send)
            return
        exchange = _Exchange(self.state, send)  # admitted: counted until it ends
        try:
            refusal = _access_refusal(scope, api, self.state.settings.token_digest)
            if refusal is not None:
                await error_response(refusal)(scope, receive, exchange.send)
                return
            await self._serve(scope, receive, exchange)
        finally:
            exchange.end()

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A WebSocket handshake through the same Host, token and Origin checks (and the
        drain); a refusal closes it with `WS_POLICY_VIOLATION` (`WS_TRY_AGAIN_LATER`
        while draining), its code as the reason, before the app sees it."""
        refusal = _misdirected(scope)
        close_code = WS_POLICY_VIOLATION
        if refusal is None and self.state.draining:
            refusal = ApiError(503, "developer_api_unavailable", "The daemon is stopping")
            close_code = WS_TRY_AGAIN_LATER
        if refusal is None:
            refusal = _access_refusal(
                {**scope, "scheme": _HTTP_SCHEME.get(str(scope.get("scheme", "ws")), "http")},
                is_api_path(scope["path"]),
                self.state.settings.token_digest,
            )
        if refusal is None:
            await self.app(scope, receive, send)
            return
        message = await receive()  # the handshake: websocket.connect
        if message["type"] == "websocket.connect":
            await send({"type": "websocket.close", "code": close_code, "reason": refusal.code})

    async def _serve(self, scope: Scope, receive: Receive, exchange: _Exchange) -> None:
        """The route, within the request deadline, with unexpected errors answered."""
        send = exchange.send
        timeout = self.state.settings.request_timeout
        deadline_at = anyio.current_time() + timeout
        scope[DEADLINE_KEY] = deadline_at
        try:
            with exchange.deadline(deadline_at) as deadline:
                await self.app(scope, receive, exchange.send)
        except ClientDisconnect:
            return
        except Exception as error:
            _log.error(
                "adk.daemon.request_failed", method=scope.get("method"), error=type(error).__name__
            )
            if not exchange.started:
                await error_response(ApiError(500, "internal_error", "The request failed"))(
                    scope, receive, send
                )
            return
        if not deadline.cancelled_caught:
            return
        if exchange.stopped_by_drain:
            await exchange.finish_stream()
        elif not exchange.started:
            _log.warning("adk.daemon.request_timeout", method=scope.get("method"))
            await error_response(
                ApiError(
                    503,
                    "request_timeout",
                    f"The request did not complete within {timeout:g} s",
                    headers={"connection": "close"},
                )
            )(scope, receive, send)


_HTTP_SCHEME = {"ws": "http", "wss": "https"}
"""A WebSocket scope's scheme as the page's origin has it (`auth.same_origin`)."""


def _misdirected(scope: Scope) -> ApiError | None:
    """421 unless the Host header names this listener on loopback (`auth.loopback_host`)."""
    server = scope.get("server")
    port = server[1] if server else None
    if isinstance(port, int) and auth.loopback_host(scope["headers"], port):
        return None
    return ApiError(
        421,
        "misdirected_request",
        "The Host header must name this server on loopback",
        headers={"connection": "close"},
    )


def _access_refusal(scope: Scope, api: bool, token_digest: bytes) -> ApiError | None:
    """The token on ``/dev/v1`` (401, 403), then the same-origin check on every path."""
    headers = scope["headers"]
    if api:
        verdict = auth.authorize(headers, token_digest)
        if verdict == "unauthorized":
            return ApiError(
                401,
                "unauthorized",
                "Bearer authentication required",
                headers={"www-authenticate": auth.WWW_AUTHENTICATE},
            )
        if verdict == "forbidden":
            return ApiError(403, "forbidden", "Access denied")
    if not auth.same_origin(scope["scheme"], headers):
        return ApiError(403, "forbidden", "Access denied")
    return None


class _Exchange:
    """One admitted request's answer as it goes out: whether it started and completed,
    its deadline, and its count in `DevState.requests_in_flight` (which a drain waits
    for) until it ends or its answer turns out to be an event stream. An event stream
    is then ended by the drain (`DevState.when_draining`): its route is cancelled and
    the response finished cleanly, so a stopping daemon does not wait for it."""

    def __init__(self, state: DevState, send: Send) -> None:
        self._state = state
        self._downstream = send
        self._scope: anyio.CancelScope | None = None
        self._undo_drain: Callable[[], None] | None = None
        self._in_flight = True
        self._ended = False
        self.started = False
        self.completed = False
        self.stopped_by_drain = False

    def deadline(self, when: float) -> anyio.CancelScope:
        self._scope = anyio.CancelScope(deadline=when)
        return self._scope

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            if _is_event_stream(message):
                self._stream_started()
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.completed = True
            self._release()  # the work is done: a client that has the answer sees it so
        await self._downstream(message)

    def _stream_started(self) -> None:
        if self._scope is not None:
            self._scope.deadline = math.inf  # the stream's own bounds apply
        self._release()
        loop = asyncio.get_running_loop()

        def on_drain() -> None:  # on the draining thread
            with contextlib.suppress(RuntimeError):  # a closed loop: the stream is gone
                loop.call_soon_threadsafe(self._stop_stream)

        self._undo_drain = self._state.when_draining(on_drain)

    def _stop_stream(self) -> None:
        """On the event loop: cancel the route of a stream that is still going."""
        if self._scope is not None and not self.completed and not self._ended:
            self.stopped_by_drain = True
            self._scope.cancel()

    async def finish_stream(self) -> None:
        """End a stream the drain cancelled with the response's last (empty) chunk."""
        if self.started and not self.completed:
            self.completed = True
            with contextlib.suppress(OSError):
                await self._downstream(
                    {"type": "http.response.body", "body": b"", "more_body": False}
                )

    def end(self) -> None:
        """The request is over: stop counting it and forget the drain callback."""
        self._ended = True
        self._release()
        if self._undo_drain is not None:
            self._undo_drain()
            self._undo_drain = None

    def _release(self) -> None:
        if self._in_flight:
            self._in_flight = False
            self._state.request_ended()


def _is_event_stream(message: Message) -> bool:
    for name, value in message.get("headers", ()):
        if name.lower() == b"content-type":
            return bytes(value).lower().startswith(b"text/event-stream")
    return False


def _with_api_headers(send: Send) -> Send:
    """`send` adding `API_HEADERS` (those the route did not set) to the response."""

    async def send_with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", ()))
            present = {bytes(name).lower() for name, _ in headers}
            headers.extend(
                (name, value) for name, value in API_HEADERS.items() if name not in present
            )
            message = {**message, "headers": headers}
        await send(message)

    return send_with_headers


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no route, wrong method) as the JSON error body."""
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    match exc.status_code:
        case 404:
            error = ApiError(404, "not_found", "Resource not found", headers=headers)
        case 405:
            error = ApiError(405, "method_not_allowed", "Method not allowed", headers=headers)
        case status:
            error = ApiError(status, "invalid_request", "The request was refused", headers=headers)
    return error_response(error)


async def _internal_error(request: Request, exc: Exception) -> Response:
    """The last resort (an error in the guards themselves): a bare 500 body."""
    return error_response(ApiError(500, "internal_error", "The request failed"))
