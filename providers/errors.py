"""`AdkError`, the error every public API raises, and recursive secret redaction.

`AdkError.reason` is a stable, bounded value (the spec's atom, e.g.
``missing_api_key``). Messages never carry secrets, raw provider bodies, argument
values or tracebacks. It lives here because `providers` and `adk_actors` both raise
it; `adk_actors` re-exports it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

MAX_DETAIL_CHARS = 512

_SECRET_WORDS = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "authorization",
        "credential",
        "credentials",
        "cookie",
        "apikey",
        "bearer",
    }
)
_SECRET_PAIRS = ("api_key", "private_key", "session_key", "access_key", "signing_key")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_WORD = re.compile(r"[^a-z0-9]+")
REDACTED = "[redacted]"


class AdkError(Exception):
    """A refused operation. `reason` says why (stable, secret-free); `detail` is for people."""

    def __init__(self, reason: Any, detail: str | None = None) -> None:
        self.reason = reason
        self.detail = (detail or "")[:MAX_DETAIL_CHARS]
        super().__init__(f"{_show(reason)}: {self.detail}" if self.detail else _show(reason))


def _show(reason: Any) -> str:
    return reason if isinstance(reason, str) else repr(reason)


def is_secret_key(key: object) -> bool:
    """True for mapping keys that name a credential: ``api_key``, ``x-goog-api-key``,
    ``Authorization``, ``refresh_token``, ``client_secret``, ... (but not counters such
    as ``promptTokenCount`` or ``max_output_tokens``)."""
    if not isinstance(key, str):
        return False
    normalized = _NON_WORD.sub("_", _CAMEL.sub("_", key).lower()).strip("_")
    words = normalized.split("_")
    if words[-1] == "count":
        return False
    return bool(_SECRET_WORDS.intersection(words)) or any(
        pair in normalized for pair in _SECRET_PAIRS
    )


def redact(value: Any, *, depth: int = 0) -> Any:
    """A copy of `value` with every secret-named key's value replaced by ``[redacted]``.

    Walks mappings, lists and tuples (to a depth of 64); other values pass unchanged.
    """
    if depth > 64:
        return REDACTED
    if isinstance(value, Mapping):
        return {
            key: (REDACTED if is_secret_key(key) else redact(item, depth=depth + 1))
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        cleaned = [redact(item, depth=depth + 1) for item in value]
        return cleaned if isinstance(value, list) else tuple(cleaned)
    return value


def check_options(value: Any, allowed: Iterable[str], reason: str, what: str) -> Mapping[str, Any]:
    """`value` as a mapping of known option keys; unknown keys are named in the error,
    as ``(reason, ("unknown_keys", [...]))`` (values are never echoed)."""
    if not isinstance(value, Mapping):
        raise AdkError(reason, f"{what} is a mapping")
    unknown = sorted((key for key in value if key not in set(allowed)), key=str)
    if unknown:
        raise AdkError((reason, ("unknown_keys", unknown)), f"unknown {what} keys: {unknown}")
    return value
