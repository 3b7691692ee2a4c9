"""The /dev/v1 evaluation routes: render a saved result or comparison, compare two results.

Pure and bounded: these routes never load files, start agents or run an evaluation;
they check what the client sends (a saved schema-2 or schema-1 result, or a saved
baseline comparison; comparing takes two schema-2 results) and answer with the library's own renderer and comparison, behind the same
guards and bearer token as every /dev/v1 route.

- ``POST /dev/v1/evaluation/render``: ``{"report": result-or-comparison, "format":
  "json" | "markdown", "options"?: {"max_output_bytes": n}}`` -> 200 with the report
  (``application/json``, or ``text/markdown; charset=utf-8``);
- ``POST /dev/v1/evaluation/compare``: ``{"baseline": result, "current": result,
  "options"?: {"max_pass_rate_drop", "metric_tolerances", "max_output_bytes"}}`` -> 200
  with the checked comparison (``"passed"`` false on any regression).

A body is read up to `MAX_BODY_BYTES`; an answer is at most ``max_output_bytes``
(default `DEFAULT_MAX_OUTPUT_BYTES`, at most `MAX_OUTPUT_BYTES`). Refusals: 400
``invalid_evaluation_request`` (the body's keys or types), 400
``invalid_evaluation_report`` with ``"reason"`` saying why (``unknown_report_kind``,
``ambiguous_report_kind``, ``invalid_eval_result``, ``invalid_eval_comparison``,
``baseline_must_be_eval_result``, ``current_must_be_eval_result``,
``invalid_options``, ``output_limit_exceeded``, ...), 409 ``evaluation_set_mismatch``
(the results are of different evaluation sets), plus the body reader's 413/415/400.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from adk_actors.daemon.bodies import read_json_object
from adk_actors.daemon.errors import ApiError
from adk_actors.daemon.views import JSON_MEDIA_TYPE
from adk_actors.evaluation.compare import (
    check_comparison_options,
    compare,
    encode_comparison,
    is_comparison_json,
)
from adk_actors.evaluation.limits import MAX_REPORT_BYTES, reason_tag
from adk_actors.evaluation.report import FORMATS, render, render_json
from adk_actors.evaluation.results import decode_result
from providers.errors import AdkError

PREFIX = "/dev/v1/evaluation"
RENDER_PATH = f"{PREFIX}/render"
COMPARE_PATH = f"{PREFIX}/compare"
MAX_BODY_BYTES = 2 * MAX_REPORT_BYTES + 64 * 1024
"""A request body is read up to this many bytes (413 past it): room for two results as
large as the engine writes (`MAX_REPORT_BYTES` each), for a comparison. The routes'
own bound, independent of the daemon's ``max_body_bytes`` for other routes."""
DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024
MAX_OUTPUT_BYTES = 16 * 1024 * 1024
MARKDOWN_MEDIA_TYPE = "text/markdown; charset=utf-8"
_RENDER_OPTIONS = frozenset({"max_output_bytes"})
_COMPARE_OPTIONS = frozenset({"max_pass_rate_drop", "metric_tolerances", "max_output_bytes"})


class _Refused(Exception):
    """Why a report was refused: one stable word (``reason`` in the 400 answer)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _bad_request() -> ApiError:
    return ApiError(
        400,
        "invalid_evaluation_request",
        "Send a report and a format, or a baseline and a current result, with optional options",
    )


def _bad_report(reason: str) -> ApiError:
    return ApiError(
        400,
        "invalid_evaluation_report",
        "The evaluation report or its options are invalid",
        extra={"reason": reason},
    )


def _body_fields(body: Mapping[str, Any], required: frozenset[str]) -> dict[str, Any]:
    """The body's objects, refusing unknown or missing keys and non-object values."""
    allowed = required | {"options"}
    if not required <= body.keys() <= allowed:
        raise _bad_request()
    if any(not isinstance(body[key], dict) for key in required - {"format"}):
        raise _bad_request()
    options = body.get("options", {})
    if not isinstance(options, dict):
        raise _bad_request()
    return {**body, "options": options}


