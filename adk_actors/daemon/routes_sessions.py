"""The /dev/v1 sessions routes (list, create, inspect, delete, state delta) and the
context explanation of one session.

Every route names one exact scope in its path (app, user, session), checked as the
session store checks ids, never ``.`` or ``..`` or empty, never holding a ``/``
(encoded ``%2F`` in the path; 400 ``invalid_path_parameter``; `views.scope_id_ok`,
`views.DotSegmentRoute`); nothing is ever searched across scopes. Session calls may block (LMDB, the session owner), so
they run off the event loop; a session service that fails is 503
``session_service_unavailable``. What is shown is redacted (`views.session_json`); a
state delta that carries a credential, or touches the runtime's ``_adk:`` keys, is
refused.

A list is one bounded page (the newest ``max_session_results``) and a count of them
all (`_newest`): it never fails because the user has many sessions or because they
change while they are counted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from adk_actors.daemon.bodies import dev_state, read_json_object
from adk_actors.daemon.errors import ApiError
from adk_actors.daemon.state import DevState
from adk_actors.daemon.views import (
    DotSegmentRoute,
    context_json,
    context_policy,
    json_response,
    scope_id_ok,
    session_json,
    session_meta_json,
)
from adk_actors.sessions import Session, SessionService
from adk_actors.sessions.core import INTERNAL_PREFIX
from adk_actors.sessions.query import MAX_PAGE
from providers.errors import AdkError, is_secret_key, redact

MAX_COUNTED_SESSIONS = 10_000
"""`total` of a session list counts at most this many sessions."""
_STALE_RETRIES = 3
_PATH_MESSAGE = "Path parameters must be non-empty UTF-8 strings within configured limits"
_T = TypeVar("_T")


# -- scope -----------------------------------------------------------------------------------


def _scope(request: Request, *names: str) -> list[str]:
    """The path's ids, each a valid session-store id within ``max_field_bytes``."""
    limit = dev_state(request).settings.max_field_bytes
    values = [request.path_params[name] for name in names]
    if not all(scope_id_ok(value, limit) for value in values):
        raise ApiError(400, "invalid_path_parameter", _PATH_MESSAGE)
    return values


async def _call(function: Callable[..., _T], *args: Any) -> _T:
    """Run a session call off the event loop; its refusals become API errors."""
    try:
        return await run_in_threadpool(function, *args)
    except AdkError as error:
        raise _refusal(error) from None


def _refusal(error: AdkError) -> ApiError:
    reason = error.reason
    if reason == "not_found":
        return ApiError(404, "session_not_found", "Resource not found")
    if reason in ("invalid_id", "invalid_utf8"):
        return ApiError(400, "invalid_path_parameter", "Path parameters are invalid")
    return ApiError(
        503,
        "session_service_unavailable",
        "The session service is unavailable",
        headers={"retry-after": "1"},
    )


# -- /dev/v1/sessions/{app}/{user} -----------------------------------------------------------


async def _sessions(request: Request) -> Response:
    app, user = _scope(request, "app_name", "user_id")
    state = dev_state(request)
    if request.method == "POST":
        return await _create(request, state, app, user)
    listing = await _call(_newest, state.sessions, app, user, state.settings.max_session_results)
    return json_response(
        {
            "schema_version": 1,
            "app_name": app,
            "user_id": user,
            "sessions": [session_meta_json(session) for session in listing.shown],
            "total": listing.total,
            "total_exact": listing.exact,
            "truncated": listing.total > len(listing.shown),
        }
    )


class _Listing(NamedTuple):
    """A session list: the rows shown, how many sessions were counted, and whether
    that count is all of them (counted in one consistent pass, under the cap)."""

    shown: list[Session]
    total: int
    exact: bool


def _newest(service: SessionService, app: str, user: str, limit: int) -> _Listing:
    """The newest `limit` sessions of a user and how many there are, read in pages of
    `MAX_PAGE` (counted up to `MAX_COUNTED_SESSIONS`).

    A page after the first goes stale when any session of the user changes meanwhile
    (a run writing its events): the pass starts over, at most `_STALE_RETRIES` times.
    If the sessions keep changing, the answer is the last pass's rows (the first page
    never goes stale, so a limit up to `MAX_PAGE` is always filled) and the largest
    count reached, marked inexact: a list is never refused because it is long or busy.
    """
    best: _Listing | None = None
    for _ in range(_STALE_RETRIES):
        shown: list[Session] = []
        total = 0
        cursor: str | None = None
        try:
            while True:
                page = service.query_sessions(app, user, MAX_PAGE, cursor)
                total += len(page.sessions)
                shown.extend(page.sessions[: max(0, limit - len(shown))])
                cursor = page.next_cursor
                if cursor is None:
                    return _Listing(shown, total, exact=True)
                if total >= MAX_COUNTED_SESSIONS:
                    return _Listing(shown, total, exact=False)
        except AdkError as error:
            if error.reason != "stale_cursor":
                raise
        if best is None or total >= best.total:
            best = _Listing(shown, total, exact=False)
    assert best is not None  # a stale page is never the first: every pass counted some
    return best


