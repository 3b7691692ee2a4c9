"""`RemoteAgent`: a remote A2A agent offered to a local agent's model as a tool, or
spawned as a local proxy agent (`RemoteAgent.spawn`, the sub-agent form: `remote_provider`).

``spawn_agent(..., tools=[RemoteAgent(card_url, ...)])``: the tool is named after the
card (or ``name=``) and takes a required ``prompt`` and an optional ``task_id`` (to
answer a remote task that asked for input). Built from sync code, construction
discovers the card (`connect`, so every outbound rule applies and a bad peer fails
there). Inside a running event loop construction never blocks: give ``name=`` and the
card is discovered (`aconnect`) on the first ``execute``, or ``await
RemoteAgent.create(card_url, ...)`` to discover it now (a sync build there without
``name=`` raises ``("a2a_sync_call_in_event_loop", "RemoteAgent.create")``).
``execute`` is async: it awaits the remote ``SendMessage`` on the reactor (no thread
waits for the peer) and answers the model with the task's state, ids and text. Only
the prompt crosses: never the invocation context, history or credentials of the local
agent.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from adk_actors.a2a.client import SYNC_IN_LOOP, A2AClient, aconnect, connect
from adk_actors.a2a.remote_provider import A2AProvider, part_texts
from adk_actors.agents import AgentRef, spawn_agent
from adk_actors.tools import Tool, ToolContext
from providers.errors import AdkError

__all__ = ["DEFAULT_TIMEOUT", "RemoteAgent", "tool_name"]

DEFAULT_TIMEOUT = 60.0
PROMPT = "prompt"
TASK_ID = "task_id"
MAX_TEXT_CHARS = 65_536
_INVALID = re.compile(r"[^A-Za-z0-9_]")
_QUESTION_FIRST = frozenset(
    {
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_AUTH_REQUIRED",
        "TASK_STATE_FAILED",
        "TASK_STATE_REJECTED",
    }
)
"""States whose status message (the question, the failure) matters more than any
artifact an earlier turn left."""


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
        self.card_url = card_url
        self._connect_options = connect_options
        self.client: A2AClient | None = None
        if not _loop_running():
            self.client = connect(card_url, **connect_options)
        elif name is None:
            raise AdkError(
                (SYNC_IN_LOOP, "RemoteAgent.create"),
                "inside a running event loop pass name= (the card is discovered on first "
                "use) or use `await RemoteAgent.create(...)`",
            )
        self._describe(name, description, timeout)

    @classmethod
    async def create(
        cls,
        card_url: str,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        **connect_options: Any,
    ) -> RemoteAgent:
        """A `RemoteAgent` whose card is discovered now, awaited (for async code)."""
        made = cls.__new__(cls)
        made.card_url = card_url
        made._connect_options = connect_options
        made.client = await aconnect(card_url, **connect_options)
        made._describe(name, description, timeout)
        return made

    def _describe(self, name: str | None, description: str | None, timeout: float) -> None:
        card = self.client.card if self.client is not None else {}
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

    async def _client(self) -> A2AClient:
        """The connected client, discovering the card on first use (racing first uses
        each discover; the first to finish is kept)."""
        if self.client is None:
            found = await aconnect(self.card_url, **self._connect_options)
            self.client = self.client or found
        return self.client

    def __repr__(self) -> str:
        where = self.client.rpc_url if self.client is not None else self.card_url
        return f"RemoteAgent({self.name!r}, {where!r})"

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
            client = await self._client()
            answer = await client.asend(prompt, task_id=task_id or None, timeout=self.timeout)
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

    def spawn(self, name: str | None = None, **spawn_options: Any) -> AgentRef:
        """The sub-agent form: a local agent named `name` (default: this tool's name)
        whose model is the remote agent (`A2AProvider`: one ``SendMessage`` per model
        call, a fresh remote context each time), so a parent's ``sub_agents``,
        ``adk.prompt`` and workflows can name it. `spawn_options` are agent config keys
        (``turn_timeout``, ``restart_intensity``, ...); a proxy has no ``provider``,
        ``sub_agents`` or instructions of its own. It shares this tool's client (or
        discovers the card on its first call), deadline and outbound rules."""
        for key in ("provider", "sub_agents", "instructions", "global_instruction"):
            if key in spawn_options:
                raise AdkError(
                    ("invalid_a2a_spawn_option", key),
                    f"a proxy of a remote agent takes no {key!r}: the remote agent has its own",
                )
        provider = A2AProvider(
            self.card_url, client=self.client, timeout=self.timeout, **self._connect_options
        )
        return spawn_agent(
            name if name is not None else self.name, {**spawn_options, "provider": provider}
        )

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def tool_name(name: str) -> str:
    """`name` made a valid tool name (letters, digits, ``_``; at most 64; no leading digit)."""
    made = _INVALID.sub("_", name.strip())[:64] or "remote_agent"
    if made[0].isdigit():
        made = ("a_" + made)[:64]
    return made


def summary(answer: dict[str, Any]) -> dict[str, Any]:
    """What the model sees of a ``SendMessage`` answer: the state, the ids and the text
    (the artifacts' text, else the status message's; the status message first when the
    task asks for input or auth, failed or was rejected; a reply message's text)."""
    task = answer.get("task")
    if isinstance(task, dict):
        status = task.get("status") or {}
        state = status.get("state", "TASK_STATE_UNSPECIFIED")
        said = part_texts(status.get("message") or {})
        made = [text for artifact in task.get("artifacts") or () for text in part_texts(artifact)]
        texts = (said or made) if state in _QUESTION_FIRST else (made or said)
        return {
            "state": state,
            "task_id": task.get("id"),
            "context_id": task.get("contextId"),
            "text": "\n".join(texts)[:MAX_TEXT_CHARS],
        }
    message = answer.get("message") or {}
    return {
        "state": "MESSAGE",
        "task_id": message.get("taskId"),
        "context_id": message.get("contextId"),
        "text": "\n".join(part_texts(message))[:MAX_TEXT_CHARS],
    }


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
