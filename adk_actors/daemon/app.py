"""The daemon's ASGI app: the /dev/v1 routes, the console page, and their guards.

`build_app(state)` assembles the routes of every area (and the legacy
``POST /a2a/prompt`` when the settings enable it) behind `Guards`, a pure ASGI
middleware that applies to every request, in this order:

1. while the daemon drains, 503 ``developer_api_unavailable`` (and the connection
   closes);
2. on ``/dev/v1``: the bearer token (401 ``unauthorized`` with ``WWW-Authenticate``,
   403 ``forbidden``) and the same-origin check (403 ``forbidden``); the console page,
   its assets and the legacy endpoint need no token;
3. a deadline of ``request_timeout`` until the answer is sent (503
   ``request_timeout`` if nothing was sent yet); an SSE stream is free of it once it
   starts, and ends at its own bounds;
4. ``Cache-Control: no-store`` and the security headers on every API answer, and a
   500 ``internal_error`` (logged by type, never with a traceback or a message) for
   anything a route did not expect.

Starlette's own 404 and 405 become the JSON error body (``not_found``,
``method_not_allowed`` with ``Allow``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
    routes_console,
    routes_runs,
    routes_sessions,
)
from adk_actors.daemon.errors import ApiError, error_response
from adk_actors.daemon.state import DevState
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

_log = get_logger("adk_actors.daemon")


def build_app(state: DevState, extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """The app serving `state`'s agents, runs and sessions (plus `extra_routes`)."""
    routes: list[BaseRoute] = [
        *routes_agents.ROUTES,
        *routes_runs.ROUTES,
        *routes_sessions.ROUTES,
        *routes_console.ROUTES,
        *(legacy.ROUTES if state.settings.legacy_a2a else ()),
        *extra_routes,
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(Guards, state=state)],
        exception_handlers={
            ApiError: _api_error,
            HTTPException: _http_error,
            Exception: _internal_error,
        },
    )
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
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        api = is_api_path(scope["path"])
        if api:
            send = _with_api_headers(send)
        refusal = self._refusal(scope, api)
        if refusal is not None:
            await error_response(refusal)(scope, receive, send)
            return
        await self._serve(scope, receive, send)

    def _refusal(self, scope: Scope, api: bool) -> ApiError | None:
        if self.state.draining:
            return ApiError(
                503,
                "developer_api_unavailable",
                "The daemon is stopping",
                headers={"connection": "close"},
            )
        if not api:
            return None
        headers = scope["headers"]
        verdict = auth.authorize(headers, self.state.settings.token_digest)
        if verdict == "unauthorized":
            return ApiError(
                401,
                "unauthorized",
                "Bearer authentication required",
                headers={"www-authenticate": auth.WWW_AUTHENTICATE},
            )
        if verdict == "forbidden" or not auth.same_origin(scope["scheme"], headers):
            return ApiError(403, "forbidden", "Access denied")
        return None

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The route, within the request deadline, with unexpected errors answered."""
        exchange = _Exchange(self.state, send)
        timeout = self.state.settings.request_timeout
        try:
            with exchange.deadline_in(timeout) as deadline:
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
        finally:
            exchange.end()
        if deadline.cancelled_caught and not exchange.started:
            _log.warning("adk.daemon.request_timeout", method=scope.get("method"))
            await error_response(
                ApiError(
                    503,
                    "request_timeout",
                    f"The request did not complete within {timeout:g} s",
                    headers={"connection": "close"},
                )
            )(scope, receive, send)


class _Exchange:
    """One request's answer as it goes out: whether it started, its deadline, and its
    count in `DevState.requests_in_flight` (which a drain waits for) until it ends or
    its answer turns out to be an event stream."""

    def __init__(self, state: DevState, send: Send) -> None:
        self._state = state
        self._send = send
        self._scope: anyio.CancelScope | None = None
        self.started = False
        self._in_flight = True
        state.request_started()

    def deadline_in(self, timeout: float) -> anyio.CancelScope:
        self._scope = anyio.CancelScope(deadline=anyio.current_time() + timeout)
        return self._scope

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            if _is_event_stream(message):
                if self._scope is not None:
                    self._scope.deadline = math.inf  # the stream's own bounds apply
                self.end()
        await self._send(message)

    def end(self) -> None:
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
