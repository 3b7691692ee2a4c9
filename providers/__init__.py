"""Model I/O: the content model, the provider protocol, the scripted provider, Gemini.

`adk_actors` re-exports the common names (`content`, `AdkError`, ...).
"""

from providers import content
from providers.content import Content, ContentLimits, Part
from providers.errors import AdkError, prune, redact
from providers.protocol import (
    ModelOutput,
    Provider,
    ProviderResult,
    ToolCalls,
    capabilities,
    generate,
    register_provider,
    resolve_provider,
    stream,
    stream_content,
    unwrap,
    validate_config,
)
from providers.scripted import ScriptedProvider

__all__ = [
    "AdkError",
    "Content",
    "ContentLimits",
    "ModelOutput",
    "Part",
    "Provider",
    "ProviderResult",
    "ScriptedProvider",
    "ToolCalls",
    "capabilities",
    "content",
    "generate",
    "prune",
    "redact",
    "register_provider",
    "resolve_provider",
    "stream",
    "stream_content",
    "unwrap",
    "validate_config",
]
