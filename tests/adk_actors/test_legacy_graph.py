"""The legacy graph helpers (`adk.graph`), a thin layer over the graph workflow.

Each test follows a case of the reference's `adk_graph_test` or `adk_graph_node_test`
(named in its docstring); node names are strings and a failure raises `AdkError`
with the reference's reason instead of returning ``{error, Reason}``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors import graph
from tests.helpers import wait_until


def reason(fn: Any) -> Any:
    with pytest.raises(adk.AdkError) as info:
        fn()
    return info.value.reason


def test_simple_graph_merges_every_node_delta():
    """Follows adk_graph_test: test_simple_graph."""
    g = graph.new()
    g = graph.add_node(g, "n1", lambda state: {"n1": True})
    g = graph.add_node(g, "n2", lambda state: {"n2": True})
    g = graph.add_edge(g, "n1", "n2")
    g = graph.add_edge(g, "n2", graph.END)
    g = graph.set_entry_point(g, "n1")
    final = graph.run(graph.compile(g), {"initial": True})
    assert final == {"initial": True, "n1": True, "n2": True}


def test_conditional_edge_loops_until_the_condition_ends_it():
    """Follows adk_graph_test: test_conditional_graph (and the spec's README counter)."""
    g = graph.add_node(graph.new(), "counter", lambda state: {"count": state.get("count", 0) + 1})
    g = graph.add_conditional_edge(
        g, "counter", lambda state: "counter" if state["count"] < 3 else graph.END
    )
    g = graph.set_entry_point(g, "counter")
    compiled = graph.compile(g)
    assert graph.run(compiled, {"count": 0}, max_steps=10) == {"count": 3}
    assert graph.run(compiled, {"count": 0})["count"] == 3


def test_a_graph_without_an_entry_point_is_refused():
    """Follows adk_graph_test: test_error_missing_entry."""
    assert reason(lambda: graph.compile(graph.new())) == "missing_entry_point"


def test_an_unknown_entry_point_is_refused():
    """Follows adk_graph_test: test_unknown_entry."""
    g = graph.set_entry_point(graph.new(), "absent")
    assert reason(lambda: graph.compile(g)) == ("unknown_entry_point", "absent")


def test_an_edge_from_an_unknown_node_is_refused():
    """Follows adk_graph_test: test_unknown_edge_source."""
    g = graph.add_node(graph.new(), "present", lambda state: {})
    g = graph.add_edge(g, "absent", "present")
    g = graph.set_entry_point(g, "present")
    assert reason(lambda: graph.compile(g)) == ("unknown_edge_source", "absent")


def test_an_edge_to_an_unknown_node_is_refused():
    """Follows adk_graph_test: test_unknown_edge_target."""
    g = graph.add_node(graph.new(), "present", lambda state: {})
    g = graph.add_edge(g, "present", "absent")
    g = graph.set_entry_point(g, "present")
    assert reason(lambda: graph.compile(g)) == ("unknown_edge_target", "absent")


def test_a_cycle_is_bounded_by_max_steps():
    """Follows adk_graph_test: test_max_steps (a one-node cycle runs max_steps times)."""
    runs = []

    def cycle(state: dict[str, Any]) -> dict[str, Any]:
        runs.append(1)
        return {"runs": state.get("runs", 0) + 1}

    g = graph.add_node(graph.new(), "cycle", cycle)
    g = graph.add_edge(g, "cycle", "cycle")
    g = graph.set_entry_point(g, "cycle")
    assert reason(lambda: graph.run(graph.compile(g), {}, max_steps=3)) == ("max_steps_exceeded", 3)
    assert len(runs) == 3


def test_invalid_max_steps_are_refused():
    """Follows adk_graph_test: test_invalid_max_steps."""
    g = graph.set_entry_point(graph.add_node(graph.new(), "entry", lambda state: state), "entry")
    compiled = graph.compile(g)
    assert reason(lambda: graph.run(compiled, {}, max_steps=0)) == ("invalid_max_steps", 0)
    assert reason(lambda: graph.run(compiled, {}, max_steps=-1)) == ("invalid_max_steps", -1)
    assert reason(lambda: graph.run(compiled, {}, max_steps="many")) == (  # type: ignore[arg-type]
        "invalid_max_steps",
        "many",
    )
    assert graph.run(compiled, {"kept": 1}, max_steps=1) == {"kept": 1}


def test_a_condition_naming_no_node_and_a_failing_node_are_errors():
    """The reference's run-time failures: ``{unknown_node, N}`` for a condition choosing
    no node, a structural failure (no message, no value) for a node that raises."""
    g = graph.add_node(graph.new(), "start", lambda state: {})
    g = graph.add_conditional_edge(g, "start", lambda state: "nowhere")
    g = graph.set_entry_point(g, "start")
    assert reason(lambda: graph.run(graph.compile(g), {})) == ("unknown_node", "nowhere")

    def broken(state: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("token=secret-value")

    g = graph.set_entry_point(graph.add_node(graph.new(), "broken", broken), "broken")
    failure = reason(lambda: graph.run(graph.compile(g), {}))
    assert failure[:2] == ("node_failed", "broken"), failure
    assert "secret-value" not in repr(failure)
    g = graph.set_entry_point(graph.add_node(graph.new(), "listy", lambda state: [1]), "listy")
    assert reason(lambda: graph.run(graph.compile(g), {}))[:2] == ("node_failed", "listy")


def test_a_legacy_graph_runs_as_a_supervised_workflow():
    """The spec's "thin layer over the same engine": a running graph is one coordinator
    under the workflow supervisor, gone once the run ended."""
    release = threading.Event()
    entered = threading.Event()

    def blocked(state: dict[str, Any]) -> dict[str, Any]:
        entered.set()
        release.wait(10)
        return {"done": True}

    g = graph.set_entry_point(graph.add_node(graph.new(), "blocked", blocked), "blocked")
    compiled = graph.compile(g)
    before = len(sv.DynamicSupervisor.which_children("adk.workflows"))
    box: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: box.update(final=graph.run(compiled, {})))
    runner.start()
    assert entered.wait(5)
    assert len(sv.DynamicSupervisor.which_children("adk.workflows")) == before + 1
    release.set()
    runner.join(10)
    assert box["final"] == {"done": True}
    wait_until(lambda: len(sv.DynamicSupervisor.which_children("adk.workflows")) == before)


def test_a_graph_past_its_deadline_is_timed_out():
    """One deadline covers the whole run (the workflow's): a slow node ends it
    ``timed_out``."""
    release = threading.Event()

    def slow(state: dict[str, Any]) -> dict[str, Any]:
        release.wait(5)
        return {"late": True}

    g = graph.set_entry_point(graph.add_node(graph.new(), "slow", slow), "slow")
    started = time.monotonic()
    assert reason(lambda: graph.run(graph.compile(g), {}, timeout=0.05)) == "timed_out"
    assert time.monotonic() - started < 2.0
    release.set()


def test_a_failing_condition_is_a_structural_failure():
    """A condition that raises fails the run with a route failure naming the node and
    the exception class, never its message."""

    def condition(state: dict[str, Any]) -> str:
        raise RuntimeError("token=secret-value")

    g = graph.add_conditional_edge(graph.add_node(graph.new(), "a", lambda s: {}), "a", condition)
    failure = reason(lambda: graph.run(graph.compile(graph.set_entry_point(g, "a")), {}))
    assert failure[:2] == ("route_failed", "a"), failure
    assert "secret-value" not in repr(failure)


def test_state_only_changes_through_deltas():
    """A node gets a copy of the state: mutating it in place changes nothing; only the
    returned delta is merged. Async nodes work as sync ones do."""

    def mutates(state: dict[str, Any]) -> dict[str, Any]:
        state["sneaky"] = True
        return {"seen": sorted(state)}

    async def later(state: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"async": True}

    g = graph.add_node(graph.add_node(graph.new(), "mutates", mutates), "later", later)
    g = graph.set_entry_point(graph.add_edge(g, "mutates", "later"), "mutates")
    final = graph.run(graph.compile(g), {"x": 1})
    assert final == {"x": 1, "seen": ["sneaky", "x"], "async": True}
    assert reason(lambda: graph.run(graph.compile(g), {"x": object()})) == (
        "invalid_initial_state",
        "invalid_json_value",
    )


def test_names_the_workflow_refuses_fail_compile_with_a_path():
    """`compile` runs the workflow compiler once: ``end`` is reserved, and its error
    names the path in the compiled spec."""
    g = graph.set_entry_point(graph.add_node(graph.new(), "end", lambda s: {}), "end")
    with pytest.raises(adk.AdkError) as info:
        graph.compile(g)
    assert info.value.reason[0] == "invalid_workflow"
    assert info.value.path == ("nodes", 0, "id")  # type: ignore[attr-defined]
    assert reason(lambda: graph.add_node(graph.new(), "", lambda s: {})) == "invalid_node_name"
    assert reason(lambda: graph.add_node({}, "a", lambda s: {})) == "invalid_graph"  # type: ignore[arg-type]
    assert reason(lambda: graph.run("not compiled", {})) == "invalid_compiled_graph"  # type: ignore[arg-type]


def test_a_graph_is_built_immutably():
    """Each ``add_*`` returns a new graph; a compiled graph runs again and again."""
    empty = graph.new()
    one = graph.add_node(empty, "a", lambda s: {"n": s.get("n", 0) + 1})
    assert empty.nodes == {} and list(one.nodes) == ["a"]
    compiled = graph.compile(graph.set_entry_point(one, "a"))
    assert [graph.run(compiled, {"n": n})["n"] for n in range(3)] == [1, 2, 3]


def test_the_facade_exports_the_graph_helpers():
    """`adk.graph` is this module (``adk.graph.new()``, ``adk.graph.run(...)``)."""
    assert adk.graph is graph
    assert "graph" in adk.__all__


# -- adk_graph_node_test ----------------------------------------------------------------------


def test_function_node_is_the_function():
    """Follows adk_graph_node_test: test_function_node."""
    node = graph.function_node(lambda state: {"b": state["a"] + 1})
    assert node({"a": 1})["b"] == 2
    assert reason(lambda: graph.function_node("not callable")) == "invalid_node_function"  # type: ignore[arg-type]


def test_tool_node_runs_pending_tools():
    """Follows adk_graph_node_test: test_tool_node (plus a known tool's result)."""
    node = graph.tool_node([])
    assert node({}) == {}
    unknown = node({"pending_tools": [{"name": "unknown_tool", "args": {}}]})
    assert len(unknown["events"]) == 1 and unknown["pending_tools"] == []
    [response] = adk.events.from_dict(unknown["events"][0]).content.parts
    assert response.response == {"success": False, "error": "Tool not found"}

    @adk.tool
    def add(a: int, b: int) -> dict:
        """Add two numbers."""
        return {"sum": a + b}

    known = graph.tool_node([add])(
        {"pending_tools": [{"name": "add", "args": {"a": 2, "b": 3}, "id": "c1"}]}
    )
    [response] = adk.events.from_dict(known["events"][0]).content.parts
    assert (response.name, response.id) == ("add", "c1")
    assert response.response == {"sum": 5}, response.response


def test_agent_node_uses_its_instructions_and_model_callbacks():
    """Follows adk_graph_node_test: test_agent_node_instructions_and_callbacks."""
    seen: dict[str, Any] = {}
    model = adk.ScriptedProvider(fn=lambda history, tools: {"text": "hello back"})
    original = model.generate

    def spy(config: Any, history: Any, tools: Any) -> Any:
        seen["instructions"] = config.get("instructions")
        seen["history"] = [item.text_value() for item in history]
        return original(config, history, tools)

    model.generate = spy  # type: ignore[method-assign]
    hooks: list[str] = []
    node = graph.agent_node(
        "graph_agent",
        {
            "provider": model,
            "instructions": "GRAPH INSTRUCTION",
            "callbacks": {
                "before_model": lambda ctx, contents: hooks.append("before_model"),
                "after_model": lambda ctx, output: hooks.append("after_model"),
            },
        },
    )
    user = adk.events.to_dict(adk.Event.new("user", "inv-1", adk.content.from_text("hello")))
    result = node({"events": [user]})
    assert result["last_agent"] == "graph_agent"
    assert seen == {"instructions": "GRAPH INSTRUCTION", "history": ["hello"]}
    assert hooks == ["before_model", "after_model"]
    final = adk.events.from_dict(result["events"][-1])
    assert (final.author, final.text(), final.is_final) == ("graph_agent", "hello back", True)
    default = graph.agent_node("plain_agent", {"provider": model})
    default({"events": [user]})
    assert seen["instructions"] == "You are a helpful assistant."


def test_an_event_based_graph_calls_tools_between_agent_turns():
    """The spec's event-based graph: agent -> tools -> agent, as a legacy graph run."""
    model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}, "id": "call-1"}]},
            {"text": "the sum is 3"},
        ]
    )

    @adk.tool
    def add(a: int, b: int) -> dict:
        """Add two numbers."""
        return {"sum": a + b}

    g = graph.new()
    g = graph.add_node(g, "agent", graph.agent_node("calc", {"provider": model}, [add]))
    g = graph.add_node(g, "tools", graph.tool_node([add]))
    g = graph.add_conditional_edge(
        g, "agent", lambda state: "tools" if state.get("pending_tools") else graph.END
    )
    g = graph.add_edge(g, "tools", "agent")
    g = graph.set_entry_point(g, "agent")
    user = adk.events.to_dict(adk.Event.new("user", "inv-1", adk.content.from_text("1+2?")))
    final = graph.run(graph.compile(g), {"events": [user]}, max_steps=10)
    assert final["pending_tools"] == []
    assert adk.events.from_dict(final["events"][-1]).text() == "the sum is 3"
    assert [adk.events.from_dict(event).author for event in final["events"]] == [
        "user",
        "calc",
        "tool",
        "calc",
    ]
