"""A2A 1.0 wire: strict parsing and rendering of the SDK's protobuf types as JSON.

The official ``a2a-sdk`` gives the wire types (protobuf messages) and protobuf gives the
JSON mapping; this module adds what the spec asks and protobuf does not check: only the
camelCase JSON names, no unknown or pre-1.0 members (``kind``), enums by name, a part
with exactly one of ``text``/``raw``/``url``/``data``, canonical base64, bounded strings,
lists and nesting, and the request rules of ``SendMessage`` (a user message with an id
and 1..`MAX_PARTS` parts). `loads` reads a body (UTF-8 only, no duplicate member, bounded
size, depth and value count). Server-side refusals are `RpcError`; client-side (`parse`,
`user_message`) they are `AdkError`.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import uuid
from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import urlsplit

from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format, struct_pb2
from google.protobuf.message import Message as ProtoMessage

from adk_actors.a2a.errors import PUSH_NOTIFICATION_NOT_SUPPORTED, RpcError, invalid_params
from adk_actors.a2a.wire_strict import (
    MAX_DOCUMENT_DEPTH,
    MAX_JSON_DEPTH,
    MAX_JSON_NODES,
    MAX_LIST_ITEMS,
    MAX_PARTS,
    MAX_STRING_CHARS,
    MAX_TEXT_CHARS,
    M,
    ShapeError,
    loads,
    strict_parse,
)
from providers import content as content_model
from providers.content import Content
from providers.errors import AdkError

A2A_VERSION = "1.0"
"""The shape we parse and render. The server's version gate admits any ``A2A-Version: 1.x``
(a 1.x peer can talk to us), but the strict parse stays 1.0's: a member a later minor adds
is refused (-32602 on the server, ``a2a_invalid_response`` in the client), never silently
dropped. Review W12: kept on purpose, documented here and in docs/a2a.md."""
VERSION_HEADER = "A2A-Version"
CARD_PATH = "/.well-known/agent-card.json"
RPC_PATH = "/a2a/v1"
JSONRPC_BINDING = "JSONRPC"

METHODS = frozenset(
    {
        "SendMessage",
        "SendStreamingMessage",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "SubscribeToTask",
    }
)
STREAMING_METHODS = frozenset({"SendStreamingMessage", "SubscribeToTask"})
PUSH_CONFIG_METHODS = frozenset(
    {
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    }
)
EXTENDED_CARD_METHOD = "GetExtendedAgentCard"

TERMINAL_STATES: frozenset[int] = frozenset(
    {
        pb.TASK_STATE_COMPLETED,
        pb.TASK_STATE_FAILED,
        pb.TASK_STATE_CANCELED,
        pb.TASK_STATE_REJECTED,
    }
)
INTERRUPTED_STATES: frozenset[int] = frozenset(
    {pb.TASK_STATE_INPUT_REQUIRED, pb.TASK_STATE_AUTH_REQUIRED}
)

# -- bounds ------------------------------------------------------------------------------

MAX_MESSAGE_ID_CHARS = 256
MAX_SMALL_LIST_ITEMS = 32
"""extensions, referenceTaskIds, acceptedOutputModes of a request."""
MAX_PAGE_SIZE = 100
MAX_HISTORY_LENGTH = 10_000
MAX_PAGE_TOKEN_CHARS = 512

ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
"""contextId / taskId / task id (matched with `fullmatch`)."""

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,31}")
"""An RFC 3986 URI scheme (bounded)."""
_SURROGATE = re.compile("[\ud800-\udfff]")
_MIME = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
"""A media type the content model takes (its own pattern); others become octet-stream."""

Request = (
    pb.SendMessageRequest
    | pb.GetTaskRequest
    | pb.ListTasksRequest
    | pb.CancelTaskRequest
    | pb.SubscribeToTaskRequest
)

_REQUEST_TYPES: dict[str, type[ProtoMessage]] = {
    "SendMessage": pb.SendMessageRequest,
    "SendStreamingMessage": pb.SendMessageRequest,
    "GetTask": pb.GetTaskRequest,
    "ListTasks": pb.ListTasksRequest,
    "CancelTask": pb.CancelTaskRequest,
    "SubscribeToTask": pb.SubscribeToTaskRequest,
}

# -- message rules ---------------------------------------------------------------------


def _check_message(message: pb.Message, raw: Mapping[str, Any], *, max_parts: int) -> None:
    """The rules of a user message in a request (`ShapeError` on the first broken one)."""
    if not message.message_id:
        raise ShapeError("message.messageId is required")
    if len(message.message_id) > MAX_MESSAGE_ID_CHARS:
        raise ShapeError(f"message.messageId is at most {MAX_MESSAGE_ID_CHARS} chars")
    if message.role != pb.ROLE_USER:
        raise ShapeError("message.role must be ROLE_USER")
    for name, value in (("contextId", message.context_id), ("taskId", message.task_id)):
        if name in raw and not ID_PATTERN.fullmatch(value):
            raise ShapeError(f"message.{name} must match {ID_PATTERN.pattern}")
    for value in message.reference_task_ids:
        if not ID_PATTERN.fullmatch(value):
            raise ShapeError(f"message.referenceTaskIds items must match {ID_PATTERN.pattern}")
    if len(message.reference_task_ids) > MAX_SMALL_LIST_ITEMS:
        raise ShapeError(f"message.referenceTaskIds: at most {MAX_SMALL_LIST_ITEMS} items")
    if len(message.extensions) > MAX_SMALL_LIST_ITEMS:
        raise ShapeError(f"message.extensions: at most {MAX_SMALL_LIST_ITEMS} items")
    if not 1 <= len(message.parts) <= max_parts:
        raise ShapeError(f"message.parts must have 1 to {max_parts} parts")
    raw_parts = raw.get("parts", [])
    for index, part in enumerate(message.parts):
        _check_part(part, raw_parts[index], f"message.parts[{index}]")


def _check_part(part: pb.Part, raw: Mapping[str, Any], where: str) -> None:
    kind = part.WhichOneof("content")
    if kind is None and "data" not in raw:
        raise ShapeError(f"{where}: a part has exactly one of text, raw, url or data")
    if kind == "raw":
        encoded = raw.get("raw")
        if not isinstance(encoded, str) or not _canonical_base64(encoded):
            raise ShapeError(f"{where}.raw must be standard padded base64")
    if kind == "url":
        _check_url(part.url, f"{where}.url")


def _canonical_base64(encoded: str) -> bool:
    try:
        return base64.b64encode(base64.b64decode(encoded, validate=True)).decode() == encoded
    except (binascii.Error, ValueError):
        return False


def _check_url(url: str, where: str) -> None:
    """A `url` part: any absolute URI (A2A 1.0 says no more; ``gs:``, ``file:``, ``data:``
    included), never fetched by us: the agent gets https URLs as file data and the others
    as a text mention (`user_content`). Review W5."""
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ShapeError(f"{where} does not parse") from None
    if not _SCHEME.fullmatch(parts.scheme):
        raise ShapeError(f"{where} must be an absolute URI (with a scheme)")
    if parts.scheme.lower() in ("http", "https") and not parts.hostname:
        raise ShapeError(f"{where} must name a host")
    if parts.username is not None or parts.password is not None:
        raise ShapeError(f"{where} may not carry credentials")
    if any(ch.isspace() for ch in url):
        raise ShapeError(f"{where} may not contain whitespace")


def _check_id(value: str, where: str) -> None:
    if not ID_PATTERN.fullmatch(value):
        raise ShapeError(f"{where} must match {ID_PATTERN.pattern}")


def _check_history_length(request: Any, raw: Mapping[str, Any], where: str) -> None:
    if "historyLength" in raw and not 0 <= request.history_length <= MAX_HISTORY_LENGTH:
        raise ShapeError(f"{where}historyLength must be 0..{MAX_HISTORY_LENGTH}")


# -- server side -------------------------------------------------------------------------


def parse_request(method: str, params: Any, *, max_parts: int = MAX_PARTS) -> Request:
    """The params of an A2A 1.0 `method` as its request message; `RpcError` -32602 for
    anything the spec refuses, -32003 for a push config inside SendMessage. Method routing
    (-32601/-32003/-32004) is the caller's."""
    cls = _REQUEST_TYPES.get(method)
    if cls is None:
        raise invalid_params(f"{method[:64]!r} is not an A2A 1.0 task method")
    try:
        request = strict_parse(cls, params)
        if isinstance(request, pb.SendMessageRequest) and request.configuration.HasField(
            "task_push_notification_config"
        ):
            # the dedicated code, as for the push config methods (review W13)
            raise RpcError(PUSH_NOTIFICATION_NOT_SUPPORTED, "push notifications are not supported")
        _check_request(request, params, max_parts=min(max_parts, MAX_PARTS))
    except ShapeError as exc:
        raise invalid_params(str(exc)) from None
    return cast(Request, request)  # _REQUEST_TYPES maps only to the Request types


