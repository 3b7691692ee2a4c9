"""The A2A 1.0 wire: strict request parsing, rendering, the agent's view of a message,
the message builders and the JSON-RPC error envelopes (adk_actors.a2a.wire / errors)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from a2a.helpers import proto_helpers
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.a2a import errors, wire
from adk_actors.a2a.card import validate_card
from adk_actors.a2a.errors import RpcError
from providers.content import FileDataPart, InlineDataPart, TextPart
from providers.errors import AdkError


def send_params(*parts: dict[str, Any], **message: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"messageId": "m-1", "role": "ROLE_USER", "parts": list(parts)}
    body.update(message)
    return {"message": body}


def refused(method: str, params: Any) -> RpcError:
    with pytest.raises(RpcError) as caught:
        wire.parse_request(method, params)
    assert caught.value.code == errors.INVALID_PARAMS
    return caught.value


def reason_of(error: RpcError) -> str:
    assert error.data is not None
    reason = error.data["reason"]
    assert isinstance(reason, str)
    return reason


# -- constants -------------------------------------------------------------------------


def test_method_sets_and_paths_are_the_spec_names() -> None:
    assert wire.A2A_VERSION == "1.0"
    assert wire.VERSION_HEADER == "A2A-Version"
    assert wire.CARD_PATH == "/.well-known/agent-card.json"
    assert wire.STREAMING_METHODS <= wire.METHODS
    assert not wire.METHODS & wire.PUSH_CONFIG_METHODS
    assert wire.EXTENDED_CARD_METHOD not in wire.METHODS
    for legacy in ("message/send", "message/stream", "tasks/get", "tasks/cancel"):
        assert legacy not in wire.METHODS


def test_state_sets_and_names() -> None:
    """Follows adk_a2a_v1_codec: task state names are the TASK_STATE_* enum names."""
    assert wire.state_name(pb.TASK_STATE_COMPLETED) == "TASK_STATE_COMPLETED"
    assert wire.state_name(pb.TASK_STATE_INPUT_REQUIRED) == "TASK_STATE_INPUT_REQUIRED"
    assert wire.state_name(999) == "TASK_STATE_UNSPECIFIED"
    assert {wire.state_name(state) for state in wire.TERMINAL_STATES} == {
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_REJECTED",
    }
    assert {pb.TASK_STATE_INPUT_REQUIRED, pb.TASK_STATE_AUTH_REQUIRED} == wire.INTERRUPTED_STATES
    assert not wire.TERMINAL_STATES & wire.INTERRUPTED_STATES


# -- SendMessage: what is accepted ------------------------------------------------------


def test_member_discriminated_parts_are_accepted() -> None:
    """Follows adk_a2a_v1_codec_test: member_discriminated_parts."""
    raw = base64.b64encode(b"\x01\x02\x03").decode()
    request = wire.parse_request(
        "SendMessage",
        send_params(
            {"text": "hello"},
            {"data": {"n": 1}},
            {"raw": raw, "filename": "a.bin", "mediaType": "application/octet-stream"},
            {"url": "https://files.example/a", "filename": "a"},
            contextId="ctx-1",
            taskId="task-1",
        ),
    )
    assert isinstance(request, pb.SendMessageRequest)
    kinds = [part.WhichOneof("content") for part in request.message.parts]
    assert kinds == ["text", "data", "raw", "url"]
    assert request.message.parts[2].raw == b"\x01\x02\x03"
    assert request.message.context_id == "ctx-1"


def test_send_message_configuration_and_streaming_method() -> None:
    params = send_params({"text": "hi"})
    params["configuration"] = {"returnImmediately": True, "historyLength": 3}
    request = wire.parse_request("SendStreamingMessage", params)
    assert isinstance(request, pb.SendMessageRequest)
    assert request.configuration.return_immediately
    assert request.configuration.history_length == 3


def test_the_sdk_clients_request_json_is_accepted() -> None:
    """What the official SDK client sends (MessageToDict of its request) parses strictly."""
    message = proto_helpers.new_text_message("hello", role=pb.ROLE_USER)
    request = pb.SendMessageRequest(
        message=message, configuration=pb.SendMessageConfiguration(return_immediately=True)
    )
    params = json_format.MessageToDict(request)
    parsed = wire.parse_request("SendMessage", params)
    assert parsed == request
    for method, sdk_request in (
        ("GetTask", pb.GetTaskRequest(id="0b5c9f1e-8a43-4d0c-9bd1-2f0f3e8f1a11", history_length=2)),
        ("CancelTask", pb.CancelTaskRequest(id="task-1")),
        ("SubscribeToTask", pb.SubscribeToTaskRequest(id="task-1")),
        (
            "ListTasks",
            pb.ListTasksRequest(context_id="ctx-1", page_size=10, status="TASK_STATE_WORKING"),
        ),
    ):
        assert wire.parse_request(method, json_format.MessageToDict(sdk_request)) == sdk_request


# -- SendMessage: what is refused ---------------------------------------------------------


def test_pre_1_0_kind_is_refused_where_it_appears() -> None:
    """Follows adk_a2a_v1_codec_test: legacy_kind_and_ambiguous_parts_are_rejected."""
    error = refused("SendMessage", send_params({"kind": "text", "text": "old"}))
    assert "'kind' is pre-1.0" in reason_of(error)
    error = refused("SendMessage", send_params({"text": "x"}, kind="message"))
    assert "'kind' is pre-1.0" in reason_of(error)


@pytest.mark.parametrize(
    "part",
    [
        {"text": "x", "data": {}},
        {"text": "x", "url": "https://a.example/x"},
        {},
        {"mediaType": "text/plain"},
    ],
)
def test_a_part_has_exactly_one_content_member(part: dict[str, Any]) -> None:
    """Follows adk_a2a_v1_codec_test: legacy_kind_and_ambiguous_parts_are_rejected
    (multiple_content_members) and missing_content_member."""
    error = refused("SendMessage", send_params(part))
    assert "exactly one of text, raw, url, data" in reason_of(error)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"role": "ROLE_AGENT"}, "ROLE_USER"),
        ({"role": "ROLE_UNSPECIFIED"}, "ROLE_USER"),
        ({"role": 1}, "enum is given by name"),
        ({"role": "user"}, "role: not one of ROLE_UNSPECIFIED, ROLE_USER, ROLE_AGENT"),
        ({"messageId": ""}, "messageId is required"),
        ({"messageId": "m" * 257}, "at most 256"),
        ({"messageId": 5}, "messageId"),
        ({"contextId": "../etc"}, "contextId must match"),
        ({"taskId": "t" * 129}, "taskId must match"),
        ({"referenceTaskIds": ["ok", "not ok"]}, "referenceTaskIds"),
        ({"parts": "hello"}, "must be an array"),
        ({"extensions": ["x"] * 33}, "at most 32"),
    ],
)
def test_message_rules(message: dict[str, Any], expected: str) -> None:
    """Follows adk_a2a_v1_codec_test: identifiers_parts_and_payload_bytes_are_bounded."""
    error = refused("SendMessage", send_params({"text": "hi"}, **message))
    assert expected in reason_of(error)


def test_missing_role_and_message_are_refused() -> None:
    params = send_params({"text": "hi"})
    del params["message"]["role"]
    assert "ROLE_USER" in reason_of(refused("SendMessage", params))
    assert "message is required" in reason_of(refused("SendMessage", {}))


def test_parts_are_bounded() -> None:
    """Follows adk_a2a_v1_codec_test: identifiers_parts_and_payload_bytes_are_bounded
    (too_many_parts, oversized text)."""
    assert "1 to 64 parts" in reason_of(refused("SendMessage", send_params()))
    too_many = [{"text": "x"}] * (wire.MAX_PARTS + 1)
    assert "at most 64 items" in reason_of(refused("SendMessage", send_params(*too_many)))
    assert wire.parse_request("SendMessage", send_params(*too_many[:64]))
    fewer = send_params(*too_many[:3])
    with pytest.raises(RpcError, match="invalid params"):
        wire.parse_request("SendMessage", fewer, max_parts=2)
    huge = {"text": "x" * (wire.MAX_TEXT_CHARS + 1)}
    assert f"at most {wire.MAX_TEXT_CHARS} chars" in reason_of(
        refused("SendMessage", send_params(huge))
    )


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        ({"raw": "!!"}, "standard padded base64"),
        ({"raw": "aGk"}, "standard padded base64"),
        ({"raw": "aG k="}, "standard padded base64"),
        ({"url": "/relative/path"}, "absolute URI"),
        ({"url": "files.example/a"}, "absolute URI"),
        ({"url": "https:///no-host"}, "must name a host"),
        ({"url": "http://[::1/x"}, "does not parse"),
        ({"url": "https://a.example/x y"}, "whitespace"),
        ({"url": "https://user:secret@a.example/x"}, "may not carry credentials"),
        ({"text": None}, "null is not allowed"),
        ({"text": 5}, "text"),
        ({"text": "x", "mediaType": "m" * 4097}, "at most 4096 chars"),
    ],
)
def test_part_member_rules(part: dict[str, Any], expected: str) -> None:
    assert expected in reason_of(refused("SendMessage", send_params(part)))


SECRET = "s3cret-t0ken-value"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("ListTasks", {"pageSize": SECRET}),
        ("ListTasks", {"status": SECRET}),
        ("ListTasks", {"statusTimestampAfter": SECRET}),
        ("ListTasks", {"includeArtifacts": SECRET}),
        ("GetTask", {"id": SECRET + "/x"}),
        ("SendMessage", send_params({"text": [SECRET]})),
        ("SendMessage", send_params({"raw": SECRET})),
        ("SendMessage", send_params({"url": "https://u:" + SECRET + "@a.example/"})),
        ("SendMessage", send_params({"text": "x"}, role=SECRET)),
        ("SendMessage", send_params({"text": "x"}, metadata=[SECRET])),
        (
            "SendMessage",
            {"configuration": {"returnImmediately": SECRET}, **send_params({"text": "x"})},
        ),
    ],
)
def test_refusals_never_echo_the_value(method: str, params: dict[str, Any]) -> None:
    """Error data never carries what the caller sent as a value (it may be a credential);
    it names the member and the kind of problem."""
    error = refused(method, params)
    assert SECRET not in json.dumps(errors.error_response(1, error))
    assert "." in reason_of(error) or ":" in reason_of(error)


def test_unknown_and_snake_case_members_are_refused() -> None:
    error = refused("SendMessage", send_params({"text": "x"}, extra=1))
    assert "unknown member 'extra'" in reason_of(error)
    params = send_params({"text": "x"})
    params["message"]["message_id"] = params["message"].pop("messageId")
    assert "use the JSON name 'messageId'" in reason_of(refused("SendMessage", params))
    params = send_params({"text": "x"})
    params["configuration"] = {"blocking": True}
    assert "unknown member 'blocking'" in reason_of(refused("SendMessage", params))


def test_push_config_in_a_request_is_refused() -> None:
    """Review W13: a push config inside SendMessage is -32003
    (PushNotificationNotSupportedError), the code the push config methods answer, not -32602."""
    params = send_params({"text": "x"})
    params["configuration"] = {"taskPushNotificationConfig": {"url": "https://hook.example/x"}}
    for method in ("SendMessage", "SendStreamingMessage"):
        with pytest.raises(RpcError) as caught:
            wire.parse_request(method, params)
        assert caught.value.code == errors.PUSH_NOTIFICATION_NOT_SUPPORTED
        assert caught.value.message == "push notifications are not supported"
    params["configuration"]["taskPushNotificationConfig"]["bogus"] = 1
    assert "unknown member 'bogus'" in reason_of(refused("SendMessage", params))


@pytest.mark.parametrize(
    "url",
    [
        "gs://bucket/report.pdf",
        "file:///tmp/a.pdf",
        "data:text/plain;base64,aGk=",
        "s3://bucket/key",
        "http://files.example/b",
        "urn:isbn:0451450523",
    ],
)
def test_url_parts_take_any_absolute_uri_as_a_mention(url: str) -> None:
    """Review W5: A2A 1.0 asks only for an absolute URL; the SDK client sends ``gs:``,
    ``file:``, ``data:`` parts. They are accepted, never fetched: the agent sees a text
    mention (only https becomes file data)."""
    request = wire.parse_request("SendMessage", send_params({"url": url, "filename": "r.pdf"}))
    assert isinstance(request, pb.SendMessageRequest)
    content = wire.user_content(request.message)
    assert content.parts == (TextPart(text=f"[file (r.pdf): {url}]"),)
    https = wire.parse_request("SendMessage", send_params({"url": "https://files.example/a"}))
    assert isinstance(https, pb.SendMessageRequest)
    assert isinstance(wire.user_content(https.message).parts[0], FileDataPart)


def test_free_json_depth_is_bounded_without_recursion_errors() -> None:
    deep: Any = "leaf"
    for _ in range(wire.MAX_JSON_DEPTH + 5):
        deep = {"a": deep}
    assert "nested deeper" in reason_of(refused("SendMessage", send_params({"data": deep})))
    very_deep: Any = 1
    for _ in range(5000):
        very_deep = [very_deep]
    assert "nested deeper" in reason_of(refused("SendMessage", send_params({"data": very_deep})))
    nested_metadata = send_params({"text": "x"}, metadata=deep)
    assert "nested deeper" in reason_of(refused("SendMessage", nested_metadata))
    shallow = send_params({"data": {"a": [1, {"b": None}]}})
    assert wire.parse_request("SendMessage", shallow)


@pytest.mark.parametrize("params", [None, [], "text", 5, {"message": []}, {"message": "m"}])
def test_params_of_the_wrong_shape(params: Any) -> None:
    refused("SendMessage", params)


def test_a_method_outside_the_task_methods_is_refused_here_too() -> None:
    assert "not an A2A 1.0 task method" in reason_of(refused("message/send", {}))


# -- the other methods ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "expected"),
    [
        ("GetTask", {}, "params.id must match"),
        ("GetTask", {"id": "a/b"}, "params.id must match"),
        ("GetTask", {"id": "t-1", "historyLength": -1}, "historyLength must be"),
        ("GetTask", {"id": "t-1", "historyLength": "x"}, "historyLength"),
        ("CancelTask", {"id": ""}, "params.id must match"),
        ("SubscribeToTask", {"id": "t-1", "extra": True}, "unknown member"),
        ("ListTasks", {"pageSize": 0}, "pageSize must be 1..100"),
        ("ListTasks", {"pageSize": 101}, "pageSize must be 1..100"),
        ("ListTasks", {"pageToken": "p" * 513}, "at most 512"),
        ("ListTasks", {"status": "WORKING"}, "status: not one of TASK_STATE_UNSPECIFIED"),
        ("ListTasks", {"status": 2}, "enum is given by name"),
        ("ListTasks", {"contextId": "bad id"}, "contextId must match"),
    ],
)
def test_task_method_params(method: str, params: dict[str, Any], expected: str) -> None:
    assert expected in reason_of(refused(method, params))


def test_task_method_params_accepted() -> None:
    listed = wire.parse_request(
        "ListTasks",
        {
            "contextId": "ctx-1",
            "status": "TASK_STATE_COMPLETED",
            "pageSize": 100,
            "pageToken": "opaque",
            "includeArtifacts": True,
        },
    )
    assert isinstance(listed, pb.ListTasksRequest)
    assert listed.status == pb.TASK_STATE_COMPLETED and listed.include_artifacts
    got = wire.parse_request("GetTask", {"id": "task-abc", "historyLength": 0})
    assert isinstance(got, pb.GetTaskRequest) and got.HasField("history_length")


# -- render, parse, sizes ---------------------------------------------------------------------


def test_render_is_camel_case_with_enum_names_and_round_trips() -> None:
    task = pb.Task(
        id="task-1",
        context_id="ctx-1",
        status=pb.TaskStatus(state=pb.TASK_STATE_WORKING),
        artifacts=[wire.text_artifact("done")],
    )
    rendered = wire.render(task)
    assert rendered["contextId"] == "ctx-1"
    assert rendered["status"] == {"state": "TASK_STATE_WORKING"}
    assert rendered["artifacts"][0]["artifactId"].startswith("artifact-")
    assert wire.parse(pb.Task, rendered, reason="a2a_invalid_response") == task
    compact = json.dumps(rendered, separators=(",", ":"), ensure_ascii=False)
    assert wire.json_bytes(task) == len(compact.encode())
    assert wire.json_bytes(wire.text_artifact("é" * 10)) > wire.json_bytes(
        wire.text_artifact("e" * 10)
    )


def test_client_parse_of_sdk_server_output() -> None:
    """A task and a status update as an SDK server renders them (timestamps included)."""
    user = proto_helpers.new_text_message("hi", role=pb.ROLE_USER)
    task = proto_helpers.new_task_from_user_message(user)
    task.status.timestamp.GetCurrentTime()
    event = proto_helpers.new_text_status_update_event(
        task.id, task.context_id, pb.TASK_STATE_COMPLETED, "done"
    )
    for value in (pb.StreamResponse(task=task), pb.StreamResponse(status_update=event)):
        rendered = json_format.MessageToDict(value)
        assert wire.parse(pb.StreamResponse, rendered, reason="a2a_invalid_response") == value


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"task": {}, "message": {}},
        {"kind": "task", "task": {}},
        [],
        {"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_DONE"}}},
    ],
)
def test_client_parse_refuses_with_the_given_reason(data: Any) -> None:
    """Follows adk_a2a_v1_codec_test: stream_response_requires_one_member."""
    with pytest.raises(AdkError) as caught:
        wire.parse(pb.StreamResponse, data, reason="a2a_invalid_response")
    assert caught.value.reason == ("a2a_invalid_response", "invalid_shape")


def test_strict_parse_refuses_non_json_values() -> None:
    """Follows adk_a2a_v1_codec_test: non_json_terms_are_rejected."""
    with pytest.raises(wire.ShapeError):
        wire.strict_parse(
            pb.Message, {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": object()}]}
        )
    with pytest.raises(wire.ShapeError):
        wire.strict_parse(pb.Message, {"messageId": "m", 1: "x"})


# -- what the agent receives --------------------------------------------------------------


def test_user_content_maps_each_part_kind() -> None:
    request = wire.parse_request(
        "SendMessage",
        send_params(
            {"text": "hello"},
            {"data": {"n": 1, "x": 1.5, "list": [2]}},
            {"raw": base64.b64encode(b"png").decode(), "mediaType": "image/png"},
            {"raw": base64.b64encode(b"?").decode(), "mediaType": "Not A Type"},
            {"url": "https://files.example/a.pdf", "mediaType": "application/pdf"},
            {"url": "http://files.example/b", "filename": "b.txt"},
            {"url": "https://files.example/c#page=2"},
        ),
    )
    assert isinstance(request, pb.SendMessageRequest)
    content = wire.user_content(request.message)
    assert content.role == "user"
    text, data, image, unknown, pdf, mention, fragment = content.parts
    assert text == TextPart("hello")
    assert isinstance(data, TextPart) and json.loads(data.text) == {"n": 1, "x": 1.5, "list": [2]}
    assert data.text == '{"list":[2],"n":1,"x":1.5}'  # compact, keys sorted (a Struct has no order)
    assert image == InlineDataPart("image/png", base64.b64encode(b"png").decode())
    assert isinstance(unknown, InlineDataPart) and unknown.mime_type == "application/octet-stream"
    assert pdf == FileDataPart("https://files.example/a.pdf", "application/pdf")
    assert mention == TextPart("[file (b.txt): http://files.example/b]")
    assert fragment == TextPart("[file: https://files.example/c#page=2]")


def test_user_content_refusal_is_invalid_params() -> None:
    wide = "é" * (wire.MAX_TEXT_CHARS // 2 + 1)  # within the char bound, over 1 MiB of UTF-8
    request = wire.parse_request("SendMessage", send_params({"text": wide}))
    assert isinstance(request, pb.SendMessageRequest)
    with pytest.raises(RpcError) as caught:
        wire.user_content(request.message)
    assert caught.value.code == errors.INVALID_PARAMS
    assert "text_part_too_large" in reason_of(caught.value)


def test_response_value() -> None:
    one_data = wire.user_message(
        {"parts": [{"text": "ignored"}, {"data": {"approve": True, "n": 2}}]}
    )
    assert wire.response_value(one_data) == {"approve": True, "n": 2}
    texts = wire.user_message({"parts": [{"text": "yes"}, {"text": "go on"}]})
    assert wire.response_value(texts) == "yes\ngo on"
    two_data = wire.user_message({"parts": [{"data": 1}, {"data": 2}, {"text": "t"}]})
    assert wire.response_value(two_data) == "t"
    null_data = wire.user_message({"parts": [{"data": None}]})
    assert wire.response_value(null_data) is None


# -- builders ------------------------------------------------------------------------------


def test_agent_message_and_text_artifact() -> None:
    message = wire.agent_message("need input", context_id="ctx-1", task_id="task-1")
    assert message.role == pb.ROLE_AGENT and message.message_id.startswith("msg-")
    assert [part.text for part in message.parts] == ["need input"]
    paused = wire.agent_message(
        "approve?", context_id="ctx-1", task_id="task-1", data={"pause": {"kind": "approval"}}
    )
    assert wire.render(paused)["parts"] == [
        {"text": "approve?"},
        {"data": {"pause": {"kind": "approval"}}},
    ]
    assert wire.agent_message("a", context_id="c", task_id="t").message_id != message.message_id
    artifact = wire.text_artifact("result", name="answer")
    assert artifact.name == "answer" and artifact.parts[0].text == "result"
    assert wire.parse(pb.Message, wire.render(paused), reason="x") == paused


def test_user_message_from_text_mapping_and_message() -> None:
    from_text = wire.user_message("hello", context_id="ctx-1", task_id="task-1")
    assert from_text.role == pb.ROLE_USER and from_text.message_id.startswith("msg-")
    assert from_text.parts[0].media_type == "text/plain"
    assert (from_text.context_id, from_text.task_id) == ("ctx-1", "task-1")
    forced = wire.user_message(
        {"role": "ROLE_AGENT", "messageId": "mine", "parts": [{"text": "x"}]}
    )
    assert forced.role == pb.ROLE_USER and forced.message_id == "mine"
    original = pb.Message(message_id="m", role=pb.ROLE_AGENT, parts=[pb.Part(text="x")])
    copied = wire.user_message(original, context_id="ctx-2")
    assert copied.role == pb.ROLE_USER and copied.context_id == "ctx-2"
    assert original.role == pb.ROLE_AGENT and not original.context_id
    params = {"message": wire.render(from_text)}
    assert wire.parse_request("SendMessage", params)


@pytest.mark.parametrize(
    ("content", "kwargs", "why"),
    [
        ({"parts": [{"kind": "text", "text": "x"}]}, {}, "invalid_shape"),
        ({"parts": []}, {}, "invalid_shape"),
        ({"parts": [{"text": "x", "data": 1}]}, {}, "invalid_shape"),
        ("x", {"context_id": "bad\nid"}, "invalid_shape"),
        (b"bytes", {}, "invalid_type"),
    ],
)
def test_user_message_refusals(content: Any, kwargs: dict[str, Any], why: str) -> None:
    with pytest.raises(AdkError) as caught:
        wire.user_message(content, **kwargs)
    assert caught.value.reason == ("invalid_a2a_message", why)


# -- errors -------------------------------------------------------------------------------


def test_error_envelopes() -> None:
    not_found = errors.task_not_found()
    assert errors.error_response("r-1", not_found) == {
        "jsonrpc": "2.0",
        "id": "r-1",
        "error": {"code": -32001, "message": "task not found"},
    }
    cancel = errors.task_not_cancelable("TASK_STATE_COMPLETED")
    assert errors.error_response(7, cancel)["error"] == {
        "code": -32002,
        "message": "task is not cancelable",
        "data": {"state": "TASK_STATE_COMPLETED"},
    }
    assert errors.result_response(None, {"task": {}}) == {
        "jsonrpc": "2.0",
        "id": None,
        "result": {"task": {}},
    }
    long = RpcError(errors.INTERNAL_ERROR, "x" * 10_000)
    assert len(long.message) == errors.MAX_ERROR_MESSAGE_CHARS
    assert set(errors.ERROR_NAMES) == {
        -32700,
        -32600,
        -32601,
        -32602,
        -32603,
        -32001,
        -32002,
        -32003,
        -32004,
        -32005,
        -32006,
        -32007,
        -32008,
        -32009,
    }
    json.dumps(errors.error_response(1, errors.invalid_params("why")))


def test_what_we_build_never_fails_on_a_stray_value() -> None:
    """Model text with a lone surrogate and pause data that is not plain JSON still render."""
    stray: dict[Any, Any] = {"nan": float("nan"), 1: {"set": {2}}, "obj": object(), "t": (1, 2)}
    message = wire.agent_message("a\ud800b", context_id="ctx-1", task_id="task-1", data=stray)
    rendered = wire.render(message)
    assert rendered["parts"][0]["text"] == "a\ufffdb"
    data = rendered["parts"][1]["data"]
    assert data["nan"] is None and data["1"] == {"set": "{2}"} and data["t"] == [1, 2]
    assert isinstance(data["obj"], str)
    assert wire.parse(pb.Message, rendered, reason="x") == message
    assert wire.text_artifact("\udc00", name="n\ud800").parts[0].text == "\ufffd"
    deep: Any = 1
    for _ in range(100):
        deep = [deep]
    assert wire.json_bytes(wire.agent_message("x", context_id="c", task_id="t", data={"d": deep}))


# -- fuzz: nothing but RpcError / AdkError gets out -----------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["text", "raw", "url", "data", "kind", "messageId", "role", "parts", "id", "x"]
            )
            | st.text(max_size=8),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    method=st.sampled_from(sorted(wire.METHODS)),
    params=json_values,
    part=json_values,
    message_extra=st.dictionaries(st.text(max_size=12), json_values, max_size=2),
)
def test_any_json_is_parsed_or_refused_as_invalid_params(
    method: str, params: Any, part: Any, message_extra: dict[str, Any]
) -> None:
    """Any decoded JSON either parses (and renders back) or is -32602, never another error."""
    attempts = [params, send_params(part), send_params({"text": "x"}, **message_extra)]
    for attempt in attempts:
        try:
            parsed = wire.parse_request(method, attempt)
        except RpcError as error:
            assert error.code == errors.INVALID_PARAMS
            json.dumps(errors.error_response(1, error))
            continue
        assert wire.parse_request(method, wire.render(parsed)) == parsed


@settings(max_examples=200, deadline=None)
@given(data=json_values)
def test_any_json_is_a_card_or_a_typed_refusal(data: Any) -> None:
    for attempt in (data, {"name": "n", "supportedInterfaces": data}):
        try:
            validate_card(attempt, card_url="https://agent.example/")
        except AdkError as error:
            reason = error.reason
            assert (isinstance(reason, tuple) and reason[0] == "a2a_invalid_agent_card") or (
                reason in ("a2a_no_jsonrpc_interface", "a2a_cross_origin_interface")
            )
