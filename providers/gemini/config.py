"""Strict Gemini configuration: every key is known, every value checked before HTTP.

Generation options (`GENERATION_KEYS`) may sit at the top level of a direct provider
config or inside ``generation_config`` (how an agent config carries them). A
misspelled key anywhere is an error naming it, never silently ignored.

``max_connections`` bounds the HTTP connections (and idle keep-alive connections)
of each client (one per key, base URL and timeout, and for async calls per event
loop too): the config key, else ``ADK_GEMINI_MAX_CONNECTIONS``, else
`DEFAULT_MAX_CONNECTIONS`; at most `MAX_CONNECTIONS_CEILING`.

``request_timeout`` (milliseconds, default `DEFAULT_TIMEOUT_MS`, at most
`MAX_TIMEOUT_MS`, or ``"infinity"``) is one absolute deadline over the whole call:
connecting, every read, every retry and its backoff, and a whole stream.

``retry`` is ``{"max_attempts": 3, "initial_delay": 500, "max_delay": 8000}``
(delays in milliseconds): how often a retryable failure (HTTP 408, 429, 500, 502,
503, 504, a refused or reset connection) is tried again, with exponential backoff
and full jitter (``Retry-After`` honoured); see `RetryPolicy`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from providers.errors import AdkError

THINKING_LEVELS = ("minimal", "low", "medium", "high")
SAFETY_CATEGORIES = {
    "harassment": "HARM_CATEGORY_HARASSMENT",
    "hate_speech": "HARM_CATEGORY_HATE_SPEECH",
    "sexually_explicit": "HARM_CATEGORY_SEXUALLY_EXPLICIT",
    "dangerous_content": "HARM_CATEGORY_DANGEROUS_CONTENT",
}
SAFETY_THRESHOLDS = {
    "off": "OFF",
    "block_none": "BLOCK_NONE",
    "block_only_high": "BLOCK_ONLY_HIGH",
    "block_medium_and_above": "BLOCK_MEDIUM_AND_ABOVE",
    "block_low_and_above": "BLOCK_LOW_AND_ABOVE",
    "unspecified": "HARM_BLOCK_THRESHOLD_UNSPECIFIED",
}
BUILTIN_TOOLS = ("google_search",)

PASS_THROUGH_GENERATION_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "max_output_tokens",
    "stop_sequences",
    "candidate_count",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "response_mime_type",
)
"""Options the SDK takes under the same name."""

GENERATION_KEYS = frozenset(
    {*PASS_THROUGH_GENERATION_KEYS, "response_schema", "thinking_config", "safety_settings"}
)
PROVIDER_KEYS = frozenset(
    {
        "provider",
        "model",
        "api_key",
        "base_url",
        "request_timeout",
        "builtin_tools",
        "generation_config",
        "cached_content",
        "max_connections",
        "retry",
    }
)
AGENT_KEYS = frozenset(
    {
        "instructions",
        "description",
        "sub_agents",
        "output_schema",
        "output_key",
        "callback_config",
        "tools",
    }
)
"""Agent/runtime fields that share the agent's config with the provider; accepted here."""

MAX_TIMEOUT_MS = 3_600_000
DEFAULT_TIMEOUT_MS = 120_000
"""The request deadline when ``request_timeout`` is not set (``"infinity"``: none)."""
DEFAULT_MAX_ATTEMPTS = 3
MAX_ATTEMPTS_CEILING = 10
DEFAULT_INITIAL_DELAY_MS = 500
DEFAULT_MAX_DELAY_MS = 8_000
MAX_RETRY_DELAY_MS = 300_000
RETRY_KEYS = ("max_attempts", "initial_delay", "max_delay")
DEFAULT_MAX_CONNECTIONS = 1024
MAX_CONNECTIONS_CEILING = 65_536
MAX_CONNECTIONS_ENV = "ADK_GEMINI_MAX_CONNECTIONS"


@dataclass(frozen=True)
class RetryPolicy:
    """How a failed request is tried again: at most `max_attempts` attempts in all;
    before attempt n+1 a random wait in [0, min(max_delay, initial_delay * 2**(n-1))]
    seconds (full jitter), or the server's ``Retry-After`` if that is longer. Every
    wait stays inside the request's deadline."""

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    initial_delay: float = DEFAULT_INITIAL_DELAY_MS / 1000
    max_delay: float = DEFAULT_MAX_DELAY_MS / 1000


DEFAULT_RETRY = RetryPolicy()


@dataclass(frozen=True)
class GeminiSettings:
    """A checked config, ready to build a request from."""

    model: str
    api_key: str
    base_url: str | None
    timeout_ms: int | None
    instructions: str | None
    generation: dict[str, Any]
    builtin_tools: tuple[str, ...]
    include_thoughts: bool
    cached_content: str | None
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    retry: RetryPolicy = DEFAULT_RETRY

    def __repr__(self) -> str:  # the key never reaches a log line or traceback
        return (
            f"GeminiSettings(model={self.model!r}, base_url={self.base_url!r}, api_key=[redacted])"
        )


