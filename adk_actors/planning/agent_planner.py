"""`AgentPlanner`: a planner that asks an agent for its plan, as JSON.

The agent is named, not held: each call resolves it (a restarted agent is used) and
makes a fresh invocation, so no conversation history leaks between calls. The agent
answers JSON only; the planner sets the plan's identity itself (``id``,
``revision``, ``goal``), so a model can propose steps but never rewrite what the
runtime checks. Answers:

    plan:   {"steps": [{"id", "description", "action": {...}}, ...], "metadata"?}
            or {"complete": <result>} when no step is needed
    review: {"decision": "continue"} | {"decision": "replan", "steps": [...]}
            | {"decision": "complete", "result": <value>}
            | {"decision": "fail", "reason": "<why>"}

Text that is not a JSON object (a code fence around it is fine) or repeats a key
makes the call fail (``invalid_plan_json`` / ``("duplicate_plan_field", key)``,
``invalid_planner_answer`` for a well-formed but unknown answer); the steps
themselves are checked by the runtime like any plan (``invalid_initial_plan``,
``invalid_replan``).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from typing import Any, Literal

from adk_actors.agents import AgentRef, invoke
from adk_actors.planning.adapters import CONTINUE, Complete, Fail, Replan
from adk_actors.planning.plan import decode_plan_json, json_copy
from providers.content import Content
from providers.errors import AdkError, key_name

APP_NAME = "adk_planning"
MAX_PROMPT_CHARS = 256 * 1024
_IDENTITY = frozenset({"schema_version", "id", "revision", "goal", "steps", "metadata"})
"""Fields the planner sets itself (or takes from the answer: steps, metadata)."""
_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n(?P<body>.*)\n\s*```\s*$", re.S)

_PLAN_INSTRUCTIONS = """You are a planner. Propose a plan that reaches the goal below.
Answer with one JSON object and nothing else:
{"steps": [{"id": "<unique id>", "description": "<what the step does>", "action": {<a JSON object in the action vocabulary>}}]}
Use only the actions listed under "actions". If the goal needs no step, answer {"complete": <the result>}."""

_REVIEW_INSTRUCTIONS = """You are a planner reviewing the step that just ran.
Answer with one JSON object and nothing else, one of:
{"decision": "continue"}  (run the next step of the plan)
{"decision": "replan", "steps": [<steps, as in the plan>]}  (replace the remaining plan)
{"decision": "complete", "result": <the result>}
{"decision": "fail", "reason": "<why the goal cannot be reached>"}"""


class AgentPlanner:
    """A planner backed by a running agent (see the module doc).

    `actions` describes the executor's action vocabulary to the model (any JSON, e.g.
    ``{"lookup": {"kind": "lookup", "query": "<text>"}}``). `review` is
    ``"on_error"`` (default: a step that worked continues the plan without a model
    call; a failed step is reviewed) or ``"always"``. `timeout` bounds each agent call
    (the run's ``callback_timeout`` bounds it too).
    """

    def __init__(
        self,
        agent: str | AgentRef,
        *,
        plan_id: str = "agent-plan",
        actions: Any = None,
        review: Literal["on_error", "always"] = "on_error",
        timeout: float = 30.0,
    ) -> None:
        if review not in ("on_error", "always"):
            raise AdkError("invalid_review_mode", "review is 'on_error' or 'always'")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise AdkError("invalid_timeout", "timeout is seconds > 0")
        self.agent = agent
        self.plan_id = plan_id
        self.actions = json_copy(actions, "invalid_actions")
        self.review_mode = review
        self.timeout = float(timeout)

    def __repr__(self) -> str:
        name = self.agent.name if isinstance(self.agent, AgentRef) else self.agent
        return f"AgentPlanner({name!r})"

    def plan(self, goal: Any, context: dict[str, Any]) -> Any:
        """Ask the agent for the initial plan (revision 0)."""
        request = {"goal": goal, "context": context, "actions": self.actions}
        answer = self._ask(_PLAN_INSTRUCTIONS, request)
        if set(answer) == {"complete"}:
            return Complete(answer["complete"])
        return self._plan(answer, 0, goal, {})

    def review(
        self,
        plan: dict[str, Any],
        step: dict[str, Any],
        observation: dict[str, Any],
        context: dict[str, Any],
    ) -> Any:
        """``continue`` for a step that worked (in ``on_error`` mode); else the agent's
        decision."""
        if self.review_mode == "on_error" and observation.get("status") == "ok":
            return CONTINUE
        request = {
            "goal": plan["goal"],
            "context": context,
            "actions": self.actions,
            "plan": plan,
            "step": step,
            "observation": observation,
        }
        answer = self._ask(_REVIEW_INSTRUCTIONS, request)
        match answer.get("decision"):
            case "continue":
                return CONTINUE
            case "complete":
                return Complete(answer.get("result"))
            case "fail":
                return Fail(answer.get("reason", "planner_failed"))
            case "replan":
                body = {key: value for key, value in answer.items() if key != "decision"}
                return Replan(
                    self._plan(body, plan["revision"] + 1, plan["goal"], plan["metadata"])
                )
        raise AdkError("invalid_planner_answer", "the agent's decision is not one of the four")

    def _plan(
        self, answer: Mapping[str, Any], revision: int, goal: Any, metadata: Any
    ) -> dict[str, Any]:
        """The agent's steps under the identity the runtime expects; anything else
        than ``steps`` and ``metadata`` is refused by the plan check."""
        extra = {key: value for key, value in answer.items() if key not in _IDENTITY}
        return {
            **extra,
            "id": self.plan_id,
            "revision": revision,
            "goal": goal,
            "steps": answer.get("steps"),
            "metadata": answer.get("metadata", metadata),
        }

    def _ask(self, instructions: str, request: dict[str, Any]) -> dict[str, Any]:
        text = f"{instructions}\n\n{json.dumps(request, ensure_ascii=False, sort_keys=True)}"
        if len(text) > MAX_PROMPT_CHARS:
            raise AdkError("planner_prompt_too_large", "the plan request is too large")
        scope = (APP_NAME, self.plan_id, f"call-{uuid.uuid4().hex}")
        reply = invoke(self.agent, text, scope=scope, timeout=self.timeout)
        answer = decode_plan_json(
            _unfenced(reply.text_value() if isinstance(reply, Content) else reply)
        )
        if not isinstance(answer, Mapping):
            raise AdkError("invalid_plan_json", "the agent's answer is not a JSON object")
        duplicate = getattr(answer, "duplicate", None)
        if duplicate is not None:
            raise AdkError(("duplicate_plan_field", key_name(duplicate)), "a field is given twice")
        return dict(answer)


def _unfenced(text: str) -> str:
    """The JSON inside a Markdown code fence, or the text as it is."""
    fenced = _FENCE.match(text)
    return fenced["body"] if fenced else text
