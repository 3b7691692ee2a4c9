"""The content model's types: `Content(role, parts)`, its `Part` variants and
`ContentLimits` (with their ceilings), and the documented refusal reasons.

Frozen msgspec structs, JSON-safe and versioned (`CONTENT_SCHEMA_VERSION`). Build and
check them through `providers.content` (its constructors validate); this module only
declares them, so the checks, the JSON rules and `canonical` can share them without
importing one another in a circle.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from providers.errors import AdkError

CONTENT_SCHEMA_VERSION = 1

Role = Literal["user", "model", "system", "tool"]
ROLES = ("user", "model", "system", "tool")

CONTENT_REASONS = frozenset(
    {
        "invalid_content",
        "invalid_content_part",
        "invalid_role",
        "empty_content",
        "too_many_parts",
        "text_part_too_large",
        "inline_data_too_large",
        "inline_data_total_too_large",
        "invalid_mime_type",
        "invalid_base64",
        "uri_too_long",
        "invalid_uri",
        "unsupported_uri_scheme",
        "uri_credentials_not_allowed",
        "uri_fragment_not_allowed",
        "invalid_function_name",
        "invalid_function_payload",
        "not_canonical_json",
        "function_payload_too_large",
        "json_too_deep",
        "invalid_utf8",
        "invalid_content_limits",
        "content_limit_above_ceiling",
    }
)
"""Every `AdkError.reason` (its first element, for a tuple) that content construction,
`validate` and `decode` raise: the documented set the fuzz suite checks against."""


class TextPart(
    msgspec.Struct,
    frozen=True,
    tag="text",
    tag_field="type",
    omit_defaults=True,
    forbid_unknown_fields=True,
):
    text: str
    thought: bool = False
    thought_signature: str | None = None


class InlineDataPart(
    msgspec.Struct, frozen=True, tag="inline_data", tag_field="type", forbid_unknown_fields=True
):
    mime_type: str
    data: str  # canonical base64 (standard alphabet, padded)


class FileDataPart(
    msgspec.Struct, frozen=True, tag="file_data", tag_field="type", forbid_unknown_fields=True
):
    file_uri: str
    mime_type: str


class FunctionCallPart(
    msgspec.Struct,
    frozen=True,
    tag="function_call",
    tag_field="type",
    omit_defaults=True,
    forbid_unknown_fields=True,
):
    name: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)
    id: str | None = None
    thought_signature: str | None = None


class FunctionResponsePart(
    msgspec.Struct,
    frozen=True,
    tag="function_response",
    tag_field="type",
    omit_defaults=True,
    forbid_unknown_fields=True,
):
    name: str
    response: dict[str, Any] = msgspec.field(default_factory=dict)
    id: str | None = None


Part = TextPart | InlineDataPart | FileDataPart | FunctionCallPart | FunctionResponsePart


class Content(msgspec.Struct, frozen=True, forbid_unknown_fields=True, weakref=True):
    """A message: who said it (`role`) and what (`parts`). Weakly referable, so
    `canonical` can remember its answer for a stored (frozen) content without keeping
    it alive."""

    role: str
    parts: tuple[Part, ...]

    def text_value(self, include_thoughts: bool = False) -> str:
        """The visible text, concatenated (thought parts left out unless asked for)."""
        return "".join(
            part.text
            for part in self.parts
            if isinstance(part, TextPart) and (include_thoughts or not part.thought)
        )

    def function_calls(self) -> list[FunctionCallPart]:
        return [part for part in self.parts if isinstance(part, FunctionCallPart)]

    def is_text_only(self) -> bool:
        return all(isinstance(part, TextPart) for part in self.parts)


_CEILING_VALUES = {
    "max_parts": 64,
    "max_text_bytes": 1 << 20,
    "max_inline_bytes": 10 << 20,
    "max_inline_total_bytes": 15 << 20,
    "max_uri_bytes": 4096,
    "max_function_payload_bytes": 1 << 20,
}


class ContentLimits(msgspec.Struct, frozen=True):
    """Validation limits. Each may be lowered; none may exceed `CEILINGS`, and the inline
    limit may not exceed the total inline limit. Checked when constructed (``AdkError``:
    ``invalid_content_limits``, ``content_limit_above_ceiling`` or
    ``("invalid_content_limits", "max_inline_exceeds_total")``)."""

    max_parts: int = _CEILING_VALUES["max_parts"]
    max_text_bytes: int = _CEILING_VALUES["max_text_bytes"]
    max_inline_bytes: int = _CEILING_VALUES["max_inline_bytes"]
    max_inline_total_bytes: int = _CEILING_VALUES["max_inline_total_bytes"]
    max_uri_bytes: int = _CEILING_VALUES["max_uri_bytes"]
    max_function_payload_bytes: int = _CEILING_VALUES["max_function_payload_bytes"]

    def __post_init__(self) -> None:
        for field in self.__struct_fields__:
            value, ceiling = getattr(self, field), _CEILING_VALUES[field]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AdkError("invalid_content_limits", f"{field} must be a positive int")
            if value > ceiling:
                raise AdkError("content_limit_above_ceiling", f"{field} may not exceed {ceiling}")
        if self.max_inline_bytes > self.max_inline_total_bytes:
            raise AdkError(
                ("invalid_content_limits", "max_inline_exceeds_total"),
                "max_inline_bytes may not exceed max_inline_total_bytes",
            )

    def checked(self) -> ContentLimits:
        """The limits (already checked when they were constructed)."""
        return self


CEILINGS = ContentLimits()
DEFAULT_LIMITS = ContentLimits()
