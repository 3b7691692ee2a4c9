"""Strict body reading (`wire.loads`) and the whole-document bounds of the strict parse:
UTF-8 only, no duplicate member, no NaN, bounded bytes, depth and value count (review
W1, W3, W4), and typed refusals for lone surrogates in member names and enums (W15)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.a2a import errors, wire
from adk_actors.a2a.card import validate_card
from adk_actors.a2a.errors import RpcError
from providers.errors import AdkError

BIG = 64 << 20


def refusal(body: bytes | str, **bounds: int) -> RpcError:
    with pytest.raises(RpcError) as caught:
        wire.loads(body, **{"max_bytes": BIG, **bounds})
    return caught.value


def reason_of(error: RpcError) -> str:
    assert error.data is not None
    reason = error.data["reason"]
    assert isinstance(reason, str)
    return reason


def values_in(value: Any) -> int:
    """The JSON values in `value`, the root included (what `max_nodes` counts)."""
    if isinstance(value, dict):
        return 1 + sum(values_in(item) for item in value.values())
    if isinstance(value, list):
        return 1 + sum(values_in(item) for item in value)
    return 1


def test_loads_reads_utf8_json() -> None:
    body = '{"a":[1,2.5,null,true,"é ✓ 😀"],"b":{"c":"x,[{\\"}]"}}'
    expected = json.loads(body)
    assert wire.loads(body.encode(), max_bytes=1024) == expected
    assert wire.loads(body, max_bytes=1024) == expected  # already-decoded text (SSE data)
    assert wire.loads(b" [ ] ", max_bytes=5) == []


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("\ufeff{}".encode(), "byte order mark"),
        ('{"id":1}'.encode("utf-16"), "not UTF-8"),
        ('{"id":1}'.encode("utf-16-le"), "not JSON"),
        ('{"id":1}'.encode("utf-32"), "not UTF-8"),
        (b'{"a":"\xff"}', "not UTF-8"),
        (b'{"a":"\xed\xa0\x80"}', "not UTF-8"),
        ('{"a":"\ud800"}', "not UTF-8"),
    ],
)
def test_loads_refuses_what_is_not_utf8(body: bytes | str, why: str) -> None:
    """Review W4: RFC 8259 §8.1, JSON between systems is UTF-8; UTF-16/32 bodies (with or
    without a byte order mark) and a UTF-8 BOM are -32700, not auto-detected."""
    error = refusal(body)
    assert error.code == errors.PARSE_ERROR
    assert error.message == "invalid JSON payload"
    assert why in reason_of(error)


@pytest.mark.parametrize(
    "body",
    [
        b'{"role":"ROLE_AGENT","role":"ROLE_USER"}',
        b'{"params":{"message":{"parts":[{"text":"a","text":"b"}]}}}',
        b'[{"a":1},{"b":{"c":1,"c":1}}]',
    ],
)
def test_loads_refuses_duplicate_member_names(body: bytes) -> None:
    """Review W3: a member name twice in one object is -32700 (a first-wins gateway and a
    last-wins parser would not see the same request), at any depth."""
    error = refusal(body)
    assert error.code == errors.PARSE_ERROR
    assert "appears twice" in reason_of(error)
    assert wire.loads(b'{"a":{"a":1},"b":[{"a":2},{"a":3}]}', max_bytes=100)["a"] == {"a": 1}


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"[NaN]", "finite"),
        (b'{"a":Infinity}', "finite"),
        (b"[-Infinity]", "finite"),
        (b"[1e999]", "finite"),
        (b"[-1e400]", "finite"),
        (b"[1,]", "not JSON"),
        (b"", "not JSON"),
        (b"{", "not JSON"),
        (b"[" + b"1" * 5000 + b"]", "not JSON"),
    ],
)
def test_loads_refuses_non_json_numbers_and_syntax(body: bytes, why: str) -> None:
    error = refusal(body)
    assert error.code == errors.PARSE_ERROR
    assert why in reason_of(error)


def test_loads_bounds_bytes_and_depth() -> None:
    assert refusal(b"[1]", max_bytes=2).code == errors.INVALID_REQUEST
    assert wire.loads(b"[1]", max_bytes=3) == [1]
    deepest = b"[" * wire.MAX_DOCUMENT_DEPTH + b"]" * wire.MAX_DOCUMENT_DEPTH
    assert wire.loads(deepest, max_bytes=BIG) is not None
    for deep in (b"[" + deepest + b"]", b'{"a":' * 65 + b"1" + b"}" * 65, b"[" * 200_000):
        error = refusal(deep)
        assert error.code == errors.INVALID_REQUEST, deep[:10]


@pytest.mark.parametrize(
    "shape",
    [
        lambda n: [0] * (n - 1),
        lambda n: [[] for _ in range(n - 1)],
        lambda n: [{} for _ in range(n - 1)],
        lambda n: [""] * (n - 1),
        lambda n: {f"k{i}": None for i in range(n - 1)},
        lambda n: [{"a": [1, 2, 3]} for _ in range((n - 1) // 5)] + [0] * ((n - 1) % 5),
    ],
)
def test_loads_bounds_the_value_count_exactly(shape: Any) -> None:
    """Review W1: a body holds at most `max_nodes` JSON values (objects, arrays, scalars,
    the root included); one more is -32600, whatever the shape, and counted from the bytes
    so a refusal never builds the value."""
    limit = 2000
    fits = shape(limit)
    assert values_in(fits) == limit
    for body in (json.dumps(fits).encode(), json.dumps(fits, indent=2).encode()):
        assert wire.loads(body, max_bytes=BIG, max_nodes=limit) == fits
        error = refusal(body, max_nodes=limit - 1)
        assert error.code == errors.INVALID_REQUEST
        assert f"at most {limit - 1} values" in reason_of(error)


def test_loads_default_value_bound_refuses_a_megabyte_of_small_values() -> None:
    """Review W1 (repro_wire_3): 250 lists of 1000 ints fit every per-node bound but are
    250k values; refused as a whole body before any protobuf parse."""
    data = [list(range(1000))] * 250
    request = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": data}]}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": request})
    error = refusal(body.encode())
    assert error.code == errors.INVALID_REQUEST
    assert f"at most {wire.MAX_JSON_NODES} values" in reason_of(error)


def test_commas_and_brackets_inside_strings_are_not_values() -> None:
    text = 'a,b,[c],{d}, \\" , \\\\' * 5000
    body = json.dumps({"jsonrpc": "2.0", "params": {"text": text}}).encode()
    assert wire.loads(body, max_bytes=BIG, max_nodes=5)["params"]["text"] == text


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from('ab,[]{}:"\\ é\n\t')),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.text(alphabet=st.sampled_from('k,[{"\\'), max_size=4), children)
    ),
    max_leaves=40,
)


@given(json_values)
@settings(max_examples=150, deadline=None)
def test_loads_agrees_with_json_and_counts_exactly(value: Any) -> None:
    """For any JSON value (strings full of commas, brackets, quotes and escapes), `loads`
    gives what `json.loads` gives, and its value count is exact: `values_in` fits, one
    fewer is refused."""
    body = json.dumps(value, ensure_ascii=False).encode()
    count = values_in(value)
    assert wire.loads(body, max_bytes=BIG, max_nodes=count) == value
    assert refusal(body, max_nodes=count - 1).code == errors.INVALID_REQUEST


# -- the strict parse's free-JSON budget (W1) ------------------------------------------


def send_params(**message: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "a"}]}
    body.update(message)
    return {"message": body}


def test_free_json_values_are_bounded_per_request() -> None:
    """Review W1: data and metadata share one budget of `MAX_JSON_NODES` free-JSON values
    per parsed message (each within the per-node bounds); past it -32602 names where."""
    assert wire.MAX_JSON_NODES == 10_000
    metadata: dict[str, Any] = {f"k{i}": [0] * 999 for i in range(9)}
    metadata["last"] = [0] * 998  # 1 object + 10 lists + 9 * 999 + 998 = 10 000 values
    assert values_in(metadata) == wire.MAX_JSON_NODES
    assert wire.parse_request("SendMessage", send_params(metadata=metadata))
    metadata["last"].append(0)
    with pytest.raises(RpcError) as caught:
        wire.parse_request("SendMessage", send_params(metadata=metadata))
    assert caught.value.code == errors.INVALID_PARAMS
    assert "free JSON holds at most" in reason_of(caught.value)
    assert "SendMessageRequest.message.metadata" in reason_of(caught.value)
    spread = send_params(
        parts=[{"data": list(range(900))} for _ in range(12)], metadata={"k": list(range(10))}
    )
    with pytest.raises(RpcError) as spread_refused:
        wire.parse_request("SendMessage", spread)
    assert "free JSON holds at most" in reason_of(spread_refused.value)


def test_a_peer_answer_with_too_much_free_json_is_a_typed_error() -> None:
    """Review W1 addendum: the client's `wire.parse` of a peer's Task shares the bound."""
    task = {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}}
    task["metadata"] = {f"k{i}": [0] * 500 for i in range(100)}
    with pytest.raises(AdkError) as caught:
        wire.parse(pb.Task, task, reason="a2a_invalid_response")
    assert caught.value.reason == ("a2a_invalid_response", "invalid_shape")
    assert "free JSON holds at most" in str(caught.value.detail)


# -- lone surrogates reach no descriptor map (W15) -------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "why"),
    [
        ("ListTasks", {"\ud800": 1}, "unknown member"),
        ("SendMessage", {**send_params(), "\udc00x": 1}, "unknown member"),
        ("SendMessage", send_params(role="\ud800"), "not one of"),
        ("ListTasks", {"status": "\udc00"}, "not one of"),
        ("ListTasks", {"status": "TASK_STATE_\u00e9"}, "not one of"),
    ],
)
def test_lone_surrogate_names_and_enums_are_invalid_params(
    method: str, params: dict[str, Any], why: str
) -> None:
    """Review W15: a member name or enum value with a lone surrogate was a SystemError (a
    upb map lookup left a UnicodeEncodeError pending), answered -32603; now -32602."""
    with pytest.raises(RpcError) as caught:
        wire.parse_request(method, params)
    assert caught.value.code == errors.INVALID_PARAMS
    assert why in reason_of(caught.value)


def test_lone_surrogates_in_a_peers_answer_are_typed_errors() -> None:
    """Review W15 (repro_wire_13): client side the same values are `AdkError`s."""
    for task in (
        {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}, "\ud800": 1},
        {"id": "t", "status": {"state": "\ud800"}},
    ):
        with pytest.raises(AdkError) as caught:
            wire.parse(pb.Task, task, reason="a2a_invalid_response")
        assert caught.value.reason == ("a2a_invalid_response", "invalid_shape")
    scheme_named = {"name": "x", "securitySchemes": {"\ud800": {"bogus": 1}}}
    with pytest.raises(AdkError) as in_a_map:
        wire.parse(pb.AgentCard, scheme_named, reason="a2a_invalid_agent_card")
    assert "securitySchemes.\\ud800: unknown member 'bogus'" in str(in_a_map.value.detail)
    str(in_a_map.value.detail).encode("utf-8")  # printable: logs and JSON take it
    card = {"name": "x", "\ud800": 1}
    with pytest.raises(AdkError) as refused_card:
        validate_card(card, card_url="https://agent.example/")
    assert refused_card.value.reason == ("a2a_invalid_agent_card", "invalid_shape")
