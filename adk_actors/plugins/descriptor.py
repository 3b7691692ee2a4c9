"""Plugin descriptors: checked once, in list order, before a Runner accepts a run.

A descriptor is a `Plugin` instance (its class attributes give the options) or a
mapping ``{"plugin": Plugin, "id": str, "mode": "observe" | "intervene",
"failure_policy": "open" | "closed", "timeout": seconds, "max_result_bytes": int,
"config": {...}}``; the mapping's keys override the plugin's class attributes.

Hard bounds (the spec's): at most `MAX_PLUGINS` descriptors, ids non-empty and at
most `MAX_ID_BYTES` UTF-8 bytes and distinct, `timeout` in (0, `MAX_TIMEOUT`],
`max_result_bytes` in [1, `MAX_RESULT_BYTES`], `config` a JSON object of at most
`MAX_CONFIG_BYTES`. Errors: ``invalid_plugin_pipeline`` (not a list, too many),
``("invalid_plugin_descriptor", index, what)`` and ``("duplicate_plugin_id", id)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any, Literal

import msgspec

from adk_actors.plugins.plugin import Plugin
from providers.errors import AdkError, decode_options

MAX_PLUGINS = 128
MAX_ID_BYTES = 256
DEFAULT_TIMEOUT = 1.0
MAX_TIMEOUT = 120.0
DEFAULT_MAX_RESULT_BYTES = 256 * 1024
MAX_RESULT_BYTES = 1024 * 1024
MAX_CONFIG_BYTES = 1024 * 1024

Mode = Literal["observe", "intervene"]
FailurePolicy = Literal["open", "closed"]


class PluginOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A descriptor's options (the plugin object itself travels beside them)."""

    id: Annotated[str, msgspec.Meta(min_length=1)]
    mode: Mode = "observe"
    failure_policy: FailurePolicy = "open"
    timeout: Annotated[float, msgspec.Meta(gt=0, le=MAX_TIMEOUT)] = DEFAULT_TIMEOUT
    max_result_bytes: Annotated[int, msgspec.Meta(ge=1, le=MAX_RESULT_BYTES)] = (
        DEFAULT_MAX_RESULT_BYTES
    )
    config: dict[str, Any] = msgspec.field(default_factory=dict)


@dataclass(frozen=True)
class CompiledPlugin:
    """One checked descriptor: its options, its plugin and the hooks it implements."""

    index: int
    options: PluginOptions
    plugin: Plugin
    hooks: frozenset[str]
    config: Mapping[str, Any]

    @property
    def id(self) -> str:
        return self.options.id


def compile_descriptors(descriptors: Any) -> tuple[CompiledPlugin, ...]:
    """The checked descriptors, in order (see the module doc for the errors)."""
    if isinstance(descriptors, str | bytes | Mapping) or not isinstance(descriptors, Sequence):
        raise AdkError("invalid_plugin_pipeline", "plugins is a list of descriptors")
    if len(descriptors) > MAX_PLUGINS:
        raise AdkError(
            ("invalid_plugin_pipeline", "too_many_plugins"), f"at most {MAX_PLUGINS} plugins"
        )
    seen: set[str] = set()
    compiled: list[CompiledPlugin] = []
    for index, descriptor in enumerate(descriptors):
        plugin, options = _options(index, descriptor)
        if options.id in seen:
            raise AdkError(("duplicate_plugin_id", options.id[:MAX_ID_BYTES]), "ids are distinct")
        seen.add(options.id)
        hooks = plugin.implemented_hooks()
        if not hooks:
            raise AdkError(
                ("invalid_plugin_descriptor", index, "no_plugin_callbacks"),
                "a plugin implements at least one hook",
            )
        config = MappingProxyType(msgspec.json.decode(msgspec.json.encode(options.config)))
        compiled.append(CompiledPlugin(index, options, plugin, hooks, config))
    return tuple(compiled)


def _options(index: int, descriptor: Any) -> tuple[Plugin, PluginOptions]:
    if isinstance(descriptor, Plugin):
        plugin, given = descriptor, {}
    elif isinstance(descriptor, Mapping) and isinstance(descriptor.get("plugin"), Plugin):
        plugin = descriptor["plugin"]
        given = {key: value for key, value in descriptor.items() if key != "plugin"}
    else:
        raise AdkError(
            ("invalid_plugin_descriptor", index, "invalid_plugin"),
            "a descriptor is a Plugin or a mapping with a Plugin under 'plugin'",
        )
    kind = type(plugin)
    merged: dict[str, Any] = {
        "id": kind.id if kind.id is not None else kind.__name__,
        "mode": kind.mode,
        "failure_policy": kind.failure_policy,
        "timeout": float(kind.timeout),
        **given,
    }
    if isinstance(merged.get("timeout"), int) and not isinstance(merged["timeout"], bool):
        merged["timeout"] = float(merged["timeout"])
    identity = merged.get("id")
    if not isinstance(identity, str) or not 0 < len(identity.encode("utf-8")) <= MAX_ID_BYTES:
        raise AdkError(
            ("invalid_plugin_descriptor", index, "invalid_id"),
            f"an id is a non-empty string of at most {MAX_ID_BYTES} bytes",
        )
    try:
        options = decode_options(PluginOptions, merged, "invalid_plugin_descriptor")
    except AdkError as error:
        key = error.reason[1] if isinstance(error.reason, tuple) else None
        what = f"invalid_{key}" if isinstance(key, str) else key or "invalid_options"
        raise AdkError(("invalid_plugin_descriptor", index, what), error.detail) from None
    try:
        size = len(msgspec.json.encode(options.config))
    except (TypeError, msgspec.EncodeError, OverflowError):
        raise AdkError(
            ("invalid_plugin_descriptor", index, "invalid_config"), "config is JSON"
        ) from None
    if size > MAX_CONFIG_BYTES:
        raise AdkError(
            ("invalid_plugin_descriptor", index, "config_too_large"),
            f"config is at most {MAX_CONFIG_BYTES} bytes",
        )
    return plugin, options
