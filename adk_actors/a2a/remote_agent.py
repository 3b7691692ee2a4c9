"""`RemoteAgent`: a remote A2A agent offered to a local agent's model as a tool.

``spawn_agent(..., tools=[RemoteAgent(card_url, ...)])``: construction discovers the
card (`connect`, so every outbound rule applies), the tool is named after the card
(or ``name=``) and takes a required ``prompt`` and an optional ``task_id`` (to answer a
remote task that asked for input). ``execute`` is async: it awaits the remote
``SendMessage`` on the reactor (no thread waits for the peer) and answers the model
with the task's state, ids and text. Only the prompt crosses: never the invocation
context, history or credentials of the local agent.
"""

from __future__ import annotations

import json
import re
from typing import Any

from adk_actors.a2a.client import A2AClient, connect
from adk_actors.tools import Tool, ToolContext
from providers.errors import AdkError

__all__ = ["DEFAULT_TIMEOUT", "RemoteAgent", "tool_name"]

DEFAULT_TIMEOUT = 60.0
PROMPT = "prompt"
TASK_ID = "task_id"
MAX_TEXT_CHARS = 65_536
_INVALID = re.compile(r"[^A-Za-z0-9_]")


class RemoteAgent(Tool):
    """A remote A2A agent as a tool taking ``prompt`` (and ``task_id`` to continue)."""

    parallel_safe = True

    def __init__(
        self,
        card_url: str,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        **connect_options: Any,
    ) -> None:
        self.client: A2AClient = connect(card_url, **connect_options)
        card = self.client.card
        self.name = tool_name(name if name is not None else str(card.get("name", "")))
        self.description = (
            description
            or str(card.get("description") or "")
            or (f"Ask the remote agent {card.get('name', self.name)!r}.")
        )
        self.timeout = timeout
        self.parameters = {
            "type": "object",
            "properties": {
                PROMPT: {"type": "string", "description": "The task for the remote agent."},
                TASK_ID: {
                    "type": "string",
                    "description": "Continue this remote task (one that asked for input).",
                },
            },
            "required": [PROMPT],
            "additionalProperties": False,
        }

    def __repr__(self) -> str:
        return f"RemoteAgent({self.name!r}, {self.client.rpc_url!r})"

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        del ctx  # the invocation context never crosses to the peer
        prompt = args.get(PROMPT) if isinstance(args, dict) else None
        task_id = args.get(TASK_ID) if isinstance(args, dict) else None
        if not isinstance(prompt, str) or not (task_id is None or isinstance(task_id, str)):
            raise AdkError(
                (
                    "invalid_tool_arguments",
                    {"kind": "expected_type", "path": [PROMPT], "constraint": "type"},
                ),
                f"{self.name} takes a required string {PROMPT!r} and an optional {TASK_ID!r}",
            )
        try:
            answer = await self.client.asend(prompt, task_id=task_id or None, timeout=self.timeout)
        except (
            AdkError
        ) as error:  # the model sees a stable word: ("a2a_rpc_error", -32001) -> a2a_rpc_error
            if (
                isinstance(error.reason, tuple)
                and error.reason
                and isinstance(error.reason[0], str)
            ):
                raise AdkError(error.reason[0], error.detail) from None
            raise
        return summary(answer)

    def close(self) -> None:
        self.client.close()


def tool_name(name: str) -> str:
    """`name` made a valid tool name (letters, digits, ``_``; at most 64; no leading digit)."""
    made = _INVALID.sub("_", name.strip())[:64] or "remote_agent"
    if made[0].isdigit():
        made = ("a_" + made)[:64]
    return made


def summary(answer: dict[str, Any]) -> dict[str, Any]:
    """What the model sees of a ``SendMessage`` answer: the state, the ids and the text
    (the artifacts' text, else the status message's; a reply message's text)."""
    task = answer.get("task")
    if isinstance(task, dict):
        status = task.get("status") or {}
        texts = [
            text for artifact in task.get("artifacts") or () for text in _texts(artifact)
        ] or _texts(status.get("message") or {})
        return {
            "state": status.get("state", "TASK_STATE_UNSPECIFIED"),
            "task_id": task.get("id"),
            "context_id": task.get("contextId"),
            "text": "\n".join(texts)[:MAX_TEXT_CHARS],
        }
    message = answer.get("message") or {}
    return {
        "state": "MESSAGE",
        "task_id": message.get("taskId"),
        "context_id": message.get("contextId"),
        "text": "\n".join(_texts(message))[:MAX_TEXT_CHARS],
    }


def _texts(holder: dict[str, Any]) -> list[str]:
    """The text of each part (a data part as its compact JSON)."""
    found: list[str] = []
    for part in holder.get("parts") or ():
        if isinstance(part.get("text"), str):
            found.append(part["text"])
        elif "data" in part:
            found.append(json.dumps(part["data"], separators=(",", ":"), ensure_ascii=False))
    return found
