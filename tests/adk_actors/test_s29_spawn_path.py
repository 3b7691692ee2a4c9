"""The spawn path's shortcuts (issue 20 §4, agent spawn >= 10,000/s) decide exactly as
the general checks they stand in for: a config without runtime keys, ASCII agent names,
the ``ADK_MAX_TOOL_THREADS`` read, script steps without a delay, the catalog's entries
and the shared validators."""

from __future__ import annotations

import dataclasses
import gc
import json
import re
import weakref
from types import MappingProxyType
from typing import Any

import pytest

import adk_actors as adk
from adk_actors.agents.names import check_agent_name
from adk_actors.agents.spec import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_MAX_CONCURRENT_INVOCATIONS,
    DEFAULT_MAX_TOOL_ROUNDS,
    DEFAULT_TOOL_MAX_CONCURRENCY,
    DEFAULT_TOOL_TIMEOUT,
    DEFAULT_TURN_TIMEOUT,
    AgentSpec,
    compile_spec,
)
from adk_actors.agents.thread_limits import (
    DEFAULT_MAX_TOOL_THREADS,
    MAX_TOOL_THREADS_ENV,
    check_max_tool_threads,
)
from adk_actors.tools import ToolCatalog
from adk_actors.tools import schema as schema_module
from adk_actors.tools.schema import RECENT_VALIDATORS, compile_schema
from providers.errors import AdkError
from providers.scripted import ScriptedProvider

SCRIPT = [{"text": "hello"}]


@adk.tool
def get_weather(city: str) -> dict:
    """Get the weather for a city."""
    return {"city": city}


def _reason(fn: Any) -> Any:
    with pytest.raises(AdkError) as info:
        fn()
    return info.value.reason


def _fields(spec: AgentSpec) -> dict[str, Any]:
    """Every field as a comparable value (the catalog by what it offers the model)."""
    values = {field.name: getattr(spec, field.name) for field in dataclasses.fields(spec)}
    values["catalog"] = values["catalog"].declarations()
    values["provider_config"] = {
        key: type(value).__name__ if key == "provider" else value
        for key, value in values["provider_config"].items()
    }
    values["callbacks"] = dict(values["callbacks"])
    return values


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"instructions": "Be brief, {user:name?}."},
        {"instructions": lambda scope: "dynamic"},
        {"model": "m", "generation_config": {"temperature": 0}},
    ],
)
def test_a_config_without_runtime_keys_compiles_as_the_general_path_does(extra):
    """The dict-without-runtime-keys shortcut against the general path, which a
    read-only mapping of the same config takes (and one naming every default)."""
    config = {"provider": "scripted", "script": SCRIPT, **extra}
    shortcut = compile_spec("Short", dict(config), [get_weather])
    general = compile_spec("Short", MappingProxyType(dict(config)), [get_weather])
    spelled = compile_spec(
        "Short",
        {
            **config,
            "turn_timeout": DEFAULT_TURN_TIMEOUT,
            "call_timeout": DEFAULT_CALL_TIMEOUT,
            "max_tool_rounds": DEFAULT_MAX_TOOL_ROUNDS,
            "max_concurrent_invocations": DEFAULT_MAX_CONCURRENT_INVOCATIONS,
            "tool_execution": {
                "mode": "serial",
                "max_concurrency": DEFAULT_TOOL_MAX_CONCURRENCY,
                "tool_timeout": DEFAULT_TOOL_TIMEOUT,
            },
            "history_policy": "include",
            "max_tool_threads": DEFAULT_MAX_TOOL_THREADS,
        },
        [get_weather],
    )
    assert _fields(shortcut) == _fields(general) == _fields(spelled)
    assert type(shortcut.turn_timeout) is float and type(shortcut.call_timeout) is float


