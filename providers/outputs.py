"""What a model call returns: `ToolCalls`, `ProviderResult`, `ModelOutput`, and helpers;
and what it cost: `TokenUsage`, reported by the provider to the caller's `metering()`.

A leaf module: the protocol (which loads the built-in providers) and the providers
(which return these values) both import it, so neither imports the other for them.
`providers.protocol` re-exports every name here.

Token usage travels beside the answer, not in it: a text answer stays a plain ``str``
(every caller of `generate` keeps comparing and matching it as before). A caller
that wants the usage wraps the call in ``with metering() as meter:`` and reads
``meter.usage`` after it; a provider calls `report_usage` with what the API said.
The meter lives in a `ContextVar`, so it follows the call onto the loop's tasks and
onto kernel pool threads (tasks carry their starter's contextvars); a call made
outside any `metering()` reports to nobody, at no cost.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import msgspec

from providers.content import Content, FunctionCallPart, TextPart
from providers.errors import AdkError

__all__ = [
    "PROVIDER_METADATA_SCHEMA_VERSION",
    "ModelOutput",
    "ProviderResult",
    "TokenUsage",
    "ToolCalls",
    "ToolDeclaration",
    "UsageMeter",
    "metering",
    "report_usage",
    "unwrap",
    "visible_text_deltas",
]

ToolDeclaration = Mapping[str, Any]
"""``{"name", "description", "parameters": JSON Schema}``."""

PROVIDER_METADATA_SCHEMA_VERSION = 1


class ToolCalls(msgspec.Struct, frozen=True):
    """The model asked for tools. `content` is the model's whole turn (thought
    signatures and call ids included), to put back into the history as is."""

    calls: tuple[FunctionCallPart, ...]
    content: Content


class ProviderResult(msgspec.Struct, frozen=True):
    """A model output with the provider metadata its candidate carried."""

    output: str | Content | ToolCalls
    metadata: dict[str, Any]

    @staticmethod
    def envelope(provider: str, kind: str, metadata: dict[str, Any]) -> dict[str, Any]:
        return {
            "schema_version": PROVIDER_METADATA_SCHEMA_VERSION,
            "provider": provider,
            "type": kind,
            "metadata": metadata,
        }


ModelOutput = str | Content | ToolCalls | ProviderResult


class TokenUsage(msgspec.Struct, frozen=True):
    """What one model call consumed, as the provider's API counted it."""

    input_tokens: int
    output_tokens: int


class UsageMeter:
    """The usage reported inside one `metering()` block: the latest report wins (a
    stream's last frame that carries usage; a retried call's successful attempt)."""

    __slots__ = ("usage",)

    def __init__(self) -> None:
        self.usage: TokenUsage | None = None


_METER: ContextVar[UsageMeter | None] = ContextVar("providers_usage_meter", default=None)


@contextmanager
def metering() -> Iterator[UsageMeter]:
    """Collect the token usage the provider calls made in this block report."""
    meter = UsageMeter()
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)


def report_usage(usage: TokenUsage | None) -> None:
    """A provider's report of a call's usage to the innermost `metering()` of the
    calling context; nothing happens outside one, or for ``None`` (usage unknown)."""
    if usage is None:
        return
    meter = _METER.get()
    if meter is not None:
        meter.usage = usage


def visible_text_deltas(parts: Sequence[Any]) -> list[str]:
    """The text deltas a text stream may show for one frame: visible text only
    (thoughts and function calls stay out); any media part refuses the stream with
    ``("unsupported_text_stream_part", kind)`` instead of silently dropping it."""
    deltas = []
    for part in parts:
        if isinstance(part, TextPart):
            if not part.thought and part.text:
                deltas.append(part.text)
        elif not isinstance(part, FunctionCallPart):
            kind = type(part).__struct_config__.tag
            raise AdkError(("unsupported_text_stream_part", kind), "use stream_content for media")
    return deltas


def unwrap(result: ModelOutput) -> tuple[str | Content | ToolCalls, dict[str, Any] | None]:
    """(output, provider metadata or None)."""
    if isinstance(result, ProviderResult):
        return result.output, result.metadata
    return result, None