async def _create(request: Request, state: DevState, app: str, user: str) -> Response:
    """Create ``{"session_id"}``: 201, or 200 with the session unchanged if it exists."""
    body = await read_json_object(request)
    if set(body) != {"session_id"}:
        raise ApiError(
            400, "invalid_session_request", "Expected a JSON object containing only session_id"
        )
    session_id = body["session_id"]
    if not scope_id_ok(session_id, state.settings.max_field_bytes):
        raise ApiError(
            400,
            "invalid_session_id",
            "session_id must be a non-empty UTF-8 string within configured limits, "
            "without '/', not '.' or '..'",
        )
    created, session = await _call(_create_session, state.sessions, app, user, session_id)
    limit = state.settings.max_session_results
    return json_response(session_json(session, limit), 201 if created else 200)


def _create_session(
    service: SessionService, app: str, user: str, session_id: str
) -> tuple[bool, Session]:
    try:
        service.get_session(app, user, session_id)
        existed = True
    except AdkError as error:
        if error.reason != "not_found":
            raise
        existed = False
    return not existed, service.create_session(app, user, session_id)


# -- /dev/v1/sessions/{app}/{user}/{session} -------------------------------------------------


async def _session(request: Request) -> Response:
    app, user, session_id = _scope(request, "app_name", "user_id", "session_id")
    state = dev_state(request)
    if request.method == "DELETE":
        await _call(state.sessions.delete_session, app, user, session_id)
        return json_response({"session_id": session_id, "deleted": True})
    session = await _call(state.sessions.get_session, app, user, session_id)
    return json_response(session_json(session, state.settings.max_session_results))


async def _session_state(request: Request) -> Response:
    """Apply one non-secret ``{"state_delta": {...}}``; the session as it is then."""
    app, user, session_id = _scope(request, "app_name", "user_id", "session_id")
    state = dev_state(request)
    body = await read_json_object(request)
    delta = body.get("state_delta")
    if set(body) != {"state_delta"} or not isinstance(delta, dict) or not delta:
        raise ApiError(
            400,
            "invalid_state_request",
            "Expected a JSON object containing one non-empty state_delta object",
        )
    if _forbidden(delta, top=True):
        raise ApiError(
            400,
            "forbidden_state_key",
            "Credentials and internal continuation keys cannot be written through the developer API",
        )
    try:
        await run_in_threadpool(state.sessions.update_state, app, user, session_id, delta)
    except AdkError as error:
        if error.reason in ("not_found", "invalid_id", "invalid_utf8"):
            raise _refusal(error) from None
        if isinstance(error.reason, str) and error.reason.startswith(("invalid_", "state_")):
            raise ApiError(400, "invalid_state_request", "The state_delta was refused") from None
        raise _refusal(error) from None
    session = await _call(state.sessions.get_session, app, user, session_id)
    return json_response(session_json(session, state.settings.max_session_results))


def _forbidden(value: Any, top: bool = False) -> bool:
    """Does `value` hold a credential-named key, secret-shaped text, or (at the top) a
    runtime key?"""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) or is_secret_key(key) or redact(key) != key:
                return True
            if top and key.startswith(INTERNAL_PREFIX):
                return True
            if _forbidden(item):
                return True
        return False
    if isinstance(value, list):
        return any(_forbidden(item) for item in value)
    if isinstance(value, str):
        return bool(redact(value, limit=None) != value)
    return False


# -- /dev/v1/context/{app}/{user}/{session} --------------------------------------------------


async def _context(request: Request) -> Response:
    """Counts, size and fingerprint of what the next model call of one session would
    see (events and state omitted)."""
    app, user, session_id = _scope(request, "app_name", "user_id", "session_id")
    state = dev_state(request)
    session = await _call(state.sessions.get_session, app, user, session_id)
    try:
        context = await run_in_threadpool(
            context_json, session, context_policy(state.runner_options)
        )
    except AdkError:
        raise ApiError(
            422, "context_diagnostic_failed", "The session context could not be analyzed"
        ) from None
    scope = {"type": "session", "app_name": app, "user_id": user, "session_id": session_id}
    return json_response({"schema_version": 1, "scope": scope, "context": context})


ROUTES: list[BaseRoute] = [
    # first: an encoded slash is refused before the decoded path matches another route
    DotSegmentRoute("/dev/v1/sessions", "invalid_path_parameter", _PATH_MESSAGE),
    DotSegmentRoute("/dev/v1/context", "invalid_path_parameter", _PATH_MESSAGE),
    Route("/dev/v1/sessions/{app_name}/{user_id}", _sessions, methods=["GET", "POST"]),
    Route(
        "/dev/v1/sessions/{app_name}/{user_id}/{session_id}/state",
        _session_state,
        methods=["POST"],
    ),
    Route(
        "/dev/v1/sessions/{app_name}/{user_id}/{session_id}",
        _session,
        methods=["GET", "DELETE"],
    ),
    Route("/dev/v1/context/{app_name}/{user_id}/{session_id}", _context, methods=["GET"]),
]