@pytest.mark.parametrize("read_only", [False, True])
def test_the_shortcut_refuses_what_the_general_path_refuses(monkeypatch, read_only):
    scripted = {"provider": "scripted", "script": SCRIPT}
    config: Any = MappingProxyType(scripted) if read_only else scripted
    assert _reason(lambda: compile_spec("user", config)) == "reserved_user"
    assert _reason(lambda: compile_spec("A", {**config, "temprature": 1})) == (
        "unknown_config_keys",
        ("temprature",),
    )
    assert _reason(lambda: compile_spec("A", config, [object()])) == ("invalid_tool", "object")
    monkeypatch.setenv(MAX_TOOL_THREADS_ENV, "lots")
    assert _reason(lambda: compile_spec("A", config)) == "invalid_max_tool_threads"
    monkeypatch.setenv(MAX_TOOL_THREADS_ENV, "3")
    assert compile_spec("A", config).max_tool_threads == 3
    monkeypatch.delenv(MAX_TOOL_THREADS_ENV)
    assert compile_spec("A", config).max_tool_threads == DEFAULT_MAX_TOOL_THREADS


def test_the_environment_is_read_at_every_spawn_through_os_environ(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`check_max_tool_threads` reads `os.environ` at every spawn: a change shows at
    once, and a removed variable is the default again."""
    monkeypatch.setenv(MAX_TOOL_THREADS_ENV, " 12 ")
    assert check_max_tool_threads(None) == 12
    monkeypatch.setenv(MAX_TOOL_THREADS_ENV, "")
    assert check_max_tool_threads(None) == DEFAULT_MAX_TOOL_THREADS
    monkeypatch.setenv(MAX_TOOL_THREADS_ENV, "257")
    assert _reason(lambda: check_max_tool_threads(None)) == "invalid_max_tool_threads"
    monkeypatch.delenv(MAX_TOOL_THREADS_ENV)
    assert check_max_tool_threads(None) == DEFAULT_MAX_TOOL_THREADS


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Name(str):
    pass


@pytest.mark.parametrize(
    "name",
    [
        "a",
        "_",
        "Agent_1",
        "1a",
        "a-b",
        "a b",
        "",
        "a\n",  # the regex's `$` accepts a final newline: so does the shortcut's fallback
        "é",
        "\uff21",  # a fullwidth A: an identifier, not an ASCII one
        "user",
        "User",
        "USER",
        "users",
        "a" * 128,
        "a" * 129,
        _Name("Sub"),
        _Name("user"),
        5,
        None,
    ],
)
def test_agent_names_are_decided_as_the_regex_decides(name):
    if not isinstance(name, str) or not _IDENTIFIER.match(name) or len(name) > 128:
        expected: Any = "invalid_identifier"
    elif name.lower() == "user":
        expected = "reserved_user"
    else:
        expected = None
    if expected is None:
        assert check_agent_name(name) is name
    else:
        assert _reason(lambda: check_agent_name(name)) == expected


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        ({"text": "x"}, None),
        ({"text": "x", "delay": 0}, None),
        ({"text": "x", "delay": 0.5}, None),
        ({"text": "x", "delay": False}, "invalid_script_step"),
        ({"text": "x", "delay": None}, "invalid_script_step"),
        ({"text": "x", "delay": -1}, "invalid_script_step"),
        ({"text": "x", "delay": "1"}, "invalid_script_step"),
        (MappingProxyType({"text": "x"}), None),
        (MappingProxyType({"text": "x", "delay": True}), "invalid_script_step"),
        ({"delay": 1}, "invalid_script_step"),
    ],
)
def test_script_steps_with_and_without_a_delay(step, reason):
    if reason is None:
        assert ScriptedProvider([step]).remaining() == 1
    else:
        assert _reason(lambda: ScriptedProvider([step])) == reason


def test_a_script_is_a_sequence_and_record_histories_a_whole_number():
    assert ScriptedProvider(("a", "b")).remaining() == 2
    for steps in ("ab", b"ab", {"text": "x"}):
        assert _reason(lambda steps=steps: ScriptedProvider(steps)) == "invalid_script"
    for count in (True, False, -1, 1.0):
        assert _reason(lambda count=count: ScriptedProvider(SCRIPT, record_histories=count)) == (
            "invalid_record_histories"
        )
    assert ScriptedProvider(SCRIPT, record_histories=0).histories == []


def test_specs_and_catalog_entries_stay_immutable_and_small():
    spec = compile_spec("Small", {"provider": "scripted", "script": SCRIPT}, [get_weather])
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "Other"  # type: ignore[misc]
    assert not hasattr(spec, "__dict__")  # slots: nothing per agent beyond its fields
    (entry,) = spec.catalog._entries.values()
    assert entry.tool is get_weather and entry.source == "tool FunctionTool"
    other = ToolCatalog([get_weather])
    assert other._entries["get_weather"].source is entry.source  # one string, shared


def test_a_validator_is_found_again_while_held_and_compiled_again_once_dropped():
    schema = {"type": "object", "properties": {"s29_only": {"type": "integer"}}}
    first = compile_schema(dict(schema))
    assert compile_schema(dict(schema)) is first
    assert compile_schema(MappingProxyType(dict(schema))) is first  # a mapping: same text
    dropped = weakref.ref(first)
    del first
    for index in range(300):  # push it out of the recent ones; nothing else holds it
        compile_schema({"type": "object", "properties": {f"s29_{index}": {"type": "string"}}})
    gc.collect()
    assert dropped() is None  # no cache held on to it
    again = compile_schema(dict(schema))
    assert again({"s29_only": 1}) == {"s29_only": 1}


def test_a_shared_hit_keeps_the_recent_validators_bounded():
    """Review of 64d0f55 (Low): a validator found again through the weak cache joined
    the recent ones without trimming them, so they grew past `RECENT_VALIDATORS`."""
    held = [
        compile_schema({"type": "object", "properties": {f"s29_held_{n}": {"type": "string"}}})
        for n in range(RECENT_VALIDATORS + 50)
    ]
    for n in range(RECENT_VALIDATORS + 50):  # found again in `_shared`, not the recent ones
        compile_schema({"type": "object", "properties": {f"s29_held_{n}": {"type": "string"}}})
    assert len(schema_module._recent) <= RECENT_VALIDATORS
    del held


def test_compiling_leaves_the_callers_schema_as_it_was():
    """Review of 64d0f55 (Medium): fastjsonschema rewrites `$ref`s under a `$id` in the
    dict it compiles; compiled in place, the caller's schema changed and its second
    compile (a second spawn with the same tool) was refused as ``remote_ref``."""
    schema = {
        "$id": "https://example.test/s29.json",
        "$ref": "#/definitions/point",
        "definitions": {
            "point": {"type": "object", "properties": {"x": {"$ref": "#/definitions/n"}}},
            "n": {"type": "integer"},
        },
    }
    before = json.dumps(schema, sort_keys=True)
    validator = compile_schema(schema)
    assert json.dumps(schema, sort_keys=True) == before
    assert compile_schema(schema) is validator


def test_spawned_agents_answer_with_the_shortcut_spec():
    agents = [
        adk.spawn_agent(f"Quick{n}", {"provider": "scripted", "script": SCRIPT}, [get_weather])
        for n in range(3)
    ]
    for agent in agents:
        assert adk.prompt(agent, "hi") == "hello"
        assert adk.agent_info(agent)["tools"] == ["get_weather"]


def test_compiling_a_schema_that_is_not_plain_json_leaves_it_as_it_was():
    """Final review of session 29 (Medium): a schema that is not plain JSON (a tuple
    `enum`) is compiled afresh, never shared; it was copied at the top level only, so
    fastjsonschema still rewrote its nested `$ref`s and the second compile was refused
    as ``remote_ref``."""
    schema = {
        "$id": "http://example.test/root.json",
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/b"}, "e": {"enum": (1, 2)}},
        "definitions": {"b": {"type": "integer"}},
    }
    compile_schema(schema)
    assert schema["properties"]["a"] == {"$ref": "#/definitions/b"}
    assert compile_schema(schema)({"a": 1, "e": 2}) == {"a": 1, "e": 2}
