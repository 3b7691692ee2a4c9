"""JSON projections of runs, events, outcomes and sessions for the /dev/v1 API.

What leaves the daemon is built here, once, so every route (and the SSE stream) shows
the same shapes (documented in ``docs/daemon.md``), refusals included: the one
mapping of a refused run operation to its API error (`run_refusal`) and the one check
of an app, user or session id (`scope_id_ok`), with the route that refuses empty,
``.`` and ``..`` path segments and encoded slashes (`DotSegmentRoute`). A projection is content for a
person, never internals: no provider metadata, no thought signatures, no inline bytes,
no credential-named keys (`events.without_secrets`, `providers.errors.redact`), no
pids, and a reason is a short stable word.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import Scope

from adk_actors.daemon.errors import ApiError
from adk_actors.events import EVENT_SCHEMA_VERSION, Event, to_dict, without_secrets
from adk_actors.outcomes import Cancelled, Completed, Failed, Outcome, Paused
from adk_actors.runner.context import (
    MAX_BUDGET_BYTES,
    MAX_INPUT_EVENTS,
    OVERFLOWS,
    PART_KINDS,
    ContextPolicy,
    estimate_tokens,
)
from adk_actors.runner.history import split_events
from adk_actors.sessions import Session
from adk_actors.sessions.core import check_id
from providers import content as content_codec
from providers.content import Content, canonical
from providers.errors import AdkError, redact

RUNS_PATH = "/dev/v1/runs"
JSON_MEDIA_TYPE = "application/json"
MAX_REASON_CHARS = 128
MAX_TEXT_PREVIEW_CHARS = 4096
"""An event's ``text`` is a preview; its content parts hold all of it."""
_NOT_SHOWN_PART_KEYS = ("thought_signature",)
CONTEXT_VERSION = 1
_NAME_FILTERS = (
    "authors",
    "exclude_authors",
    "invocations",
    "exclude_invocations",
    "content_types",
    "exclude_content_types",
)
_FILTERS = (*_NAME_FILTERS, "since", "until", "include_partial", "final_only")
RETRY_SOON = {"retry-after": "1"}
DOT_SEGMENTS = frozenset({"", ".", ".."})
"""Path segments that never name anything: empty, or a relative step a client or a
proxy may have meant to resolve."""
_ANY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON answer, never cached (as every API answer)."""
    return Response(
        msgspec.json.encode(body),
        status,
        headers={"cache-control": "no-store", **(headers or {})},
        media_type=JSON_MEDIA_TYPE,
    )


def run_path(run_id: str) -> str:
    """The status URL of a run (also its ``Location``)."""
    return f"{RUNS_PATH}/{run_id}"


def started_json(run_id: str, parent_run_id: str | None = None) -> dict[str, Any]:
    """The 202 answer of a start or a resume: the new run and where to follow it."""
    body: dict[str, Any] = {
        "run_id": run_id,
        "state": "running",
        "status_url": run_path(run_id),
        "events_url": run_path(run_id) + "/events",
    }
    if parent_run_id is not None:
        body["parent_run_id"] = parent_run_id
    return body


# -- events ----------------------------------------------------------------------------------


def event_json(event: Event) -> dict[str, Any]:
    """An event as the API shows it (see the module docstring for what is left out)."""
    shown = without_secrets(event)
    try:
        data = to_dict(shown)
    except AdkError:
        return {"schema_version": event.schema_version, "encoding_error": "event_not_json_safe"}
    data.pop("provider_metadata", None)
    data["text"] = shown.text()[:MAX_TEXT_PREVIEW_CHARS]
    data["content"] = _content_json(data.get("content"))
    data.setdefault("actions", {})
    data["partial"] = bool(data.get("partial", False))
    data["is_final"] = bool(data.get("is_final", False))
    return data


def _content_json(content: Any) -> dict[str, Any] | None:
    if not isinstance(content, dict):
        return None
    return {**content, "parts": [_part_json(part) for part in content.get("parts", [])]}


def _part_json(part: dict[str, Any]) -> dict[str, Any]:
    if part.get("type") == "inline_data":
        data = part.get("data", "")
        return {
            "type": "inline_data",
            "mime_type": part.get("mime_type", ""),
            "bytes": len(data) * 3 // 4 - data[-2:].count("="),
            "data_omitted": True,
        }
    return {key: value for key, value in part.items() if key not in _NOT_SHOWN_PART_KEYS}


# -- outcomes --------------------------------------------------------------------------------


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    """A run's outcome: completed text, the pause (event and details), or a reason."""
    match outcome:
        case Completed(output=str() as text):
            return {"type": "completed", "text": text}
        case Completed(output=Content() as content):
            data = msgspec.to_builtins(content)
            return {
                "type": "completed",
                "text": content.text_value(),
                "content": _content_json(data),
            }
        case Paused(event=event):
            return {"type": "paused", "event": event_json(event), "pause": pause_json(event)}
        case Cancelled(reason=reason):
            return {"type": "cancelled", "reason": public_reason(reason, "cancelled")}
        case Failed(reason=reason):
            return failed_json(reason)
    return {"type": "failed", "reason": "unknown"}


