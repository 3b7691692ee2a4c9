"""`load_agent_file`: read, check and decode one agent config file.

The file is bounded (`MAX_FILE_BYTES`), strict JSON (no duplicate keys, no NaN or
Infinity), one object whose keys are all known. A secret anywhere in it (a key that
names a credential, such as ``api_key``, ``token`` or ``password``, at any depth, or a
value shaped like one) refuses the whole file with ``secret_in_config_file``: model
keys come from the environment (``GEMINI_API_KEY``). Every refusal is an `AdkError`
whose reason names what was wrong (``("unknown_agent_config_keys", [...])``,
``("invalid_agent_config", key)``, ...); values are never echoed.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec

from adk_actors.agents.names import check_agent_name
from adk_actors.config_file.agent_file import DEFAULT_AGENT_NAME, DEFAULT_MODEL, AgentFile
from adk_actors.config_file.strict_json import StrictJsonError, strict_json_loads
from adk_actors.config_file.tool_paths import resolve_tools
from adk_actors.runner.options import runner_options as check_runner_options
from adk_actors.tools import Tool, ToolCatalog
from adk_actors.tools.schema import InvalidSchema, compile_schema
from providers import protocol
from providers.errors import AdkError, decode_options, is_secret_key, key_name
from providers.scripted import ScriptedProvider
from supervision import redact_text

PROVIDERS = ("gemini", "scripted")
MAX_FILE_BYTES = 1 << 20
"""A config file is at most 1 MiB (the reference's bound)."""
MAX_DEPTH = 64
"""Objects and arrays nest at most this deep (deeper is ``invalid_json``)."""
MAX_TOOLS = 128
MAX_SCRIPT_STEPS = 10_000

GENERATION_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "max_output_tokens",
    "stop_sequences",
    "candidate_count",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "response_mime_type",
    "response_schema",
    "thinking_config",
    "safety_settings",
)
"""Generation options a file may also give at its top level; they are moved into
``generation_config`` (giving one in both places is an error)."""

RUNNER_KEYS = (
    "run_timeout",
    "max_llm_calls",
    "max_tool_rounds",
    "streaming_mode",
    "max_stream_output_bytes",
    "max_partial_events",
    "tool_execution",
)
"""``runner_options`` keys: the Runner's options (times in seconds) and the agent's
``tool_execution`` (``"serial"`` or ``{"mode", "max_concurrency", "tool_timeout"}``)."""


