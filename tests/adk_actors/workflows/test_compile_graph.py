"""`compile_workflow` on graphs: every node, edge and topology refusal names its path
(a node's own key, or the node by id for topology), the graph defaults, and every node
type compiling."""

from __future__ import annotations

from typing import Any

import pytest

from adk_actors.workflows import spec as S
from adk_actors.workflows.compile import compile_workflow
from adk_actors.workflows.results import Route
from tests.adk_actors.workflows._specs import (
    fork_graph,
    graph,
    lookup,
    needs_three,
    ok,
    refusal,
    seq,
    with_context,
)

# -- graph nodes, edges and topology -----------------------------------------------------------


def one(node: dict[str, Any], edges: Any = None) -> dict[str, Any]:
    """A graph of one node `a` (with an edge to the end unless given)."""
    return graph([{"id": "a", **node}], {"a": "end"} if edges is None else edges)


ROUTER = {"type": "branch", "choose": lambda s: "end", "targets": ["end"]}
LOOP = {"type": "loop", "while": lambda s: False, "body": "a", "max_iterations": 1}

GRAPH_CASES = [
    (graph({}, {}), ("nodes",), "expected_list"),
    (graph([], {}), ("nodes",), "empty"),
    (graph([1], {}), ("nodes", 0), "expected_map"),
    (graph([{"run": ok}], {}), ("nodes", 0, "id"), "expected_nonempty_utf8_binary"),
    (graph([{"id": "end", "run": ok}], {}), ("nodes", 0, "id"), "reserved_id"),
    (graph([{"id": "$end", "run": ok}], {}), ("nodes", 0, "id"), "reserved_id"),
    (
        graph([{"id": "a", "run": ok}, {"id": "a", "run": ok}], {}),
        ("nodes", 1, "id"),
        ("duplicate_id", "a"),
    ),
    (one({"type": "weird"}), ("nodes", 0, "type"), "unsupported_graph_node_type"),
    (one({"type": 3}), ("nodes", 0, "type"), "unsupported_graph_node_type"),
    (one({"run": ok, "targets": []}), ("nodes", 0, "targets"), "unknown_key"),
    (one({"run": "x"}), ("nodes", 0, "run"), "invalid_action"),
    (
        one({"type": "agent", "agent": "bad-name", "prompt": "p"}),
        ("nodes", 0, "agent"),
        "invalid_agent_name",
    ),
    (
        one({"type": "agent", "name": "user", "prompt": "p"}),
        ("nodes", 0, "name"),
        "invalid_agent_name",
    ),
    (
        one({"type": "agent", "agent": "helper", "prompt": 5}),
        ("nodes", 0, "prompt"),
        "invalid_action",
    ),
    (
        one({"type": "agent", "agent": "helper", "prompt": "p", "decide": ok}),
        ("nodes", 0, "decide"),
        "invalid_action",
    ),
    (
        one({"type": "agent", "agent": "helper", "name": "helper", "prompt": "p"}),
        ("nodes", 0, "name"),
        "duplicate_alias",
    ),
    (one({"type": "tool"}), ("nodes", 0, "tool"), "invalid_tool_node"),
    (one({"type": "tool", "tool": ok}), ("nodes", 0, "tool"), "invalid_tool_node"),
    (one({"type": "tool", "tool": lookup, "args": 5}), ("nodes", 0, "args"), "invalid_tool_node"),
    (
        one({"type": "tool", "tool": lookup, "result_key": ""}),
        ("nodes", 0, "result_key"),
        "invalid_tool_node",
    ),
    (
        one({"type": "workflow", "workflow": {}}),
        ("nodes", 0, "workflow"),
        "invalid_nested_workflow_node",
    ),
    (one({"type": "join", "run": 3}), ("nodes", 0, "run"), "invalid_action"),
    (one({"type": "join", "timeout": -2}), ("nodes", 0, "timeout"), "invalid_timeout"),
    (one({**ROUTER, "choose": None}, {}), ("nodes", 0, "choose"), "invalid_route"),
    (one({**ROUTER, "choose": None, "route": 5}, {}), ("nodes", 0, "route"), "duplicate_alias"),
    (
        one({"type": "dynamic", "route": 5, "targets": ["end"]}, {}),
        ("nodes", 0, "route"),
        "invalid_route",
    ),
    (one({**ROUTER, "targets": "end"}, {}), ("nodes", 0, "targets"), "expected_list"),
    (one({**ROUTER, "targets": []}, {}), ("nodes", 0, "targets"), "empty"),
    (one({**ROUTER, "targets": [1]}, {}), ("nodes", 0, "targets"), "invalid_target"),
    (one({**ROUTER, "targets": [["a"]]}, {}), ("nodes", 0, "targets"), "invalid_target"),
    (one({**ROUTER, "targets": ["a", "a"]}, {}), ("nodes", 0, "targets"), "duplicate_target"),
    (one({**ROUTER, "targets": ["end", "$end"]}, {}), ("nodes", 0, "targets"), "duplicate_target"),
    (one({**LOOP, "while": None}, {}), ("nodes", 0, "while"), "invalid_predicate"),
    (
        one({**LOOP, "while": None, "decide": lambda s: True}, {}),
        ("nodes", 0, "decide"),
        "duplicate_alias",
    ),
    (one({**LOOP, "body": None}, {}), ("nodes", 0, "body"), "invalid_target"),
    (one({**LOOP, "body": "end"}, {}), ("nodes", 0, "body"), "invalid_target"),
    (one({**LOOP, "done": 5}, {}), ("nodes", 0, "done"), "invalid_target"),
    (
        one({k: v for k, v in LOOP.items() if k != "max_iterations"}, {}),
        ("nodes", 0, "max_iterations"),
        "expected_non_negative_integer",
    ),
    (
        one({**LOOP, "max_iterations": -1}, {}),
        ("nodes", 0, "max_iterations"),
        "expected_non_negative_integer",
    ),
    (fork_graph({"branches": "left"}), ("nodes", 0, "branches"), "expected_list"),
    (fork_graph({"branches": [1]}), ("nodes", 0, "branches"), "invalid_id"),
    (fork_graph({"branches": ["left", "left"]}), ("nodes", 0, "branches"), "duplicate_id"),
    (fork_graph({"branches": []}), ("nodes", 0, "branches"), "empty"),
    (fork_graph({"join": None}), ("nodes", 0, "join"), "invalid_target"),
    (fork_graph({"join": "end"}), ("nodes", 0, "join"), "invalid_target"),
    (fork_graph({"merge": "union"}), ("nodes", 0, "merge"), "invalid_merge_policy"),
    (
        fork_graph({"max_concurrency": 0}),
        ("nodes", 0, "max_concurrency"),
        "expected_positive_integer",
    ),
    (
        fork_graph({"max_concurrency": 1025}),
        ("nodes", 0, "max_concurrency"),
        ("exceeds_maximum", 1024),
    ),
    (graph([{"id": "a", "run": ok}], {"a": "end"}, entry=None), ("entry",), "unknown_graph_entry"),
    (graph([{"id": "a", "run": ok}], {"a": "end"}, entry="b"), ("entry",), "unknown_graph_entry"),
    (graph([{"id": "a", "run": ok}], [], entry="a"), ("edges",), "expected_map"),
    (
        graph([{"id": "a", "run": ok}], {"a": "end", "b": "end"}),
        ("edges",),
        "every_node_requires_explicit_edge",
    ),
    (fork_graph(fork="end"), ("edges",), "every_node_requires_explicit_edge"),
    (fork_graph(join=None), ("edges",), "every_node_requires_explicit_edge"),
    (one({**ROUTER}, {"a": "end"}), ("edges",), "every_node_requires_explicit_edge"),
    (one({"run": ok}, {"a": "missing"}), ("edges", "a"), ("unknown_edge_target", "missing")),
    (one({"run": ok}, {"a": Route(5)}), ("edges", "a"), "invalid_route"),
    (one({"run": ok}, {"a": Route(needs_three)}), ("edges", "a"), "invalid_route"),
    (one({"run": ok}, {"a": 5}), ("edges", "a"), "invalid_edge"),
    (one({"run": ok}, {"a": None}), ("edges", "a"), "invalid_edge"),
    (fork_graph({"join": "nowhere"}), ("nodes", 0, "join"), "invalid_fork_topology"),
    (
        fork_graph({"branches": ["left", "ghost"]}),
        ("nodes", 0, "branches"),
        "invalid_fork_topology",
    ),
    (
        fork_graph({"branches": ["left", "fork"]}),
        ("nodes", 0, "branches"),
        "invalid_fork_topology",
    ),
    (
        fork_graph({"branches": ["left", "join"]}),
        ("nodes", 0, "branches"),
        "invalid_fork_topology",
    ),
    (
        fork_graph(right=Route(lambda s: "join")),
        ("nodes", 0, "branches"),
        "invalid_fork_topology",
    ),
    (fork_graph(right="left"), ("nodes", 0, "branches"), "invalid_fork_topology"),
    (
        graph([{"id": "a", **LOOP, "body": "ghost"}], {}),
        ("nodes", 0, "body"),
        "unknown_graph_target",
    ),
    (
        graph([{"id": "a", **LOOP, "done": "ghost"}], {}),
        ("nodes", 0, "done"),
        "unknown_graph_target",
    ),
    (
        graph([{"id": "x", "run": ok}, {"id": "a", **LOOP, "body": "ghost"}], {"x": "end"}),
        ("nodes", 1, "body"),
        "unknown_graph_target",
    ),
    (one({"run": ok}, None) | {"max_steps": 0}, ("max_steps",), "expected_positive_integer"),
]


