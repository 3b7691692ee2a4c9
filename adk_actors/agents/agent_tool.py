"""`AgentTool`: another agent, offered to a model as a tool (how sub-agents work).

The target is resolved by name at call time, so a restarted sub-agent is found. The
call carries the chain of delegating agents: a target already in it
(``delegation_cycle``) or a chain of 64 (``delegation_depth_exceeded``) is refused
before the target's provider runs, and the refusal goes back to the calling model as
a failed tool result. Only the safe scope crosses: never history or credentials.
"""

from __future__ import annotations

from typing import Any

from adk_actors.agents import calls
from adk_actors.agents.names import check_agent_name
from adk_actors.agents.scope import Scope
from adk_actors.tools import Tool, ToolContext
from providers.content import Content
from providers.errors import AdkError

MAX_DELEGATION_DEPTH = 64
DEFAULT_TIMEOUT = 60.0


class AgentTool(Tool):
    """Offer agent `name` to a model as a tool taking one ``request`` string."""

    def __init__(
        self, agent: Any, description: str = "", *, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        self.name = check_agent_name(getattr(agent, "name", agent))
        self.description = description or f"Ask the {self.name} agent."
        self.timeout = timeout
        self.parameters = {
            "type": "object",
            "properties": {
                "request": {"type": "string", "description": f"What to ask {self.name}"}
            },
            "required": ["request"],
            "additionalProperties": False,
        }

    def __repr__(self) -> str:
        return f"AgentTool({self.name!r})"

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        if self.name in ctx.ancestry:
            raise AdkError("delegation_cycle", f"{self.name} is already in this delegation chain")
        if len(ctx.ancestry) >= MAX_DELEGATION_DEPTH:
            raise AdkError(
                "delegation_depth_exceeded",
                f"delegation chains stop at {MAX_DELEGATION_DEPTH} agents",
            )
        answer = calls.invoke(
            self.name,
            args["request"],
            Scope(ctx.app_name, ctx.user_id, ctx.session_id),
            self.timeout,
            ancestry=ctx.ancestry,
            global_instruction=ctx.global_instruction,
            state=ctx.state,
        )
        return {"result": answer.text_value() if isinstance(answer, Content) else answer}