def _check_request(request: ProtoMessage, raw: Mapping[str, Any], *, max_parts: int) -> None:
    match request:
        case pb.SendMessageRequest():
            if not request.HasField("message"):
                raise ShapeError("params.message is required")
            _check_message(request.message, raw["message"], max_parts=max_parts)
            configuration = raw.get("configuration") or {}
            if len(request.configuration.accepted_output_modes) > MAX_SMALL_LIST_ITEMS:
                raise ShapeError(f"acceptedOutputModes: at most {MAX_SMALL_LIST_ITEMS} items")
            _check_history_length(request.configuration, configuration, "configuration.")
        case pb.GetTaskRequest():
            _check_id(request.id, "params.id")
            _check_history_length(request, raw, "params.")
        case pb.CancelTaskRequest() | pb.SubscribeToTaskRequest():
            _check_id(request.id, "params.id")
        case pb.ListTasksRequest():
            if "contextId" in raw:
                _check_id(request.context_id, "params.contextId")
            if "pageSize" in raw and not 1 <= request.page_size <= MAX_PAGE_SIZE:
                raise ShapeError(f"params.pageSize must be 1..{MAX_PAGE_SIZE}")
            if len(request.page_token) > MAX_PAGE_TOKEN_CHARS:
                raise ShapeError(f"params.pageToken is at most {MAX_PAGE_TOKEN_CHARS} chars")
            _check_history_length(request, raw, "params.")


