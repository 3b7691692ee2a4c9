"""The content model: constructors, limits, URI and MIME rules, exact JSON round trips."""

from __future__ import annotations

import base64

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from providers import content
from providers.content import Content, ContentLimits, FunctionCallPart, InlineDataPart, TextPart
from providers.errors import AdkError, redact

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNk+A8AAQUBAScY42YAAAAASUVORK5CYII="
)


def reason(fn) -> str:
    with pytest.raises(AdkError) as info:
        fn()
    return info.value.reason


def test_constructors_and_canonical_base64():
    prompt = content.text("Describe this image briefly.")
    image = content.inline_data("image/png", PNG)
    assert image.data == base64.b64encode(PNG).decode()
    message = content.new([prompt, image])
    assert message == Content("user", (TextPart("Describe this image briefly."), image))
    assert content.validate(message) is message
    assert content.new(["plain"], role="model").text_value() == "plain"


def test_json_round_trip_is_exact():
    message = content.new(
        [
            content.text("thinking", thought=True),
            TextPart("Hello", thought_signature="c2ln"),
            content.function_call(
                "get_weather", {"city": "Paris"}, id="call_1", thought_signature="c2ln"
            ),
            content.function_response("get_weather", {"temp": 21}, id="call_1"),
            content.file_data("gs://bucket/a.pdf", "application/pdf"),
            content.inline_data("image/png", PNG),
        ],
        role="model",
    )
    encoded = content.encode(message)
    assert content.decode(encoded) == message
    assert content.encode(content.decode(encoded)) == encoded
    assert content.validate(content.to_dict(message)) == message
    assert message.text_value() == "Hello"
    assert message.text_value(include_thoughts=True) == "thinkingHello"


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("https://example.com/a.pdf", None),
        ("gs://bucket/object", None),
        ("http://example.com/a.pdf", "unsupported_uri_scheme"),
        ("file:///etc/passwd", "unsupported_uri_scheme"),
        ("data:text/plain;base64,aGk=", "unsupported_uri_scheme"),
        ("/relative/path", "unsupported_uri_scheme"),
        ("https://user:pw@example.com/a", "uri_credentials_not_allowed"),
        ("https://example.com/a#frag", "uri_fragment_not_allowed"),
        ("https:///nohost", "invalid_uri"),
        ("https://example.com/" + "a" * 5000, "uri_too_long"),
    ],
)
def test_file_uri_rules(uri, expected):
    if expected is None:
        assert content.file_data(uri, "application/pdf").file_uri == uri
    else:
        assert reason(lambda: content.file_data(uri, "application/pdf")) == expected


@pytest.mark.parametrize("mime", ["IMAGE/PNG", "image/png; charset=x", "image", "", "image/png "])
def test_mime_types_are_lowercase_without_parameters(mime):
    assert reason(lambda: content.inline_data(mime, b"x")) == "invalid_mime_type"


def test_limits_and_their_ceilings():
    assert reason(lambda: content.new(["x"] * 65)) == "too_many_parts"
    assert reason(lambda: content.text("x" * ((1 << 20) + 1))) == "text_part_too_large"
    assert (
        reason(lambda: content.inline_data("image/png", b"x" * ((10 << 20) + 1)))
        == "inline_data_too_large"
    )
    big = content.inline_data("image/png", b"x" * (8 << 20))
    assert reason(lambda: content.new([big, big])) == "inline_data_total_too_large"
    assert (
        reason(lambda: content.function_call("f", {"a": "x" * (1 << 20)}))
        == "function_payload_too_large"
    )
    small = ContentLimits(max_parts=2, max_text_bytes=10)
    assert reason(lambda: content.new(["a", "b", "c"], limits=small)) == "too_many_parts"
    assert (
        reason(lambda: content.validate(content.from_text("x" * 11), limits=small))
        == "text_part_too_large"
    )
    assert reason(
        lambda: content.validate(content.from_text("x"), limits=ContentLimits(max_parts=65))
    ) == ("content_limit_above_ceiling")


