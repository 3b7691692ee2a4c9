"""Admission control configuration: defaults, hard ceilings and strict validation.

Every value has the spec's default and a hard ceiling, written as msgspec
constraints on `AdmissionConfig`; unknown keys and values out of range raise
`AdkError("invalid_admission_config", ...)` naming the key, never echoing the value.
Per-call arguments of `acquire` are checked here too.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec

from providers.errors import AdkError, decode_options

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

_CONFIG_ERROR = "invalid_admission_config"

Limit = Annotated[int, msgspec.Meta(ge=1, le=MAX_LIMIT)]
AgentName = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NAME_CHARS)]


class AdmissionConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Validated, immutable controller settings (build one with `validate_config`).

    The annotations are the rules: `validate_config` decodes a mapping strictly
    against them, so a bool or a float is never a limit and NaN never a timeout.
    """

    global_limit: Limit = DEFAULT_GLOBAL_LIMIT
    default_agent_limit: Limit = DEFAULT_AGENT_LIMIT
    agent_limits: Annotated[
        dict[AgentName, Limit], msgspec.Meta(max_length=MAX_AGENT_LIMIT_ENTRIES)
    ] = msgspec.field(default_factory=dict)
    overflow: Overflow = DEFAULT_OVERFLOW
    max_queue: Annotated[int, msgspec.Meta(ge=0, le=MAX_QUEUE_CEILING)] = DEFAULT_MAX_QUEUE
    default_queue_timeout: Annotated[float, msgspec.Meta(gt=0, le=MAX_TIMEOUT)] = (
        DEFAULT_QUEUE_TIMEOUT
    )

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
    """Check `config` strictly and fill in defaults (an `AdmissionConfig` is checked again).

    Raises `AdkError("invalid_admission_config")`; the message names the key (every
    unknown key), never the value.
    """
    return decode_options(
        AdmissionConfig, config, _CONFIG_ERROR, keyed=False, what="admission_control"
    )


# -- per-call arguments of acquire ------------------------------------------------------

_REQUEST_ERROR = "invalid_admission_request"

RequestId = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_REQUEST_ID_CHARS)]
"""A caller-chosen request id: a non-empty string of at most `MAX_REQUEST_ID_CHARS`."""
Instant = Annotated[float, msgspec.Meta(ge=-sys.float_info.max, le=sys.float_info.max)]
"""A finite `time.monotonic()` instant (the bounds refuse infinities and NaN)."""


class AcquireArguments(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The arguments of one `acquire` (or `request_permit`), checked before any message.

    `overflow` None uses the controller's mode; `deadline` is absolute
    (`time.monotonic()`); `timeout` is seconds from now; `request_id` None gets a fresh one.
    """

    agent_name: AgentName
    overflow: Overflow | None = None
    deadline: Instant | None = None
    timeout: Annotated[float, msgspec.Meta(ge=0, le=MAX_TIMEOUT)] | None = None
    request_id: RequestId | None = None


def check_arguments(
    agent_name: Any, overflow: Any, deadline: Any, timeout: Any, request_id: Any
) -> AcquireArguments:
    """The checked arguments of `acquire`, or `AdkError("invalid_admission_request")`."""
    return decode_options(
        AcquireArguments,
        {
            "agent_name": agent_name,
            "overflow": overflow,
            "deadline": deadline,
            "timeout": timeout,
            "request_id": request_id,
        },
        _REQUEST_ERROR,
        keyed=False,
        what="acquire argument",
    )


def check_request_id(request_id: Any) -> str:
    """A caller-chosen request id, or `AdkError("invalid_admission_request")`."""
    try:
        return msgspec.convert(request_id, RequestId, strict=True)
    except msgspec.ValidationError:
        raise AdkError(
            _REQUEST_ERROR,
            f"request_id must be a non-empty string of at most {MAX_REQUEST_ID_CHARS} chars",
        ) from None