def render(message: ProtoMessage) -> dict[str, Any]:
    """`message` as its A2A JSON object (camelCase members, enums by name, defaults left out)."""
    rendered: dict[str, Any] = json_format.MessageToDict(message)
    return rendered


def json_bytes(message: ProtoMessage) -> int:
    """The size in bytes of `message`'s compact JSON rendering (what byte bounds count)."""
    return len(_compact(render(message)).encode("utf-8"))


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def state_name(state: int) -> str:
    """A `pb.TaskState` number as its wire name, e.g. ``TASK_STATE_COMPLETED``."""
    try:
        return pb.TaskState.Name(state)
    except ValueError:
        return "TASK_STATE_UNSPECIFIED"


# -- what the agent receives -----------------------------------------------------------


def user_content(message: pb.Message) -> Content:
    """The content an agent receives for `message`: text parts as text, a data part as its
    compact JSON text (keys sorted), a raw part as inline data, an https url part as file
    data, any other url (``http:``, ``gs:``, ``file:``, ``data:`` ...) as a text mention
    ``[file (name): url]`` (we never fetch it). `RpcError` (-32602) when the content model
    refuses a part."""
    parts: list[content_model.Part] = []
    try:
        for part in message.parts:
            parts.append(_content_part(part))
        return content_model.new(parts, "user")
    except AdkError as exc:
        raise invalid_params(f"message content refused: {_reason_text(exc.reason)}") from None


