"""Graph workflows: edges and routes, step budgets, two-phase routing (a committed
node is never run again when routing resumes), routers and loop nodes, output/stop."""

from __future__ import annotations

import queue
import threading

import adk_actors as adk
from adk_actors.workflows import Completed, Failed, Goto, Output, Route, Stop
from tests.helpers import wait_until


def graph_spec(entry: str, nodes: list, edges: dict, max_steps: int, **extra: object) -> dict:
    return {
        "version": 1,
        "id": "graph-extension-test",
        "kind": "graph",
        "entry": entry,
        "nodes": nodes,
        "edges": edges,
        "max_steps": max_steps,
        **extra,
    }


def increment(state: dict) -> dict:
    return {"count": state.get("count", 0) + 1}


def test_route_and_step_budget() -> None:
    """Follows adk_workflow_test: graph_route_and_step_budget_case."""

    def finish(state: dict) -> dict:
        assert state["count"] == 1
        return {"finished": True}

    def route(state: dict) -> str:
        return "finish" if state["count"] == 1 else "missing"

    wf = adk.compile_workflow(
        graph_spec(
            "increment",
            [{"id": "increment", "run": increment}, {"id": "finish", "run": finish}],
            {"increment": Route(route), "finish": "end"},
            3,
        )
    )
    outcome = adk.run_workflow(wf, {"count": 0})
    assert isinstance(outcome, Completed)
    assert outcome.state["finished"] is True

    cycle = adk.compile_workflow(
        graph_spec("cycle", [{"id": "cycle", "run": increment}], {"cycle": "cycle"}, 3)
    )
    outcome = adk.run_workflow(cycle, {"count": 0})
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("budget_exhausted", "steps")
    assert outcome.checkpoint.state["count"] == 3

    unknown = adk.compile_workflow(
        graph_spec(
            "increment",
            [{"id": "increment", "run": increment}, {"id": "finish", "run": finish}],
            {"increment": lambda s: "missing", "finish": "end"},
            3,
        )
    )
    outcome = adk.run_workflow(unknown, {"count": 5})
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("route_failed", "increment", "invalid_route")


def test_graph_readme_example() -> None:
    """Follows readme_workflow_examples_test: loop_transfer_and_graph_workflows (the graph)."""

    def counter(state: dict) -> Output:
        count = state.get("count", 0) + 1
        return Output(count, {"count": count})

    def route(state: dict, context: dict) -> str:
        return "counter" if context["input"] < 3 else "end"

    wf = adk.compile_workflow(
        graph_spec(
            "counter",
            [{"id": "counter", "run": counter}],
            {"counter": Route(route)},
            5,
            id="readme-graph-v1",
        )
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"count": 3}
    assert outcome.checkpoint.output == 3


def test_committed_node_is_not_replayed_when_routing_resumes() -> None:
    """Follows adk_workflow_graph_test: committed_node_is_not_replayed_when_routing_resumes."""
    calls = {"action": 0}
    allow_route = threading.Event()
    blocked: queue.Queue[bool] = queue.Queue()
    unblock = threading.Event()

    def action(state: dict) -> Output:
        calls["action"] += 1
        return Output("route-input", {"committed": True})

    def route(state: dict, context: dict) -> str:
        assert context["input"] == "route-input"
        if allow_route.is_set():
            return "done"
        blocked.put(True)
        unblock.wait(10)
        return "done"

    def done(state: dict, context: dict) -> dict:
        assert context["input"] == "route-input"
        return {"done": True}

    wf = adk.compile_workflow(
        graph_spec(
            "action",
            [{"id": "action", "run": action}, {"id": "done", "run": done}],
            {"action": Route(route), "done": "end"},
            6,
        )
    )
    ref = adk.workflows.start(wf, {})
    assert blocked.get(timeout=10)

    def routing() -> object:
        cp = adk.workflows.checkpoint(ref)
        return cp if cp.cursor.phase == "routing" and cp.state.get("committed") else None

    observed = wait_until(routing)
    adk.workflows.cancel(ref, "route_resume")
    cancelled = adk.workflows.wait(ref, timeout=10)
    assert cancelled.reason == "route_resume"
    assert cancelled.checkpoint.cursor == observed.cursor
    assert cancelled.checkpoint.cursor.node_output == "route-input"
    unblock.set()
    allow_route.set()
    resumed = adk.workflows.resume(wf, cancelled.checkpoint)
    outcome = adk.workflows.wait(resumed, timeout=10)
    assert isinstance(outcome, Completed)
    assert outcome.state["done"] is True
    assert calls["action"] == 1


