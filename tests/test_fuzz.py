"""Fuzzing every parser and checker of untrusted input: nothing but a typed `AdkError`.

Content (dicts for `content.validate`, JSON for `content.decode`), events
(`events.decode` of bytes, `events.from_dict` of dicts), agent configs (`compile_spec`,
what `spawn_agent` checks before any process starts), option dicts (Runner, run,
Runner admission, context policy, admission controller, runtime policy), session query
cursors, and tool arguments through the catalog's argument check: each input is either
accepted or refused with an `AdkError` whose reason (its first element, for a tuple) is
in `REASONS`. A tool-argument refusal is a structural payload instead, and must itself be
valid content.

Deterministic (``derandomize=True``, no example database) so CI sees the same inputs
every run; about 12,000 inputs in all, well under a minute on two cores.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import adk_actors as adk
from adk_actors import events
from adk_actors.admission.config import validate_config as admission_config
from adk_actors.agents.spec import compile_spec
from adk_actors.events import Event, EventActions
from adk_actors.policy import RuntimePolicy
from adk_actors.runner.context import ContextPolicy
from adk_actors.runner.options import runner_admission, runner_options
from adk_actors.runs.options import run_options
from adk_actors.tools import ToolCatalog
from providers import content
from providers.errors import AdkError

# The documented reasons. `providers.content.CONTENT_REASONS` is content's own set (one
# place, imported); the rest are collected from the modules fuzzed here (their docstrings
# name them), kept in this module because `providers/errors.py` has no central registry.
REASONS = content.CONTENT_REASONS | {
    # events
    "invalid_event",
    "event_too_large",
    "unsupported_event_schema_version",
    # agent configs: adk_actors/agents/{spec,names,instructions,callbacks}.py, the
    # scripted provider's config check, the tool catalog
    "invalid_config",
    "invalid_agent_name",
    "reserved_user",
    "invalid_instructions",
    "secret_template_key",
    "invalid_template",
    "missing_script",
    "invalid_script",
    "invalid_script_step",
    "invalid_provider",
    "unknown_provider",
    "invalid_provider_config",
    "unknown_config_keys",
    "invalid_sub_agents",
    "self_reference",
    "invalid_tool_execution",
    "invalid_history_policy",
    "invalid_global_instruction",
    "invalid_input_schema",
    "invalid_output_schema",
    "invalid_callbacks",
    "unknown_callbacks",
    "invalid_output_key",
    "invalid_turn_timeout",
    "invalid_call_timeout",
    "invalid_max_tool_rounds",
    "invalid_max_concurrent_invocations",
    "invalid_tool_schema",
    "invalid_tool_name",
    "duplicate_tool_name",
    "invalid_identifier",
    "secret_instruction_key",
    "missing_instruction_key",
    "instructions_too_large",
    # the Gemini provider's config check (`providers/gemini/config.py`)
    "invalid_model",
    "invalid_api_key",
    "missing_api_key",
    "invalid_base_url",
    "invalid_generation_config",
    "invalid_thinking_config",
    "invalid_thinking_budget",
    "invalid_thinking_level",
    "duplicate_config_keys",
    "duplicate_safety_category",
    "invalid_retry",
    "invalid_builtin_tools",
    "invalid_cached_content",
    # option dicts
    "invalid_runner_options",
    "invalid_run_timeout",
    "invalid_max_llm_calls",
    "invalid_streaming_mode",
    "invalid_max_stream_output_bytes",
    "invalid_max_partial_events",
    "invalid_run_options",
    "invalid_retention",
    "invalid_max_buffered_events",
    "invalid_admission_control",
    "invalid_admission_config",
    "invalid_context_policy",
    "invalid_runtime_policy",
    # session queries
    "invalid_cursor",
    "stale_cursor",
    "invalid_limit",
    "invalid_author",
    "not_found",
}

FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def fuzz(examples: int) -> settings:
    return settings(FUZZ, max_examples=examples)


counted: dict[str, int] = {}
_COLLECT: set[tuple[str, str]] | None = set() if os.environ.get("FUZZ_COLLECT") else None


def typed(kind: str, fn: Callable[[], Any]) -> Any:
    """Run `fn`: it returns, or raises an `AdkError` with a documented reason."""
    counted[kind] = counted.get(kind, 0) + 1
    try:
        return fn()
    except AdkError as error:
        head = error.reason[0] if isinstance(error.reason, tuple) else error.reason
        if _COLLECT is not None:
            if head not in REASONS:
                _COLLECT.add((kind, repr(head)[:80]))
            return None
        assert head in REASONS, (kind, error.reason)
        return None


# -- strategies -----------------------------------------------------------------------------

poison_text = st.sampled_from(["\ud800", "a\udfffb", "\x00", "é", "text/plain\n", "#", ""])
texts = st.text(max_size=12) | poison_text
numbers = (
    st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([math.nan, math.inf, -math.inf, 0, -1, 1, 2**64])
)
scalars = st.none() | st.booleans() | numbers | texts | st.binary(max_size=4)
keys = texts | st.integers(-2, 2) | st.none() | st.sampled_from([(1, 2), 1.5])


def nested(depth: int, leaf: Any) -> Any:
    for _ in range(depth):
        leaf = [leaf] if depth % 2 else {"k": leaf}
    return leaf


deep = st.builds(nested, st.sampled_from([60, 63, 64, 65, 70, 200, 5_000]), scalars)
values = (
    st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.tuples(inner)
            | st.dictionaries(keys, inner, max_size=3)
            | st.frozensets(st.integers(0, 3), max_size=2)
        ),
        max_leaves=10,
    )
    | deep
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)

part_types = st.sampled_from(
    ["text", "inline_data", "file_data", "function_call", "function_response", "video", None, 5]
)
part_fields = {
    "text": texts | scalars,
    "thought": st.booleans() | scalars,
    "thought_signature": texts | scalars,
    "mime_type": st.sampled_from(
        ["image/png", "text/plain", "Image/PNG", "text/plain\n", "a/b;c=d"]
    )
    | scalars,
    "data": st.sampled_from(["aGk=", "aGk", "not base64", ""]) | scalars,
    "file_uri": st.sampled_from(
        [
            "https://example.com/a.png",
            "gs://bucket/a",
            "ftp://h/x",
            "https://u:p@h/x",
            "https://h/x#f",
            "https:///x",
            "https://h/x y",
            "http://[::1",
        ]
    )
    | scalars,
    "name": st.sampled_from(["get_weather", "", "x" * 200]) | texts | scalars,
    "args": values,
    "response": values,
    "id": texts | scalars,
    "extra": scalars,
}


@st.composite
def part_dicts(draw: Any) -> Any:
    part: dict[Any, Any] = {"type": draw(part_types)}
    for field in draw(st.lists(st.sampled_from(sorted(part_fields)), max_size=4, unique=True)):
        part[field] = draw(part_fields[field])
    return part


content_dicts = (
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "model", "system", "tool", "robot", ""]) | scalars,
            "parts": st.lists(part_dicts() | scalars, max_size=4) | scalars,
        },
        optional={"extra": scalars},
    )
    | values
)


def reachable(obj: Any) -> bytes | None:
    try:
        return msgspec.json.encode(obj)
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError):
        return None


# -- content --------------------------------------------------------------------------------


@fuzz(2500)
@given(content_dicts)
def test_content_dicts_validate_or_fail_typed(obj):
    checked = typed("content.validate", lambda: content.validate(obj))
    data = reachable(obj)
    if data is not None:
        decoded = typed("content.decode", lambda: content.decode(data))
        assert (checked is None) == (decoded is None)  # one validation path
        if checked is not None:
            assert decoded == checked and content.decode(content.encode(checked)) == checked


def mutate(data: bytes, cuts: list[tuple[int, int, bytes]]) -> bytes:
    for position, length, replacement in cuts:
        at = position % (len(data) + 1)
        data = data[:at] + replacement + data[at + length :]
    return data


mutations = st.lists(
    st.tuples(
        st.integers(0, 10_000),
        st.integers(0, 4),
        st.binary(max_size=3) | st.sampled_from([b"[", b"{", b"\\ud800", b'"', b"\xff", b"1e999"]),
    ),
    max_size=4,
)
VALID_CONTENT = content.encode(
    content.new(
        [
            content.text("hi"),
            content.inline_data("image/png", b"\x89PNG"),
            content.file_data("https://example.com/a.png", "image/png"),
            content.function_call("f", {"a": [1, {"b": None}]}, id="c1"),
            content.function_response("f", {"ok": True}, id="c1"),
        ]
    )
)


@fuzz(1500)
@given(mutations | st.just([]), st.binary(max_size=64))
def test_content_bytes_decode_or_fail_typed(cuts, noise):
    typed("content.decode", lambda: content.decode(mutate(VALID_CONTENT, cuts)))
    typed("content.decode", lambda: content.decode(noise))


# -- events ---------------------------------------------------------------------------------

VALID_EVENT = events.encode(
    Event.new(
        "agent",
        "inv-1",
        content.new([content.function_call("f", {"a": 1}, id="c")], role="model"),
        actions=EventActions(state_delta={"k": [1, 2]}, artifact_delta={"a": 1}),
        provider_metadata={"schema_version": 1, "provider": "p", "type": "t", "metadata": {}},
    )
)
VALID_EVENT_DICT = events.to_dict(events.decode(VALID_EVENT))
event_fields = st.sampled_from(sorted(VALID_EVENT_DICT))


@fuzz(1500)
@given(mutations | st.just([]), st.binary(max_size=64))
def test_event_bytes_decode_or_fail_typed(cuts, noise):
    typed("events.decode", lambda: events.decode(mutate(VALID_EVENT, cuts)))
    typed("events.decode", lambda: events.decode(noise))


@fuzz(1500)
@given(st.dictionaries(event_fields | keys, values | content_dicts, max_size=3), content_dicts)
def test_event_dicts_decode_or_fail_typed(changes, content_dict):
    typed("events.from_dict", lambda: events.from_dict({**VALID_EVENT_DICT, **changes}))
    with_content = {**VALID_EVENT_DICT, "content": content_dict}
    event = typed("events.from_dict", lambda: events.from_dict(with_content))
    if isinstance(content_dict, dict) and reachable(content_dict) is not None:
        validated = typed("content.validate", lambda: content.validate(content_dict))
        assert (event is None) == (validated is None)  # events validate content as content does


# -- agent configs (checked before any process starts) --------------------------------------

MODEL = adk.ScriptedProvider(["ok"])
config_values = {
    "provider": st.just(MODEL) | st.sampled_from(["scripted", "nope", "gemini"]) | scalars,
    "script": st.lists(st.sampled_from(["x", {"text": "y"}, {"tool_calls": []}, 5]), max_size=2)
    | scalars,
    "instructions": st.sampled_from(["Be brief.", "Hi {user:name}", "{api_key}", "{", "}"])
    | scalars,
    "turn_timeout": numbers | scalars,
    "call_timeout": numbers | scalars,
    "max_tool_rounds": numbers | scalars,
    "max_concurrent_invocations": numbers | scalars,
    "sub_agents": st.dictionaries(texts | keys, st.none() | values, max_size=2) | scalars,
    "global_instruction": texts | scalars,
    "input_schema": st.sampled_from(
        [{"type": "object"}, {"$ref": "http://127.0.0.1:9/x"}, {"type": 5}, True]
    )
    | values,
    "output_schema": st.sampled_from([{"type": "array"}, {"$ref": "file:///etc/passwd"}]) | values,
    "history_policy": st.sampled_from(["include", "exclude"]) | scalars,
    "tool_execution": st.fixed_dictionaries(
        {}, optional={"mode": texts, "max_concurrency": numbers, "tool_timeout": numbers}
    )
    | values,
    "callbacks": st.dictionaries(
        st.sampled_from(["before_model", "after_tool", "nope"]) | texts, st.just(print) | scalars
    )
    | scalars,
    "output_key": st.sampled_from(["answer", "temp:x", ""]) | scalars,
    "model": texts | scalars,
    "temperature": numbers | scalars,
    "unknown": scalars,
}


@fuzz(1200)
@given(
    st.sampled_from(["Agent", "user", "", "9x", "a-b", "\ud800"]) | scalars,
    st.fixed_dictionaries({}, optional={key: strategy for key, strategy in config_values.items()})
    | scalars,
)
def test_agent_configs_compile_or_fail_typed(name, config):
    typed("compile_spec", lambda: compile_spec(name, config))


# -- option dicts ---------------------------------------------------------------------------


def options_of(known: list[str]) -> Any:
    return st.dictionaries(st.sampled_from(known) | keys, values | numbers, max_size=4)


RUNNER_KEYS = [
    "run_timeout",
    "max_llm_calls",
    "max_tool_rounds",
    "streaming_mode",
    "max_stream_output_bytes",
    "max_partial_events",
]
CONTEXT_KEYS = [
    "authors",
    "exclude_authors",
    "content_types",
    "since",
    "until",
    "max_bytes",
    "max_tokens",
    "overflow",
    "compressor",
    "include_partial",
    "max_input_events",
]


@fuzz(1500)
@given(
    options_of(RUNNER_KEYS),
    options_of(["retention", "max_buffered_events"]),
    options_of(["overflow", "queue_timeout", "server"]) | scalars,
    options_of(CONTEXT_KEYS) | scalars,
    options_of(["global_limit", "default_agent_limit", "agent_limits", "overflow", "max_queue"])
    | scalars,
    options_of(["id", "agents", "tools", "max_argument_bytes", "max_content_bytes"]) | scalars,
)
def test_option_dicts_decode_or_fail_typed(runner, run, admission, context, controller, policy):
    string_keyed = {key: value for key, value in runner.items() if isinstance(key, str)}
    typed("runner_options", lambda: runner_options(**string_keyed))
    run_keyed = {key: value for key, value in run.items() if isinstance(key, str)}
    typed("run_options", lambda: run_options(**run_keyed))
    typed("runner_admission", lambda: runner_admission(admission))
    typed("context_policy", lambda: ContextPolicy.compile(context))
    typed("admission_config", lambda: admission_config(controller))
    typed("runtime_policy", lambda: RuntimePolicy.compile(policy))


# -- session query cursors ------------------------------------------------------------------


def test_session_cursors_are_accepted_or_refused_typed():
    adk.start()
    sessions = adk.sessions.InMemorySessionService()
    try:
        for n in range(3):
            sessions.create_session("app", "u", f"s{n}")
            sessions.add_event("app", "u", "s0", Event.new("user", "i", content.from_text("x")))
        real = sessions.query_sessions("app", "u", limit=1).next_cursor
        real_events = sessions.query_events("app", "u", "s0", limit=1).next_cursor
        assert real and real_events

        @fuzz(1500)
        @given(
            st.sampled_from([real, real_events]),
            mutations,
            st.text(max_size=40) | st.binary(max_size=20) | scalars | poison_text,
            st.integers(-1, 600) | scalars,
            st.sampled_from(["user", None]) | scalars,
        )
        def cursors(token, cuts, other, limit, author):
            mutated = mutate(token.encode(), cuts).decode("latin-1")
            for cursor in (mutated, other):
                typed(
                    "query_sessions",
                    lambda cursor=cursor: sessions.query_sessions("app", "u", 1, cursor),
                )
                typed(
                    "query_events",
                    lambda cursor=cursor: sessions.query_events(
                        "app", "u", "s0", 1, cursor, author
                    ),
                )
            typed("query_limit", lambda: sessions.query_events("app", "u", "s0", limit))

        cursors()
    finally:
        sessions.close()
        adk.stop()


# -- tool arguments -------------------------------------------------------------------------


@adk.tool
def get_weather(city: str, days: int = 1, tags: list[str] | None = None) -> dict:
    """Weather."""
    return {}


class Booking(adk.Tool):
    name = "book"
    parameters = {
        "type": "object",
        "properties": {
            "when": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
            "seats": {"type": "integer", "minimum": 1, "maximum": 9},
            "tree": {"$ref": "#/$defs/tree"},
        },
        "required": ["when"],
        "additionalProperties": False,
        "$defs": {"tree": {"type": "array", "items": {"$ref": "#/$defs/tree"}}},
    }

    def execute(self, args: dict[str, Any], ctx: Any) -> Any:
        return {}


CATALOG = ToolCatalog([get_weather, Booking()])
argument_keys = st.sampled_from(["city", "days", "tags", "when", "seats", "tree"]) | keys


@fuzz(1500)
@given(
    st.sampled_from(["get_weather", "book", "missing"]),
    st.dictionaries(argument_keys, values, max_size=4) | values,
)
def test_tool_arguments_are_accepted_or_refused_structurally(name, args):
    counted["check_arguments"] = counted.get("check_arguments", 0) + 1
    refusal = CATALOG.check_arguments(name, args)
    if refusal is not None:
        assert refusal["success"] is False
        content.function_response(name, refusal)  # the refusal is valid content


# -- Gemini: deep JSON in a response is malformed_response ----------------------------------


@pytest.mark.parametrize("depth", [70, 100_000])
def test_gemini_deep_json_is_malformed_response(depth):
    pytest.importorskip("google.genai")
    from providers import protocol
    from providers.fake_gemini import FakeGemini, FakeResponse, candidate

    body = msgspec.json.encode(candidate([{"functionCall": {"name": "f", "args": {"x": "HOLE"}}}]))
    body = body.replace(b'"HOLE"', b"[" * depth + b"]" * depth)
    with FakeGemini() as fake:
        fake.enqueue(FakeResponse(raw=body, headers={"Content-Type": "application/json"}))
        config = {
            "provider": "gemini",
            "model": "gemini-3.1-flash-lite",
            "api_key": "AIzaSyTEST-fuzz-0123456789",
            "base_url": fake.base_url,
        }
        with pytest.raises(AdkError) as info:
            protocol.generate(config, [content.from_text("hi")])
    assert info.value.reason == "malformed_response"


def test_the_suite_generated_enough_inputs():
    """Runs last (file order): the fuzz tests above fed at least 10,000 inputs."""
    if _COLLECT:
        pytest.fail(f"undocumented reasons: {sorted(_COLLECT)}")
    total = sum(counted.values())
    if total == 0:
        pytest.skip("run with the whole file")
    assert total >= 10_000, counted
