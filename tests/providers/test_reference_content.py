"""Content rules taken from the reference implementation's tests (erlang_adk 0.7.0)."""

from __future__ import annotations

import msgspec
import pytest

from providers import content
from providers.content import (
    Content,
    ContentLimits,
    FunctionCallPart,
    FunctionResponsePart,
    TextPart,
)
from providers.errors import AdkError, prune


def reason(fn):
    with pytest.raises(AdkError) as info:
        fn()
    return info.value.reason


def message_dict(**extra):
    return {"role": "user", "parts": [{"type": "text", "text": "x"}], **extra}


def test_unknown_content_and_part_keys_are_rejected():
    """Follows erlang_adk test/core/adk_content_test.erl:
    unknown_versions_fields_and_part_types_are_rejected_test (unknown keys are
    ``{invalid_content_part, Path, {unknown_keys, Keys}}``; here without the path)."""
    assert reason(lambda: content.validate(message_dict(unsafe=True, zeta=1))) == (
        "invalid_content_part",
        ("unknown_keys", ["unsafe", "zeta"]),
    )
    part = {"type": "function_call", "name": "f", "args": {}, "injected": 1, "id": "c1"}
    assert reason(lambda: content.validate({"role": "model", "parts": [part]})) == (
        "invalid_content_part",
        ("unknown_keys", ["injected"]),
    )
    encoded = msgspec.json.encode(message_dict(unsafe=True))
    assert reason(lambda: content.decode(encoded)) == (
        "invalid_content_part",
        ("unknown_keys", ["unsafe"]),
    )
    # the detail names keys, never values
    with pytest.raises(AdkError) as info:
        content.validate(message_dict(secret_extension="AIzaSECRET"))
    assert "AIzaSECRET" not in str(info.value)
    # every known key is still accepted, and the dict form round-trips exactly
    full = content.new(
        [
            TextPart("t", thought=True, thought_signature="c2ln"),
            content.function_call("f", {"a": 1}, id="c1", thought_signature="c2ln"),
            content.function_response("f", {"b": 2}, id="c1"),
        ],
        role="model",
    )
    assert content.validate(content.to_dict(full)) == full


@pytest.mark.parametrize(
    "payload",
    [
        {1: "an int key"},
        {"nested": {("a", "tuple"): "key"}},
        {"nested": [{True: "a bool key"}]},
        {"ratio": float("nan")},
        {"ratio": float("inf")},
        {"tags": {"a", "b"}},
        {"blob": b"bytes"},
    ],
    ids=["int-key", "tuple-key", "bool-key-in-list", "nan", "inf", "set", "bytes"],
)
def test_non_canonical_function_payloads_are_rejected(payload):
    """Follows erlang_adk test/core/adk_content_test.erl:
    non_json_function_payload_is_rejected_test (a payload that is JSON only after a
    change, such as an atom key, is ``not_canonical_json``)."""
    assert reason(lambda: content.function_call("f", payload)) == "not_canonical_json"
    assert reason(lambda: content.function_response("f", payload)) == "not_canonical_json"
    built = Content("model", (FunctionCallPart("f", payload),))  # bypassing the constructor
    assert reason(lambda: content.validate(built)) == "not_canonical_json"


def test_non_json_payloads_and_string_keyed_dict_form():
    """Follows erlang_adk test/core/adk_content_test.erl:
    non_json_function_payload_is_rejected_test (a value with no JSON form, there a pid,
    is refused with a typed error)."""
    assert reason(lambda: content.function_call("f", {"pid": object()})) == (
        "invalid_function_payload"
    )
    as_dict = {"role": "model", "parts": [{"type": "function_call", "name": "f", "args": {1: 2}}]}
    assert reason(lambda: content.validate(as_dict)) == "not_canonical_json"
    # tuples are JSON arrays: accepted, and payloads are kept as given
    call = content.function_call("f", {"point": (1, 2), "deep": [{"ok": (3,)}]})
    assert call.args == {"point": (1, 2), "deep": [{"ok": (3,)}]}
    assert content.function_response("f", {"n": 1.5, "none": None})


