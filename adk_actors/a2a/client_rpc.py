"""JSON-RPC 2.0 envelopes for the A2A client: the request body, and the result or the
typed error of an answer (``("a2a_rpc_error", code)``: the server's message, bounded,
with any credential this call sent blanked out)."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from adk_actors.a2a.client_options import MAX_RESPONSE_BYTES
from adk_actors.a2a.errors import RpcError
from adk_actors.a2a.wire import loads
from providers.errors import AdkError

INVALID = "a2a_invalid_response"
MAX_ANSWER_VALUES = 100_000
"""JSON values in one answer (a ListTasks page of 100 tasks with their history fits)."""
MAX_ERROR_MESSAGE_CHARS = 512
REDACTED = "[redacted]"


def request_body(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()


def decode_json(body: bytes | str) -> Any:
    """A peer's JSON answer, strictly (`wire.loads`: UTF-8, no duplicate member, no
    NaN, bounded depth and values); the byte bound is the transport's, already applied."""
    try:
        return loads(body, max_bytes=MAX_RESPONSE_BYTES, max_nodes=MAX_ANSWER_VALUES)
    except RpcError as error:
        why = (error.data or {}).get("reason", "")
        raise AdkError((INVALID, "json"), f"the answer is not JSON we take: {why}") from None


def result_of(envelope: Any, request_id: int, secrets: Collection[str]) -> Any:
    """The ``result`` of a JSON-RPC answer to request `request_id`, or its error raised."""
    if not isinstance(envelope, dict) or envelope.get("jsonrpc") != "2.0":
        raise AdkError((INVALID, "envelope"), "not a JSON-RPC 2.0 answer")
    has_result, has_error = "result" in envelope, "error" in envelope
    if has_result == has_error:
        raise AdkError((INVALID, "envelope"), "a JSON-RPC answer has a result or an error")
    answered = envelope.get("id")
    if has_error and isinstance(envelope["error"], dict) and answers(answered, request_id, True):
        raise rpc_error(envelope["error"], secrets)
    if not answers(answered, request_id):
        raise AdkError((INVALID, "id"), "the answer is for another request")
    if has_error:
        raise AdkError((INVALID, "error"), "a JSON-RPC error is an object")
    return envelope["result"]


def answers(answered: Any, request_id: int, or_null: bool = False) -> bool:
    """Is `answered` the id of request `request_id` (exactly the integer: ``1.0`` and
    ``true`` are other ids), or with `or_null` a null id (an error before the id was read)?"""
    if answered is None:
        return or_null
    return type(answered) is int and answered == request_id


def rpc_error(error: dict[str, Any], secrets: Collection[str]) -> AdkError:
    """``AdkError(("a2a_rpc_error", code), message)``; an unusable code is -32603."""
    code = error.get("code")
    if not isinstance(code, int) or isinstance(code, bool) or abs(code) > 2**31:
        code = -32603
    message = error.get("message")
    text = message[: MAX_ERROR_MESSAGE_CHARS * 4] if isinstance(message, str) else ""
    return AdkError(("a2a_rpc_error", code), redact(text, secrets)[:MAX_ERROR_MESSAGE_CHARS])


def redact(text: str, secrets: Collection[str]) -> str:
    """`text` with each credential value (and its token after a scheme word) blanked."""
    for secret in secrets:
        for value in {secret, secret.partition(" ")[2]}:
            if len(value) >= 4:
                text = text.replace(value, REDACTED)
    return text