def failed_json(reason: Any) -> dict[str, Any]:
    """A failure: its reason word, and the word that details it when there is one
    (``("admission_failed", "concurrency_limit_reached")``)."""
    body = {"type": "failed", "reason": public_reason(reason, "run_failed")}
    if isinstance(reason, list | tuple) and len(reason) > 1 and isinstance(reason[1], str):
        body["detail"] = reason[1][:MAX_REASON_CHARS]
    return body


def pause_json(event: Event) -> dict[str, Any] | None:
    """Why a paused run waits, with its kind as ``type`` (``tool_confirmation``, ...)."""
    pause = event.actions.pause
    if pause is None:
        return None
    details = redact(pause.details, limit=None) if pause.details else None
    kind = details.get("type") if isinstance(details, dict) else None
    return {
        "reason": pause.reason,
        "type": kind if isinstance(kind, str) else pause.reason,
        "tool_name": pause.tool_name,
        "call_id": pause.call_id,
        "hint": pause.hint,
        "continuation_id": pause.continuation_id,
        "details": details,
    }


def outcome_from_status(value: Any) -> dict[str, Any] | None:
    """The outcome in a `runs.status` view (JSON builtins) as `outcome_json` shows it."""
    if value is None:
        return None
    try:
        outcome: Outcome = msgspec.convert(value, Outcome)
    except (msgspec.ValidationError, TypeError):
        kind = value.get("type") if isinstance(value, dict) else None
        reason = value.get("reason") if isinstance(value, dict) else None
        if kind == "cancelled":
            return {"type": "cancelled", "reason": public_reason(reason, "cancelled")}
        return failed_json(reason)
    return outcome_json(outcome)


def public_reason(reason: Any, default: str) -> str:
    """A reason as one short word: a string itself, a tuple or list its first string."""
    if isinstance(reason, list | tuple) and reason:
        reason = reason[0]
    if isinstance(reason, str) and reason:
        return reason[:MAX_REASON_CHARS]
    return default


# -- run status ------------------------------------------------------------------------------


def status_json(status: dict[str, Any]) -> dict[str, Any]:
    """`runs.status(run_id)` as the API shows it, with links to its parent and child."""
    run_id = status["run_id"]
    latest = _int(status.get("latest_sequence"))
    oldest = _int(status.get("oldest_available_sequence"), latest + 1)
    parent = status.get("parent_run_id")
    child = status.get("resumed_to")
    return {
        "run_id": run_id,
        "state": status.get("state", "failed"),
        "outcome": outcome_from_status(status.get("outcome")),
        "agent_name": status.get("agent"),
        "app_name": status.get("app_name"),
        "user_id": status.get("user_id"),
        "session_id": status.get("session_id"),
        "invocation_id": status.get("invocation_id"),
        "started_at": status.get("started_at"),
        "finished_at": status.get("ended_at"),
        "event_count": latest,
        "buffered_event_count": max(0, latest - oldest + 1),
        "subscriber_count": _int(status.get("subscribers")),
        "latest_sequence": latest,
        "oldest_available_sequence": oldest,
        "terminal_sequence": status.get("terminal_sequence"),
        "parent_run_id": parent,
        "resumed_to": child,
        "status_url": run_path(run_id),
        "events_url": run_path(run_id) + "/events",
        "parent_url": run_path(parent) if isinstance(parent, str) else None,
        "resumed_to_url": run_path(child) if isinstance(child, str) else None,
    }


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


