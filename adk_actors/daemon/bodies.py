"""Reading request bodies and path fields within the daemon's bounds.

Every JSON body goes through `read_json_object`: ``Content-Type`` must be JSON (415
``unsupported_media_type``), the body is read up to ``max_body_bytes`` and no
further (413 ``payload_too_large``), and it must be strict JSON (the config file's
parser: UTF-8, no NaN or infinity, no duplicate key, nested at most `MAX_BODY_DEPTH`
deep) that decodes to an object (400 ``invalid_json``). `text_field` checks one field
(400 ``invalid_request``).
"""

from __future__ import annotations

import math
from typing import Any

import anyio
from starlette.requests import Request

from adk_actors.config_file.strict_json import StrictJsonError, strict_json_loads
from adk_actors.daemon.errors import ApiError
from adk_actors.daemon.state import DevState

MAX_BODY_DEPTH = 64
"""Objects and arrays in a body nest at most this deep (``providers.content``'s bound)."""


DEADLINE_KEY = "adk.deadline"
"""The ASGI scope key where the guards put the request's deadline (event loop time)."""


def dev_state(request: Request) -> DevState:
    """The `DevState` of the app serving `request`."""
    return request.app.state.dev  # type: ignore[no-any-return]


def time_left(request: Request) -> float:
    """Seconds until the request's deadline (``inf`` outside the guards)."""
    deadline: float = request.scope.get(DEADLINE_KEY, math.inf)
    return deadline - anyio.current_time()


def is_json(request: Request) -> bool:
    """The request says its body is ``application/json`` (parameters aside)."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return media_type == "application/json"


def payload_too_large(limit: int) -> ApiError:
    return ApiError(413, "payload_too_large", f"the body exceeds {limit} bytes")


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refusing it (413) as soon as it passes `limit` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                raise payload_too_large(limit)
        except ValueError:
            raise ApiError(400, "invalid_request", "Content-Length is not a number") from None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise payload_too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json_object(request: Request, limit: int | None = None) -> dict[str, Any]:
    """The body as a JSON object (limit: the settings' ``max_body_bytes``)."""
    if not is_json(request):
        raise ApiError(415, "unsupported_media_type", "Content-Type must be application/json")
    body = await read_body(
        request, dev_state(request).settings.max_body_bytes if limit is None else limit
    )
    value = parse_json(body)
    if not isinstance(value, dict):
        raise ApiError(400, "invalid_json", "Request body must be a JSON object")
    return value


def parse_json(body: bytes) -> Any:
    """`body` as strict JSON (see the module doc), or 400 ``invalid_json``."""
    try:
        return strict_json_loads(body, max_depth=MAX_BODY_DEPTH)
    except StrictJsonError as error:
        raise ApiError(
            400, "invalid_json", f"Request body must be a JSON object ({error.detail})"
        ) from None


def text_field(value: Any, max_bytes: int, name: str = "field") -> str:
    """A non-empty UTF-8 string of at most `max_bytes` bytes, or 400 ``invalid_request``."""
    if (
        not isinstance(value, str)
        or not value
        or len(value.encode("utf-8", "surrogatepass")) > max_bytes
    ):
        raise ApiError(
            400,
            "invalid_request",
            f"{name} must be a non-empty UTF-8 string within {max_bytes} bytes",
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, "invalid_request", f"{name} must be valid UTF-8") from None
    return value
