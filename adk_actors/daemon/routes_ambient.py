"""The /dev/v1 trigger routes: submit an ambient event, its status, cancel it.

Triggers are registered by the application embedding the daemon
(`adk.ambient.register_trigger`); these routes only feed and inspect them, behind
the same guards and bearer token as every /dev/v1 route:

- ``GET /dev/v1/triggers``: the registered triggers and their counters;
- ``GET /dev/v1/triggers/{name}``: one trigger's counters (404 ``trigger_not_found``);
- ``POST /dev/v1/triggers/{name}/events``: ``{"payload": text, "idempotency_key":
  text, "metadata"?: object, "session"?: {"user_id", "session_id"}, "timeout"?:
  seconds}`` -> 202 ``{"ref", "duplicate", "url"}`` (a duplicate key answers the
  first event's ref); 400 ``invalid_ambient_event``, 429 ``ambient_queue_full``, 503
  ``ambient_capacity_exhausted`` (the application-wide event bound);
- ``GET /dev/v1/triggers/{name}/events/{ref}``: the event's status (404
  ``event_not_found``); an outcome's output past `MAX_OUTPUT_BYTES` (64 KiB of JSON)
  is cut (a text to its first 64 KiB, anything else dropped) and the view says
  ``"output_truncated": true`` (`adk.ambient.wait` has it whole);
- ``DELETE /dev/v1/triggers/{name}/events/{ref}``: cancel a queued or active event ->
  202; 409 ``event_already_terminal``.

Every call into the runtime runs off the event loop (`run_in_threadpool`).
"""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

import adk_actors as adk
from adk_actors.daemon.bodies import read_json_object
from adk_actors.daemon.errors import ApiError
from adk_actors.daemon.views import DotSegmentRoute, json_response
from providers.errors import AdkError

PREFIX = "/dev/v1/triggers"
MAX_OUTPUT_BYTES = 65_536
CANCEL_REASON = "developer_cancelled"
_EVENT_KEYS = frozenset({"payload", "idempotency_key", "metadata", "session", "timeout"})
_STATUS = {
    "invalid_ambient_event": (400, "invalid_ambient_event"),
    "invalid_trigger_name": (400, "invalid_trigger_name"),
    "trigger_not_found": (404, "trigger_not_found"),
    "ambient_queue_full": (429, "ambient_queue_full"),
    "ambient_capacity_exhausted": (503, "ambient_capacity_exhausted"),
    "already_terminal": (409, "event_already_terminal"),
    "unavailable": (503, "ambient_unavailable"),
}


def _refusal(error: AdkError, missing: str = "trigger_not_found") -> ApiError:
    reason = error.reason if isinstance(error.reason, str) else str(error.reason)
    if reason == "not_found":
        return ApiError(404, missing, "No such trigger or event")
    status, code = _STATUS.get(reason, (500, "internal_error"))
    return ApiError(status, code, error.detail or code)


def _name(request: Request) -> str:
    name: str = request.path_params["name"]
    return name


def _event_ref(request: Request) -> str:
    ref: str = request.path_params["ref"]
    if not ref.startswith("amb-") or not ref.endswith(":" + _name(request)):
        raise ApiError(404, "event_not_found", "No such event on this trigger")
    return ref


async def _triggers(request: Request) -> Response:
    def listing() -> list[dict[str, Any]]:
        views = []
        for name in adk.ambient.triggers():
            try:
                views.append(adk.ambient.trigger_status(name))
            except AdkError:
                continue  # unregistered meanwhile
        return views

    return json_response({"triggers": await run_in_threadpool(listing)})


async def _trigger(request: Request) -> Response:
    try:
        view = await run_in_threadpool(adk.ambient.trigger_status, _name(request))
    except AdkError as error:
        raise _refusal(error) from None
    return json_response(view)


async def _submit(request: Request) -> Response:
    name = _name(request)
    body = await read_json_object(request)
    unknown = sorted(set(body) - _EVENT_KEYS)
    if unknown:
        raise ApiError(400, "invalid_ambient_event", f"Unknown keys: {', '.join(unknown[:8])}")
    try:
        receipt = await run_in_threadpool(adk.ambient.submit, name, body)
    except AdkError as error:
        raise _refusal(error) from None
    return json_response(
        {
            "ref": receipt.ref,
            "duplicate": receipt.duplicate,
            "url": f"{PREFIX}/{name}/events/{receipt.ref}",
        },
        202,
    )


async def _event(request: Request) -> Response:
    ref = _event_ref(request)
    try:
        if request.method == "DELETE":
            await run_in_threadpool(adk.ambient.cancel, ref, CANCEL_REASON)
            return json_response({"ref": ref, "state": "cancelling"}, 202)
        view = await run_in_threadpool(adk.ambient.status, ref)
    except AdkError as error:
        raise _refusal(error, "event_not_found") from None
    return json_response(_bounded(view))


def _bounded(view: dict[str, Any]) -> dict[str, Any]:
    """The status view with its outcome's output bounded to `MAX_OUTPUT_BYTES`."""
    outcome = view.get("outcome")
    truncated = False
    if isinstance(outcome, dict) and "output" in outcome:
        output = outcome["output"]
        if len(msgspec.json.encode(output)) > MAX_OUTPUT_BYTES:
            if isinstance(output, str):
                cut = output.encode()[: MAX_OUTPUT_BYTES - 2].decode(errors="ignore")
                while (excess := len(msgspec.json.encode(cut)) - MAX_OUTPUT_BYTES) > 0:
                    cut = cut[: len(cut) - excess]  # escapes grew it
            else:
                cut = None
            view = {**view, "outcome": {**outcome, "output": cut}}
            truncated = True
    return {**view, "output_truncated": truncated}


ROUTES: list[BaseRoute] = [
    DotSegmentRoute(PREFIX, "invalid_path_parameter", "A path segment cannot hold an encoded '/'"),
    Route(PREFIX, _triggers, methods=["GET"]),
    Route(PREFIX + "/{name}", _trigger, methods=["GET"]),
    Route(PREFIX + "/{name}/events", _submit, methods=["POST"]),
    Route(PREFIX + "/{name}/events/{ref}", _event, methods=["GET", "DELETE"]),
]
