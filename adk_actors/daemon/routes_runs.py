"""The /dev/v1 runs routes: start, status, cancel, resume, and the SSE event stream.

Runs are stable runs (`adk.runs`) of the daemon's Runner for ``(agent, app)``: they
outlive the request that started them and any client that follows them. Every call
into the runtime that may block runs off the event loop (`run_in_threadpool`); the SSE
stream awaits its subscription on the loop without blocking it (see `sse.py`).

Refusals are mapped once: `views.run_refusal` for what every run operation shares
(``run_not_found``, ``too_many_runs``, ``run_service_unavailable``), each route only
adding its own reasons; the status lookup is `sse.run_status`, shared with the stream.
"""

from __future__ import annotations

from typing import Any, Final

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from adk_actors import runs
from adk_actors.agents import AgentRef
from adk_actors.daemon.bodies import dev_state, read_json_object, text_field
from adk_actors.daemon.errors import ApiError
from adk_actors.daemon.sse import MEDIA_TYPE, last_event_id, open_run_stream, run_status
from adk_actors.daemon.state import DevState
from adk_actors.daemon.views import (
    DotSegmentRoute,
    json_response,
    run_path,
    run_refusal,
    scope_id_ok,
    started_json,
    status_json,
)
from adk_actors.runs import RunError
from adk_actors.runs.values import check_run_id
from providers.errors import AdkError

CANCEL_REASON = "developer_cancelled"
_START_KEYS = frozenset({"agent_name", "app_name", "user_id", "session_id", "message"})
_START_REFUSALS: Final = frozenset({"too_many_runs", "not_started", "admission_unavailable"})
"""Why a start may be refused that `views.run_refusal` maps (429, 503); anything else is
a fault of the start (500)."""


# -- POST /dev/v1/runs -----------------------------------------------------------------------


async def _start_run(request: Request) -> Response:
    """Start a run of a registered agent: 202 with its id and URLs."""
    state = dev_state(request)
    body = await read_json_object(request)
    if set(body) != _START_KEYS:
        raise ApiError(
            400,
            "invalid_request",
            "Expected agent_name, app_name, user_id, session_id, and message",
        )
    field_limit = state.settings.max_field_bytes
    agent = text_field(body["agent_name"], field_limit, "agent_name")
    app = _scope_id(body["app_name"], field_limit, "app_name")
    user = _scope_id(body["user_id"], field_limit, "user_id")
    session = _scope_id(body["session_id"], field_limit, "session_id")
    message = text_field(body["message"], state.settings.max_body_bytes, "message")
    if AgentRef(agent).pid is None:
        raise ApiError(404, "agent_not_found", "Agent is not registered")
    run_id = await run_in_threadpool(_start, state, agent, app, user, session, message)
    return json_response(started_json(run_id), 202, {"location": run_path(run_id)})


def _scope_id(value: Any, limit: int, name: str) -> str:
    """An app, user or session id as the session routes take it (`views.scope_id_ok`:
    the session store's rule, within `limit` bytes, never ``.`` or ``..``, no ``/``),
    else 400 ``invalid_request`` as for any other body field."""
    text = text_field(value, limit, name)
    if not scope_id_ok(text, limit):
        raise ApiError(
            400,
            "invalid_request",
            f"{name} must be printable, within 128 UTF-8 bytes, without '/', and not '.' or '..'",
        )
    return text


def _start(state: DevState, agent: str, app: str, user: str, session: str, message: str) -> str:
    settings = state.settings
    try:
        return runs.start(
            state.runner(agent, app),
            user,
            session,
            message,
            retention=settings.run_retention,
            max_buffered_events=settings.run_max_buffered_events,
        )
    except AdkError as error:
        raise _start_refusal(error) from None


def _start_refusal(error: AdkError) -> ApiError:
    """A run that was not started: capacity (429), the runtime (503), or a fault (500)."""
    if error.reason in _START_REFUSALS:
        return run_refusal(error)
    return ApiError(500, "run_start_failed", "The run could not be started")