def check(config: Mapping[str, Any], *, need_key: bool = True) -> GeminiSettings:
    """Validate a Gemini config; raises `AdkError` with the reason of the first problem."""
    if not isinstance(config, Mapping):
        raise AdkError("invalid_config", "a provider config is a mapping")
    unknown = sorted(set(config) - PROVIDER_KEYS - GENERATION_KEYS - AGENT_KEYS)
    if unknown:
        raise AdkError(
            ("unknown_config_keys", tuple(unknown)), f"unknown keys: {', '.join(unknown)}"
        )
    nested = config.get("generation_config") or {}
    if not isinstance(nested, Mapping):
        raise AdkError("invalid_generation_config", "generation_config is a mapping")
    unknown = sorted(set(nested) - GENERATION_KEYS)
    if unknown:
        raise AdkError(
            ("unknown_generation_config_keys", tuple(unknown)),
            f"unknown keys: {', '.join(unknown)}",
        )
    both = sorted(set(nested) & set(config))
    if both:
        raise AdkError(("duplicate_config_keys", tuple(both)), "set each option once")
    generation = {**{k: v for k, v in config.items() if k in GENERATION_KEYS}, **nested}

    model = config.get("model")
    if (
        not isinstance(model, str)
        or not model
        or len(model) > 256
        or "/" in model.removeprefix("models/")
    ):
        raise AdkError("invalid_model", "model is a model name such as 'gemini-3.1-flash-lite'")
    api_key = (
        config.get("api_key")
        or os.environ.get("GEMINI_API_KEY")
        or os.environ.get("GOOGLE_API_KEY")
    )
    if need_key and not api_key:
        raise AdkError("missing_api_key", "set GEMINI_API_KEY or config['api_key']")
    if api_key is not None and not isinstance(api_key, str):
        raise AdkError("invalid_api_key", "api_key is a string")
    base_url = config.get("base_url") or os.environ.get("GOOGLE_GEMINI_BASE_URL")
    if base_url is not None and (
        not isinstance(base_url, str) or not base_url.startswith(("http://", "https://"))
    ):
        raise AdkError("invalid_base_url", "base_url is an http(s) URL")
    instructions = config.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise AdkError("invalid_instructions", "instructions is a string")
    cached = config.get("cached_content")
    if cached is not None and not isinstance(cached, str):
        raise AdkError("invalid_cached_content", "cached_content is a cache name")

    _check_generation(generation)
    thinking = generation.get("thinking_config") or {}
    return GeminiSettings(
        model=model.removeprefix("models/"),
        api_key=api_key or "",
        base_url=base_url,
        timeout_ms=_timeout(config.get("request_timeout")),
        instructions=instructions,
        generation=generation,
        builtin_tools=_builtin_tools(config.get("builtin_tools")),
        include_thoughts=bool(thinking.get("include_thoughts", False)),
        cached_content=cached,
        max_connections=_max_connections(config.get("max_connections")),
        retry=_retry(config.get("retry")),
    )


def _timeout(value: Any) -> int | None:
    if value is None:
        return DEFAULT_TIMEOUT_MS
    if value == "infinity":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise AdkError(
            "invalid_request_timeout", "request_timeout is milliseconds >= 0 or 'infinity'"
        )
    if not 0 <= value <= MAX_TIMEOUT_MS:
        raise AdkError(
            "invalid_request_timeout", f"request_timeout is 0..{MAX_TIMEOUT_MS} ms or 'infinity'"
        )
    return int(value)


def _retry(value: Any) -> RetryPolicy:
    """The ``retry`` mapping: known keys only, ints in range (delays in ms)."""
    if value is None:
        return DEFAULT_RETRY
    if not isinstance(value, Mapping):
        raise AdkError("invalid_retry", f"retry is a mapping of {', '.join(RETRY_KEYS)}")
    unknown = sorted(str(key)[:64] for key in set(value) - set(RETRY_KEYS))
    if unknown:
        raise AdkError(
            ("unknown_retry_keys", tuple(unknown)), f"unknown keys: {', '.join(unknown)}"
        )
    bounds = {
        "max_attempts": (1, MAX_ATTEMPTS_CEILING, DEFAULT_MAX_ATTEMPTS),
        "initial_delay": (0, MAX_RETRY_DELAY_MS, DEFAULT_INITIAL_DELAY_MS),
        "max_delay": (0, MAX_RETRY_DELAY_MS, DEFAULT_MAX_DELAY_MS),
    }
    checked: dict[str, int] = {}
    for key, (low, high, default) in bounds.items():
        item = value.get(key, default)
        if isinstance(item, bool) or not isinstance(item, int) or not low <= item <= high:
            unit = "" if key == "max_attempts" else " ms"
            raise AdkError(("invalid_retry", key), f"retry.{key} is an int in {low}..{high}{unit}")
        checked[key] = item
    return RetryPolicy(
        max_attempts=checked["max_attempts"],
        initial_delay=checked["initial_delay"] / 1000,
        max_delay=checked["max_delay"] / 1000,
    )