def _reason_text(reason: Any) -> str:
    return reason if isinstance(reason, str) else str(reason)[:120]


def _content_part(part: pb.Part) -> content_model.Part:
    match part.WhichOneof("content"):
        case "text":
            return content_model.text(part.text)
        case "raw":
            return content_model.inline_data(
                _media_type(part, "application/octet-stream"), part.raw
            )
        case "url":
            if _url_scheme(part.url) == "https":
                try:
                    return content_model.file_data(
                        part.url, _media_type(part, "application/octet-stream")
                    )
                except AdkError:
                    pass  # e.g. a fragment the content model refuses: the agent gets a mention
            label = f" ({part.filename})" if part.filename else ""
            return content_model.text(f"[file{label}: {part.url}]")
        case _:
            return content_model.text(
                json.dumps(
                    _data_value(part), separators=(",", ":"), ensure_ascii=False, sort_keys=True
                )
            )


def _url_scheme(url: str) -> str:
    try:
        return urlsplit(url).scheme.lower()
    except ValueError:
        return ""


def _media_type(part: pb.Part, default: str) -> str:
    media_type = part.media_type.strip().lower()
    if _MIME.fullmatch(media_type):
        return media_type
    return default


def _data_value(part: pb.Part) -> Any:
    return plain_json(json_format.MessageToDict(part.data)) if part.HasField("data") else None


def plain_json(value: Any) -> Any:
    """`value` with integral floats as ints (protobuf JSON numbers are all doubles), so
    ``{"n": 1}`` reaches the agent as 1, not 1.0."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    if isinstance(value, dict):
        return {key: plain_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain_json(item) for item in value]
    return value


def response_value(message: pb.Message) -> Any:
    """What a follow-up message gives a paused run: the value of its data part when it has
    exactly one, else its text parts joined by newlines."""
    data_parts = [part for part in message.parts if part.WhichOneof("content") == "data"]
    if len(data_parts) == 1:
        return _data_value(data_parts[0])
    return "\n".join(part.text for part in message.parts if part.WhichOneof("content") == "text")


# -- building messages -----------------------------------------------------------------


def _new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def _data_part(data: Any) -> pb.Part:
    value = struct_pb2.Value()
    json_format.ParseDict(json_safe(data), value)
    return pb.Part(data=value)


def json_safe(value: Any, depth: int = 0) -> Any:
    """`value` as plain JSON a protobuf ``Value`` takes: string keys, lists for tuples,
    None for non-finite numbers and for what nests deeper than `MAX_JSON_DEPTH`, the
    text of anything else. What we render never fails on a stray value."""
    if depth > MAX_JSON_DEPTH:
        return None
    if value is None or isinstance(value, bool | int | str):
        return _text(value) if isinstance(value, str) else value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {_text(str(key)): json_safe(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item, depth + 1) for item in value]
    return _text(str(value)[:MAX_STRING_CHARS])


def _text(value: str) -> str:
    """`value` as valid UTF-8 (a lone surrogate becomes U+FFFD); protobuf refuses it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", value)
    return value


def agent_message(
    text: str, *, context_id: str, task_id: str, data: dict[str, Any] | None = None
) -> pb.Message:
    """An agent message (``ROLE_AGENT``, a new ``msg-`` id): one text part, plus one data
    part when `data` is given."""
    parts = [pb.Part(text=_text(text))]
    if data is not None:
        parts.append(_data_part(data))
    return pb.Message(
        message_id=_new_id("msg"),
        context_id=context_id,
        task_id=task_id,
        role=pb.ROLE_AGENT,
        parts=parts,
    )


