"""History to the Gemini request body, converted once per distinct `Content`.

Why: google-genai re-validates every message of ``contents`` into pydantic models
and then walks each one field by field (`_GenerateContentParameters`,
`_Content_to_mldev`); that costs about 0.5 ms of CPU per message on every call, so
a turn's cost grew with its whole history. We build the wire JSON of each message
ourselves, exactly as the SDK would have sent it, and hand the SDK the finished
list through ``HttpOptions.extra_body`` (documented as extra request-body fields in
the backend's own structure; a list value replaces the SDK's ``contents`` whole).
The SDK is given a placeholder ``contents`` (it insists on one); it has no parts,
so if a future SDK stopped applying ``extra_body`` the API would refuse the request
loudly (``INVALID_ARGUMENT``) instead of answering a wrong prompt.

Each message's wire JSON is cached in a bounded LRU keyed by its msgspec-encoded
bytes (microseconds to compute). The cached value is built from those bytes
decoded again, so it is a pure function of the key and shares nothing mutable with
the caller's `Content`. JSON has no NaN or infinity: such payload values are sent as
``null`` (msgspec's encoding), where the SDK would have sent invalid JSON.
"""

from __future__ import annotations

import base64
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import msgspec
from google.genai import types

from providers.content import (
    Content,
    FileDataPart,
    FunctionCallPart,
    FunctionResponsePart,
    InlineDataPart,
    Part,
    TextPart,
)
from providers.errors import AdkError

CACHE_MAX_ENTRIES = 16_384
CACHE_MAX_BYTES = 32 << 20
"""Bound on the encoded bytes of all cached messages (values are about as large)."""
CACHE_MAX_ENTRY_BYTES = 256 << 10
"""Larger messages are converted on every call (their cost is their size anyway)."""

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Content)


class SharedWire(dict[str, Any]):
    """A message's wire JSON, shared by every request that sends it: never mutated,
    so copies are the object itself (the SDK deep-copies each call's config, and with
    it ``extra_body``; copying a thousand messages per call is what we avoid)."""

    def __copy__(self) -> SharedWire:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedWire:
        return self


class WireCache:
    """A thread-safe LRU from encoded `Content` bytes to its wire JSON, bounded by
    entries and by bytes."""

    def __init__(
        self,
        max_entries: int = CACHE_MAX_ENTRIES,
        max_bytes: int = CACHE_MAX_BYTES,
        max_entry_bytes: int = CACHE_MAX_ENTRY_BYTES,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes
        self._entries: OrderedDict[bytes, SharedWire] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        """The encoded bytes of the cached messages."""
        return self._bytes

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def wires(self, messages: Sequence[Content]) -> list[SharedWire]:
        """The wire JSON of each user/model/tool message, in order (one lock round
        for the lookups, conversions outside the lock)."""
        keys = [_encoded(message) for message in messages]
        with self._lock:
            found: list[SharedWire | None] = []
            for key in keys:
                wire = self._entries.get(key)
                if wire is not None:
                    self._entries.move_to_end(key)
                found.append(wire)
            self.hits += sum(wire is not None for wire in found)
            self.misses += sum(wire is None for wire in found)
        converted: dict[bytes, SharedWire] = {}
        for key, wire in zip(keys, found, strict=True):
            if wire is None and key not in converted:
                converted[key] = content_wire(_decoded(key))
        if converted:
            self._store(converted)
        return [
            wire if wire is not None else converted[key]
            for key, wire in zip(keys, found, strict=True)
        ]

    def _store(self, converted: dict[bytes, SharedWire]) -> None:
        with self._lock:
            for key, wire in converted.items():
                if len(key) <= self.max_entry_bytes and key not in self._entries:
                    self._entries[key] = wire
                    self._bytes += len(key)
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                evicted, _ = self._entries.popitem(last=False)
                self._bytes -= len(evicted)


DEFAULT_CACHE = WireCache()


def _encoded(message: Content) -> bytes:
    try:
        return _encoder.encode(message)
    except (TypeError, msgspec.EncodeError):
        raise AdkError("invalid_content", "history content must be JSON-safe") from None


def _decoded(key: bytes) -> Content:
    """The message again, from its key: fresh values, nothing shared with the caller."""
    try:
        return _decoder.decode(key)
    except msgspec.ValidationError as error:  # a Content built without validation
        raise AdkError("invalid_content", str(error)[:200]) from None


def _urlsafe(value: str) -> str:
    """Standard base64 to the urlsafe form the SDK sends bytes fields in (it decodes
    our value into bytes and `encode_unserializable_types` re-encodes them)."""
    return base64.urlsafe_b64encode(base64.b64decode(value)).decode("ascii")


def part_wire(part: Part) -> dict[str, Any]:
    """One part's wire JSON, key for key and in the order google-genai writes it."""
    if isinstance(part, TextPart):
        text: dict[str, Any] = {"text": part.text}
        if part.thought:
            text["thought"] = True
        if part.thought_signature:
            text["thoughtSignature"] = _urlsafe(part.thought_signature)
        return text
    if isinstance(part, FunctionCallPart):
        call: dict[str, Any] = {} if part.id is None else {"id": part.id}
        call["args"] = part.args
        call["name"] = part.name
        wrapped: dict[str, Any] = {"functionCall": call}
        if part.thought_signature:
            wrapped["thoughtSignature"] = _urlsafe(part.thought_signature)
        return wrapped
    if isinstance(part, FunctionResponsePart):
        response: dict[str, Any] = {} if part.id is None else {"id": part.id}
        response["name"] = part.name
        response["response"] = part.response
        return {"functionResponse": response}
    if isinstance(part, InlineDataPart):  # nested keys stay snake_case, as the SDK dumps them
        return {"inlineData": {"data": _urlsafe(part.data), "mime_type": part.mime_type}}
    if isinstance(part, FileDataPart):
        return {"fileData": {"file_uri": part.file_uri, "mime_type": part.mime_type}}
    raise AdkError("invalid_content", f"unknown part type {type(part).__name__}")


def content_wire(message: Content) -> SharedWire:
    """A user/model/tool message's wire JSON (tool turns are sent as ``user``); it
    holds `message`'s payload dicts (`WireCache` passes it a decoded copy)."""
    return SharedWire(
        parts=[part_wire(part) for part in message.parts],
        role="model" if message.role == "model" else "user",
    )


def request_contents(
    history: Sequence[Content], instructions: str | None, cache: WireCache = DEFAULT_CACHE
) -> tuple[list[SharedWire], str | None]:
    """The request's ``contents`` (wire JSON) and the system instruction (config
    instructions, then the text of every system turn)."""
    system = [instructions] if instructions else []
    turns = []
    for message in history:
        if message.role == "system":
            system.append(message.text_value(include_thoughts=True))
        else:
            turns.append(message)
    if not turns:
        raise AdkError("empty_history", "the history needs at least one user or model turn")
    return cache.wires(turns), "\n\n".join(system) if system else None


_PLACEHOLDER = types.Content(role="user", parts=[])


def placeholder_contents() -> list[types.Content]:
    """What the SDK is given as ``contents`` (a new list: the SDK may append to it);
    `extra_body` replaces it on the wire."""
    return [_PLACEHOLDER]


def carrying(config: types.GenerateContentConfig, contents: list[SharedWire]) -> None:
    """Make `config` send `contents` as the request's ``contents``. The body is
    assigned, not validated (validation would copy it into a plain dict): as a
    `SharedWire`, the SDK's deep copies of the config do not walk the history."""
    options = types.HttpOptions()
    options.extra_body = SharedWire(contents=contents)
    config.http_options = options
