"""Secret redaction: one set of rules for free text and for structured values.

`redact_text(text)` removes credentials from text (exception messages, log lines,
error details, reprs); `redact_value(value)` walks mappings, lists and tuples,
replaces the value of every credential-named key (`is_secret_key`) and redacts every
string with `redact_text`. Both are what crash reports, logs, `AdkError` and the
upper layers use, so one rule decides what a secret looks like.

What `redact_text` removes (the credential becomes ``[redacted]``, the name stays):

- ``Authorization: Bearer ...`` / ``Basic ...``, ``Proxy-Authorization:``,
  ``Cookie:``, ``Set-Cookie:`` header lines (the rest of the line);
- a stand-alone ``Bearer <token>`` (8+ characters) or ``Basic <base64 user:password>``;
- ``<secret name>=<value>``, ``<secret name>: <value>``, JSON ``"api_key": "..."``
  and Python repr ``'api_key': '...'`` (escaped quotes too), where a secret name is
  what `is_secret_key` accepts: ``api_key``, ``apikey``, ``x-goog-api-key``,
  ``token``, ``access_token``, ``secret``, ``client_secret``, ``password``,
  ``private_key``, ``aws_access_key_id``, ``aws_secret_access_key``, ... (but not
  counters such as ``max_tokens`` or ``promptTokenCount``);
- ``key=<value>`` as a word of its own (``?key=``, ``&key=`` in URLs), not
  ``monkey=`` or ``keyboard=``;
- the password of ``scheme://user:password@host``;
- PEM private key blocks (``-----BEGIN ... PRIVATE KEY-----`` to ``-----END ...-----``);
- well-known token shapes: Google API keys (``AIza...``), Google OAuth access tokens
  (``ya29.``), AWS access key ids, GitHub, Slack and ``sk-`` API tokens, JWTs.

It is fast on clean text: a lower-cased substring prefilter skips the regular
expression when no trigger word is present, and the scan is bounded: text past
`MAX_REDACT_CHARS` is cut off (with a marker) before it is scanned.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MAX_REDACT_CHARS",
    "REDACTED",
    "is_secret_key",
    "redact_text",
    "redact_value",
]

REDACTED = "[redacted]"
MAX_REDACT_CHARS = 64 * 1024
"""Text longer than this is cut to this many characters (then marked) before redaction."""
TRUNCATED = "...[truncated]"
MAX_DEPTH = 64
"""`redact_value` replaces anything nested deeper than this with ``[redacted]``."""

# -- secret key names -----------------------------------------------------------------

_SECRET_WORDS = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "authorization",
        "credential",
        "credentials",
        "cookie",
        "apikey",
        "privatekey",
        "bearer",
    }
)
_SECRET_PAIRS = ("api_key", "private_key", "session_key", "access_key", "signing_key")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_WORD = re.compile(r"[^a-z0-9]+")


_MEASURE_WORDS = frozenset({"count", "limit"})
"""A name ending in one of these measures something (``input_token_limit``)."""


@functools.lru_cache(maxsize=4096)
def _is_secret_name(key: str) -> bool:
    normalized = _NON_WORD.sub("_", _CAMEL.sub("_", key).lower()).strip("_")
    words = normalized.split("_")
    if words[-1] in _MEASURE_WORDS:
        return False
    return bool(_SECRET_WORDS.intersection(words)) or any(
        pair in normalized for pair in _SECRET_PAIRS
    )


def is_secret_key(key: object) -> bool:
    """True for names of credentials: ``api_key``, ``x-goog-api-key``,
    ``Authorization``, ``refresh_token``, ``client_secret``, ``aws_access_key_id``, ...
    (but not counters and limits such as ``promptTokenCount``, ``input_token_limit``
    or ``max_output_tokens``).

    The rule: split the name into lower-case words (camelCase, ``-``, ``.`` and ``_``
    separate them); a name ending in ``count`` or ``limit`` is not a secret; a name with one of
    the secret words (``token``, ``secret``, ``password``, ``authorization``,
    ``cookie``, ``apikey``, ...) or pairs (``api_key``, ``private_key``,
    ``access_key``, ...) is.
    """
    if not isinstance(key, str) or len(key) > 256:
        return False
    return _is_secret_name(key)  # names repeat: the answer is cached (bounded)


# -- free text ------------------------------------------------------------------------
#
# Rules run in order, each only when one of its trigger words is in the (lower-cased)
# text. A rule's pattern is written for lower-case text: on text whose lower-cased form
# has the same length (all ASCII, and nearly everything else) it matches the lower-cased
# copy and replaces spans of the original, which is much faster than IGNORECASE; other
# text uses the same pattern compiled with IGNORECASE.

_KEY_WORDS = ("api", "private", "access", "session", "signing")
# Words a secret name contains (checked precisely by `is_secret_key` afterwards).
_CANDIDATES = (
    r"token|secret|passw|passphrase|authoriz|credential|cookie|bearer"
    r"|api[_-]?key|private[_-]?key|access[_-]?key|session[_-]?key|signing[_-]?key"
)
_BARE = r"[^\s\"'\\,;&<>(){}\[\]#|]"  # characters of an unquoted value

_PEM = r"""
    (?P<pem>-----begin[ a-z0-9]*private[ ]key[ a-z0-9]*-----)
    (?:(?s:.*?)(?P<pem_end>-----end[ a-z0-9]*-----)|(?s:.*))