def user_message(
    content: str | Mapping[str, Any] | pb.Message,
    *,
    context_id: str | None = None,
    task_id: str | None = None,
) -> pb.Message:
    """A user message for a request: a str is one text part; a mapping is the JSON form of
    a Message (strictly parsed, messageId generated when absent, role forced to user).
    ``AdkError(("invalid_a2a_message", why))`` when it breaks a rule."""
    if isinstance(content, str):
        message = pb.Message(parts=[pb.Part(text=content, media_type="text/plain")])
        raw: Mapping[str, Any] = {"parts": [{"text": content}]}
    elif isinstance(content, pb.Message):
        message = pb.Message()
        message.CopyFrom(content)
        raw = render(message)
    elif isinstance(content, Mapping):
        data = dict(content)
        data.setdefault("role", "ROLE_USER")
        try:
            message = strict_parse(pb.Message, data)
        except ShapeError as exc:
            raise AdkError(("invalid_a2a_message", "invalid_shape"), str(exc)) from None
        raw = data
    else:
        raise AdkError(
            ("invalid_a2a_message", "invalid_type"), "a message is a str, a mapping or a Message"
        )
    message.role = pb.ROLE_USER
    if not message.message_id:
        message.message_id = _new_id("msg")
    if context_id is not None:
        message.context_id = context_id
    if task_id is not None:
        message.task_id = task_id
    # A peer's ids are opaque (ours follow ID_PATTERN, another server's need not): here
    # they are only bounded and printable; the server's parse_request keeps the pattern.
    for name, value in (("contextId", message.context_id), ("taskId", message.task_id)):
        if value and not (len(value) <= MAX_STRING_CHARS and value.isprintable()):
            raise AdkError(
                ("invalid_a2a_message", "invalid_shape"),
                f"message.{name} is a printable string of at most {MAX_STRING_CHARS} characters",
            )
    checked = {key: value for key, value in raw.items() if key not in ("contextId", "taskId")}
    try:
        _check_message(message, checked, max_parts=MAX_PARTS)
    except ShapeError as exc:
        raise AdkError(("invalid_a2a_message", "invalid_shape"), str(exc)) from None
    return message


def text_artifact(text: str, *, name: str = "response") -> pb.Artifact:
    """An artifact (a new ``artifact-`` id) holding `text` as one text part."""
    return pb.Artifact(
        artifact_id=_new_id("artifact"),
        name=_text(name),
        parts=[pb.Part(text=_text(text))],
    )


# -- client side -------------------------------------------------------------------------


def parse(cls: type[M], data: Any, *, reason: str) -> M:
    """`data` (a decoded JSON value from a peer) as a `cls`, as strictly as `parse_request`;
    ``AdkError((reason, "invalid_shape"), where and why)`` otherwise."""
    try:
        return strict_parse(cls, data)
    except ShapeError as exc:
        raise AdkError((reason, "invalid_shape"), str(exc)) from None


__all__ = [
    "A2A_VERSION",
    "CARD_PATH",
    "EXTENDED_CARD_METHOD",
    "ID_PATTERN",
    "INTERRUPTED_STATES",
    "JSONRPC_BINDING",
    "MAX_DOCUMENT_DEPTH",
    "MAX_JSON_DEPTH",
    "MAX_JSON_NODES",
    "MAX_LIST_ITEMS",
    "MAX_PARTS",
    "MAX_STRING_CHARS",
    "MAX_TEXT_CHARS",
    "METHODS",
    "PUSH_CONFIG_METHODS",
    "RPC_PATH",
    "STREAMING_METHODS",
    "TERMINAL_STATES",
    "VERSION_HEADER",
    "Request",
    "RpcError",
    "ShapeError",
    "agent_message",
    "json_bytes",
    "json_safe",
    "loads",
    "parse",
    "parse_request",
    "plain_json",
    "render",
    "response_value",
    "state_name",
    "strict_parse",
    "text_artifact",
    "user_content",
    "user_message",
]
