"""The provider protocol, result types, and the registry that dispatches by config.

A provider turns a history of `Content` plus tool declarations into one of:

* ``str``: a text-only answer;
* `Content`: an answer with media or thought summaries (canonical, never lossy text);
* `ToolCalls`: the model asks for tools (the agent layer runs them);
* `ProviderResult`: any of the above plus provider metadata (grounding), in the
  envelope ``{"schema_version": 1, "provider", "type", "metadata"}``.

`stream` delivers visible UTF-8 text deltas to a callback and returns the same kind
of value as `generate`; `stream_content` delivers one `Content` per decoded frame.
`capabilities` and `validate_config` are optional for custom providers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from providers.content import Content, FunctionCallPart, TextPart
from providers.errors import AdkError

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


@runtime_checkable
class Provider(Protocol):
    """What a model provider implements (`capabilities`/`validate_config` optional)."""

    name: str

    def generate(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
    ) -> ModelOutput: ...

    def stream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[str], None],
    ) -> ModelOutput: ...


_registry: dict[str, Provider] = {}
_registry_lock = threading.Lock()


def register_provider(provider: Provider, name: str | None = None) -> None:
    """Make `provider` reachable as ``{"provider": name}`` in configs."""
    with _registry_lock:
        _registry[name or provider.name] = provider


def resolve_provider(config: Mapping[str, Any]) -> Provider:
    """The provider a config names (a registered name or an instance)."""
    if not isinstance(config, Mapping):
        raise AdkError("invalid_config", "a provider config is a mapping")
    chosen = config.get("provider")
    if isinstance(chosen, str):
        _load_builtin(chosen)
        with _registry_lock:
            found = _registry.get(chosen)
        if found is None:
            raise AdkError("unknown_provider", f"no provider is registered as {chosen!r}")
        return found
    if chosen is not None and callable(getattr(chosen, "generate", None)):
        return chosen  # type: ignore[no-any-return]
    raise AdkError("invalid_provider", "config['provider'] must be a provider name or instance")


def _load_builtin(name: str) -> None:
    if name == "gemini" and "gemini" not in _registry:
        from providers.gemini import GeminiProvider

        register_provider(GeminiProvider())
    elif name == "scripted" and "scripted" not in _registry:
        from providers.scripted import ScriptedProvider

        register_provider(ScriptedProvider.from_config_provider())


def capabilities(provider: str | Provider) -> dict[str, Any]:
    """What a provider really implements (honest flags; unknown means False)."""
    found = resolve_provider({"provider": provider})
    reported = getattr(found, "capabilities", None)
    base = {"streaming": True, "function_calling": False, "content_schema_version": 1}
    return {**base, **(reported() if callable(reported) else {})}


def validate_config(config: Mapping[str, Any]) -> None:
    """Raise `AdkError` if the provider refuses `config` (strict: unknown keys fail)."""
    found = resolve_provider(config)
    check = getattr(found, "validate_config", None)
    if callable(check):
        check(config)


def _history(history: Sequence[Content]) -> Sequence[Content]:
    if not isinstance(history, Sequence) or not all(isinstance(item, Content) for item in history):
        raise AdkError("invalid_history", "history is a sequence of Content")
    return history


def generate(
    config: Mapping[str, Any], history: Sequence[Content], tools: Sequence[ToolDeclaration] = ()
) -> ModelOutput:
    """One model call: ``str``, `Content`, `ToolCalls` or `ProviderResult`; raises `AdkError`."""
    provider = resolve_provider(config)
    return provider.generate(config, _history(history), tools)


def stream(
    config: Mapping[str, Any],
    history: Sequence[Content],
    tools: Sequence[ToolDeclaration],
    on_delta: Callable[[str], None],
) -> ModelOutput:
    """Stream visible text deltas to `on_delta`; returns what `generate` would."""
    provider = resolve_provider(config)
    return provider.stream(config, _history(history), tools, on_delta)


def stream_content(
    config: Mapping[str, Any],
    history: Sequence[Content],
    tools: Sequence[ToolDeclaration],
    on_delta: Callable[[Content], None],
) -> ModelOutput:
    """Deliver one `Content` per decoded provider frame; returns what `generate` would."""
    provider = resolve_provider(config)
    streamer = getattr(provider, "stream_content", None)
    if not callable(streamer):
        raise AdkError("unsupported_operation", f"{provider.name} has no content stream")
    return streamer(config, _history(history), tools, on_delta)  # type: ignore[no-any-return]
