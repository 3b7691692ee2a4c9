"""`AgentSpec`: an agent's config, checked once and frozen.

Agent runtime keys (timeouts, limits) are taken out here; everything else is the
provider's config and the provider checks it strictly, so a misspelled key fails
`spawn_agent` instead of being ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from adk_actors.agents.agent_tool import AgentTool
from adk_actors.agents.callbacks import check_callbacks
from adk_actors.agents.instructions import template_keys
from adk_actors.agents.names import check_agent_name
from adk_actors.agents.thread_limits import DEFAULT_MAX_TOOL_THREADS, check_max_tool_threads
from adk_actors.tools import Tool, ToolCatalog
from adk_actors.tools.schema import InvalidSchema, compile_schema
from providers import protocol
from providers.errors import AdkError
from providers.scripted import ScriptedProvider

DEFAULT_TURN_TIMEOUT = 60.0
DEFAULT_CALL_TIMEOUT = 60.0
DEFAULT_MAX_TOOL_ROUNDS = 16
DEFAULT_MAX_CONCURRENT_INVOCATIONS = 32
MAX_HISTORY_CONTENTS = 1000

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_MAX_CONCURRENT_INVOCATIONS",
    "DEFAULT_MAX_TOOL_ROUNDS",
    "DEFAULT_TOOL_MAX_CONCURRENCY",
    "DEFAULT_TOOL_TIMEOUT",
    "DEFAULT_TURN_TIMEOUT",
    "MAX_HISTORY_CONTENTS",
    "RUNTIME_KEYS",
    "AgentSpec",
    "check_agent_name",
    "compile_spec",
]

RUNTIME_KEYS = frozenset(
    {
        "turn_timeout",
        "call_timeout",
        "max_tool_rounds",
        "max_concurrent_invocations",
        "sub_agents",
        "global_instruction",
        "input_schema",
        "output_schema",
        "history_policy",
        "tool_execution",
        "callbacks",
        "output_key",
        "max_tool_threads",
        "restart_intensity",  # read by spawn_agent (the agent's own restart budget)
    }
)
DEFAULT_TOOL_MAX_CONCURRENCY = 4
DEFAULT_TOOL_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """An agent's checked config. Slots, no instance dict: every running agent holds
    one, idle ones too."""

    name: str
    provider_config: Mapping[str, Any]
    catalog: ToolCatalog
    turn_timeout: float
    call_timeout: float
    max_tool_rounds: int
    max_concurrent_invocations: int
    sub_agents: tuple[str, ...] = ()
    global_instruction: str | None = None
    input_validator: Any = None
    output_validator: Any = None
    history_policy: str = "include"
    tool_mode: str = "serial"
    tool_max_concurrency: int = DEFAULT_TOOL_MAX_CONCURRENCY
    tool_timeout: float = DEFAULT_TOOL_TIMEOUT
    callbacks: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    instructions: Any = None  # a template str or a callable, rendered per turn
    instruction_keys: tuple[str, ...] = ()
    output_key: str | None = None
    max_tool_threads: int = DEFAULT_MAX_TOOL_THREADS

    def __repr__(self) -> str:  # never the provider config: it may hold an API key
        return f"AgentSpec({self.name!r}, tools={self.catalog.names()})"


def compile_spec(name: Any, config: Mapping[str, Any], tools: Sequence[Tool] = ()) -> AgentSpec:
    """Check everything once: name, runtime limits, provider config, tool catalog.

    A plain dict config without any runtime key (most of them) takes every runtime
    default as it is: nothing is looked up or checked for them (the spawn path, issue
    20 §4; what it builds is exactly what the general path builds)."""
    check_agent_name(name)
    plain = type(config) is dict
    if not plain and not isinstance(config, Mapping):
        raise AdkError("invalid_config", "an agent config is a mapping")
    provider_config = {key: value for key, value in config.items() if key not in RUNTIME_KEYS}
    defaults_only = plain and len(provider_config) == len(config)
    instructions = provider_config.get("instructions")
    instruction_keys: tuple[str, ...] = ()
    if callable(instructions):
        provider_config.pop("instructions")  # rendered per turn
    elif instructions is not None:
        if not isinstance(instructions, str):
            raise AdkError("invalid_instructions", "instructions is a string or a function")
        instruction_keys = tuple(template_keys(instructions))
    if provider_config.get("provider") == "scripted":
        script = provider_config.pop("script", None)
        if script is None:
            raise AdkError("missing_script", "a scripted agent needs 'script': [steps]")
        provider_config["provider"] = (
            script if isinstance(script, ScriptedProvider) else ScriptedProvider(script)
        )
    _check_provider(provider_config)
    if defaults_only:
        return AgentSpec(
            name=name,
            provider_config=MappingProxyType(provider_config),
            catalog=ToolCatalog([*tools]),
            instructions=instructions,
            instruction_keys=instruction_keys,
            callbacks=_NO_CALLBACKS,
            max_tool_threads=check_max_tool_threads(None),
            turn_timeout=DEFAULT_TURN_TIMEOUT,
            call_timeout=DEFAULT_CALL_TIMEOUT,
            max_tool_rounds=DEFAULT_MAX_TOOL_ROUNDS,
            max_concurrent_invocations=DEFAULT_MAX_CONCURRENT_INVOCATIONS,
        )
    sub_agents = _sub_agent_tools(name, config.get("sub_agents"))
    tool_mode, tool_max_concurrency, tool_timeout = _tool_execution(config.get("tool_execution"))
    history_policy = config.get("history_policy", "include")
    if history_policy not in ("include", "exclude"):
        raise AdkError("invalid_history_policy", "history_policy is 'include' or 'exclude'")
    global_instruction = config.get("global_instruction")
    if global_instruction is not None and not isinstance(global_instruction, str):
        raise AdkError("invalid_global_instruction", "global_instruction is a string")
    return AgentSpec(
        name=name,
        provider_config=MappingProxyType(provider_config),
        catalog=ToolCatalog([*tools, *sub_agents]),
        sub_agents=tuple(tool.name for tool in sub_agents),
        global_instruction=global_instruction,
        input_validator=_contract(config.get("input_schema"), "input_schema"),
        output_validator=_contract(config.get("output_schema"), "output_schema"),
        history_policy=history_policy,
        tool_mode=tool_mode,
        tool_max_concurrency=tool_max_concurrency,
        tool_timeout=tool_timeout,
        callbacks=_callbacks(config.get("callbacks")),
        instructions=instructions,
        instruction_keys=instruction_keys,
        output_key=_output_key(config.get("output_key")),
        max_tool_threads=check_max_tool_threads(config.get("max_tool_threads")),
        turn_timeout=_seconds(config, "turn_timeout", DEFAULT_TURN_TIMEOUT),
        call_timeout=_seconds(config, "call_timeout", DEFAULT_CALL_TIMEOUT),
        max_tool_rounds=_positive(
            config, "max_tool_rounds", DEFAULT_MAX_TOOL_ROUNDS, "invalid_max_tool_rounds"
        ),
        max_concurrent_invocations=_positive(
            config,
            "max_concurrent_invocations",
            DEFAULT_MAX_CONCURRENT_INVOCATIONS,
            "invalid_max_concurrent_invocations",
        ),
    )


def _check_provider(provider_config: Mapping[str, Any]) -> None:
    """`protocol.validate_config`, then the credential check, on the one provider the
    config resolves to (resolved once: the provider config is our own fresh dict).

    A provider that needs a credential to answer (Gemini's API key) says so now, at
    spawn, rather than at the agent's first call: its optional
    ``check_credentials(config)`` raises (``missing_api_key``). `validate_config` alone
    does not, so a config can be checked before its key is set."""
    provider = protocol.resolve_provider(provider_config)
    protocol.validate_with(provider, provider_config)
    check = getattr(provider, "check_credentials", None)
    if callable(check):
        check(provider_config)


_NO_CALLBACKS: Mapping[str, Any] = MappingProxyType({})


def _callbacks(config: Any) -> Mapping[str, Any]:
    """The checked callbacks, read-only; one shared empty mapping for the agents
    without any (most of them: one object fewer per agent for the garbage collector)."""
    callbacks = dict(check_callbacks(config))
    return MappingProxyType(callbacks) if callbacks else _NO_CALLBACKS


def _output_key(key: Any) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key or key.startswith("temp:"):
        raise AdkError("invalid_output_key", "output_key is a non-temp: state key")
    return key


def _contract(schema: Any, key: str) -> Any:
    """The compiled contract: a JSON Schema mapping (or boolean), compiled without ever
    fetching a ``$ref`` (`adk_actors.tools.schema`); ``(f"invalid_{key}",)`` otherwise."""
    if schema is None:
        return None
    try:
        return compile_schema(schema, allow_bool=True)
    except InvalidSchema as refused:
        raise AdkError(
            refused.reason((f"invalid_{key}",), key),
            f"{key} is not an accepted JSON Schema ({refused.why})",
        ) from None


def _tool_execution(options: Any) -> tuple[str, int, float]:
    """``{"mode": "serial" | "parallel", "max_concurrency": 4, "tool_timeout": 30}``;
    anything else is ``("invalid_tool_execution", <the value given>)``, as the spec
    reports it (the value shown as JSON-like builtins, bounded)."""
    if options is None:
        return "serial", DEFAULT_TOOL_MAX_CONCURRENCY, DEFAULT_TOOL_TIMEOUT
    refused = AdkError(
        ("invalid_tool_execution", _shown(options)),
        "tool_execution is {'mode': 'serial' | 'parallel', 'max_concurrency': 1..4096, "
        "'tool_timeout': seconds in (0, 86400]}",
    )
    if not isinstance(options, Mapping) or set(options) - {
        "mode",
        "max_concurrency",
        "tool_timeout",
    }:
        raise refused
    mode = options.get("mode", "serial")
    if mode not in ("serial", "parallel"):
        raise refused
    try:
        width = _positive(
            options, "max_concurrency", DEFAULT_TOOL_MAX_CONCURRENCY, "invalid_tool_execution"
        )
        timeout = _seconds(options, "tool_timeout", DEFAULT_TOOL_TIMEOUT)
    except AdkError:
        raise refused from None
    return mode, width, timeout


def _shown(value: Any, depth: int = 0) -> Any:
    """A config value as it may appear in a reason: scalars as they are, a small
    mapping or list walked, anything else by its type name (never a repr)."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value[:64]
    if depth < 2 and isinstance(value, Mapping) and len(value) <= 8:
        return {str(key)[:64]: _shown(item, depth + 1) for key, item in value.items()}
    if depth < 2 and isinstance(value, list | tuple) and len(value) <= 8:
        return [_shown(item, depth + 1) for item in value]
    return type(value).__name__


def _sub_agent_tools(root: str, declared: Any) -> list[Tool]:
    """``{"Name": {"description": ...}}`` -> one `AgentTool` per sub-agent."""
    if declared is None:
        return []
    if not isinstance(declared, Mapping):
        raise AdkError(
            "invalid_sub_agents", "sub_agents maps each sub-agent's name to {'description': ...}"
        )
    tools: list[Tool] = []
    for child, options in declared.items():
        check_agent_name(child)
        if child == root:
            raise AdkError("self_reference", f"{root} cannot be its own sub-agent")
        options = options or {}
        if not isinstance(options, Mapping) or set(options) - {"description"}:
            raise AdkError(
                ("invalid_sub_agents", child), "a sub-agent entry has only 'description'"
            )
        tools.append(AgentTool(child, str(options.get("description", ""))))
    return tools


def _seconds(config: Mapping[str, Any], key: str, default: float) -> float:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 86_400:
        raise AdkError(
            (f"invalid_{key}", value if isinstance(value, int | float) else None),
            f"{key} is seconds in (0, 86400]",
        )
    return float(value)


def _positive(config: Mapping[str, Any], key: str, default: int, reason: str) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 4096:
        raise AdkError(reason, f"{key} is an int in 1..4096")
    return value
