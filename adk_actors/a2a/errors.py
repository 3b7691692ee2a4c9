"""A2A 1.0 JSON-RPC errors: the codes the spec names, `RpcError` and the response envelopes.

An `RpcError` is what the HTTP layer answers with; its `data` is a small, secret-free
mapping (never tokens, principal ids or stack traces), so a refusal can always be
rendered as it is.
"""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
PUSH_NOTIFICATION_NOT_SUPPORTED = -32003
UNSUPPORTED_OPERATION = -32004
CONTENT_TYPE_NOT_SUPPORTED = -32005
INVALID_AGENT_RESPONSE = -32006
EXTENDED_CARD_NOT_CONFIGURED = -32007
EXTENSION_SUPPORT_REQUIRED = -32008
VERSION_NOT_SUPPORTED = -32009

ERROR_NAMES: dict[int, str] = {
    PARSE_ERROR: "parse_error",
    INVALID_REQUEST: "invalid_request",
    METHOD_NOT_FOUND: "method_not_found",
    INVALID_PARAMS: "invalid_params",
    INTERNAL_ERROR: "internal_error",
    TASK_NOT_FOUND: "task_not_found",
    TASK_NOT_CANCELABLE: "task_not_cancelable",
    PUSH_NOTIFICATION_NOT_SUPPORTED: "push_notification_not_supported",
    UNSUPPORTED_OPERATION: "unsupported_operation",
    CONTENT_TYPE_NOT_SUPPORTED: "content_type_not_supported",
    INVALID_AGENT_RESPONSE: "invalid_agent_response",
    EXTENDED_CARD_NOT_CONFIGURED: "extended_card_not_configured",
    EXTENSION_SUPPORT_REQUIRED: "extension_support_required",
    VERSION_NOT_SUPPORTED: "version_not_supported",
}
"""A stable snake_case name per code (for logs and metrics labels)."""

MAX_ERROR_MESSAGE_CHARS = 512
"""An error message longer than this is cut (it is for people; the code is the contract)."""


class RpcError(Exception):
    """A JSON-RPC error to answer with: `code`, a short `message` and optional `data`."""

    code: int
    message: str
    data: dict[str, Any] | None

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        self.code = code
        self.message = message[:MAX_ERROR_MESSAGE_CHARS]
        self.data = data
        super().__init__(f"{code}: {self.message}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def task_not_found() -> RpcError:
    """The same answer for an unknown task and another principal's task (no oracle)."""
    return RpcError(TASK_NOT_FOUND, "task not found")


def task_not_cancelable(state: str) -> RpcError:
    """A cancel of a task already in the terminal `state` (e.g. ``TASK_STATE_COMPLETED``)."""
    return RpcError(TASK_NOT_CANCELABLE, "task is not cancelable", {"state": state})


def invalid_params(why: str) -> RpcError:
    """Params that do not parse or break a rule; `why` says which (no values echoed)."""
    return RpcError(INVALID_PARAMS, "invalid params", {"reason": why[:MAX_ERROR_MESSAGE_CHARS]})


def parse_error(why: str) -> RpcError:
    """A body that is not UTF-8 JSON (-32700); `why` says what (no values echoed)."""
    return RpcError(PARSE_ERROR, "invalid JSON payload", {"reason": why[:MAX_ERROR_MESSAGE_CHARS]})


def invalid_request(why: str) -> RpcError:
    """JSON past a whole-document bound or not a request object (-32600)."""
    return RpcError(INVALID_REQUEST, "invalid request", {"reason": why[:MAX_ERROR_MESSAGE_CHARS]})


def error_response(request_id: str | int | None, error: RpcError) -> dict[str, Any]:
    """``{"jsonrpc": "2.0", "id": ..., "error": {...}}``."""
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_dict()}


def result_response(request_id: str | int | None, result: dict[str, Any]) -> dict[str, Any]:
    """``{"jsonrpc": "2.0", "id": ..., "result": ...}``."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}
