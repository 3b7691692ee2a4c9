"""`AgentTool`: another agent, offered to a model as a tool (how sub-agents work).

The tool takes one required string, ``prompt``: the task for the target agent. The
target is resolved by name at call time, so a restarted sub-agent is found. The call
carries the chain of delegating agents: a target already in it (``delegation_cycle``)
or a chain of 64 (``delegation_depth_exceeded``) is refused before the target's
provider runs (`scope.check_ancestry`, shared with `adk.invoke`), and the refusal goes
back to the calling model as a failed tool result. Only the safe scope crosses: never
history or credentials.
"""

from __future__ import annotations

from typing import Any

from adk_actors.agents import calls
from adk_actors.agents.names import check_agent_name
from adk_actors.agents.scope import MAX_DELEGATION_DEPTH, Scope
from adk_actors.tools import Tool, ToolContext
from providers.content import Content
from providers.errors import AdkError

__all__ = ["DEFAULT_TIMEOUT", "MAX_DELEGATION_DEPTH", "PROMPT", "AgentTool"]

DEFAULT_TIMEOUT = 60.0
PROMPT = "prompt"


class AgentTool(Tool):
    """Offer agent `name` to a model as a tool taking one required ``prompt`` string."""

    def __init__(
        self, agent: Any, description: str = "", *, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        self.name = check_agent_name(getattr(agent, "name", agent))
        self.description = description or f"Ask the {self.name} agent."
        self.timeout = timeout
        self.parameters = {
            "type": "object",
            "properties": {
                PROMPT: {"type": "string", "description": f"The task instruction for {self.name}."}
            },
            "required": [PROMPT],
            "additionalProperties": False,
        }

    def __repr__(self) -> str:
        return f"AgentTool({self.name!r})"

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        prompt = args.get(PROMPT) if isinstance(args, dict) else None
        if not isinstance(prompt, str):  # an agent's catalog refuses this before it runs
            kind = "required_property" if prompt is None else "expected_type"
            constraint = "required" if prompt is None else "type"
            raise AdkError(
                (
                    "invalid_tool_arguments",
                    {"kind": kind, "path": [PROMPT], "constraint": constraint},
                ),
                f"{self.name} takes a required string {PROMPT!r}",
            )
        answer = calls.invoke(
            self.name,
            prompt,
            Scope(ctx.app_name, ctx.user_id, ctx.session_id),
            self.timeout,
            ancestry=ctx.ancestry,
            global_instruction=ctx.global_instruction,
            state=ctx.state,
            plugins=getattr(ctx, "plugins", None),  # a Runner's plugins carry over
        )
        return {"result": answer.text_value() if isinstance(answer, Content) else answer}