def test_dynamic_branch_and_loop_are_bounded() -> None:
    """Follows adk_workflow_graph_test: dynamic_branch_and_loop_are_bounded."""
    branch_graph = adk.compile_workflow(
        graph_spec(
            "choose",
            [
                {
                    "id": "choose",
                    "type": "dynamic",
                    "choose": lambda s: s["choice"],
                    "targets": ["left", "right"],
                },
                {"id": "left", "run": lambda s: {"picked": "left"}},
                {"id": "right", "run": lambda s: {"picked": "right"}},
            ],
            {"left": "end", "right": "end"},
            4,
        )
    )
    outcome = adk.run_workflow(branch_graph, {"choice": "right"})
    assert isinstance(outcome, Completed)
    assert outcome.state["picked"] == "right"
    outside = adk.run_workflow(branch_graph, {"choice": "outside"})
    assert isinstance(outside, Failed)
    assert outside.reason == ("route_failed", "choose", "target_not_allowed")
    assert "outside" not in repr(outside.reason)

    loop_node = {
        "id": "loop",
        "type": "loop",
        "while": lambda s: s["count"] < 3,
        "body": "body",
        "done": "done",
        "max_iterations": 3,
    }
    nodes = [loop_node, {"id": "body", "run": increment}, {"id": "done", "type": "join"}]
    loop_graph = adk.compile_workflow(
        graph_spec("loop", nodes, {"body": "loop", "done": "end"}, 12)
    )
    outcome = adk.run_workflow(loop_graph, {"count": 0})
    assert isinstance(outcome, Completed)
    assert outcome.state["count"] == 3

    bound = {**loop_node, "max_iterations": 2, "while": lambda s: True}
    bound_graph = adk.compile_workflow(
        graph_spec("loop", [bound, *nodes[1:]], {"body": "loop", "done": "end"}, 12)
    )
    outcome = adk.run_workflow(bound_graph, {"count": 0})
    assert isinstance(outcome, Completed)
    assert outcome.state["count"] == 2
    assert outcome.checkpoint.completed is True


def test_a_router_may_add_a_delta_and_go_to_the_end() -> None:
    """Follows adk_workflow_graph_test: dynamic_branch_and_loop_are_bounded (the
    reference router's ``{route, Target, Delta}`` result, here `Goto`)."""
    wf = adk.compile_workflow(
        graph_spec(
            "choose",
            [
                {
                    "id": "choose",
                    "type": "branch",
                    "choose": lambda s: Goto("end", {"chosen": True}),
                    "targets": ["work", "end"],
                },
                {"id": "work", "run": lambda s: {"worked": True}},
            ],
            {"work": "end"},
            4,
        )
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"chosen": True}


def test_output_continues_and_stop_terminates_the_graph() -> None:
    """Follows adk_workflow_graph_test: output_continues_and_stop_terminates_graph."""
    never = threading.Event()

    def stop(state: dict) -> Stop:
        assert state["first"] is True
        return Stop("graph-stopped", {"stopped": True})

    def must_not_run(state: dict) -> dict:
        never.set()
        return {"never": True}

    wf = adk.compile_workflow(
        graph_spec(
            "first",
            [
                {"id": "first", "run": lambda s: Output("intermediate", {"first": True})},
                {"id": "stop", "run": stop},
                {"id": "never", "run": must_not_run},
            ],
            {"first": "stop", "stop": "never", "never": "end"},
            4,
        )
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"first": True, "stopped": True}
    assert outcome.checkpoint.output == "graph-stopped"
    assert not never.is_set()


def test_a_goto_names_the_successor() -> None:
    """Follows adk_workflow_graph_test: output_continues_and_stop_terminates_graph (the
    reference's explicit ``{route, Target, Delta}`` node result, here `Goto`)."""
    wf = adk.compile_workflow(
        graph_spec(
            "start",
            [
                {"id": "start", "run": lambda s: Goto("second", {"went": True})},
                {"id": "first", "run": lambda s: {"first": True}},
                {"id": "second", "run": lambda s, c: {"second_input": c["input"]}},
            ],
            {"start": "first", "first": "end", "second": "end"},
            4,
        )
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"went": True, "second_input": None}


def test_a_goto_to_an_unknown_node_fails_before_anything_commits() -> None:
    """Follows adk_workflow_graph_test: output_continues_and_stop_terminates_graph (a
    result can name only nodes the compiled graph holds; the failed run's checkpoint
    is the last good boundary, so it can be resumed)."""
    calls: list[str] = []

    def start(state: dict) -> Goto:
        calls.append("start")
        return Goto("ghost" if len(calls) == 1 else "end", {"went": len(calls)})

    wf = adk.compile_workflow(
        graph_spec("start", [{"id": "start", "run": start}], {"start": "end"}, 4)
    )
    outcome = adk.run_workflow(wf, {})
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("route_failed", "start", "invalid_route")
    assert outcome.checkpoint.state == {}  # the node's delta was not committed
    resumed = adk.workflows.wait(adk.workflows.resume(wf, outcome.checkpoint), timeout=5)
    assert isinstance(resumed, Completed)
    assert resumed.state == {"went": 2}
