"""One agent turn: model call, tool rounds, final answer. Runs inside a `Task`.

The turn never raises: it returns ``("ok", output, new_contents)`` or
``("error", reason)``, so a provider's `AdkError` reason reaches the caller as is
(a crash would only carry its class name).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import structlog

from adk_actors.agents.spec import AgentSpec
from adk_actors.tools import ToolContext
from providers import content as content_model
from providers import protocol
from providers.content import Content
from providers.errors import AdkError
from providers.protocol import ToolCalls
from supervision.process import is_fenced_thread

_log = structlog.get_logger("adk.agents")


@dataclass(frozen=True)
class Scope:
    """Who an invocation belongs to: it keys the lane and reaches tools."""

    app_name: str | None = None
    user_id: str | None = None
    session_id: str | None = None

    def lane(self) -> tuple[str, ...]:
        if self.app_name and self.user_id and self.session_id:
            return ("scoped", self.app_name, self.user_id, self.session_id)
        return ("unscoped",)


def as_content(message: str | Content) -> Content:
    if isinstance(message, Content):
        return content_model.validate(message)
    if isinstance(message, str):
        return content_model.from_text(message)
    raise AdkError("invalid_message", "a message is a str or a Content")


def run_turn(
    spec: AgentSpec,
    history: Sequence[Content],
    message: Content,
    scope: Scope,
    invocation_id: str,
    ancestry: tuple[str, ...] = (),
) -> tuple[Any, ...]:
    started = time.monotonic()
    contents = [*history, message]
    rounds = 0
    try:
        while True:
            result = protocol.generate(spec.provider_config, contents, spec.catalog.declarations())
            output, _metadata = protocol.unwrap(result)
            if not isinstance(output, ToolCalls):
                contents.append(
                    output
                    if isinstance(output, Content)
                    else content_model.from_text(output, role="model")
                )
                if not is_fenced_thread():  # a killed turn's result goes nowhere
                    _log.info(
                        "adk.agent.turn_completed",
                        agent=spec.name,
                        tool_rounds=rounds,
                        seconds=round(time.monotonic() - started, 4),
                    )
                return ("ok", output, contents[len(history) :])
            rounds += 1
            if rounds > spec.max_tool_rounds:
                return ("error", "max_tool_rounds_exceeded")
            contents.append(output.content)
            responses = []
            for call in output.calls:
                ctx = ToolContext(
                    app_name=scope.app_name,
                    user_id=scope.user_id,
                    session_id=scope.session_id,
                    invocation_id=invocation_id,
                    call_id=call.id,
                    agent_name=spec.name,
                    state=MappingProxyType({}),
                    ancestry=(*ancestry, spec.name),
                )
                responses.append(spec.catalog.call(call, ctx))
            contents.append(Content("tool", tuple(responses)))
    except AdkError as error:
        _log.info("adk.agent.turn_failed", agent=spec.name, reason=str(error.reason)[:200])
        return ("error", error.reason)
