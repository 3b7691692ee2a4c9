"""Admission control configuration: defaults, hard ceilings and strict validation.

Every value has the spec's default and a hard ceiling; unknown keys and values out
of range raise `AdkError("invalid_admission_config", ...)` naming the key, never
echoing the value. Per-call arguments of `acquire` are checked here too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from providers.errors import AdkError

Overflow = Literal["reject", "queue"]

DEFAULT_GLOBAL_LIMIT = 256
DEFAULT_AGENT_LIMIT = 16
DEFAULT_OVERFLOW: Overflow = "reject"
DEFAULT_MAX_QUEUE = 1024
DEFAULT_QUEUE_TIMEOUT = 30.0

MAX_LIMIT = 1_000_000
"""Ceiling for `global_limit`, `default_agent_limit` and every per-agent limit."""
MAX_QUEUE_CEILING = 1_000_000
"""Ceiling for `max_queue` (queued requests across all agents)."""
MAX_TIMEOUT = 86_400.0
"""Ceiling, in seconds, for `default_queue_timeout` and a per-call `timeout`."""
MAX_AGENT_LIMIT_ENTRIES = 10_000
"""Ceiling for the number of entries in `agent_limits`."""
MAX_NAME_CHARS = 256
"""Longest accepted agent name."""
MAX_REQUEST_ID_CHARS = 128
"""Longest accepted request id."""

_KEYS = (
    "global_limit",
    "default_agent_limit",
    "agent_limits",
    "overflow",
    "max_queue",
    "default_queue_timeout",
)
_CONFIG_ERROR = "invalid_admission_config"


class AdmissionConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Validated, immutable controller settings (build one with `validate_config`)."""

    global_limit: int = DEFAULT_GLOBAL_LIMIT
    default_agent_limit: int = DEFAULT_AGENT_LIMIT
    agent_limits: dict[str, int] = msgspec.field(default_factory=dict)
    overflow: Overflow = DEFAULT_OVERFLOW
    max_queue: int = DEFAULT_MAX_QUEUE
    default_queue_timeout: float = DEFAULT_QUEUE_TIMEOUT

    def limit_for(self, agent: str) -> int:
        """The concurrency limit of one agent: its own entry or the default."""
        return self.agent_limits.get(agent, self.default_agent_limit)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe copy of the settings."""
        return {
            "global_limit": self.global_limit,
            "default_agent_limit": self.default_agent_limit,
            "agent_limits": dict(self.agent_limits),
            "overflow": self.overflow,
            "max_queue": self.max_queue,
            "default_queue_timeout": self.default_queue_timeout,
        }


def validate_config(config: Mapping[str, Any] | AdmissionConfig | None) -> AdmissionConfig:
    """Check `config` strictly and fill in defaults; raises `AdkError` on any problem."""
    if config is None:
        return AdmissionConfig()
    if isinstance(config, AdmissionConfig):
        config = config.to_dict()
    if not isinstance(config, Mapping):
        raise AdkError(_CONFIG_ERROR, "admission_control must be a mapping")
    unknown = [key for key in config if key not in _KEYS]
    if unknown:
        names = sorted(_show_key(key) for key in unknown)[:10]
        raise AdkError(_CONFIG_ERROR, f"unknown admission_control keys: {', '.join(names)}")
    values: dict[str, Any] = {}
    for key in ("global_limit", "default_agent_limit"):
        if key in config:
            values[key] = _config_int(key, config[key], 1, MAX_LIMIT)
    if "max_queue" in config:
        values["max_queue"] = _config_int("max_queue", config["max_queue"], 0, MAX_QUEUE_CEILING)
    if "overflow" in config:
        if config["overflow"] not in ("reject", "queue"):
            raise AdkError(_CONFIG_ERROR, "overflow must be 'reject' or 'queue'")
        values["overflow"] = config["overflow"]
    if "default_queue_timeout" in config:
        values["default_queue_timeout"] = _seconds(
            config["default_queue_timeout"], _CONFIG_ERROR, "default_queue_timeout", positive=True
        )
    if "agent_limits" in config:
        values["agent_limits"] = _agent_limits(config["agent_limits"])
    return AdmissionConfig(**values)


def _agent_limits(raw: Any) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        raise AdkError(_CONFIG_ERROR, "agent_limits must be a mapping of agent name to limit")
    if len(raw) > MAX_AGENT_LIMIT_ENTRIES:
        raise AdkError(
            _CONFIG_ERROR, f"agent_limits has more than {MAX_AGENT_LIMIT_ENTRIES} entries"
        )
    limits: dict[str, int] = {}
    for name, limit in raw.items():
        if not _valid_name(name):
            raise AdkError(
                _CONFIG_ERROR,
                f"agent_limits keys must be non-empty strings of at most {MAX_NAME_CHARS} chars",
            )
        limits[name] = _config_int("agent_limits", limit, 1, MAX_LIMIT)
    return limits


def _config_int(key: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise AdkError(_CONFIG_ERROR, f"{key} must be an integer from {low} to {high}")
    return value


def _seconds(value: Any, reason: str, key: str, *, positive: bool) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
        or value > MAX_TIMEOUT
    ):
        low = "more than 0" if positive else "from 0"
        raise AdkError(reason, f"{key} must be a number of seconds {low} to {MAX_TIMEOUT:g}")
    return float(value)


def _show_key(key: Any) -> str:
    text = key if isinstance(key, str) else type(key).__name__
    return text[:64]


def _valid_name(name: Any) -> bool:
    return isinstance(name, str) and 0 < len(name) <= MAX_NAME_CHARS


# -- per-call arguments of acquire ------------------------------------------------------

_REQUEST_ERROR = "invalid_admission_request"


def check_agent_name(agent_name: Any) -> str:
    """The agent name, or `AdkError("invalid_admission_request")`."""
    if not _valid_name(agent_name):
        raise AdkError(
            _REQUEST_ERROR, f"agent_name must be a non-empty string of at most {MAX_NAME_CHARS}"
        )
    return str(agent_name)


def check_overflow(overflow: Any) -> Overflow | None:
    """None (use the controller's setting), ``"reject"`` or ``"queue"``."""
    if overflow is None or overflow in ("reject", "queue"):
        return overflow  # type: ignore[no-any-return]
    raise AdkError(_REQUEST_ERROR, "overflow must be 'reject', 'queue' or None")


def check_timeout(timeout: Any) -> float | None:
    """None, or seconds from 0 to `MAX_TIMEOUT`."""
    if timeout is None:
        return None
    return _seconds(timeout, _REQUEST_ERROR, "timeout", positive=False)


def check_deadline(deadline: Any) -> float | None:
    """None, or a finite absolute `time.monotonic()` instant."""
    if deadline is None:
        return None
    if (
        isinstance(deadline, bool)
        or not isinstance(deadline, int | float)
        or not math.isfinite(deadline)
    ):
        raise AdkError(_REQUEST_ERROR, "deadline must be a finite time.monotonic() instant")
    return float(deadline)


def check_request_id(request_id: Any) -> str:
    """A caller-chosen request id: a non-empty string of at most `MAX_REQUEST_ID_CHARS`."""
    if not isinstance(request_id, str) or not 0 < len(request_id) <= MAX_REQUEST_ID_CHARS:
        raise AdkError(
            _REQUEST_ERROR,
            f"request_id must be a non-empty string of at most {MAX_REQUEST_ID_CHARS} chars",
        )
    return request_id
