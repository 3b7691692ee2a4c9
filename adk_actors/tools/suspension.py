"""Tool results that pause the invocation instead of answering at once.

A tool returns `long_running(operation_id, message)` when the work goes on outside
the process: the Runner stores a pause and no worker stays blocked; the application
later reports progress (`Runner.update_long_running`) and one terminal completion
(`Runner.resume`). `request_human_approval` is the built-in tool a model calls to
ask a human before acting; the human's answer becomes its function response.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adk_actors.tools.tool import Tool, ToolContext
from providers.errors import AdkError

MAX_OPERATION_ID_CHARS = 256
MAX_PAUSE_MESSAGE_CHARS = 4096


@dataclass(frozen=True)
class Suspension:
    """A request to pause: `kind` is ``long_running`` or ``human_in_the_loop``."""

    kind: str
    message: str
    operation_id: str | None = None


def long_running(operation_id: str, message: str = "") -> Suspension:
    """What a tool returns to suspend on an external operation named `operation_id`."""
    if (
        not isinstance(operation_id, str)
        or not operation_id
        or len(operation_id) > MAX_OPERATION_ID_CHARS
    ):
        raise AdkError(
            "invalid_long_running_operation",
            f"operation_id is a non-empty string of at most {MAX_OPERATION_ID_CHARS} characters",
        )
    return Suspension("long_running", _bounded_message(message), operation_id)


class RequestHumanApproval(Tool):
    """The model asks a human before a consequential action; the run pauses."""

    name = "request_human_approval"
    description = (
        "Ask a human to approve an action before doing it. Call it with a short summary "
        "of what you intend to do; the human's answer comes back as this tool's result."
    )
    parameters = {
        "type": "object",
        "properties": {
            "summary": {"type": "string", "description": "What needs approval, in a sentence."}
        },
        "required": ["summary"],
        "additionalProperties": False,
    }

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> Suspension:
        return Suspension("human_in_the_loop", _bounded_message(args["summary"]))


request_human_approval = RequestHumanApproval()


def _bounded_message(message: Any) -> str:
    if not isinstance(message, str):
        raise AdkError("invalid_pause_message", "a pause message is a string")
    return message[:MAX_PAUSE_MESSAGE_CHARS]
