"""`A2AProvider`: a remote A2A agent as the model of a local proxy agent (the sub-agent form).

``RemoteAgent(card_url, ...).spawn(name)`` spawns a local agent whose provider is an
`A2AProvider`, so the remote agent has a name in the local registry and works wherever
a local agent does: a parent's ``sub_agents`` naming it, ``adk.prompt``, ``adk.invoke``,
workflows. (``RemoteAgent`` itself is the tool form.)

One model call of the proxy is one remote ``SendMessage``, under one deadline
(``timeout``, the client's outbound rules unchanged): the text of the latest user turn
is sent, and the answer is the remote task's text: its artifacts' text when it is
COMPLETED (a direct message reply: that message's text), its status message (the
question) when it is INPUT_REQUIRED; any other state is
``("a2a_remote_task_failed", <state>)``. Client failures keep their own reasons
(``a2a_timeout``, ``("a2a_rpc_error", code)``, ``insecure_a2a_destination``, ...).

What the remote side sees: **a fresh remote context per call.** Only that one user
text crosses, as a new task with no context id (the remote starts a new context);
never the local history, session, state, instructions, tool declarations (no tools are
sent: the remote agent uses its own) or credentials other than ``auth()``'s. So the
remote agent does not remember earlier turns, and an INPUT_REQUIRED question answered
by a later local turn starts a new remote task (the asking one is left to the remote's
own expiry). For a multi-turn remote task, give the local model the tool form, whose
``task_id`` argument continues it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from adk_actors.a2a.client import A2AClient, aconnect, blocking
from providers import content as content_model
from providers.content import Content
from providers.errors import AdkError
from providers.outputs import ModelOutput, ToolDeclaration

__all__ = ["DEFAULT_TIMEOUT", "MAX_TEXT_CHARS", "A2AProvider", "part_texts"]

DEFAULT_TIMEOUT = 60.0
MAX_TEXT_CHARS = 65_536
FAILED = "a2a_remote_task_failed"
COMPLETED = "TASK_STATE_COMPLETED"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
_CONFIG_KEYS = frozenset({"provider"})


class A2AProvider:
    """The model of a local proxy agent: each call is one ``SendMessage`` to the remote
    agent at `card_url` (discovered on first use, or `client` if already connected)."""

    name = "a2a"

    def __init__(
        self,
        card_url: str,
        *,
        client: A2AClient | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        **connect_options: Any,
    ) -> None:
        self.card_url = card_url
        self.client = client
        self.timeout = timeout
        self._connect_options = connect_options

    def __repr__(self) -> str:
        where = self.client.rpc_url if self.client is not None else self.card_url
        return f"A2AProvider({where!r})"

    def capabilities(self) -> dict[str, Any]:
        return {"streaming": True, "function_calling": False, "content_schema_version": 1}

    def validate_config(self, config: Mapping[str, Any]) -> None:
        """Only ``provider``: anything else (instructions, a model name, a script) would
        never reach the remote agent, so it is refused rather than ignored."""
        unknown = sorted(set(config) - _CONFIG_KEYS)
        if unknown:
            raise AdkError(
                ("unknown_config_keys", tuple(unknown)),
                f"an A2A proxy agent's config has only 'provider' (not {', '.join(unknown)})",
            )

    # -- async (the agent's turn runs these on the reactor: nothing blocks) ----------------

    async def agenerate(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
    ) -> ModelOutput:
        del config, tools  # nothing of the local turn crosses but the user's text
        prompt = latest_user_text(history)
        client = await self._aclient()
        answer = await client.asend(prompt, timeout=self.timeout)
        return answer_text(answer)

    async def astream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[str], None],
    ) -> ModelOutput:
        """The whole answer as one delta (the remote call is one ``SendMessage``)."""
        return _as_text_delta(await self.agenerate(config, history, tools), on_delta)

    async def astream_content(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[Content], None],
    ) -> ModelOutput:
        return _as_content_delta(await self.agenerate(config, history, tools), on_delta)

    async def _aclient(self) -> A2AClient:
        """The connected client, the card discovered on first use (racing first uses
        each discover; the first to finish is kept)."""
        if self.client is None:
            found = await aconnect(self.card_url, **self._connect_options)
            self.client = self.client or found
        return self.client

    # -- sync (from sync code only: each runs the async call on a private loop) ------------

    def generate(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
    ) -> ModelOutput:
        return blocking(self.agenerate)(config, history, tools)

    def stream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[str], None],
    ) -> ModelOutput:
        return _as_text_delta(self.generate(config, history, tools), on_delta)

    def stream_content(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[Content], None],
    ) -> ModelOutput:
        return _as_content_delta(self.generate(config, history, tools), on_delta)


def _as_text_delta(answer: ModelOutput, on_delta: Callable[[str], None]) -> ModelOutput:
    """A stream of one remote answer: the whole text as one delta."""
    if isinstance(answer, str) and answer:
        on_delta(answer)
    return answer


def _as_content_delta(answer: ModelOutput, on_delta: Callable[[Content], None]) -> ModelOutput:
    """`_as_text_delta` for content streams: the text as one model `Content`."""
    if isinstance(answer, str) and answer:
        on_delta(content_model.new([answer], role="model"))
    return answer


def latest_user_text(history: Sequence[Content]) -> str:
    """The text of the newest ``user`` turn: what the proxy sends."""
    for item in reversed(history):
        if item.role == "user":
            text = item.text_value()
            if text:
                return text
            break
    raise AdkError(
        ("invalid_a2a_request", "prompt"), "the proxy sends the latest user turn's text: none"
    )


def answer_text(answer: Mapping[str, Any]) -> str:
    """The proxy's answer to a ``SendMessage`` result: a COMPLETED task's artifacts'
    text (its status message's if it has none), an INPUT_REQUIRED task's question, a
    reply message's text; any other state is ``("a2a_remote_task_failed", state)``."""
    task = answer.get("task")
    if not isinstance(task, Mapping):
        return _joined(part_texts(answer.get("message") or {}))
    status = task.get("status") or {}
    state = str(status.get("state", "TASK_STATE_UNSPECIFIED"))
    said = part_texts(status.get("message") or {})
    if state == COMPLETED:
        made = [text for artifact in task.get("artifacts") or () for text in part_texts(artifact)]
        return _joined(made or said)
    if state == INPUT_REQUIRED:
        return _joined(said)
    why = _joined(said)[:500]
    raise AdkError((FAILED, state), f"the remote task ended {state}" + (f": {why}" if why else ""))


def part_texts(holder: Mapping[str, Any]) -> list[str]:
    """The text of each part of a message or artifact (a data part as its compact JSON)."""
    found: list[str] = []
    for part in holder.get("parts") or ():
        if isinstance(part.get("text"), str):
            found.append(part["text"])
        elif "data" in part:
            found.append(json.dumps(part["data"], separators=(",", ":"), ensure_ascii=False))
    return found


def _joined(texts: list[str]) -> str:
    return "\n".join(texts)[:MAX_TEXT_CHARS]
