"""Typed actions: agents (resolved by name at dispatch, identity-checked, fresh
invocations in the workflow's lane), tools (fail closed when they want approval) and
nested workflows, as sequential steps and as graph nodes."""

from __future__ import annotations

import collections
import queue
import types
from typing import Any

import adk_actors as adk
import supervision as sv
from adk_actors.agents.messages import GetSpec, Invoke
from adk_actors.agents.names import registered_name
from adk_actors.workflows import Agent, Completed, Failed, Output, ToolCall
from providers import ScriptedProvider


@adk.tool
def value_tool(value: int) -> dict:
    """Echo a value as the state key tool_value."""
    return {"tool_value": value}


def child_workflow(output: str) -> Any:
    return adk.compile_workflow(
        {
            "version": 1,
            "id": "typed-child",
            "kind": "sequential",
            "max_steps": 2,
            "steps": [{"id": "child-step", "run": lambda s: Output(output, {"child": True})}],
        }
    )


def test_typed_adapters_continue_in_a_sequential_workflow() -> None:
    """Follows adk_workflow_graph_test: typed_adapters_continue_in_sequential_workflow."""
    adk.spawn_agent(
        "typed_sequential_agent", {"provider": "scripted", "script": [{"text": "agent-output"}]}
    )

    def final(state: dict) -> Output:
        assert state["last_response"] == "agent-output"
        assert state["last_agent"] == "typed_sequential_agent"
        assert state["tool_value"] == 9
        assert state["child"] is True
        return Output("pipeline-output", {"final": True})

    wf = adk.compile_workflow(
        {
            "version": 1,
            "id": "typed-sequential-parent",
            "kind": "sequential",
            "max_steps": 5,
            "steps": [
                {"id": "agent", "run": Agent("typed_sequential_agent", "hello")},
                {"id": "tool", "run": ToolCall(value_tool, {"value": 9})},
                {"id": "workflow", "run": child_workflow("child-output")},
                {"id": "final", "run": final},
            ],
        }
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.state["final"] is True
    assert outcome.checkpoint.output == "pipeline-output"


def test_typed_agent_tool_and_nested_workflow_nodes() -> None:
    """Follows adk_workflow_graph_test: typed_agent_tool_and_nested_workflow_nodes."""
    adk.spawn_agent(
        "typed_graph_agent", {"provider": "scripted", "script": [{"text": "agent-value"}]}
    )
    wf = adk.compile_workflow(
        {
            "version": 1,
            "id": "graph-extension-test",
            "kind": "graph",
            "entry": "agent",
            "max_steps": 10,
            "nodes": [
                {"id": "agent", "type": "agent", "agent": "typed_graph_agent", "prompt": "hello"},
                {"id": "tool", "type": "tool", "tool": value_tool, "args": {"value": 7}},
                {"id": "child", "type": "workflow", "workflow": child_workflow("child-value")},
                {"id": "done", "type": "join"},
            ],
            "edges": {"agent": "tool", "tool": "child", "child": "done", "done": "end"},
        }
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.state["last_response"] == "agent-value"
    assert outcome.state["tool_value"] == 7
    assert outcome.state["child"] is True
    assert outcome.checkpoint.output == "child-value"


def test_agent_invocations_are_fresh_and_run_in_the_workflow_lane() -> None:
    """Follows adk_workflow_graph_test: workflow_agent_invocations_are_fresh_and_receive_context."""
    histories: list[list[str]] = []
    contexts: queue.Queue[adk.ToolContext] = queue.Queue()

    @adk.tool
    def probe(ctx: adk.ToolContext) -> dict:
        """Record where the call runs."""
        contexts.put(ctx)
        return {"ok": True}

    def answer(history: list, tools: list) -> dict:
        users = [c.text_value() for c in history if c.role == "user" and c.text_value()]
        if history[-1].role == "user":
            histories.append(users)
            return {"tool_calls": [{"name": "probe", "args": {}}]}
        return {"text": "isolated"}

    adk.spawn_agent(
        "workflow_agent_isolation", {"provider": ScriptedProvider(fn=answer)}, tools=[probe]
    )
    wf = adk.compile_workflow(
        {
            "version": 1,
            "id": "graph-extension-test",
            "kind": "graph",
            "entry": "agent",
            "max_steps": 2,
            "nodes": [
                {
                    "id": "agent",
                    "type": "agent",
                    "agent": "workflow_agent_isolation",
                    "prompt": "same",
                }
            ],
            "edges": {"agent": "end"},
        }
    )
    for _ in range(2):
        outcome = adk.run_workflow(wf, {})
        assert isinstance(outcome, Completed)
        assert outcome.state["last_response"] == "isolated"
    assert histories == [["same"], ["same"]]  # no history shared between runs
    first, second = contexts.get(timeout=5), contexts.get(timeout=5)
    assert first.app_name == "adk_workflow"
    assert first.user_id == "graph-extension-test"
    assert first.session_id.startswith("workflow-")
    assert first.session_id != second.session_id


class _Alias(sv.GenServer):
    """A process registered under an agent's name that reports another name."""

    def init(self, invoked: queue.Queue) -> Any:
        return invoked

    def handle_call(self, request: Any, from_: sv.From, state: Any) -> Any:
        match request:
            case GetSpec():
                return sv.Reply(("ok", types.SimpleNamespace(name="workflow_agent_actual")), state)
            case Invoke():
                state.put(request)
                return sv.Reply(("ok", "wrong-agent"), state)
        return sv.Reply(("error", "unexpected"), state)


def test_an_agent_alias_mismatch_fails_closed() -> None:
    """Follows adk_workflow_graph_test: workflow_agent_registry_alias_mismatch_fails_closed."""
    invoked: queue.Queue[Any] = queue.Queue()
    alias = _Alias.start(invoked)
    sv.register(registered_name("workflow_agent_alias"), alias)
    try:
        wf = adk.compile_workflow(
            {
                "version": 1,
                "id": "graph-extension-test",
                "kind": "graph",
                "entry": "agent",
                "max_steps": 2,
                "nodes": [
                    {"id": "agent", "type": "agent", "agent": "workflow_agent_alias", "prompt": "x"}
                ],
                "edges": {"agent": "end"},
            }
        )
        outcome = adk.run_workflow(wf, {})
        assert isinstance(outcome, Failed)
        tag, node, failure = outcome.reason
        assert (tag, node) == ("node_failed", "agent")
        assert failure["reason"] == "agent_identity_mismatch"
        assert invoked.empty()  # the wrong agent was never asked
    finally:
        sv.stop(alias)


class _Protected(adk.Tool):
    name = "protected"
    description = "A side effect that needs approval."
    require_confirmation = True

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()

    def confirmation(self, args: dict, ctx: adk.ToolContext) -> tuple[bool, str | None]:
        self.calls["checked"] += 1
        return super().confirmation(args, ctx)

    def execute(self, args: dict, ctx: adk.ToolContext) -> Any:
        self.calls["executed"] += 1
        return {"done": True}


def _tool_workflow(tool: Any, args: dict, workflow_id: str = "workflow-confirmation") -> Any:
    return adk.compile_workflow(
        {
            "version": 1,
            "id": workflow_id,
            "kind": "sequential",
            "max_steps": 1,
            "steps": [
                {
                    "id": "protected-tool",
                    "run": ToolCall(tool, args, "tool_result"),
                    "retry": {"max_attempts": 3},
                }
            ],
        }
    )


@adk.tool
async def async_value_tool(value: int) -> dict:
    """Echo a value, from a coroutine."""
    return {"tool_value": value}


def test_an_async_function_tool_is_awaited() -> None:
    """An ``async def`` function tool is a coroutine tool (`Tool.is_async`), though its
    `execute` wrapper is a plain method: the step awaits it instead of storing a
    coroutine object."""
    outcome = adk.run_workflow(_tool_workflow(async_value_tool, {"value": 7}), {})
    assert isinstance(outcome, Completed), outcome
    assert outcome.state["tool_result"] == {"tool_value": 7}


def test_a_tool_that_wants_approval_fails_closed() -> None:
    """Follows adk_workflow_graph_test: confirmation_required_workflow_tool_fails_closed."""
    tool = _Protected()
    outcome = adk.run_workflow(_tool_workflow(tool, {"id": "side-effect"}), {})
    assert isinstance(outcome, Failed)
    tag, step, failure = outcome.reason
    assert (tag, step) == ("step_failed", "protected-tool")
    assert failure["reason"] == "tool_confirmation_requires_runner"
    assert tool.calls == {"checked": 1}  # never retried, never executed


def test_a_tool_whose_condition_is_false_runs() -> None:
    """Follows adk_workflow_graph_test: conditional_false_workflow_tool_executes."""
    seen: list[tuple[str, adk.ToolContext]] = []

    class Conditional(adk.Tool):
        name = "conditional"
        description = "Needs approval only when asked to."

        def require_confirmation(self, args: dict, ctx: adk.ToolContext) -> bool:
            seen.append(("checked", ctx))
            return bool(args["confirm"])

        def execute(self, args: dict, ctx: adk.ToolContext) -> Any:
            seen.append(("executed", ctx))
            return {"id": args["id"], "kind": "conditional"}

    wf = _tool_workflow(
        Conditional(), {"id": "read-only", "confirm": False}, "workflow-conditional"
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    result = {"id": "read-only", "kind": "conditional"}
    assert outcome.state["tool_result"] == result
    assert outcome.checkpoint.output == result
    assert [what for what, _ctx in seen] == ["checked", "executed"]
    for _what, ctx in seen:
        assert ctx.user_id == "workflow-conditional"  # the workflow id
        assert ctx.call_id == "protected-tool"  # the step id
        assert ctx.app_name == "adk_workflow"


def test_a_failing_approval_check_fails_closed() -> None:
    """Follows adk_workflow_graph_test: confirmation_evaluation_failure_fails_closed."""
    executed: list[bool] = []

    class Broken(adk.Tool):
        name = "broken"
        description = "Its approval rule raises."

        def require_confirmation(self, args: dict, ctx: adk.ToolContext) -> bool:
            raise RuntimeError("cannot evaluate")

        def execute(self, args: dict, ctx: adk.ToolContext) -> Any:
            executed.append(True)
            return {}

    outcome = adk.run_workflow(_tool_workflow(Broken(), {}), {})
    assert isinstance(outcome, Failed)
    assert outcome.reason[2]["reason"] == "tool_confirmation_evaluation_failed"
    assert executed == []