def _max_output(options: Mapping[str, Any], allowed: frozenset[str]) -> int:
    if not options.keys() <= allowed:
        raise _Refused("invalid_options")
    value = options.get("max_output_bytes", DEFAULT_MAX_OUTPUT_BYTES)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_OUTPUT_BYTES:
        raise _Refused("invalid_output_limit")
    return value


def _kind(report: Mapping[str, Any]) -> str:
    """``result`` or ``comparison`` by the report's discriminator keys."""
    is_result = "result_schema_version" in report
    is_comparison = is_comparison_json(report)
    if is_result and is_comparison:
        raise _Refused("ambiguous_report_kind")
    if is_result:
        return "result"
    if is_comparison:
        if report.get("report_type", "baseline_comparison") != "baseline_comparison":
            raise _Refused("unsupported_report_type")
        return "comparison"
    raise _Refused("unknown_report_kind")


def _word(error: AdkError) -> str:
    return reason_tag(error)[:64]


def render_report(report: Mapping[str, Any], fmt: object, options: Mapping[str, Any]) -> str:
    """The rendered report (blocking: it checks and renders the whole value)."""
    if fmt not in FORMATS:
        raise _Refused("invalid_format")
    max_bytes = _max_output(options, _RENDER_OPTIONS)
    _kind(report)
    try:
        return render(report, str(fmt), max_bytes=max_bytes)
    except AdkError as error:
        reason = _word(error)
        raise _Refused(
            "output_limit_exceeded" if reason == "eval_report_too_large" else reason
        ) from None


def compare_reports(
    baseline: Mapping[str, Any], current: Mapping[str, Any], options: Mapping[str, Any]
) -> str:
    """The comparison as JSON text (blocking)."""
    max_bytes = _max_output(options, _COMPARE_OPTIONS)
    drop = options.get("max_pass_rate_drop", 0.0)
    tolerances = options.get("metric_tolerances", {})
    try:
        check_comparison_options(drop, tolerances)
    except AdkError:
        raise _Refused("invalid_comparison_options") from None
    for side, value in (("baseline", baseline), ("current", current)):
        if _kind(value) != "result":
            raise _Refused(f"{side}_must_be_eval_result")
    try:
        checked = [decode_result(dict(baseline)), decode_result(dict(current))]
    except AdkError as error:
        raise _Refused(_word(error)) from None
    try:
        comparison = compare(
            checked[0], checked[1], max_pass_rate_drop=drop, metric_tolerances=tolerances
        )
        return render_json(encode_comparison(comparison), max_bytes=max_bytes)
    except AdkError as error:
        reason = _word(error)
        if reason == "eval_report_too_large":
            raise _Refused("output_limit_exceeded") from None
        raise _Refused(reason) from None


async def _render(request: Request) -> Response:
    body = _body_fields(
        await read_json_object(request, MAX_BODY_BYTES), frozenset({"report", "format"})
    )
    if not isinstance(body["format"], str):
        raise _bad_request()
    try:
        text = await run_in_threadpool(
            render_report, body["report"], body["format"], body["options"]
        )
    except _Refused as refused:
        raise _bad_report(refused.reason) from None
    media_type = JSON_MEDIA_TYPE if body["format"] == "json" else MARKDOWN_MEDIA_TYPE
    return Response(text, 200, headers={"cache-control": "no-store"}, media_type=media_type)


async def _compare(request: Request) -> Response:
    body = _body_fields(
        await read_json_object(request, MAX_BODY_BYTES), frozenset({"baseline", "current"})
    )
    try:
        text = await run_in_threadpool(
            compare_reports, body["baseline"], body["current"], body["options"]
        )
    except _Refused as refused:
        if refused.reason == "eval_set_mismatch":
            raise ApiError(
                409, "evaluation_set_mismatch", "Baseline and current evaluation set ids differ"
            ) from None
        raise _bad_report(refused.reason) from None
    return Response(text, 200, headers={"cache-control": "no-store"}, media_type=JSON_MEDIA_TYPE)


ROUTES: list[BaseRoute] = [
    Route(RENDER_PATH, _render, methods=["POST"]),
    Route(COMPARE_PATH, _compare, methods=["POST"]),
]
