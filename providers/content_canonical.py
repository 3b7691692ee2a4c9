"""What crosses the model boundary: `canonical` (adjacent plain text merged, secrets
pruned; remembered for frozen contents) and `without_secrets`."""

from __future__ import annotations

import threading
import weakref
from typing import Any

import msgspec

from providers.content_types import Content, FunctionCallPart, FunctionResponsePart, Part, TextPart
from providers.errors import prune
from providers.frozen import FrozenDict, freeze

CANONICAL_CACHE_SIZE = 1 << 16
"""How many frozen contents `canonical` remembers its answer for (oldest dropped first)."""
_canonical_cache: dict[int, tuple[weakref.ref[Content], Content | None, bool]] = {}
"""id(content) -> (the content, weakly; its answer, None if the content itself; whether
a hit must check again that its empty payloads are still empty)."""
_canonical_insert = threading.Lock()
_MUTABLE, _FROZEN, _EMPTY_PAYLOADS = 0, 1, 2


def canonical(content: Content) -> Content:
    """What crosses the model boundary: adjacent plain text parts merged, and every
    credential-named key (``api_key``, ``access_token``, ...) removed, at any depth,
    from function-call arguments and function responses. Signatures are kept.

    A content nobody can change (`providers.frozen`: a stored history entry) is made
    canonical once: the answer is remembered, keyed by the content's identity and
    held only while the content lives, for at most `CANONICAL_CACHE_SIZE` contents;
    a changed answer is frozen too, so callers can share it."""
    key = id(content)
    hit = _canonical_cache.get(key)
    if hit is not None and hit[0]() is content and (not hit[2] or _frozenness(content)):
        return content if hit[1] is None else hit[1]
    frozenness = _frozenness(content)
    result = without_secrets(_merged_text(content))
    if frozenness == _MUTABLE:
        return result
    answer = None if result is content else freeze(result)
    _remember(key, content, answer, frozenness == _EMPTY_PAYLOADS)
    return content if answer is None else answer


def _frozenness(content: Content) -> int:
    """`_FROZEN` if nothing in `content` can change (every payload read-only, every
    other field immutable); `_EMPTY_PAYLOADS` if only empty (plain) payloads could,
    which a cached answer must check again; `_MUTABLE` otherwise."""
    frozenness = _FROZEN
    for part in content.parts:
        if isinstance(part, FunctionCallPart):
            payload: dict[str, Any] = part.args
        elif isinstance(part, FunctionResponsePart):
            payload = part.response
        else:
            continue
        if type(payload) is not FrozenDict:
            if payload:
                return _MUTABLE
            frozenness = _EMPTY_PAYLOADS
    return frozenness


def _remember(key: int, content: Content, answer: Content | None, recheck: bool) -> None:
    """Keep `canonical`'s answer for `content` until it dies (or is evicted)."""

    def forget(ref: weakref.ref[Content]) -> None:  # runs when the content dies
        entry = _canonical_cache.get(key)
        if entry is not None and entry[0] is ref:
            _canonical_cache.pop(key, None)

    with _canonical_insert:
        while len(_canonical_cache) >= CANONICAL_CACHE_SIZE:
            try:
                del _canonical_cache[next(iter(_canonical_cache))]
            except (StopIteration, RuntimeError, KeyError):  # a `forget` ran meanwhile
                break
        _canonical_cache[key] = (weakref.ref(content, forget), answer, recheck)


def without_secrets(content: Content) -> Content:
    """`content` with every credential-named key removed, at any depth, from function-call
    arguments and function responses (`providers.errors.prune`); `content` itself when
    there is none. What session queries show of stored content."""
    parts: list[Part] = []
    changed = False
    for part in content.parts:
        if isinstance(part, FunctionCallPart):
            args = prune(part.args)
            if args is not part.args:
                part = msgspec.structs.replace(part, args=args)
                changed = True
        elif isinstance(part, FunctionResponsePart):
            response = prune(part.response)
            if response is not part.response:
                part = msgspec.structs.replace(part, response=response)
                changed = True
        parts.append(part)
    return Content(content.role, tuple(parts)) if changed else content


def _merged_text(content: Content) -> Content:
    parts: list[Part] = []
    changed = False
    for part in content.parts:
        if isinstance(part, TextPart) and parts and _plain(part) and _plain(parts[-1]):
            part, changed = TextPart(parts.pop().text + part.text), True  # type: ignore[union-attr]
        parts.append(part)
    return Content(content.role, tuple(parts)) if changed else content


def _plain(part: Any) -> bool:
    return isinstance(part, TextPart) and not part.thought and part.thought_signature is None