@pytest.mark.parametrize(("spec", "path", "what"), GRAPH_CASES)
def test_graph_refusals(spec: Any, path: tuple[Any, ...], what: Any) -> None:
    assert refusal(spec) == (path, what)


def test_a_fork_branch_must_be_action_like() -> None:
    """A loop, router or fork node cannot be a fork branch."""
    spec = fork_graph({"branches": ["left", "choose"]})
    spec["nodes"].append({"id": "choose", **ROUTER})
    assert refusal(spec) == (("nodes", 0, "branches"), "invalid_fork_topology")


def test_nested_workflow_node_options_are_checked() -> None:
    child = compile_workflow(seq())
    for options in ({"bogus": 1}, {"max_steps": 0}, {"timeout": -1}, {"retention": -1}, 3):
        spec = one({"type": "workflow", "workflow": child, "options": options})
        assert refusal(spec) == (("nodes", 0, "options"), "invalid_nested_workflow_node")


# -- defaults and what compiles ------------------------------------------------------------


def test_graph_defaults() -> None:
    loop_node = {
        "id": "loop",
        "type": "loop",
        "while": lambda s: False,
        "body": "a",
        "max_iterations": 2,
    }
    spec = fork_graph()
    spec["nodes"] += [loop_node, {"id": "a", "run": ok}]
    spec["edges"]["a"] = "loop"
    wf = compile_workflow(spec)
    assert isinstance(wf.data, S.GraphData)
    fork = wf.data.nodes["fork"]
    assert isinstance(fork, S.ForkNode)
    assert (fork.merge.name, fork.max_concurrency) == ("reject_conflicts", 2)
    loop = wf.data.nodes["loop"]
    assert isinstance(loop, S.LoopNode)
    assert loop.done == S.END
    join = wf.data.nodes["join"]
    assert isinstance(join, S.ActionNode) and join.action is None
    assert wf.data.edges["join"] == S.Edge(target=S.END)
    assert wf.data.node_order == ("fork", "left", "right", "join", "loop", "a")