def _max_connections(value: Any) -> int:
    """The config value, else the environment's, else the default; 1..ceiling."""
    source = "max_connections"
    if value is None:
        raw = os.environ.get(MAX_CONNECTIONS_ENV, "").strip()
        if not raw:
            return DEFAULT_MAX_CONNECTIONS
        source = MAX_CONNECTIONS_ENV
        value = int(raw) if raw.isascii() and raw.isdigit() else None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= MAX_CONNECTIONS_CEILING
    ):
        raise AdkError("invalid_config", f"{source} is an int in 1..{MAX_CONNECTIONS_CEILING}")
    return value


def _builtin_tools(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or any(tool not in BUILTIN_TOOLS for tool in value):
        raise AdkError("invalid_builtin_tools", f"builtin_tools may contain only {BUILTIN_TOOLS}")
    if len(set(value)) != len(value):
        raise AdkError("invalid_builtin_tools", "each built-in tool once")
    return tuple(value)


def _number(
    generation: Mapping[str, Any], key: str, low: float, high: float, integer: bool = False
) -> None:
    value = generation.get(key)
    if value is None:
        return
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
        raise AdkError(
            ("invalid_generation_config", key), f"{key} must be a number in {low}..{high}"
        )


def _check_generation(generation: Mapping[str, Any]) -> None:
    _number(generation, "temperature", 0.0, 2.0)
    _number(generation, "top_p", 0.0, 1.0)
    _number(generation, "top_k", 1, 1000, integer=True)
    _number(generation, "max_output_tokens", 1, 1_000_000, integer=True)
    _number(generation, "candidate_count", 1, 1, integer=True)
    _number(generation, "seed", -(2**31), 2**31 - 1, integer=True)
    _number(generation, "presence_penalty", -2.0, 2.0)
    _number(generation, "frequency_penalty", -2.0, 2.0)
    stops = generation.get("stop_sequences")
    if stops is not None and (
        not isinstance(stops, list) or len(stops) > 5 or not all(isinstance(s, str) for s in stops)
    ):
        raise AdkError(("invalid_generation_config", "stop_sequences"), "at most 5 strings")
    mime = generation.get("response_mime_type")
    if mime is not None and mime not in ("text/plain", "application/json", "text/x.enum"):
        raise AdkError(
            ("invalid_generation_config", "response_mime_type"),
            "text/plain, application/json or text/x.enum",
        )
    schema = generation.get("response_schema")
    if schema is not None and not isinstance(schema, Mapping | bool):
        raise AdkError(("invalid_generation_config", "response_schema"), "a JSON Schema object")
    if schema is not None and mime != "application/json":
        raise AdkError(
            ("invalid_generation_config", "response_schema"),
            "response_schema needs response_mime_type application/json",
        )
    _check_thinking(generation.get("thinking_config"))
    _check_safety(generation.get("safety_settings"))


def _check_thinking(thinking: Any) -> None:
    if thinking is None:
        return
    if not isinstance(thinking, Mapping):
        raise AdkError("invalid_thinking_config", "thinking_config is a mapping")
    unknown = sorted(set(thinking) - {"thinking_level", "thinking_budget", "include_thoughts"})
    if unknown:
        raise AdkError(
            ("unknown_thinking_config_keys", tuple(unknown)), f"unknown keys: {', '.join(unknown)}"
        )
    level, budget = thinking.get("thinking_level"), thinking.get("thinking_budget")
    if level is not None and budget is not None:
        raise AdkError(
            "thinking_level_and_budget",
            "set thinking_level or the legacy thinking_budget, not both",
        )
    if level is not None and level not in THINKING_LEVELS:
        raise AdkError("invalid_thinking_level", f"thinking_level is one of {THINKING_LEVELS}")
    if budget is not None and (
        isinstance(budget, bool) or not isinstance(budget, int) or not -1 <= budget <= 32_768
    ):
        raise AdkError("invalid_thinking_budget", "thinking_budget is an int in -1..32768")
    include = thinking.get("include_thoughts")
    if include is not None and not isinstance(include, bool):
        raise AdkError("invalid_thinking_config", "include_thoughts is a bool")


def _check_safety(settings: Any) -> None:
    if settings is None:
        return
    if not isinstance(settings, list):
        raise AdkError(
            "invalid_safety_settings", "safety_settings is a list of {category, threshold}"
        )
    seen: set[str] = set()
    for entry in settings:
        if not isinstance(entry, Mapping) or set(entry) != {"category", "threshold"}:
            raise AdkError(
                "invalid_safety_settings", "each setting has exactly category and threshold"
            )
        category, threshold = entry["category"], entry["threshold"]
        if category == "civic_integrity":
            raise AdkError(
                "unsupported_safety_category", "the civic integrity category is deprecated"
            )
        if category not in SAFETY_CATEGORIES:
            raise AdkError(
                "invalid_safety_category", f"category is one of {sorted(SAFETY_CATEGORIES)}"
            )
        if threshold not in SAFETY_THRESHOLDS:
            raise AdkError(
                "invalid_safety_threshold", f"threshold is one of {sorted(SAFETY_THRESHOLDS)}"
            )
        if category in seen:
            raise AdkError("duplicate_safety_category", "each category once")
        seen.add(category)