def test_structural_errors_never_echo_values():
    bad = {"role": "user", "parts": [{"type": "text", "text": 42, "secret": "AIzaSECRET"}]}
    with pytest.raises(AdkError) as info:
        content.validate(bad)
    assert info.value.reason == "invalid_content" and "AIzaSECRET" not in str(info.value)
    assert reason(
        lambda: content.validate({"role": "robot", "parts": [{"type": "text", "text": "x"}]})
    ) == ("invalid_role")
    assert reason(lambda: content.validate({"role": "user", "parts": []})) == "empty_content"
    assert reason(lambda: content.validate("text")) == "invalid_content"
    assert reason(lambda: content.decode(b"{not json")) == "invalid_content"
    not_canonical = {
        "role": "user",
        "parts": [{"type": "inline_data", "mime_type": "image/png", "data": "aGk"}],
    }
    assert reason(lambda: content.validate(not_canonical)) == "invalid_base64"
    url_safe = base64.urlsafe_b64encode(b"\xfb\xff").decode()
    assert reason(lambda: content.inline_data("image/png", url_safe)) == "invalid_base64"


def test_redact_removes_secret_keys_recursively():
    value = {
        "api_key": "k",
        "nested": [
            {"Authorization": "Bearer x", "ok": 1},
            ("x-goog-api-key", {"refreshToken": "r"}),
        ],
        "promptTokenCount": 3,
        "max_output_tokens": 5,
        "client_secret": "s",
    }
    assert redact(value) == {
        "api_key": "[redacted]",
        "nested": [
            {"Authorization": "[redacted]", "ok": 1},
            ("x-goog-api-key", {"refreshToken": "[redacted]"}),
        ],
        "promptTokenCount": 3,
        "max_output_tokens": 5,
        "client_secret": "[redacted]",
    }


# -- property-based: the parser of untrusted content -------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
parts = st.one_of(
    st.builds(TextPart, st.text(max_size=50).filter(lambda s: "\ud800" not in s), st.booleans()),
    st.builds(
        lambda raw: InlineDataPart("image/png", base64.b64encode(raw).decode()),
        st.binary(max_size=64),
    ),
    st.builds(
        FunctionCallPart,
        st.text(min_size=1, max_size=20),
        st.dictionaries(st.text(max_size=8), json_values, max_size=4),
        st.none() | st.text(max_size=8),
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["user", "model"]), st.lists(parts, min_size=1, max_size=8))
def test_valid_content_round_trips(role, generated_parts):
    try:
        message = content.new(generated_parts, role=role)
    except AdkError as error:  # e.g. a lone surrogate: must be a clean, typed error
        assert error.reason in {"invalid_utf8"}
        return
    assert content.decode(content.encode(message)) == message
    assert content.validate(msgspec.json.decode(content.encode(message))) == message


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_arbitrary_json_is_accepted_or_refused_with_a_typed_error(value):
    try:
        result = content.validate(value)
    except AdkError as error:
        assert isinstance(error.reason, str) or error.reason[:2] == (
            "invalid_content_part",
            ("unknown_keys", error.reason[1][1]),
        )
    else:
        assert isinstance(result, Content)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
@example(b'{"":')  # a field refused before the syntax error: still malformed JSON
def test_arbitrary_bytes_decode_or_fail_typed(data):
    try:
        content.decode(data)
    except AdkError as error:
        assert error.reason == "invalid_content"


# -- hardening: depth, wrong types, MIME newlines, parsers never leak a Python error -------


