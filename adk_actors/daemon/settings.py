"""The daemon's bounds: the spec's developer settings, checked once at start.

`DevSettings` holds every limit the HTTP surface applies, with the spec's defaults
and hard ceilings; `settings_from_env` reads the ``ADK_DEV_*`` environment settings
(and ``ADK_DEV_TOKEN``, kept only as its SHA-256 digest). A bad value is an
`AdkError` naming the setting (the environment variable, when it came from one, with
its bounds in that variable's unit: ``ADK_DEV_SSE_MAX_DURATION_MS is an integer from 1
to 3600000 (milliseconds)``), raised before anything listens.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from adk_actors.config_file.strict_json import StrictJsonError, strict_json_loads
from providers.errors import AdkError

MIN_TOKEN_CHARS = 16
MAX_TOKEN_CHARS = 4096
MAX_SSE_EVENTS = 10_000
MAX_SSE_BYTES = 16 * 1024 * 1024
MAX_SSE_DURATION = 3600.0
MAX_SESSION_RESULTS = 1000
MAX_BODY_BYTES = 16 * 1024 * 1024

TOKEN_ENV = "ADK_DEV_TOKEN"
RUN_OPTIONS_ENV = "ADK_DEV_RUN_OPTIONS"
LEGACY_ENV = "ADK_LEGACY_A2A"


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
    """A request's whole life until its answer is sent (an SSE stream: until it starts;
    its own bounds apply after)."""
    drain_grace: Annotated[float, msgspec.Meta(ge=0, le=600)] = 10.0
    """How long a stopping daemon waits for running runs before cancelling them."""
    legacy_a2a: bool = False
    legacy_max_body_bytes: Annotated[int, msgspec.Meta(gt=0, le=MAX_BODY_BYTES)] = 1024 * 1024
    legacy_max_concurrent: Annotated[int, msgspec.Meta(gt=0, le=1024)] = 16
    """Legacy prompts served at once (each holds a worker thread); more get 503."""

    def __post_init__(self) -> None:
        if len(self.token_digest) != 32:
            raise AdkError(("invalid_dev_setting", "token_digest"), "a SHA-256 digest")
        if self.max_field_bytes > self.max_body_bytes:
            raise AdkError(
                ("invalid_dev_setting", "max_field_bytes"), "must not exceed max_body_bytes"
            )


_TOKEN_CHARS = re.compile(r"[\x21-\x7e]+")
"""Visible ASCII: what an ``Authorization: Bearer`` value can carry unchanged."""


def token_digest(token: Any) -> bytes:
    """The digest kept for a bearer token: ``dev_token_too_short`` under 16 characters,
    ``dev_token_invalid`` for anything but 16..4096 visible ASCII characters (no space:
    a header value with one never authenticates)."""
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
        raise AdkError(
            "dev_token_too_short",
            f"set {TOKEN_ENV} to at least {MIN_TOKEN_CHARS} random characters",
        )
    if len(token) > MAX_TOKEN_CHARS or not _TOKEN_CHARS.fullmatch(token):
        raise AdkError(
            "dev_token_invalid",
            f"{TOKEN_ENV} is {MIN_TOKEN_CHARS}..{MAX_TOKEN_CHARS} visible ASCII characters, "
            "without spaces",
        )
    return hashlib.sha256(token.encode("ascii")).digest()


def dev_settings(**values: Any) -> DevSettings:
    """`DevSettings` from keyword values; a bad one raises ``invalid_dev_setting``."""
    try:
        return msgspec.convert(values, DevSettings)
    except msgspec.ValidationError as error:
        raise AdkError(("invalid_dev_setting", _key(str(error))), str(error)) from None


_NUMERIC_ENV: dict[str, tuple[str, int]] = {
    "ADK_DEV_SSE_MAX_EVENTS": ("sse_max_events", 1),
    "ADK_DEV_SSE_MAX_BYTES": ("sse_max_bytes", 1),
    "ADK_DEV_SSE_MAX_DURATION_MS": ("sse_max_duration", 1000),
    "ADK_DEV_MAX_SESSION_RESULTS": ("max_session_results", 1),
    "ADK_DEV_DRAIN_GRACE_MS": ("drain_grace", 1000),
}
"""Environment variable -> (setting, divisor): the ``_MS`` ones become seconds."""

_RUN_OPTION_KEYS = {"max_buffered_events": "run_max_buffered_events", "retention": "run_retention"}
"""``ADK_DEV_RUN_OPTIONS`` key -> setting (``retention`` in seconds)."""

_UNITS = {"sse_max_duration": "seconds", "drain_grace": "seconds", "run_retention": "seconds"}
"""Settings held in seconds (their ``_MS`` variables are in milliseconds)."""

_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")


def settings_from_env(environ: Mapping[str, str], **overrides: Any) -> DevSettings:
    """The settings of `adk serve`: ``ADK_DEV_TOKEN`` (required) and the ``ADK_DEV_*``
    bounds, then `overrides` (keyword values of `DevSettings`) on top.

    Every value is checked against its bounds on its own, so the error names the
    environment variable that holds it (``("invalid_dev_setting", "ADK_DEV_...")``).
    """
    token = environ.get(TOKEN_ENV)
    if not token:
        raise AdkError("dev_token_required", f"set {TOKEN_ENV} (at least 16 characters)")
    digest = token_digest(token)
    values: dict[str, Any] = {}
    for name, (key, divisor) in _NUMERIC_ENV.items():
        raw = environ.get(name)
        if raw is not None:
            number = _integer(name, raw)
            value = number / divisor if divisor != 1 else number
            _check_one(name, key, value, divisor, integer=True)
            values[key] = value
    raw_run_options = environ.get(RUN_OPTIONS_ENV)
    if raw_run_options is not None:
        values.update(_run_options(raw_run_options))
    raw_legacy = environ.get(LEGACY_ENV)
    if raw_legacy is not None and raw_legacy not in ("0", "1"):
        raise AdkError(("invalid_dev_setting", LEGACY_ENV), f"{LEGACY_ENV} is 1 (on) or 0 (off)")
    if raw_legacy == "1":
        values["legacy_a2a"] = True
    values.update(overrides)
    return dev_settings(token_digest=digest, **values)


def _integer(name: str, raw: str) -> int:
    if not _INTEGER.fullmatch(raw.strip()):
        raise AdkError(("invalid_dev_setting", name), f"{name} is an integer")
    return int(raw.strip())


def _check_one(name: str, key: str, value: Any, scale: int = 1, integer: bool = False) -> None:
    """`value` within the bounds of setting `key`, or an error naming `name` with the
    bounds in `name`'s own unit (the setting's times `scale`: 1000 for milliseconds)."""
    try:
        dev_settings(token_digest=bytes(32), **{key: value})
    except AdkError:
        raise AdkError(
            ("invalid_dev_setting", name), f"{name} is {_allowed(key, scale, integer)}"
        ) from None


def _allowed(key: str, scale: int, integer: bool) -> str:
    """What setting `key` takes, as a variable holding it times `scale` (an integer if
    `integer` or the setting is one): ``an integer from 1 to 3600000 (milliseconds)``."""
    bounds = _SETTING_TYPES[key]
    assert isinstance(bounds, msgspec.inspect.IntType | msgspec.inspect.FloatType)
    unit = _UNITS.get(key)
    if unit is not None and scale == 1000:
        unit = "milliseconds"
    shown = f" ({unit})" if unit else ""
    high = _number(bounds.le * scale) if bounds.le is not None else None
    upper = f" to {high}" if high is not None else " or more"
    if integer or isinstance(bounds, msgspec.inspect.IntType):
        if bounds.ge is not None:
            low = math.ceil(bounds.ge * scale)
        else:
            low = math.floor((bounds.gt or 0) * scale) + 1
        return f"an integer from {low}{upper}{shown}"
    lower = (
        f"at least {_number(bounds.ge * scale)}"
        if bounds.ge is not None
        else f"greater than {_number((bounds.gt or 0) * scale)}"
    )
    upper = f" and at most {high}" if high is not None else ""
    return f"a number {lower}{upper}{shown}"


def _number(value: float) -> str:
    """`value` as written in a setting (``3600000``, not ``3600000.0``)."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _run_options(raw: str) -> dict[str, Any]:
    """``ADK_DEV_RUN_OPTIONS``: a JSON object of ``max_buffered_events`` and
    ``retention`` (seconds), each checked against its setting's bounds."""
    try:
        options = strict_json_loads(raw)
    except StrictJsonError:
        raise AdkError(("invalid_dev_setting", RUN_OPTIONS_ENV), "a JSON object") from None
    if not isinstance(options, dict):
        raise AdkError(("invalid_dev_setting", RUN_OPTIONS_ENV), "a JSON object")
    unknown = set(options) - set(_RUN_OPTION_KEYS)
    if unknown:
        raise AdkError(
            ("invalid_dev_setting", RUN_OPTIONS_ENV),
            f"unknown keys {sorted(unknown)[:16]}; use max_buffered_events and retention",
        )
    values = {_RUN_OPTION_KEYS[key]: value for key, value in options.items()}
    for key, value in options.items():
        if isinstance(value, bool):
            raise AdkError(("invalid_dev_setting", f"{RUN_OPTIONS_ENV}.{key}"), "a number")
        _check_one(f"{RUN_OPTIONS_ENV}.{key}", _RUN_OPTION_KEYS[key], value)
    return values


def _setting_types() -> dict[str, Any]:
    """Each setting's msgspec type (its bounds), by name."""
    info = msgspec.inspect.type_info(DevSettings)
    assert isinstance(info, msgspec.inspect.StructType)
    return {field.name: field.type for field in info.fields}


_SETTING_TYPES = _setting_types()


def _key(message: str) -> str:
    """The setting a msgspec validation message names (``... - at `$.key` ``)."""
    marker = "$."
    start = message.find(marker)
    if start < 0:
        return "settings"
    return message[start + len(marker) :].rstrip("`").split(".")[0].split("[")[0]