def test_limits_contract_is_strict():
    """Follows erlang_adk test/core/adk_content_test.erl: limits_contract_is_strict_test
    (``{invalid_content_limits, max_inline_exceeds_total}``, checked at construction)."""
    assert reason(lambda: ContentLimits(max_inline_bytes=5, max_inline_total_bytes=4)) == (
        "invalid_content_limits",
        "max_inline_exceeds_total",
    )
    assert reason(lambda: ContentLimits(max_inline_total_bytes=1 << 20)) == (
        "invalid_content_limits",
        "max_inline_exceeds_total",
    )  # the default inline limit (10 MiB) is above this total
    assert reason(lambda: ContentLimits(max_parts=0)) == "invalid_content_limits"
    assert reason(lambda: ContentLimits(max_parts=65)) == "content_limit_above_ceiling"
    equal = ContentLimits(max_inline_bytes=4, max_inline_total_bytes=4)
    assert equal.checked() is equal
    assert reason(lambda: msgspec.structs.replace(equal, max_inline_bytes=5)) == (
        "invalid_content_limits",
        "max_inline_exceeds_total",
    )


@pytest.mark.parametrize(
    "build",
    [
        lambda: content.text("bad \ud800"),
        lambda: content.new([TextPart("ok", thought_signature="\udfff")]),
        lambda: content.function_call("\ud800tool"),
        lambda: content.function_call("f", id="\ud800"),
        lambda: content.function_call("f", thought_signature="\ud800"),
        lambda: content.function_call("f", {"city": "\ud800"}),
        lambda: content.function_call("f", {"\ud800": 1}),
        lambda: content.function_response("f", {"deep": [{"k": "\udc80"}]}),
        lambda: content.file_data("https://example.test/\ud800", "image/png"),
        lambda: content.validate(Content("user", (TextPart("\ud800"),))),
        lambda: content.validate({"role": "user", "parts": [{"type": "text", "text": "\ud800"}]}),
        lambda: content.validate(Content("tool", (FunctionResponsePart("f", {"\ud800": 1}),))),
    ],
    ids=[
        "text",
        "text-signature",
        "call-name",
        "call-id",
        "call-signature",
        "arg-value",
        "arg-key",
        "response-nested",
        "uri",
        "validate-struct",
        "validate-dict",
        "validate-response-key",
    ],
)
def test_lone_surrogates_are_invalid_utf8(build):
    """Follows erlang_adk test/core/adk_event_test.erl: invalid_utf8_is_rejected_before_jsx_test
    (invalid UTF-8 is a typed ``invalid_utf8``, never an encoder crash)."""
    assert reason(build) == "invalid_utf8"


def test_canonical_prunes_and_without_secrets_keeps_the_parts():
    """Follows erlang_adk test/sessions/adk_session_query_test.erl:
    filtered_events_and_state_are_json_safe (credential-named keys are removed, at any
    depth, from tool arguments and results: one rule, `prune`)."""
    call = content.function_call("login", {"user": "ada", "auth": {"api_key": "k", "n": 1}})
    answer = content.function_response("login", {"access_token": "t", "value": 42})
    message = content.new(["a", "b", call, answer], role="model")
    shown = content.without_secrets(message)
    assert [type(part) for part in shown.parts] == [type(part) for part in message.parts]
    assert shown.parts[2].args == {"user": "ada", "auth": {"n": 1}}
    assert shown.parts[3].response == {"value": 42}
    assert message.parts[2].args["auth"]["api_key"] == "k"  # the original is untouched
    canonical = content.canonical(message)
    assert canonical.parts[0] == TextPart("ab") and canonical.parts[1:] == shown.parts[2:]
    clean = content.from_text("nothing secret")
    assert content.without_secrets(clean) is clean and content.canonical(clean) is clean
    value = {"keep": [1, {"x": 2}], "t": (1,)}
    assert prune(value) is value
    assert prune({"a": [{"Authorization": "x", "b": (1, {"token": 2})}]}) == {"a": [{"b": (1, {})}]}
