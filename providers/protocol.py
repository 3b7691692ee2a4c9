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

`agenerate`, `astream` and `astream_content` are the same calls as coroutines, for
code on an event loop (the kernel's reactor): same results, same `AdkError`
reasons. A provider that has the matching ``async def`` method runs on the loop;
one that has only the sync method (a custom provider) runs it in a task on a kernel
pool of its own (`PROVIDER_THREADS_ENV`, default `DEFAULT_PROVIDER_THREADS` threads,
a bounded queue), so the loop never blocks and a hung custom provider cannot take
the threads of tools, callbacks or `adk.aio` calls; its `on_delta` is then called
from that thread. Cancelling the awaiting coroutine stops the task (the thread runs
on, fenced, and is counted as abandoned in `kernel_stats`).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from providers.content import Content
from providers.errors import AdkError
from providers.outputs import (
    PROVIDER_METADATA_SCHEMA_VERSION,
    ModelOutput,
    ProviderResult,
    TokenUsage,
    ToolCalls,
    ToolDeclaration,
    UsageMeter,
    metering,
    report_usage,
    unwrap,
    visible_text_deltas,
)
from providers.scripted import ScriptedProvider
from supervision import Task, TaskBusy, shared_pool
from supervision.aio import wait_task

__all__ = [
    "PROVIDER_METADATA_SCHEMA_VERSION",
    "ModelOutput",
    "Provider",
    "ProviderResult",
    "ScriptedProvider",
    "TokenUsage",
    "ToolCalls",
    "ToolDeclaration",
    "UsageMeter",
    "agenerate",
    "astream",
    "astream_content",
    "capabilities",
    "generate",
    "metering",
    "register_provider",
    "report_usage",
    "resolve_provider",
    "stream",
    "stream_content",
    "unwrap",
    "validate_config",
    "visible_text_deltas",
]

_T = TypeVar("_T")
DEFAULT_PROVIDER_THREADS = 64
PROVIDER_THREADS_ENV = "ADK_PROVIDER_THREADS"


@runtime_checkable
class Provider(Protocol):
    """What a model provider implements.

    Optional: `capabilities`, `validate_config`, `stream_content`, and the async
    methods ``async def agenerate(config, history, tools)``,
    ``astream(config, history, tools, on_delta)`` and
    ``astream_content(config, history, tools, on_delta)`` (same arguments and results
    as their sync twins). An async method must never block its loop (await I/O and
    sleeps; keep CPU work short); without one, the async module functions run the
    sync method on a worker thread.
    """

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


_PLUGINS = {"gemini": ("providers.gemini", "GeminiProvider")}
"""Built-in providers loaded by name on first use: google-genai takes about 0.5 s to
import, and only Gemini users should pay for it (a plugin load, not a hidden cycle)."""


def _load_builtin(name: str) -> None:
    if name in _registry:
        return
    if name == "scripted":
        register_provider(ScriptedProvider.from_config_provider())
    elif name in _PLUGINS:
        module, attribute = _PLUGINS[name]
        register_provider(getattr(importlib.import_module(module), attribute)())


def capabilities(provider: str | Provider) -> dict[str, Any]:
    """What a provider really implements (honest flags; unknown means False)."""
    found = resolve_provider({"provider": provider})
    reported = getattr(found, "capabilities", None)
    base = {"streaming": True, "function_calling": False, "content_schema_version": 1}
    return {**base, **(reported() if callable(reported) else {})}


def validate_config(config: Mapping[str, Any]) -> None:
    """Raise `AdkError` if the provider refuses `config` (strict: unknown keys fail)."""
    validate_with(resolve_provider(config), config)


def validate_with(provider: Provider, config: Mapping[str, Any]) -> None:
    """`validate_config` with the provider `config` resolves to already in hand."""
    check = getattr(provider, "validate_config", None)
    if callable(check):
        check(config)


def _history(history: Sequence[Content]) -> Sequence[Content]:
    if (type(history) is not list and not isinstance(history, Sequence)) or not all(
        isinstance(item, Content) for item in history
    ):
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


# -- async calls --------------------------------------------------------------------------


async def agenerate(
    config: Mapping[str, Any], history: Sequence[Content], tools: Sequence[ToolDeclaration] = ()
) -> ModelOutput:
    """`generate` as a coroutine: the provider's ``agenerate`` on the running loop, or
    its sync ``generate`` on a worker thread."""
    provider = await _aresolve(config)
    checked = _history(history)
    native = getattr(provider, "agenerate", None)
    if callable(native):
        return await _native(native, config, checked, tools)
    return await _on_worker_thread(provider.generate, config, checked, tools)


async def astream(
    config: Mapping[str, Any],
    history: Sequence[Content],
    tools: Sequence[ToolDeclaration],
    on_delta: Callable[[str], None],
) -> ModelOutput:
    """`stream` as a coroutine. `on_delta` runs on the loop for a provider with
    ``astream``, on the worker thread for a sync-only provider."""
    provider = await _aresolve(config)
    checked = _history(history)
    native = getattr(provider, "astream", None)
    if callable(native):
        return await _native(native, config, checked, tools, on_delta)
    return await _on_worker_thread(provider.stream, config, checked, tools, on_delta)


async def astream_content(
    config: Mapping[str, Any],
    history: Sequence[Content],
    tools: Sequence[ToolDeclaration],
    on_delta: Callable[[Content], None],
) -> ModelOutput:
    """`stream_content` as a coroutine (``unsupported_operation`` without one).
    `on_delta` runs where `astream`'s does."""
    provider = await _aresolve(config)
    checked = _history(history)
    native = getattr(provider, "astream_content", None)
    if callable(native):
        return await _native(native, config, checked, tools, on_delta)
    streamer = getattr(provider, "stream_content", None)
    if not callable(streamer):
        raise AdkError("unsupported_operation", f"{provider.name} has no content stream")
    return await _on_worker_thread(streamer, config, checked, tools, on_delta)


async def _aresolve(config: Mapping[str, Any]) -> Provider:
    """`resolve_provider`, but a built-in provider's first load (importing its SDK
    can take a second) happens on a worker thread, not on the loop."""
    chosen = config.get("provider") if isinstance(config, Mapping) else None
    if isinstance(chosen, str):
        with _registry_lock:
            loaded = chosen in _registry
        if not loaded:
            return await _on_worker_thread(resolve_provider, config)
    return resolve_provider(config)


async def _native(method: Callable[..., Awaitable[ModelOutput]], *args: Any) -> ModelOutput:
    """Await a provider's own async method (it runs on this loop)."""
    return await method(*args)


async def _on_worker_thread(fn: Callable[..., _T], *args: Any) -> _T:
    """Run a blocking call in a task on the providers' own kernel pool, awaited
    without holding a thread; what it raises is raised here as is. A full pool is
    ``busy``. Cancelling the awaiting coroutine stops the task (a thread cannot be
    interrupted: it runs on, fenced)."""
    pool = shared_pool("providers", PROVIDER_THREADS_ENV, DEFAULT_PROVIDER_THREADS)
    try:
        task = Task.start(_caught, fn, args, pool=pool)
    except TaskBusy:
        raise AdkError("busy", "the pool for sync provider calls is full") from None
    try:
        ok, value = await wait_task(task)
    except BaseException:
        task.kill()
        raise
    if not ok:
        raise value
    result: _T = value
    return result


def _caught(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[bool, Any]:
    try:
        return True, fn(*args)
    except Exception as error:  # crosses as a value: the coroutine re-raises it
        return False, error
