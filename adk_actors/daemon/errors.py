"""The developer API's error body: ``{"error": {"code": reason, "message": text}}``.

Handlers raise `ApiError`; the app's exception handler turns it into the JSON body
with its HTTP status. Messages are short and fixed: never a secret, a raw body, an
argument value or a traceback.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

MAX_MESSAGE_CHARS = 512


class ApiError(Exception):
    """An HTTP refusal: `status`, the spec's `code` (its reason atom) and a message.

    `extra` adds fields beside ``code`` and ``message`` inside ``error`` (for example
    ``oldest_sequence`` and ``latest_sequence`` of a ``run_event_replay_gap``);
    `headers` are set on the response.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message[:MAX_MESSAGE_CHARS]
        self.extra = extra or {}
        self.headers = headers or {}


def error_body(code: str, message: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of an error."""
    return {"error": {"code": code, "message": message[:MAX_MESSAGE_CHARS], **(extra or {})}}


def error_response(error: ApiError) -> JSONResponse:
    """The response for `error` (``Cache-Control: no-store``, as every API answer)."""
    headers = {"cache-control": "no-store", **error.headers}
    return JSONResponse(
        error_body(error.code, error.message, error.extra), error.status, headers=headers
    )
