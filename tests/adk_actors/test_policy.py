"""Runtime policy: fail-closed rules, exact byte budgets, value-free audit records."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors import events
from adk_actors.events import PolicyDecision
from adk_actors.policy import (
    DEFAULT_MAX_ARGUMENT_BYTES,
    DEFAULT_MAX_CONTENT_BYTES,
    MAX_BUDGET_BYTES,
    RuntimePolicy,
    audit_event,
    audit_record,
    canonical_json,
    denial_error,
    is_audit_event,
    measure_content,
    record_digest,
    tool_denial_response,
    verify_record,
)
from providers import content
from providers.errors import AdkError

SECRET = "sk-live-SECRET-9f8e7d6c5b4a"


def compile_policy(**config: Any) -> RuntimePolicy:
    return RuntimePolicy.compile({"id": "test-policy", **config})


def open_policy(**config: Any) -> RuntimePolicy:
    return compile_policy(agents={"allow": "all"}, tools={"allow": "all"}, **config)


def canonical_size(value: Any) -> int:
    return len(
        json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    )


# --- fail closed -----------------------------------------------------------------


def test_empty_policy_denies_every_agent_and_tool() -> None:
    policy = compile_policy()
    agent = policy.check_agent("WeatherAgent")
    tool = policy.check_tool("get_weather", {"city": "Tokyo"})
    for decision in (agent, tool):
        assert not decision.allowed
        assert decision.reason == "not_allowed"
        assert decision.outcome == "deny"
        assert decision.measured_bytes is None
    empty_lists = compile_policy(agents={"allow": [], "deny": []}, tools={})
    assert empty_lists.check_agent("WeatherAgent").reason == "not_allowed"
    assert empty_lists.check_tool("get_weather", {}).reason == "not_allowed"


def test_allow_lists_are_exact_names() -> None:
    policy = compile_policy(agents={"allow": ["Writer"]}, tools={"allow": ["weather"]})
    assert policy.check_agent("Writer").allowed
    assert policy.check_agent("writer").reason == "not_allowed"
    assert policy.check_agent("Writer2").reason == "not_allowed"
    assert policy.check_tool("weather", {}).allowed
    assert policy.check_tool("weather_admin", {}).reason == "not_allowed"
    # only the bare string "all" selects everything; inside a list it is a name
    literal = compile_policy(agents={"allow": ["all"]})
    assert literal.check_agent("all").allowed
    assert literal.check_agent("Writer").reason == "not_allowed"


def test_deny_beats_allow() -> None:
    policy = compile_policy(
        agents={"allow": ["Writer", "Legacy"], "deny": ["Legacy"]},
        tools={"allow": "all", "deny": ["shell"]},
    )
    assert policy.check_agent("Writer").allowed
    assert policy.check_agent("Legacy").reason == "explicitly_denied"
    assert policy.check_tool("weather", {}).allowed
    shell = policy.check_tool("shell", {"cmd": "ls"})
    assert (shell.allowed, shell.reason) == (False, "explicitly_denied")
    everything_denied = compile_policy(tools={"allow": "all", "deny": "all"})
    assert everything_denied.check_tool("weather", {}).reason == "explicitly_denied"


def test_denied_subject_is_never_measured() -> None:
    policy = compile_policy(tools={"allow": ["weather"], "deny": ["shell"]}, max_argument_bytes=1)
    huge = {"blob": "x" * 10_000}
    for name in ("shell", "unknown_tool"):
        decision = policy.check_tool(name, huge)
        assert not decision.allowed
        assert decision.measured_bytes is None
        assert decision.reason in {"explicitly_denied", "not_allowed"}
    # not even values that could not be measured at all are looked at
    assert policy.check_tool("shell", {"f": object()}).reason == "explicitly_denied"


def test_malformed_subjects_and_values_are_denied_not_raised() -> None:
    policy = open_policy()
    for bad in (None, "", 42, "x" * 257, "\ud800"):
        decision = policy.check_tool(bad, {})
        assert (decision.allowed, decision.reason, decision.subject) == (
            False,
            "invalid_subject",
            "<invalid>",
        )
        assert decision.measured_bytes is None
    for bad_args in ([1, 2], "text", {"n": float("nan")}, {"o": object()}, {1: "int key"}):
        decision = policy.check_tool("weather", bad_args)
        assert (decision.allowed, decision.reason, decision.measured_bytes) == (
            False,
            "invalid_arguments",
            None,
        )
    deep: Any = "leaf"
    for _ in range(100):
        deep = [deep]
    assert policy.check_tool("weather", {"deep": deep}).reason == "invalid_arguments"
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert policy.check_content("tool_result", cyclic).reason == "invalid_content"
    assert policy.check_content("input", "\ud800").reason == "invalid_content"
    assert policy.check_content("input", b"\xff\xfe").reason == "invalid_content"
    assert policy.check_content("input", {1, 2}).reason == "invalid_content"


def test_unknown_content_operation_is_a_programming_error() -> None:
    with pytest.raises(AdkError) as info:
        open_policy().check_content("model_thoughts", "x")
    assert info.value.reason == "invalid_policy_operation"


# --- byte budgets ----------------------------------------------------------------


def test_defaults_and_ceiling() -> None:
    policy = compile_policy()
    assert policy.max_argument_bytes == DEFAULT_MAX_ARGUMENT_BYTES == 64 * 1024
    assert policy.max_content_bytes == DEFAULT_MAX_CONTENT_BYTES == 1024 * 1024
    top = compile_policy(max_argument_bytes=MAX_BUDGET_BYTES, max_content_bytes=0)
    assert (top.max_argument_bytes, top.max_content_bytes) == (MAX_BUDGET_BYTES, 0)


def test_argument_budget_boundary_with_multibyte_utf8() -> None:
    args = {"z": 1, "city": "東京 ☀️", "a": [True, None, 1.5]}
    size = len(canonical_json(args))
    assert size == canonical_size(args)
    assert size > len(json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
    exact = open_policy(max_argument_bytes=size).check_tool("weather", args)
    assert (exact.allowed, exact.reason, exact.measured_bytes, exact.limit_bytes) == (
        True,
        "allowed",
        size,
        size,
    )
    short = open_policy(max_argument_bytes=size - 1).check_tool("weather", args)
    assert (short.allowed, short.reason, short.measured_bytes, short.limit_bytes) == (
        False,
        "argument_budget_exceeded",
        size,
        size - 1,
    )


def test_default_argument_budget_boundary() -> None:
    overhead = len(canonical_json({"v": ""}))
    fits = {"v": "é" * ((DEFAULT_MAX_ARGUMENT_BYTES - overhead) // 2)}
    assert len(canonical_json(fits)) == DEFAULT_MAX_ARGUMENT_BYTES
    assert open_policy().check_tool("weather", fits).allowed
    over = {"v": fits["v"] + "a"}
    assert open_policy().check_tool("weather", over).reason == "argument_budget_exceeded"


def test_content_budget_boundary_with_multibyte_utf8() -> None:
    text = "Grüße, 世界 🌍"
    size = len(text.encode("utf-8"))
    assert size > len(text)
    for operation in ("input", "tool_result", "final_output"):
        exact = open_policy(max_content_bytes=size).check_content(operation, text)
        assert (exact.allowed, exact.measured_bytes, exact.operation) == (True, size, operation)
        short = open_policy(max_content_bytes=size - 1).check_content(operation, text)
        assert (short.allowed, short.reason, short.measured_bytes) == (
            False,
            "content_budget_exceeded",
            size,
        )
    assert open_policy(max_content_bytes=0).check_content("input", "").allowed
    assert open_policy(max_content_bytes=size).check_content("input", text.encode()).allowed


def test_structured_content_is_measured_as_canonical_json() -> None:
    message = content.new(
        [content.text("héllo"), content.function_call("f", {"b": 1, "a": "ü"})], role="model"
    )
    size = measure_content(message)
    assert size == canonical_size(content.to_dict(message))
    assert size == measure_content(content.to_dict(message))
    assert open_policy(max_content_bytes=size).check_content("final_output", message).allowed
    short = open_policy(max_content_bytes=size - 1).check_content("final_output", message)
    assert short.reason == "content_budget_exceeded"
    result = {"forecast": "sunny", "temp": 21}
    decision = open_policy().check_content("tool_result", result, subject="weather")
    assert (decision.subject, decision.measured_bytes) == ("weather", canonical_size(result))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


def _reordered(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _reordered(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(item) for item in value]
    return value


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_canonical_measurement_ignores_key_order(args: dict[str, Any]) -> None:
    reordered = _reordered(args)
    assert canonical_json(reordered) == canonical_json(args)
    assert msgspec.json.decode(canonical_json(args)) == args
    policy = open_policy()
    first = policy.check_tool("weather", args)
    second = policy.check_tool("weather", reordered)
    assert first.measured_bytes == second.measured_bytes == len(canonical_json(args))
    assert measure_content(args) == measure_content(reordered)


# --- config ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"id": "p", "agent": {}, "budget": 1}, ["'agent'", "'budget'"]),
        ({"id": "p", "tools": {"allowed": ["x"]}}, ["'tools.allowed'"]),
        ({"id": "p", "agents": {"allow": [], "except": []}}, ["'agents.except'"]),
        (
            {"id": "p", "budget": 1, "agents": {"alow": []}, "tools": {"allowed": []}},
            ["'budget'", "'agents.alow'", "'tools.allowed'"],
        ),
    ],
)
def test_unknown_keys_are_named(config: dict[str, Any], named: list[str]) -> None:
    with pytest.raises(AdkError) as info:
        RuntimePolicy.compile(config)
    assert info.value.reason == "invalid_runtime_policy"
    for key in named:
        assert key in str(info.value)


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({}, "'id' is required"),
        ({"id": ""}, "'id'"),
        ({"id": 7}, "'id'"),
        ({"id": "x" * 129}, "'id'"),
        ({"id": "p", "tools": ["weather"]}, "'tools'"),
        ({"id": "p", "tools": {"allow": "weather"}}, "'tools.allow'"),
        ({"id": "p", "tools": {"allow": "*"}}, "'tools.allow'"),
        ({"id": "p", "tools": {"allow": ["*"]}}, "wildcards are not supported"),
        ({"id": "p", "tools": {"deny": ["get_*"]}}, "'tools.deny[0]'"),
        ({"id": "p", "agents": {"allow": ["ok", 3]}}, "'agents.allow[1]'"),
        ({"id": "p", "agents": {"allow": [""]}}, "'agents.allow[0]'"),
        ({"id": "p", "max_argument_bytes": -1}, "'max_argument_bytes'"),
        ({"id": "p", "max_argument_bytes": MAX_BUDGET_BYTES + 1}, "'max_argument_bytes'"),
        ({"id": "p", "max_content_bytes": 1.5}, "'max_content_bytes'"),
        ({"id": "p", "max_content_bytes": True}, "'max_content_bytes'"),
        ({"id": "p", "max_content_bytes": "1024"}, "'max_content_bytes'"),
        ("not a mapping", "mapping"),
        ({"id": "p", 1: 2}, "string keys"),
    ],
)
def test_invalid_values_are_refused(config: Any, fragment: str) -> None:
    with pytest.raises(AdkError) as info:
        RuntimePolicy.compile(config)
    assert info.value.reason == "invalid_runtime_policy"
    assert fragment in str(info.value)


def test_compiled_policy_is_frozen_and_normalized() -> None:
    policy = RuntimePolicy.compile(
        {"id": "p", "agents": {"allow": ("b", "a", "a")}, "tools": {"allow": "all"}}
    )
    with pytest.raises(AttributeError):
        policy.id = "other"  # type: ignore[misc]
    assert RuntimePolicy.compile(policy) is policy
    assert policy.to_config() == {
        "id": "p",
        "agents": {"allow": ["a", "b"], "deny": []},
        "tools": {"allow": "all", "deny": []},
        "max_argument_bytes": DEFAULT_MAX_ARGUMENT_BYTES,
        "max_content_bytes": DEFAULT_MAX_CONTENT_BYTES,
    }
    again = RuntimePolicy.compile(policy.to_config())
    assert again == policy
    renamed = RuntimePolicy.compile({**policy.to_config(), "id": "renamed"})
    assert renamed.fingerprint == policy.fingerprint  # the fingerprint is the behaviour
    stricter = RuntimePolicy.compile({**policy.to_config(), "max_content_bytes": 1})
    assert stricter.fingerprint != policy.fingerprint
    json.dumps(policy.describe())


# --- audit -----------------------------------------------------------------------


def test_audit_record_is_json_safe_and_value_free() -> None:
    policy = compile_policy(tools={"allow": ["publish"]}, max_argument_bytes=64)
    args = {"api_key": SECRET, "note": SECRET * 3}
    decision = policy.check_tool("publish", args)
    assert decision.reason == "argument_budget_exceeded"
    record = audit_record(decision)
    builtins = msgspec.to_builtins(record)
    assert json.loads(json.dumps(builtins)) == builtins
    assert builtins["decision_id"] and len(builtins["digest"]) == 64
    assert {key: builtins[key] for key in ("policy_id", "operation", "subject", "outcome")} == {
        "policy_id": "test-policy",
        "operation": "tool_call",
        "subject": "publish",
        "outcome": "deny",
    }
    assert (builtins["reason"], builtins["measured_bytes"]) == (
        "argument_budget_exceeded",
        len(canonical_json(args)),
    )
    event = audit_event("inv-1", decision)
    encoded = events.encode(event)
    assert SECRET.encode() not in encoded
    assert b"api_key" not in encoded and b"note" not in encoded
    assert b"sk-live" not in msgspec.json.encode(decision)
    allowed = policy.check_tool("publish", {"api_key": SECRET})
    assert allowed.allowed
    assert SECRET.encode() not in events.encode(audit_event("inv-1", allowed))


def test_audit_event_round_trips_and_is_recognizable() -> None:
    decision = compile_policy().check_agent("WeatherAgent")
    event = audit_event("inv-7", decision)
    assert (event.author, event.content, event.invocation_id) == ("system", None, "inv-7")
    assert is_audit_event(event)
    (record,) = event.actions.policy_decisions
    assert isinstance(record, PolicyDecision)
    assert (record.outcome, record.reason, record.measured_bytes) == ("deny", "not_allowed", None)
    decoded = events.decode(events.encode(event))
    assert decoded == event
    assert verify_record(decoded.actions.policy_decisions[0])
    assert b"measured_bytes" not in events.encode(event)  # not measured: absent, not null
    with pytest.raises(AttributeError):
        event.author = "user"  # type: ignore[misc]
    with pytest.raises(AdkError) as info:
        audit_event("", decision)
    assert info.value.reason == "invalid_invocation_id"


def test_digest_is_deterministic_and_detects_changes() -> None:
    policy = open_policy(max_argument_bytes=100)
    first = audit_record(policy.check_tool("weather", {"b": 1, "a": 2}))
    second = audit_record(policy.check_tool("weather", {"a": 2, "b": 1}))
    assert first.decision_id != second.decision_id
    assert first.digest == second.digest == record_digest(first)
    assert verify_record(first)
    tampered = msgspec.structs.replace(first, outcome="deny")
    assert not verify_record(tampered)
    other = audit_record(policy.check_tool("weather", {"a": 22, "b": 1}))
    assert other.digest != first.digest


def test_tool_denial_response_is_structural() -> None:
    policy = compile_policy(tools={"allow": ["publish"], "deny": ["shell"]}, max_content_bytes=4)
    denied = policy.check_tool("shell", {"cmd": SECRET})
    response = tool_denial_response(denied)
    assert response == {
        "success": False,
        "error": {"kind": "runtime_policy_denied", "reason": "explicitly_denied", "tool": "shell"},
    }
    assert SECRET not in json.dumps(response)
    result = policy.check_content("tool_result", {"out": SECRET}, subject="publish")
    assert tool_denial_response(result)["error"] == {
        "kind": "runtime_policy_denied",
        "reason": "content_budget_exceeded",
        "tool": "publish",
    }
    with pytest.raises(AdkError):
        tool_denial_response(policy.check_tool("publish", {}))
    with pytest.raises(AdkError):
        tool_denial_response(policy.check_agent("Writer"))


def test_denial_error_names_no_values() -> None:
    policy = compile_policy(max_content_bytes=3)
    error = denial_error(policy.check_content("input", SECRET, subject="Writer"))
    assert error.reason == "runtime_policy_denied"
    assert "content_budget_exceeded" in str(error) and SECRET not in str(error)
    with pytest.raises(AdkError):
        denial_error(open_policy().check_agent("Writer"))


def test_concurrent_checks_share_one_policy() -> None:
    policy = compile_policy(tools={"allow": ["weather"]}, max_argument_bytes=50)
    barrier = threading.Barrier(8)

    def work(index: int) -> tuple[bool, int | None]:
        barrier.wait()
        decision = policy.check_tool("weather", {"i": index, "pad": "x" * (index * 5)})
        return decision.allowed, decision.measured_bytes

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(8)))
    expected = [len(canonical_json({"i": i, "pad": "x" * (i * 5)})) for i in range(8)]
    assert [size for _, size in results] == expected
    assert [ok for ok, _ in results] == [size <= 50 for size in expected]
