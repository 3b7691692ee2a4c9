"""Explicit planning and replanning: a trusted planner proposes a versioned JSON plan,
a trusted executor runs its steps, the planner reviews each observation and may
replan, all within step, replan, byte and time budgets (see `docs/workflows.md`).

import adk_actors as adk

result = adk.run_planning(planner, executor, {"task": "prepare release"}, max_replans=1)
result["status"], result["result"], result.plans
"""

from adk_actors.planning.adapters import CONTINUE, Complete, Fail, Planner, Replan
from adk_actors.planning.agent_planner import AgentPlanner
from adk_actors.planning.api import PlanningRef, cancel, run_planning, start, wait
from adk_actors.planning.plan import decode_plan_json, new_plan, plan_step, validate_plan
from adk_actors.planning.result import RESULT_KEYS, PlanningResult, decode_result

__all__ = [
    "CONTINUE",
    "RESULT_KEYS",
    "AgentPlanner",
    "Complete",
    "Fail",
    "Planner",
    "PlanningRef",
    "PlanningResult",
    "Replan",
    "cancel",
    "decode_plan_json",
    "decode_result",
    "new_plan",
    "plan_step",
    "run_planning",
    "start",
    "validate_plan",
    "wait",
]