# -- GET / DELETE /dev/v1/runs/{run_id} ------------------------------------------------------


async def _run(request: Request) -> Response:
    run_id = _run_id(request)
    if request.method == "DELETE":
        await run_in_threadpool(_cancel, run_id)
        return json_response({"run_id": run_id, "state": "cancelling"}, 202)
    return json_response(status_json(await run_status(run_id)))


def _run_id(request: Request) -> str:
    """The run id in the path, checked as `adk.runs` checks one (400 ``invalid_run_id``)."""
    try:
        return check_run_id(request.path_params["run_id"])
    except RunError:
        raise ApiError(400, "invalid_run_id", "Run ID is invalid") from None


def _cancel(run_id: str) -> None:
    try:
        runs.cancel(run_id, CANCEL_REASON)
    except RunError as error:
        if error.reason == "already_terminal":
            raise ApiError(409, "run_already_terminal", "The run has already finished") from None
        raise run_refusal(error) from None


# -- POST /dev/v1/runs/{run_id}/resume -------------------------------------------------------


async def _resume_run(request: Request) -> Response:
    """Resume a paused run with ``{"tool_response": ...}``: 202 with the new run's id."""
    run_id = _run_id(request)
    state = dev_state(request)
    body = await read_json_object(request)
    if set(body) != {"tool_response"}:
        raise ApiError(
            400,
            "invalid_resume_request",
            "Expected a JSON object containing only tool_response",
        )
    resumed = await run_in_threadpool(_resume, state, run_id, body["tool_response"])
    return json_response(started_json(resumed, run_id), 202, {"location": run_path(resumed)})


def _resume(state: DevState, run_id: str, response: Any) -> str:
    settings = state.settings
    try:
        return runs.resume(
            run_id,
            response,
            retention=settings.run_retention,
            max_buffered_events=settings.run_max_buffered_events,
        )
    except RunError as error:
        raise _resume_refusal(error) from None
    except AdkError as error:
        raise _resume_refusal(error) from None


def _resume_refusal(error: AdkError) -> ApiError:
    reason = error.reason
    match reason:
        case "run_not_paused" | "no_paused_invocation":
            return ApiError(409, "run_not_paused", "Only a paused run can be resumed")
        case "already_resumed":
            resumed = error.run_id if isinstance(error, RunError) else None
            return ApiError(
                409,
                "run_already_resumed",
                "The paused run has already been resumed",
                extra={"resumed_run_id": resumed},
            )
        case str() if reason.startswith("invalid_"):
            # the Runner refused the answer before anything started (e.g. a
            # tool_confirmation takes exactly {"confirmed": bool})
            return ApiError(400, reason, "The tool_response does not answer this pause")
    return run_refusal(error)  # run_not_found, too_many_runs, run_service_unavailable


# -- GET /dev/v1/runs/{run_id}/events --------------------------------------------------------


async def _run_events(request: Request) -> Response:
    """The run's items as server-sent events after ``Last-Event-ID`` (see `sse.py`)."""
    run_id = _run_id(request)
    cursor = last_event_id(request)
    if request.method == "HEAD":  # no body would be sent: hold no subscription for it
        await run_status(run_id)
        return Response(media_type=MEDIA_TYPE, headers={"cache-control": "no-cache"})
    return await open_run_stream(run_id, cursor, dev_state(request).settings)


ROUTES: list[BaseRoute] = [
    DotSegmentRoute("/dev/v1/runs", "invalid_run_id", "Run ID is invalid"),  # first: %2F
    Route("/dev/v1/runs", _start_run, methods=["POST"]),
    Route("/dev/v1/runs/{run_id}/events", _run_events, methods=["GET"]),
    Route("/dev/v1/runs/{run_id}/resume", _resume_run, methods=["POST"]),
    Route("/dev/v1/runs/{run_id}", _run, methods=["GET", "DELETE"]),
]