class _ToolExecution(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    mode: Literal["serial", "parallel"] = "serial"
    max_concurrency: Annotated[int, msgspec.Meta(ge=1, le=4096)] = 4
    tool_timeout: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 30.0


class _FileSchema(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The file's top-level keys and their types (generation keys already folded)."""

    name: str = DEFAULT_AGENT_NAME
    provider: Literal["gemini", "scripted"] = "gemini"
    model: str | None = None
    instructions: str | None = None
    global_instruction: str | None = None
    generation_config: dict[str, Any] | None = None
    builtin_tools: list[str] | None = None
    request_timeout: int | Literal["infinity"] | None = None
    input_schema: dict[str, Any] | bool | None = None
    output_schema: dict[str, Any] | bool | None = None
    output_key: str | None = None
    history_policy: Literal["include", "exclude"] | None = None
    max_concurrent_invocations: Annotated[int, msgspec.Meta(ge=1, le=4096)] | None = None
    turn_timeout: Annotated[float, msgspec.Meta(gt=0, le=86_400)] | None = None
    tools: list[str] = msgspec.field(default_factory=list)
    runner_options: dict[str, Any] = msgspec.field(default_factory=dict)
    script: list[dict[str, Any]] | None = None
    script_repeat: bool = False


_TOP_LEVEL_KEYS = frozenset(_FileSchema.__struct_encode_fields__) | frozenset(GENERATION_KEYS)
_AGENT_KEYS = (
    "instructions",
    "global_instruction",
    "builtin_tools",
    "request_timeout",
    "input_schema",
    "output_schema",
    "output_key",
    "history_policy",
    "max_concurrent_invocations",
    "turn_timeout",
)
_PROVIDER_KEYS = ("model", "instructions", "generation_config", "builtin_tools", "request_timeout")


def load_agent_file(path: str | os.PathLike[str]) -> AgentFile:
    """The checked `AgentFile` at `path`; raises `AdkError` naming what is wrong."""
    raw = _read_json(path)
    if not isinstance(raw, dict):
        raise AdkError("agent_config_must_be_object", "an agent config file is one JSON object")
    _refuse_secrets(raw)
    unknown = sorted(key for key in raw if key not in _TOP_LEVEL_KEYS)
    if unknown:
        named = [key_name(key) for key in unknown[:16]]
        raise AdkError(
            ("unknown_agent_config_keys", named),
            f"unknown keys: {', '.join(named)}; known: {', '.join(sorted(_TOP_LEVEL_KEYS))}",
        )
    provider = raw.get("provider", "gemini")
    if provider not in PROVIDERS:
        shown = provider[:64] if isinstance(provider, str) else type(provider).__name__
        raise AdkError(("unknown_provider", shown), 'provider is "gemini" or "scripted"')
    fields = _fold_generation(raw)
    schema = decode_options(_FileSchema, fields, "invalid_agent_config", what="agent config")
    return _agent_file(os.fspath(path), schema)


def _read_json(path: str | os.PathLike[str]) -> Any:
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        code = errno.errorcode.get(error.errno or 0, "io_error").lower()
        raise AdkError(("file_read_failed", code), "the config file could not be read") from None
    if len(data) > MAX_FILE_BYTES:
        raise AdkError("file_too_large", f"a config file is at most {MAX_FILE_BYTES} bytes")
    try:
        return strict_json_loads(data, max_depth=MAX_DEPTH)
    except StrictJsonError as error:
        if isinstance(error.reason, tuple):  # ("duplicate_json_key", key)
            raise AdkError(
                ("duplicate_agent_config_key", error.reason[1]), "a key appears twice in one object"
            ) from None
        raise AdkError(
            "invalid_json", f"the config file is not strict JSON: {error.detail}"
        ) from None


def _refuse_secrets(document: dict[str, Any]) -> None:
    """``secret_in_config_file`` if any key names a credential or any string looks
    like one (the path to it is in the message; the value never is)."""
    stack: list[tuple[str, Any]] = [("", document)]  # nested at most MAX_DEPTH (parsed so)
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                at = f"{where}.{key_name(key)}" if where else key_name(key)
                if is_secret_key(key):
                    raise _secret(at)
                stack.append((at, item))
        elif isinstance(value, list):
            stack.extend((f"{where}[{index}]", item) for index, item in enumerate(value))
        elif isinstance(value, str) and redact_text(value) != value:
            raise _secret(where)


def _secret(where: str) -> AdkError:
    return AdkError(
        "secret_in_config_file",
        f"'{where}' holds a credential; keep GEMINI_API_KEY in the environment, not in the file",
    )


def _fold_generation(raw: dict[str, Any]) -> dict[str, Any]:
    """The file's keys with top-level generation options moved into generation_config."""
    fields = {key: value for key, value in raw.items() if key not in GENERATION_KEYS}
    top = {key: raw[key] for key in GENERATION_KEYS if key in raw}
    if not top:
        return fields
    nested = fields.get("generation_config")
    if nested is None:
        nested = {}
    if not isinstance(nested, dict):
        raise AdkError(("invalid_agent_config", "generation_config"), "it must be an object")
    both = sorted(set(top) & set(nested))
    if both:
        raise AdkError(("duplicate_config_keys", both), "set each generation option once")
    fields["generation_config"] = {**nested, **top}
    return fields


def _agent_file(path: str, schema: _FileSchema) -> AgentFile:
    try:
        name = check_agent_name(schema.name)
    except AdkError as error:
        raise AdkError("invalid_agent_name", error.detail) from None
    model = schema.model
    if schema.provider == "gemini" and model is None:
        model = DEFAULT_MODEL
    agent_config: dict[str, Any] = {} if model is None else {"model": model}
    for key in _AGENT_KEYS:
        value = getattr(schema, key)
        if value is not None:
            agent_config[key] = value
    if schema.generation_config is not None:
        agent_config["generation_config"] = _generation(schema.generation_config)
    runner, tool_execution = _runner_options(schema.runner_options)
    if tool_execution is not None:
        agent_config["tool_execution"] = tool_execution
    script = _script(schema)
    _check_provider_config(schema.provider, agent_config, script)
    _check_contracts(agent_config)
    tools = _tools(schema.tools)
    return AgentFile(
        path=path,
        name=name,
        provider=schema.provider,
        model=model,
        agent_config=agent_config,
        runner_options=runner,
        tools=tuple(schema.tools),
        tool_objects=tuple(tools),
        script=None if script is None else tuple(script),
        script_repeat=schema.script_repeat,
    )


def _generation(options: dict[str, Any]) -> dict[str, Any]:
    """generation_config with safety settings also accepted in the API's own spelling
    (``HARM_CATEGORY_DANGEROUS_CONTENT``, ``BLOCK_MEDIUM_AND_ABOVE``), as the spec's
    example file writes them; the provider checks every value afterwards."""
    settings = options.get("safety_settings")
    if not isinstance(settings, list):
        return dict(options)
    return {**options, "safety_settings": [_safety_setting(entry) for entry in settings]}


def _safety_setting(entry: Any) -> Any:
    if not isinstance(entry, dict):
        return entry
    shown = dict(entry)
    category, threshold = entry.get("category"), entry.get("threshold")
    if isinstance(category, str) and category.startswith("HARM_CATEGORY_"):
        shown["category"] = category.removeprefix("HARM_CATEGORY_").lower()
    if isinstance(threshold, str) and threshold.isupper():
        lowered = threshold.lower()
        shown["threshold"] = (
            "unspecified" if lowered == "harm_block_threshold_unspecified" else lowered
        )
    return shown


def _runner_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The Runner's keyword options (checked by the Runner's own rules) and the agent's
    tool_execution, from the file's ``runner_options``."""
    unknown = sorted(key for key in options if key not in RUNNER_KEYS)
    if unknown:
        named = [key_name(key) for key in unknown[:16]]
        raise AdkError(
            ("unknown_runner_options", named),
            f"unknown runner_options keys: {', '.join(named)}; known: {', '.join(RUNNER_KEYS)}",
        )
    runner = {key: value for key, value in options.items() if key != "tool_execution"}
    check_runner_options(**runner)
    execution = options.get("tool_execution")
    if execution is None or execution == "serial":
        return runner, None if execution is None else {"mode": "serial"}
    checked = decode_options(
        _ToolExecution, execution, "invalid_parallel_tool_policy", what="tool_execution"
    )
    return runner, msgspec.to_builtins(checked)


def _script(schema: _FileSchema) -> list[dict[str, Any]] | None:
    """The scripted model's steps: required with provider "scripted", refused otherwise."""
    if schema.provider != "scripted":
        if schema.script is not None or schema.script_repeat:
            raise AdkError(
                "script_requires_scripted_provider",
                'a "script" is only for "provider": "scripted"',
            )
        return None
    if not schema.script:
        raise AdkError("missing_script", 'a scripted agent needs "script": [steps]')
    if len(schema.script) > MAX_SCRIPT_STEPS:
        raise AdkError("script_too_long", f"a script has at most {MAX_SCRIPT_STEPS} steps")
    ScriptedProvider(list(schema.script))  # checks every step
    return schema.script


def _check_provider_config(
    provider: str, agent_config: Mapping[str, Any], script: list[dict[str, Any]] | None
) -> None:
    """The provider's own strict check of its part of the config (no API key needed)."""
    model: Any = ScriptedProvider(script) if script is not None else provider
    config = {
        "provider": model,
        **{k: agent_config[k] for k in _PROVIDER_KEYS if k in agent_config},
    }
    protocol.validate_config(config)


def _check_contracts(agent_config: Mapping[str, Any]) -> None:
    for key in ("input_schema", "output_schema"):
        if key in agent_config:
            try:
                compile_schema(agent_config[key], allow_bool=True)
            except InvalidSchema as refused:
                raise AdkError(
                    refused.reason((f"invalid_{key}",), key),
                    f"{key} is not an accepted JSON Schema ({refused.why})",
                ) from None


def _tools(paths: list[str]) -> list[Any]:
    if len(paths) > MAX_TOOLS:
        raise AdkError("too_many_tools", f"at most {MAX_TOOLS} tools")
    tools = resolve_tools(paths)
    ToolCatalog([tool for tool in tools if isinstance(tool, Tool)])  # schemas, duplicate names
    return tools
