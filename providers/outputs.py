"""What a model call returns: `ToolCalls`, `ProviderResult`, `ModelOutput`, and helpers.

A leaf module: the protocol (which loads the built-in providers) and the providers
(which return these values) both import it, so neither imports the other for them.
`providers.protocol` re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from providers.content import Content, FunctionCallPart, TextPart
from providers.errors import AdkError

__all__ = [
    "PROVIDER_METADATA_SCHEMA_VERSION",
    "ModelOutput",
    "ProviderResult",
    "ToolCalls",
    "ToolDeclaration",
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