"""
_HEADER = r"""
    (?<![\w-])(?P<header>(?:proxy-)?authorization|(?:set-)?cookie)
    [ \t]*:[ \t]*(?![\\"'\s])(?P<line>(?:(?!\\[rn])[^\r\n])++)
"""
_USERINFO = r"""(?<=://)[^\s/@:?#'"]*+:(?P<password>[^\s/@?#'"]++)@"""
_KEY_VALUE = rf"""
    (?<![\w.-])
    (?:
        (?=[\w.-]*?(?:{_CANDIDATES}))(?P<key>[\w.-]++)
        (?:\\{{0,3}}["'])?[ \t]*[=:][ \t]*
        (?:
            "(?P<dq>(?:[^"\\\r\n]|\\.)*+)"?
          | '(?P<sq>(?:[^'\\\r\n]|\\.)*+)'?
          | \\{{1,3}}["'](?P<eq>(?:(?!\\{{1,3}}["']).)*+)(?:\\{{1,3}}["'])?
          | (?P<bare>(?:(?:bearer|basic)[ \t]+)?{_BARE}++)
        )
    )
"""
_QUERY_KEY = rf"""(?<![\w.-])key[ ]?=[ \t]*(?P<query>{_BARE}++)"""
_SCHEME = r"""
    (?<![\w-])
    (?:bearer[ \t]+(?P<bearer>[a-z0-9._~+/-]{8,}=*)
      | basic[ \t]+(?P<basic>[a-z0-9+/]{8,}={0,2})(?![\w+/=]))
"""
_SHAPES = r"""
    (?P<shape>
        aiza[0-9a-z_-]{20,}
      | ya29\.[0-9a-z_-]{20,}
      | (?<![a-z0-9])(?:akia|asia)[0-9a-z]{16}(?![a-z0-9])
      | (?<![\w-])(?:gh[pousr]_[a-z0-9]{30,}|github_pat_[a-z0-9_]{30,})
      | (?<![\w-])xox[abprs]-[a-z0-9-]{10,}
      | (?<![\w-])sk-(?:[a-z0-9]+-)?[a-z0-9_]{20,}
      | (?<![\w-])eyj[a-z0-9_-]{8,}\.eyj[a-z0-9_-]{8,}\.[a-z0-9_-]*
    )
"""


def _any_of(words: tuple[str, ...]) -> re.Pattern[str]:
    """A pattern finding any of `words` (a prefilter: one C-level scan of the text)."""
    return re.compile("|".join(re.escape(word) for word in sorted(set(words))))


class _Rule:
    """One pattern, the trigger words that let it run, and the groups it redacts."""

    __slots__ = ("folded", "ignorecase", "trigger", "triggers")

    def __init__(self, pattern: str, triggers: tuple[str, ...]) -> None:
        self.folded = re.compile(pattern, re.VERBOSE)
        self.ignorecase = re.compile(pattern, re.VERBOSE | re.IGNORECASE)
        self.triggers = triggers
        self.trigger = _any_of(triggers)

    def apply(self, text: str, lowered: str) -> str:
        """`text` with this rule's secrets redacted (`lowered` is ``text.lower()``)."""
        if self.trigger.search(lowered) is None:
            return text
        if len(lowered) == len(text):
            matches = self.folded.finditer(lowered)
        else:  # a character whose lower case is longer: indices would not line up
            matches = self.ignorecase.finditer(text)
        pieces: list[str] = []
        position = 0
        for match in matches:
            spans = _secret_spans(text, match)
            for start, end in spans:
                pieces.append(text[position:start])
                pieces.append(REDACTED)
                position = end
        if not pieces:
            return text
        pieces.append(text[position:])
        return "".join(pieces)


def _secret_spans(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """The spans of `text` a match says are secret (none if the match is not one)."""
    found = match.groupdict()
    if found.get("pem") is not None:
        return [(match.end("pem"), match.start("pem_end") if found["pem_end"] else match.end())]
    for group in ("line", "password", "query", "bearer", "shape"):
        if found.get(group) is not None:
            return [match.span(group)]
    if found.get("key") is not None:
        if not is_secret_key(text[match.start("key") : match.end("key")]):
            return []
        group = next(name for name in ("dq", "sq", "eq", "bare") if found[name] is not None)
        return [match.span(group)]
    if found.get("basic") is not None:
        start, end = match.span("basic")
        return [(start, end)] if _is_basic(text[start:end]) else []
    return []


_RULES = (
    _Rule(_PEM, ("-----begin",)),
    _Rule(_HEADER, ("authorization", "cookie")),
    _Rule(_USERINFO, ("://",)),
    _Rule(
        _KEY_VALUE,
        (
            *("token", "secret", "passw", "authoriz", "credential", "cookie", "bearer"),
            *(f"{word}{joint}key" for word in _KEY_WORDS for joint in ("_", "-", "")),
        ),
    ),
    _Rule(_QUERY_KEY, ("key=", "key =")),
    _Rule(_SCHEME, ("bearer", "basic")),
    _Rule(
        _SHAPES,
        (
            *("aiza", "ya29.", "akia", "asia", "xox", "sk-", "eyj"),
            *("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        ),
    ),
)
_TRIGGER = _any_of(tuple(trigger for rule in _RULES for trigger in rule.triggers))


def _is_basic(value: str) -> bool:
    """Whether a ``Basic`` token is base64 of ``user:password`` (not an English word)."""
    try:
        return b":" in base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False


def redact_text(text: str, limit: int | None = MAX_REDACT_CHARS) -> str:
    """`text` without credentials (see the module doc), cut to `limit` characters first.

    Clean text comes back as the same object. Text longer than `limit` is cut, then
    redacted, then marked ``...[truncated]``. ``limit=None`` never cuts: for text whose
    size the caller already bounds (an event's payload), where cutting would lose data.
    """
    truncated = limit is not None and len(text) > limit
    if truncated:
        text = text[:limit]
    lowered = text.lower()
    if _TRIGGER.search(lowered) is not None:
        for rule in _RULES:
            redacted = rule.apply(text, lowered)
            if redacted is not text:
                text, lowered = redacted, redacted.lower()
    return text + TRUNCATED if truncated else text


# -- structured values ----------------------------------------------------------------

_LEAVES = frozenset({int, float, bool, type(None), bytes})
"""Types `redact_value` returns as they are, found without an ABC check."""


def redact_value(value: Any, *, limit: int | None = MAX_REDACT_CHARS, depth: int = 0) -> Any:
    """A copy of `value` with every secret-named key's value replaced by ``[redacted]``
    and every string passed through `redact_text` (with `limit`).

    Walks mappings (copied into dicts), lists and tuples (named tuples keep their
    type) to a depth of `MAX_DEPTH`; other values pass unchanged.
    """
    kind = type(value)
    if kind is str or isinstance(value, str):
        return redact_text(value, limit)
    if depth > MAX_DEPTH:
        return REDACTED
    if kind in _LEAVES:  # before the `Mapping` check, an ABC check that walks the
        return value  # registry whenever a class registered since invalidated its cache
    if kind is dict or isinstance(value, Mapping):
        return {
            key: (
                REDACTED if is_secret_key(key) else redact_value(item, limit=limit, depth=depth + 1)
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        cleaned = [redact_value(item, limit=limit, depth=depth + 1) for item in value]
        if isinstance(value, list):
            return cleaned
        if all(new is old for new, old in zip(cleaned, value, strict=True)):
            return value
        return type(value)(*cleaned) if hasattr(value, "_fields") else tuple(cleaned)
    return value
