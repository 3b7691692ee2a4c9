"""The daemon's bounds: the spec's developer settings, checked once at start.

`DevSettings` holds every limit the HTTP surface applies, with the spec's defaults
and hard ceilings; `settings_from_env` reads the ``ADK_DEV_*`` environment settings
(and ``ADK_DEV_TOKEN``, kept only as its SHA-256 digest). A bad value is an
`AdkError` naming the setting, raised before anything listens.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from providers.errors import AdkError

MIN_TOKEN_CHARS = 16
MAX_SSE_EVENTS = 10_000
MAX_SSE_BYTES = 16 * 1024 * 1024
MAX_SSE_DURATION = 3600.0
MAX_SESSION_RESULTS = 1000
MAX_BODY_BYTES = 16 * 1024 * 1024

TOKEN_ENV = "ADK_DEV_TOKEN"


class DevSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every bound of the developer HTTP surface (times in seconds)."""

    token_digest: bytes
    """SHA-256 of the bearer token; the token itself is never kept."""
    max_body_bytes: Annotated[int, msgspec.Meta(gt=0, le=MAX_BODY_BYTES)] = 65_536
    max_field_bytes: Annotated[int, msgspec.Meta(gt=0, le=MAX_BODY_BYTES)] = 4096
    sse_heartbeat: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 15.0
    sse_max_events: Annotated[int, msgspec.Meta(gt=0, le=MAX_SSE_EVENTS)] = 128
    sse_max_bytes: Annotated[int, msgspec.Meta(gt=0, le=MAX_SSE_BYTES)] = 1024 * 1024
    sse_max_duration: Annotated[float, msgspec.Meta(gt=0, le=MAX_SSE_DURATION)] = 300.0
    max_session_results: Annotated[int, msgspec.Meta(gt=0, le=MAX_SESSION_RESULTS)] = 100
    run_retention: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 60.0
    run_max_buffered_events: Annotated[int, msgspec.Meta(gt=0, le=100_000)] = 256
    max_connections: Annotated[int, msgspec.Meta(gt=0, le=100_000)] = 2048
    keepalive_timeout: Annotated[float, msgspec.Meta(gt=0, le=300)] = 5.0
    request_timeout: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 30.0
    drain_grace: Annotated[float, msgspec.Meta(ge=0, le=600)] = 10.0
    legacy_a2a: bool = False
    legacy_max_body_bytes: Annotated[int, msgspec.Meta(gt=0, le=MAX_BODY_BYTES)] = 1024 * 1024

    def __post_init__(self) -> None:
        if len(self.token_digest) != 32:
            raise AdkError(("invalid_dev_setting", "token_digest"), "a SHA-256 digest")
        if self.max_field_bytes > self.max_body_bytes:
            raise AdkError(
                ("invalid_dev_setting", "max_field_bytes"), "must not exceed max_body_bytes"
            )


def token_digest(token: Any) -> bytes:
    """The digest kept for a bearer token; ``dev_token_too_short`` under 16 characters."""
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
        raise AdkError(
            "dev_token_too_short",
            f"set {TOKEN_ENV} to at least {MIN_TOKEN_CHARS} random characters",
        )
    return hashlib.sha256(token.encode()).digest()


def dev_settings(**values: Any) -> DevSettings:
    """`DevSettings` from keyword values; a bad one raises ``invalid_dev_setting``."""
    try:
        return msgspec.convert(values, DevSettings)
    except msgspec.ValidationError as error:
        raise AdkError(("invalid_dev_setting", _key(str(error))), str(error)) from None


def settings_from_env(environ: Mapping[str, str], **overrides: Any) -> DevSettings:
    """The settings of `adk serve`: ``ADK_DEV_TOKEN`` (required) and the ``ADK_DEV_*``
    bounds, then `overrides` (keyword values of `DevSettings`) on top."""
    token = environ.get(TOKEN_ENV)
    if not token:
        raise AdkError("dev_token_required", f"set {TOKEN_ENV} (at least 16 characters)")
    values: dict[str, Any] = {"token_digest": token_digest(token)}
    for name, key, scale in _NUMERIC_ENV:
        raw = environ.get(name)
        if raw is not None:
            values[key] = _number(name, raw) / scale
            if key != "sse_max_duration":
                values[key] = _integer(name, values[key])
    raw_run_options = environ.get("ADK_DEV_RUN_OPTIONS")
    if raw_run_options is not None:
        values.update(_run_options(raw_run_options))
    if environ.get("ADK_LEGACY_A2A") == "1":
        values["legacy_a2a"] = True
    values.update(overrides)
    return dev_settings(**values)


_NUMERIC_ENV = (
    ("ADK_DEV_SSE_MAX_EVENTS", "sse_max_events", 1),
    ("ADK_DEV_SSE_MAX_BYTES", "sse_max_bytes", 1),
    ("ADK_DEV_SSE_MAX_DURATION_MS", "sse_max_duration", 1000),
    ("ADK_DEV_MAX_SESSION_RESULTS", "max_session_results", 1),
)


def _number(name: str, raw: str) -> float:
    try:
        return float(int(raw))
    except ValueError:
        raise AdkError(("invalid_dev_setting", name), f"{name} is an integer") from None


def _integer(name: str, value: float) -> int:
    return int(value)


def _run_options(raw: str) -> dict[str, Any]:
    try:
        options = json.loads(raw)
    except ValueError:
        raise AdkError(("invalid_dev_setting", "ADK_DEV_RUN_OPTIONS"), "a JSON object") from None
    if not isinstance(options, dict):
        raise AdkError(("invalid_dev_setting", "ADK_DEV_RUN_OPTIONS"), "a JSON object")
    unknown = set(options) - {"max_buffered_events", "retention"}
    if unknown:
        raise AdkError(
            ("invalid_dev_setting", "ADK_DEV_RUN_OPTIONS"),
            f"unknown keys {sorted(unknown)}; use max_buffered_events and retention",
        )
    renamed = {"max_buffered_events": "run_max_buffered_events", "retention": "run_retention"}
    return {renamed[key]: value for key, value in options.items()}


def _key(message: str) -> str:
    """The setting a msgspec validation message names (``... - at `$.key` ``)."""
    marker = "$."
    start = message.find(marker)
    if start < 0:
        return "settings"
    return message[start + len(marker) :].rstrip("`").split(".")[0].split("[")[0]
