"""Tools and options to google-genai request types, and responses back to our types.

(The history's wire JSON is built in `providers.gemini.requests`.) Thought
signatures and function-call ids survive the round trip. A tool's schema goes
in ``parameters`` only when it is the small positive subset Gemini's `Schema` knows;
anything else (``oneOf``, ``additionalProperties``, type unions, boolean schemas,
unknown keywords) goes in ``parametersJsonSchema`` unchanged.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from google.genai import types

from providers import content as content_model
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
from providers.gemini.config import (
    PASS_THROUGH_GENERATION_KEYS,
    SAFETY_CATEGORIES,
    SAFETY_THRESHOLDS,
    GeminiSettings,
)
from providers.outputs import (
    ModelOutput,
    ProviderResult,
    TokenUsage,
    ToolCalls,
    ToolDeclaration,
    report_usage,
)

MAX_GROUNDING_METADATA_BYTES = 256 * 1024

_SIMPLE_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean"})
_SIMPLE_KEYS = frozenset(
    {
        "type",
        "description",
        "properties",
        "required",
        "items",
        "enum",
        "nullable",
        "format",
        "title",
        "minimum",
        "maximum",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "default",
        "example",
    }
)


# -- requests --------------------------------------------------------------------------------


def is_simple_schema(schema: Any) -> bool:
    """True when `schema` fits Gemini's `Schema` type without loss."""
    if not isinstance(schema, Mapping) or not set(schema) <= _SIMPLE_KEYS:
        return False
    kind = schema.get("type")
    if kind is not None and (not isinstance(kind, str) or kind not in _SIMPLE_TYPES):
        return False
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping) or not all(
        is_simple_schema(sub) for sub in properties.values()
    ):
        return False
    return "items" not in schema or is_simple_schema(schema["items"])


def function_declaration(tool: ToolDeclaration) -> types.FunctionDeclaration:
    name, description, parameters = (
        tool.get("name"),
        tool.get("description", ""),
        tool.get("parameters"),
    )
    if not isinstance(name, str) or not name:
        raise AdkError("invalid_tool_declaration", "a tool declaration needs a name")
    if parameters is None:
        return types.FunctionDeclaration(name=name, description=description)
    if is_simple_schema(parameters):
        return types.FunctionDeclaration(
            name=name,
            description=description,
            parameters=types.Schema.model_validate(_to_schema_fields(parameters)),
        )
    return types.FunctionDeclaration(
        name=name, description=description, parameters_json_schema=parameters
    )


def _to_schema_fields(schema: Mapping[str, Any]) -> dict[str, Any]:
    """JSON Schema (camelCase) to the SDK's `Schema` fields (snake_case, TYPE enums)."""
    renames = {
        "minItems": "min_items",
        "maxItems": "max_items",
        "minLength": "min_length",
        "maxLength": "max_length",
    }
    fields: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type":
            fields["type"] = value.upper()
        elif key == "properties":
            fields["properties"] = {name: _to_schema_fields(sub) for name, sub in value.items()}
        elif key == "items":
            fields["items"] = _to_schema_fields(value)
        elif key in ("minItems", "maxItems", "minLength", "maxLength"):
            fields[renames[key]] = value
        else:
            fields[key] = value
    return fields


def generate_config(
    settings: GeminiSettings, tools: Sequence[ToolDeclaration], system: str | None
) -> types.GenerateContentConfig:
    generation = dict(settings.generation)
    options: dict[str, Any] = {}
    for key in PASS_THROUGH_GENERATION_KEYS:
        if key in generation:
            options[key] = generation[key]
    if "response_schema" in generation:
        options["response_json_schema"] = generation["response_schema"]
    thinking = generation.get("thinking_config")
    if thinking:
        options["thinking_config"] = types.ThinkingConfig(
            thinking_level=thinking.get("thinking_level", "").upper() or None,
            thinking_budget=thinking.get("thinking_budget"),
            include_thoughts=thinking.get("include_thoughts"),
        )
    if generation.get("safety_settings"):
        options["safety_settings"] = [
            types.SafetySetting(
                category=types.HarmCategory(SAFETY_CATEGORIES[s["category"]]),
                threshold=types.HarmBlockThreshold(SAFETY_THRESHOLDS[s["threshold"]]),
            )
            for s in generation["safety_settings"]
        ]
    genai_tools: list[types.Tool] = []
    if "google_search" in settings.builtin_tools:
        genai_tools.append(types.Tool(google_search=types.GoogleSearch()))
    if tools:
        genai_tools.append(
            types.Tool(function_declarations=[function_declaration(tool) for tool in tools])
        )
        options["automatic_function_calling"] = types.AutomaticFunctionCallingConfig(disable=True)
    if genai_tools:
        options["tools"] = genai_tools
    if system:
        options["system_instruction"] = system
    if settings.cached_content:
        options["cached_content"] = settings.cached_content
    return types.GenerateContentConfig(**options)


# -- responses -------------------------------------------------------------------------------


def _b64(value: bytes | None) -> str | None:
    return base64.b64encode(value).decode("ascii") if value else None