def nested(depth: int, leaf=1):
    """`depth` nested lists around `leaf`: the leaf sits at depth `depth` (the outer list at 0)."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def test_function_payloads_nest_at_most_64_deep():
    assert content.MAX_JSON_DEPTH == 64
    # the payload is depth 0: a leaf at depth 64 is the deepest accepted (as `prune` keeps it)
    ok = content.function_call("f", {"x": nested(63)})
    assert redact(ok.args) == ok.args
    content.function_response("f", {"x": nested(62, [])})  # an empty list at depth 64
    for build in (
        lambda: content.function_call("f", {"x": nested(64)}),
        lambda: content.function_response("f", {"x": nested(64)}),
        lambda: content.function_call("f", {"x": nested(100_000)}),  # far past recursion
    ):
        assert reason(build) == "json_too_deep"
    deep = {"role": "model", "parts": [{"type": "function_call", "name": "f", "args": {}}]}
    deep["parts"][0]["args"] = {"x": nested(64)}
    assert reason(lambda: content.validate(deep)) == "json_too_deep"


def test_decode_of_deep_or_mistyped_input_is_an_adk_error():
    deep = b'{"role":"user","parts":[{"type":"function_call","name":"f","args":{"x":'
    for depth in (70, 100_000):
        data = deep + b"[" * depth + b"]" * depth + b"}}]}"
        assert reason(lambda data=data: content.decode(data)) == "json_too_deep"
    assert reason(lambda: content.decode(b"[" * 100_000)) == "invalid_content"
    for wrong in (5, None, ["x"], 1.5):
        assert reason(lambda wrong=wrong: content.decode(wrong)) == "invalid_content"
    lone = b'{"role":"user","parts":[{"type":"text","text":"\\ud800"}]}'
    assert reason(lambda: content.decode(lone)) == "invalid_content"  # msgspec: not JSON
    assert reason(lambda: content.decode('{"role":"user","parts":"\ud800"}')) == "invalid_utf8"


@pytest.mark.parametrize(
    "build",
    [
        lambda: content.text(5),
        lambda: content.text(None),
        lambda: content.text("x", thought="yes"),
        lambda: content.from_text(b"bytes"),
        lambda: content.inline_data("image/png", 5),
        lambda: content.inline_data(None, b"x"),
        lambda: content.file_data(5, "text/plain"),
        lambda: content.file_data("https://x.test/a", 5),
        lambda: content.function_call(5),
        lambda: content.function_call("f", [1, 2]),
        lambda: content.function_call("f", 5),
        lambda: content.function_call("f", id=5),
        lambda: content.function_call("f", thought_signature=[]),
        lambda: content.function_response("f", 5),
        lambda: content.function_response(None, {}),
        lambda: content.function_response("f", {}, id=b"x"),
        lambda: content.new(5),
        lambda: content.new([5]),
        lambda: content.new(["x"], role=5),
        lambda: content.new(["x"], limits=5),
        lambda: content.validate(Content("user", 5)),
        lambda: content.validate(Content("user", (TextPart(5),))),
        lambda: content.validate(Content("user", ("x",))),
        lambda: content.validate(Content(None, (TextPart("x"),))),
        lambda: content.validate(Content("user", (FunctionCallPart("f", None),))),
        lambda: content.validate(Content("user", (InlineDataPart("image/png", None),))),
        lambda: content.validate({"role": "user", "parts": [{"type": "text", "text": 5}]}),
        lambda: content.validate({"role": "user", "parts": None}),
        lambda: content.validate({1: 2}),
        lambda: content.validate({"role": "user", "parts": [{"type": "text", "\ud800": 1}]}),
    ],
)
def test_mistyped_fields_are_adk_errors_never_python_errors(build):
    with pytest.raises(AdkError) as info:
        build()
    msgspec.json.encode(info.value.reason)  # the reason itself is JSON (no lone surrogate)


@pytest.mark.parametrize("mime", ["text/plain\n", "image/png\n", "text/plain\r\n", "\ntext/plain"])
def test_mime_types_refuse_a_trailing_newline(mime):
    assert reason(lambda: content.inline_data(mime, b"x")) == "invalid_mime_type"
    assert reason(lambda: content.file_data("https://x.test/a", mime)) == "invalid_mime_type"
