"""The daemon's ASGI app: the /dev/v1 routes, the console page, and their guards.

`build_app(state)` assembles the routes of every area with the guards that apply to
all of them: the bearer token and same-origin check on ``/dev/v1``, 503 while the
daemon drains, and the JSON error body for `ApiError`.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from adk_actors.daemon import routes_agents, routes_runs, routes_sessions
from adk_actors.daemon.errors import ApiError, error_response
from adk_actors.daemon.state import DevState


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc)


def build_app(state: DevState, extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """The app serving `state`'s agents, runs and sessions (plus `extra_routes`)."""
    routes: list[BaseRoute] = [
        *routes_agents.ROUTES,
        *routes_runs.ROUTES,
        *routes_sessions.ROUTES,
        *extra_routes,
    ]
    app = Starlette(routes=routes, exception_handlers={ApiError: _api_error})
    app.state.dev = state
    return app