def from_genai_part(part: types.Part) -> Part | None:
    if part.function_call is not None:
        call = part.function_call
        return FunctionCallPart(
            call.name or "", dict(call.args or {}), call.id, _b64(part.thought_signature)
        )
    if part.function_response is not None:
        response = part.function_response
        return FunctionResponsePart(response.name or "", dict(response.response or {}), response.id)
    if part.inline_data is not None:
        blob = part.inline_data
        return InlineDataPart(
            (blob.mime_type or "application/octet-stream").lower(), _b64(blob.data) or ""
        )
    if part.file_data is not None:
        return FileDataPart(part.file_data.file_uri or "", (part.file_data.mime_type or "").lower())
    if part.text is not None:
        return TextPart(part.text, bool(part.thought), _b64(part.thought_signature))
    return None  # parts we do not model (executable code, ...) are left out


def candidate_parts(response: types.GenerateContentResponse) -> tuple[list[Part], Any]:
    """The first candidate's parts and its grounding metadata; raises on a blocked prompt.
    Reports the response's token usage first (`report_usage`: a blocked prompt was
    counted too; in a stream, the last frame that carries usage wins)."""
    report_usage(token_usage(response))
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason is not None:
        raise AdkError(
            ("blocked", str(_enum_name(feedback.block_reason))), "Gemini blocked the prompt"
        )
    if not response.candidates:
        return [], None
    first = response.candidates[0]
    parts = [
        p
        for p in (from_genai_part(part) for part in ((first.content and first.content.parts) or []))
        if p is not None
    ]
    finish = _enum_name(first.finish_reason) if first.finish_reason is not None else None
    if not parts and finish in ("SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION"):
        raise AdkError(("blocked", finish), "Gemini withheld the answer")
    return parts, first.grounding_metadata


def token_usage(response: types.GenerateContentResponse) -> TokenUsage | None:
    """``usageMetadata`` as `TokenUsage` (promptTokenCount in, candidatesTokenCount
    out); ``None`` when it is absent, carries neither count, or a count is not a
    non-negative integer. One count absent is 0: proto3 JSON leaves zeros out."""
    metadata = response.usage_metadata
    if metadata is None:
        return None
    counts = (metadata.prompt_token_count, metadata.candidates_token_count)
    if counts == (None, None):
        return None
    if not all(c is None or (type(c) is int and c >= 0) for c in counts):
        return None
    return TokenUsage(counts[0] or 0, counts[1] or 0)


def _enum_name(value: Any) -> str:
    return str(getattr(value, "value", value))


def grounding_json(metadata: Any) -> dict[str, Any] | None:
    """The candidate's grounding metadata as strict, bounded JSON (wire names)."""
    if metadata is None:
        return None
    data = metadata.model_dump(mode="json", by_alias=True, exclude_none=True)
    if not isinstance(data, dict):
        raise AdkError("invalid_grounding_metadata", "grounding metadata must be a JSON object")
    try:
        size = len(msgspec.json.encode(data))
    except (TypeError, msgspec.EncodeError):
        raise AdkError(
            "invalid_grounding_metadata", "grounding metadata must be strict JSON"
        ) from None
    if size > MAX_GROUNDING_METADATA_BYTES:
        raise AdkError(
            "grounding_metadata_too_large", f"at most {MAX_GROUNDING_METADATA_BYTES} bytes"
        )
    return data if data else None


def merge_grounding(
    into: dict[str, Any] | None, more: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Stream frames: list fields accumulate in arrival order, other fields take the latest."""
    if more is None:
        return into
    merged = dict(into or {})
    for key, value in more.items():
        if isinstance(value, list) and isinstance(merged.get(key), list):
            merged[key] = merged[key] + value
        else:
            merged[key] = value
    if len(msgspec.json.encode(merged)) > MAX_GROUNDING_METADATA_BYTES:
        raise AdkError(
            "grounding_metadata_too_large", f"at most {MAX_GROUNDING_METADATA_BYTES} bytes"
        )
    return merged


def model_output(parts: list[Part], grounding: dict[str, Any] | None) -> ModelOutput:
    """Our result for a whole answer: text, canonical content, tool calls; wrapped with
    its grounding metadata when the candidate carried some."""
    if not parts:
        raise AdkError("empty_response", "Gemini returned no content")
    try:
        message = content_model.new(_merge_text(parts), role="model")
    except AdkError as error:
        if error.reason != "json_too_deep":
            raise
        raise AdkError("malformed_response", "Gemini's response nests JSON too deep") from None
    calls = message.function_calls()
    output: str | Content | ToolCalls
    if calls:
        output = ToolCalls(tuple(calls), message)
    elif message.is_text_only() and not any(
        isinstance(p, TextPart) and (p.thought or p.thought_signature) for p in message.parts
    ):
        output = message.text_value()
    else:
        output = message
    if grounding is None:
        return output
    return ProviderResult(
        output, ProviderResult.envelope("gemini", "google_search_grounding", grounding)
    )


def _merge_text(parts: list[Part]) -> list[Part]:
    """Adjacent plain text parts of the same kind become one (stream frames split text)."""
    merged: list[Part] = []
    for part in parts:
        last = merged[-1] if merged else None
        if (
            isinstance(part, TextPart)
            and isinstance(last, TextPart)
            and last.thought == part.thought
            and part.thought_signature is None
            and last.thought_signature is None
        ):
            merged[-1] = TextPart(last.text + part.text, last.thought)
        else:
            merged.append(part)
    return merged
