"""Which Gemini failures are tried again, how long to wait, and clean error text.

A request has one absolute deadline (``request_timeout``) and at most
``retry.max_attempts`` attempts. Retried: HTTP 408, 429, 500, 502, 503 and 504, and a
connection that was refused, reset or closed before the answer (`RETRYABLE_TRANSPORT`);
a stream only until its first chunk has been delivered. Anything else (400, 401, 403,
404, a blocked prompt, a malformed answer, the deadline) fails at once. Before attempt
n+1 the wait is uniform in [0, min(max_delay, initial_delay * 2**(n-1))] (full jitter),
or the server's ``Retry-After`` (seconds or an HTTP date) when that is longer; a wait
that would end past the deadline is not started: the call fails with ``timeout`` at
once. A ``Retry-After`` beyond `RETRY_AFTER_CEILING` is not waited for either (the
HTTP error is raised).

google-genai's own `HttpRetryOptions` is not used: it ignores ``Retry-After`` and the
call's deadline, and its jitter is additive rather than full.

`clean_text` caps and redacts text from a provider answer (an error ``status``) before
it reaches an `AdkError`: the configured API key and anything shaped like a credential
become ``[redacted]`` (the kernel's `supervision.redact_text` rules, plus the exact
key and a prefix of it cut off by the cap).
"""

from __future__ import annotations

import email.utils
import random
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import httpx
from google.genai import errors as genai_errors

from providers.errors import REDACTED, AdkError
from providers.gemini.config import RetryPolicy
from supervision import redact_text

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
RETRYABLE_TRANSPORT: tuple[type[Exception], ...] = (
    httpx.ConnectError,  # refused, unreachable
    httpx.ReadError,  # reset mid-answer
    httpx.WriteError,
    httpx.RemoteProtocolError,  # closed without (a complete) answer
)
RETRY_AFTER_CEILING = 60.0
"""Seconds: a longer ``Retry-After`` fails the call instead of holding it."""
MAX_STATUS_CHARS = 64
MAX_ERROR_TEXT = 256

_TOKENS = re.compile(
    r"AIza[0-9A-Za-z_\-]{12,}"  # Google API keys
    r"|ya29\.[0-9A-Za-z_\-.]+"  # OAuth access tokens
    r"|(?i:bearer)\s+[^\s,;\"']+"
    r"|(?i:api[_-]?key|key|token|secret|password)\s*[=:]\s*[^\s&,;\"']+"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def clean_text(text: Any, secrets: Sequence[str] = (), limit: int = MAX_ERROR_TEXT) -> str:
    """`text` as at most `limit` characters, with each of `secrets` (and a prefix of
    one cut at the end) and credential-shaped tokens replaced by ``[redacted]``."""
    value = _CONTROL.sub(" ", str(text)[: limit + 64])
    for secret in secrets:
        if secret:
            value = value.replace(secret, REDACTED)
    value = redact_text(_TOKENS.sub(REDACTED, value))[:limit]
    for secret in secrets:
        for size in range(min(len(secret) - 1, len(value)), 3, -1):
            if value.endswith(secret[:size]):
                return value[:-size] + REDACTED
    return value


def http_status_text(error: genai_errors.APIError, api_key: str) -> str:
    """The ``status`` of a Google error body, fit for an `AdkError` reason."""
    status = getattr(error, "status", None)
    return clean_text(status or "", (api_key,), MAX_STATUS_CHARS)


def retryable(error: BaseException) -> bool:
    if isinstance(error, genai_errors.APIError):
        return error.code in RETRYABLE_STATUS
    return isinstance(error, RETRYABLE_TRANSPORT)


def retry_after(error: BaseException, now: datetime | None = None) -> float | None:
    """The ``Retry-After`` of an HTTP error's response, in seconds (None without one)."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        raw = headers.get("retry-after")
    except Exception:
        return None
    if not isinstance(raw, str):
        return None
    raw = raw.strip()[:64]
    if raw.isascii() and raw.isdigit():
        return float(raw)
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def next_delay(
    policy: RetryPolicy, attempts: int, error: BaseException, remaining: float | None
) -> float | None:
    """Seconds to wait before trying again after `attempts` attempts ended in `error`,
    or None to give up (not retryable, attempts spent, ``Retry-After`` too long).
    Raises ``AdkError("timeout")`` when the wait would outlast the deadline."""
    if attempts >= policy.max_attempts or not retryable(error):
        return None
    ceiling = min(policy.max_delay, policy.initial_delay * 2 ** (attempts - 1))
    delay = random.uniform(0.0, ceiling) if ceiling > 0 else 0.0
    after = retry_after(error)
    if after is not None:
        if after > RETRY_AFTER_CEILING:
            return None
        delay = max(delay, after)
    if remaining is not None and delay >= remaining:
        raise AdkError(
            "timeout",
            f"the Gemini request deadline ends before the next attempt could start "
            f"(wait {delay:.3g} s, {max(remaining, 0.0):.3g} s left)",
        )
    return delay


class DeadlineReached(httpx.TimeoutException):
    """The sync transport's view of the request deadline (mapped to ``timeout``)."""