def test_every_graph_node_type_compiles() -> None:
    child = compile_workflow(seq())
    nodes = [
        {"id": "start", "type": "agent", "agent": "helper", "prompt": lambda s, c: "hi"},
        {"id": "tool", "type": "tool", "tool": lookup, "args": {"value": 1}, "result_key": "r"},
        {"id": "child", "type": "workflow", "workflow": child, "options": {"max_steps": 5}},
        {"id": "choose", "type": "dynamic", "route": lambda s: "loop", "targets": ["loop", "end"]},
        {
            "id": "loop",
            "type": "loop",
            "decide": lambda s: True,
            "body": "body",
            "done": "fork",
            "max_iterations": 3,
        },
        {"id": "body", "run": ok, "timeout": 1.5, "retry": {"max_attempts": 2, "backoff": 0.01}},
        {
            "id": "fork",
            "type": "fork",
            "branches": ["x", "y"],
            "join": "join",
            "merge": "ordered_last_wins",
            "max_concurrency": 1,
        },
        {"id": "x", "run": ok},
        {"id": "y", "type": "tool", "tool": lookup},
        {"id": "join", "type": "join", "run": with_context},
    ]
    edges = {
        "start": "tool",
        "tool": Route(lambda s, c: "child"),
        "child": lambda s: "choose",
        "body": "loop",
        "x": "join",
        "y": "join",
        "join": "end",
    }
    wf = compile_workflow(graph(nodes, edges, entry="start"))
    data = wf.data
    assert isinstance(data, S.GraphData)
    assert data.node_order == tuple(node["id"] for node in nodes)
    assert {node_id: node.type for node_id, node in data.nodes.items()} == {
        node["id"]: node.get("type", "action") for node in nodes
    }
    router = data.nodes["choose"]
    assert isinstance(router, S.RouterNode) and router.targets == ("loop", S.END)
    nested = data.nodes["child"]
    assert isinstance(nested, S.ActionNode) and isinstance(nested.action, S.NestedAction)
    assert nested.action.workflow is child and nested.action.options.max_steps == 5
    assert nested.action.options.retention == 0.0
    assert data.edges["tool"].route is not None and data.edges["tool"].route.arity == 2
    assert data.edges["child"].route is not None and data.edges["child"].route.arity == 1
    body = data.nodes["body"]
    assert isinstance(body, S.ActionNode)
    assert body.policy.timeout == 1.5 and body.policy.retry.max_attempts == 2
    assert "choose" not in data.edges and "loop" not in data.edges