# -- refusals shared by the routes -----------------------------------------------------------


def run_refusal(error: AdkError) -> ApiError:
    """The API error of a refused run operation: the one mapping every run route and
    the SSE stream share (each maps its own specific reasons before calling this)."""
    match error.reason:
        case "not_found":
            return ApiError(404, "run_not_found", "Resource not found")
        case "too_many_runs":
            return ApiError(
                429, "too_many_runs", "The run capacity is in use; retry", headers=RETRY_SOON
            )
        case "too_many_subscribers":
            return ApiError(
                503,
                "too_many_subscribers",
                "The run has its maximum number of subscribers",
                headers=RETRY_SOON,
            )
    return ApiError(
        503, "run_service_unavailable", "The run service is unavailable", headers=RETRY_SOON
    )


def scope_id_ok(value: Any, limit: int) -> bool:
    """Is `value` an app, user or session id the daemon takes: one the session store
    takes (`sessions.core.check_id`), within `limit` UTF-8 bytes, not ``.`` or ``..``
    (which a client, a proxy or a shell may resolve as a path step), and without a
    ``/`` (an id is one path segment: one with a slash could be created from a body
    but never named by a path, and its encoded form is refused, `DotSegmentRoute`)?"""
    if not isinstance(value, str) or value in DOT_SEGMENTS or "/" in value:
        return False
    try:
        check_id(value, "id")
        return len(value.encode("utf-8")) <= limit
    except (AdkError, UnicodeEncodeError):
        return False


def has_encoded_slash(scope: Scope) -> bool:
    """Does the path as sent (``raw_path``, before the server decoded it) hold a
    ``%2F`` (any case)? The router matches the decoded path, where that slash would
    split one segment into two and name another route."""
    raw = scope.get("raw_path")
    return isinstance(raw, bytes) and b"%2f" in raw.lower()


class DotSegmentRoute(Route):
    """Matches only a path under `prefix` that names nothing and refuses it (any
    method): 400 `code`. Such a path has an empty, ``.`` or ``..`` segment (a route's
    id never is one, and a client may have meant it as a relative step), or, as sent,
    an encoded slash (``%2F``: an id is one segment, never two; the decoded path would
    reach another route). With `dot_segments` false only the encoded slash is refused.
    Every other path is left to the other routes (their 404 and 405 stay as they are).
    Put it before them, so an encoded slash is refused before the decoded path matches
    another route. The app's router does not redirect trailing slashes
    (`app.build_app`), so an unknown path keeps its 404 rather than a redirect."""

    def __init__(self, prefix: str, code: str, message: str, *, dot_segments: bool = True) -> None:
        self.code = code
        self.message = message
        self.dot_segments = dot_segments
        super().__init__(prefix + "/{rest:path}", self._refuse, methods=_ANY_METHOD)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is Match.NONE:
            return match, child
        if has_encoded_slash(scope):
            return match, child
        segments = str(child["path_params"]["rest"]).split("/")
        if self.dot_segments and any(segment in DOT_SEGMENTS for segment in segments):
            return match, child
        return Match.NONE, {}

    async def _refuse(self, request: Request) -> Response:
        raise ApiError(400, self.code, self.message)


# -- sessions --------------------------------------------------------------------------------


def session_meta_json(session: Session) -> dict[str, Any]:
    """One row of a session list: its id and when it last changed."""
    return {"id": session.id, "timestamp": session.last_update_time}


def session_json(session: Session, max_events: int) -> dict[str, Any]:
    """One session: its state (credential-named values redacted) and its newest
    `max_events` events, oldest first."""
    events = session.events[-max_events:] if max_events > 0 else ()
    return {
        "id": session.id,
        "app_name": session.app_name,
        "user_id": session.user_id,
        "state": redact(session.state, limit=None),
        "events": [event_json(event) for event in events],
        "event_count": len(session.events),
        "events_truncated": len(events) < len(session.events),
        "timestamp": session.last_update_time,
    }


# -- context ---------------------------------------------------------------------------------


def context_policy(runner_options: dict[str, Any]) -> ContextPolicy:
    """The context policy the daemon's Runners use (its runner options' ``context_policy``)."""
    return ContextPolicy.compile(runner_options.get("context_policy"))


def context_capabilities(policy: ContextPolicy) -> dict[str, Any]:
    """What the context policy can do, and the daemon's policy: settings, never content."""
    return {
        "context_version": CONTEXT_VERSION,
        "event_codec_version": EVENT_SCHEMA_VERSION,
        "overflow_modes": list(OVERFLOWS),
        "content_types": list(PART_KINDS),
        "filters": sorted(_FILTERS),
        "token_estimate": "bytes/4",
        "fingerprint": {"algorithm": "sha256", "encoding": "hex"},
        "max_input_events": MAX_INPUT_EVENTS,
        "max_budget_bytes": MAX_BUDGET_BYTES,
        "policy": {
            "overflow": policy.overflow,
            "max_bytes": policy.max_bytes,
            "max_tokens": policy.max_tokens,
            "max_request_bytes": policy.max_request_bytes,
            "max_request_tokens": policy.max_request_tokens,
            "max_input_events": policy.max_input_events,
            "include_partial": policy.include_partial,
            "final_only": policy.final_only,
            "filtered": any(
                getattr(policy, name) not in (None, frozenset()) for name in _NAME_FILTERS
            )
            or policy.since is not None
            or policy.until is not None,
            "compressor": policy.compressor is not None,
        },
    }


def context_json(session: Session, policy: ContextPolicy) -> dict[str, Any]:
    """What the next model call of this session would see: counts, size and the
    fingerprint of the selected events (never their content). A compressor is never
    run here: a history over its budget is reported ``over_budget``."""
    past, _ = split_events(session.events, None, policy.include_partial)
    probe = Event.new("user", "adk-dev-context")  # no content: it weighs nothing
    checking = policy if policy.overflow != "compress" else replace(policy, overflow="error")
    over_budget = False
    try:
        selected = checking.select(past, probe, "adk-dev")[:-1]
    except AdkError as error:
        if _reason_head(error.reason) != "context_budget_exceeded":
            raise
        over_budget = True
        selected = replace(policy, max_bytes=None, max_tokens=None).select(past, probe, "adk-dev")[
            :-1
        ]
    size = sum(_content_bytes(event) for event in selected)
    digest = hashlib.sha256()
    for event in selected:
        digest.update(event.id.encode())
        digest.update(b"\0")
    return {
        "version": CONTEXT_VERSION,
        "bytes": size,
        "estimated_tokens": estimate_tokens(size),
        "input_events": len(past),
        "output_events": len(selected),
        "dropped_events": len(past) - len(selected),
        "compressed": False,
        "overflow": policy.overflow,
        "over_budget": over_budget,
        "fingerprint": {
            "value": digest.hexdigest(),
            "algorithm": "sha256",
            "encoding": "hex",
            "context_version": CONTEXT_VERSION,
            "event_codec_version": EVENT_SCHEMA_VERSION,
        },
    }


def _content_bytes(event: Event) -> int:
    """Bytes of the event's canonical content, as the model would receive it."""
    return 0 if event.content is None else len(content_codec.encode(canonical(event.content)))


def _reason_head(reason: Any) -> Any:
    return reason[0] if isinstance(reason, tuple) and reason else reason
