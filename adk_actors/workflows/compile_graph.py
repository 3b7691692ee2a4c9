"""A graph spec's ``nodes``, ``entry`` and ``edges``, checked and compiled (`compile_graph`).

Nodes are compiled in declared order (a node's failure names ``("nodes", index,
key)``), then the entry, then the edges (every action, agent, tool, workflow and join
node has exactly one, and no other node has one; an edge's failure names its source,
the key of ``edges``), then the topology, again by the node's position (``("nodes",
index, key)``): a fork's branches are action-like nodes whose edge is the join;
branch/dynamic targets and loop body/done name nodes (or ``"end"``). Nothing a route
returns at run time can name anything else: the engine checks it against these structs.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from adk_actors.tools import Tool
from adk_actors.workflows.compile_parts import (
    CONTEXT_ARITIES,
    agent_decide,
    agent_name,
    agent_prompt,
    bounded_int,
    callback,
    check_keys,
    compile_action,
    compile_merge,
    compile_policy,
    is_list,
    nested_options,
    tool_args,
    valid_id,
)
from adk_actors.workflows.errors import Path, WorkflowSpecError
from adk_actors.workflows.results import Route
from adk_actors.workflows.spec import (
    EDGE_NODE_TYPES,
    END,
    FORK_BRANCH_TYPES,
    MAX_CONCURRENCY,
    MAX_ITEMS,
    MAX_ITERATIONS,
    ActionNode,
    AgentAction,
    Callback,
    CompiledWorkflow,
    Edge,
    ForkNode,
    GraphData,
    GraphNode,
    LoopNode,
    NestedAction,
    RouterNode,
    ToolAction,
)

SPEC_END = "end"
"""How a spec names the graph's end (compiled to `END`)."""
_RESERVED_IDS = frozenset({SPEC_END, END})
_POLICY_KEYS = frozenset({"timeout", "retry"})
_NODE_KEYS: Mapping[str, frozenset[str]] = {
    "action": frozenset({"id", "type", "run"}) | _POLICY_KEYS,
    "join": frozenset({"id", "type", "run"}) | _POLICY_KEYS,
    "agent": frozenset({"id", "type", "agent", "name", "prompt", "decide"}) | _POLICY_KEYS,
    "tool": frozenset({"id", "type", "tool", "args", "result_key"}) | _POLICY_KEYS,
    "workflow": frozenset({"id", "type", "workflow", "options"}) | _POLICY_KEYS,
    "branch": frozenset({"id", "type", "choose", "route", "targets"}),
    "dynamic": frozenset({"id", "type", "choose", "route", "targets"}),
    "loop": frozenset({"id", "type", "while", "decide", "body", "done", "max_iterations"}),
    "fork": frozenset({"id", "type", "branches", "join", "merge", "max_concurrency"}),
}


def compile_graph(spec: Mapping[str, Any]) -> GraphData:
    """The graph's nodes, entry and edges (see the module docstring for the order)."""
    nodes = _nodes(spec.get("nodes"))
    entry = spec.get("entry")
    if not isinstance(entry, str) or entry not in nodes:
        raise WorkflowSpecError(("entry",), "unknown_graph_entry")
    edges = _edges(spec.get("edges"), nodes)
    for index, node in enumerate(nodes.values()):
        _check_topology(("nodes", index), node, nodes, edges)
    return GraphData(
        entry=entry,
        nodes=MappingProxyType(nodes),
        node_order=tuple(nodes),
        edges=MappingProxyType(edges),
    )


# -- nodes ---------------------------------------------------------------------------------------


def _nodes(items: Any) -> dict[str, GraphNode]:
    if not is_list(items):
        raise WorkflowSpecError(("nodes",), "expected_list")
    if len(items) > MAX_ITEMS:
        raise WorkflowSpecError(("nodes",), ("exceeds_maximum", MAX_ITEMS))
    nodes: dict[str, GraphNode] = {}
    for index, item in enumerate(items):
        path: Path = ("nodes", index)
        if not isinstance(item, Mapping):
            raise WorkflowSpecError(path, "expected_map")
        node_id = item.get("id")
        if not valid_id(node_id):
            raise WorkflowSpecError((*path, "id"), "expected_nonempty_utf8_binary")
        if node_id in _RESERVED_IDS:
            raise WorkflowSpecError((*path, "id"), "reserved_id", "'end' names the graph's end")
        if node_id in nodes:
            raise WorkflowSpecError((*path, "id"), ("duplicate_id", node_id))
        node_type = item.get("type", "action")
        if not isinstance(node_type, str) or node_type not in _NODE_KEYS:
            raise WorkflowSpecError((*path, "type"), "unsupported_graph_node_type")
        check_keys(item, _NODE_KEYS[node_type], path)
        nodes[node_id] = _node(item, path, node_id, node_type)
    if not nodes:
        raise WorkflowSpecError(("nodes",), "empty")
    return nodes


def _node(item: Mapping[str, Any], path: Path, node_id: str, node_type: str) -> GraphNode:
    if node_type == "action":
        action = compile_action(item.get("run"), (*path, "run"))
        return ActionNode(
            id=node_id, type="action", action=action, policy=compile_policy(item, path)
        )
    if node_type == "join":
        run = item.get("run")
        joined = None if run is None else compile_action(run, (*path, "run"))
        return ActionNode(id=node_id, type="join", action=joined, policy=compile_policy(item, path))
    if node_type == "agent":
        return ActionNode(
            id=node_id, type="agent", action=_agent(item, path), policy=compile_policy(item, path)
        )
    if node_type == "tool":
        return ActionNode(
            id=node_id, type="tool", action=_tool(item, path), policy=compile_policy(item, path)
        )
    if node_type == "workflow":
        return ActionNode(
            id=node_id,
            type="workflow",
            action=_nested(item, path),
            policy=compile_policy(item, path),
        )
    if node_type in ("branch", "dynamic"):
        return _router(item, path, node_id, node_type)
    if node_type == "loop":
        return _loop(item, path, node_id)
    return _fork(item, path, node_id)


def _alias(item: Mapping[str, Any], path: Path, key: str, alias: str) -> tuple[Any, Path]:
    """``item[key]`` or its alias (not both), with the path of the key used."""
    if key in item and alias in item:
        raise WorkflowSpecError((*path, alias), "duplicate_alias", f"{alias!r} aliases {key!r}")
    used = alias if alias in item else key
    return item.get(used), (*path, used)


def _agent(item: Mapping[str, Any], path: Path) -> AgentAction:
    name, name_path = _alias(item, path, "agent", "name")
    canonical = agent_name(name)
    if canonical is None:
        raise WorkflowSpecError(name_path, "invalid_agent_name", "not a valid agent name")
    prompt = agent_prompt(item.get("prompt"))
    if prompt is None:
        raise WorkflowSpecError((*path, "prompt"), "invalid_action")
    decide: Callback | None = None
    if item.get("decide") is not None:
        decide = agent_decide(item["decide"])
        if decide is None:
            raise WorkflowSpecError((*path, "decide"), "invalid_action")
    return AgentAction(name=canonical, prompt=prompt, decide=decide)


def _tool(item: Mapping[str, Any], path: Path) -> ToolAction:
    tool = item.get("tool")
    if not isinstance(tool, Tool):
        raise WorkflowSpecError((*path, "tool"), "invalid_tool_node", "an adk_actors Tool")
    args = tool_args(item.get("args", {}))
    if args is None:
        raise WorkflowSpecError((*path, "args"), "invalid_tool_node")
    result_key = item.get("result_key")
    if result_key is not None and not valid_id(result_key):
        raise WorkflowSpecError((*path, "result_key"), "invalid_tool_node")
    return ToolAction(tool=tool, args=args, result_key=result_key)


def _nested(item: Mapping[str, Any], path: Path) -> NestedAction:
    workflow = item.get("workflow")
    if not isinstance(workflow, CompiledWorkflow):
        raise WorkflowSpecError((*path, "workflow"), "invalid_nested_workflow_node")
    options = nested_options(item.get("options", {}))
    if options is None:
        raise WorkflowSpecError((*path, "options"), "invalid_nested_workflow_node")
    return NestedAction(workflow=workflow, options=options)


def _router(item: Mapping[str, Any], path: Path, node_id: str, node_type: str) -> RouterNode:
    choose, choose_path = _alias(item, path, "choose", "route")
    compiled = callback(choose, CONTEXT_ARITIES)
    if compiled is None:
        raise WorkflowSpecError(choose_path, "invalid_route")
    targets = item.get("targets")
    if not is_list(targets):
        raise WorkflowSpecError((*path, "targets"), "expected_list")
    if not targets:
        raise WorkflowSpecError((*path, "targets"), "empty")
    if not all(_valid_target(target) for target in targets):
        raise WorkflowSpecError((*path, "targets"), "invalid_target")
    compiled_targets = tuple(_target(target) for target in targets)
    if len(set(compiled_targets)) != len(compiled_targets):
        raise WorkflowSpecError((*path, "targets"), "duplicate_target")
    kind: Literal["branch", "dynamic"] = "branch" if node_type == "branch" else "dynamic"
    return RouterNode(id=node_id, type=kind, choose=compiled, targets=compiled_targets)


def _loop(item: Mapping[str, Any], path: Path, node_id: str) -> LoopNode:
    decide, decide_path = _alias(item, path, "while", "decide")
    compiled = callback(decide, CONTEXT_ARITIES)
    if compiled is None:
        raise WorkflowSpecError(decide_path, "invalid_predicate")
    body = item.get("body")
    if not valid_id(body) or body in _RESERVED_IDS:
        raise WorkflowSpecError((*path, "body"), "invalid_target")
    done = item.get("done", SPEC_END)
    if not _valid_target(done):
        raise WorkflowSpecError((*path, "done"), "invalid_target")
    if "max_iterations" not in item:
        raise WorkflowSpecError((*path, "max_iterations"), "expected_non_negative_integer")
    limit = bounded_int(item, "max_iterations", path, 0, 0, MAX_ITERATIONS)
    return LoopNode(
        id=node_id, decide=compiled, body=body, done=_target(done), max_iterations=limit
    )


def _fork(item: Mapping[str, Any], path: Path, node_id: str) -> ForkNode:
    branches = item.get("branches")
    if not is_list(branches):
        raise WorkflowSpecError((*path, "branches"), "expected_list")
    if not all(valid_id(branch) for branch in branches):
        raise WorkflowSpecError((*path, "branches"), "invalid_id")
    if len(set(branches)) != len(branches):
        raise WorkflowSpecError((*path, "branches"), "duplicate_id")
    if not branches:
        raise WorkflowSpecError((*path, "branches"), "empty")
    if len(branches) > MAX_ITEMS:
        raise WorkflowSpecError((*path, "branches"), ("exceeds_maximum", MAX_ITEMS))
    join = item.get("join")
    if not valid_id(join) or join in _RESERVED_IDS:
        raise WorkflowSpecError((*path, "join"), "invalid_target")
    merge = compile_merge(item.get("merge", "reject_conflicts"), (*path, "merge"))
    default = min(len(branches), MAX_CONCURRENCY)
    limit = bounded_int(item, "max_concurrency", path, default, 1, MAX_CONCURRENCY)
    return ForkNode(
        id=node_id, branches=tuple(branches), join=join, merge=merge, max_concurrency=limit
    )


def _valid_target(target: Any) -> bool:
    return isinstance(target, str) and (target in _RESERVED_IDS or valid_id(target))


def _target(target: str) -> str:
    """A spec target as compiled: ``"end"`` (or ``"$end"``) is `END`."""
    return END if target in _RESERVED_IDS else target


# -- edges and topology --------------------------------------------------------------------------


def _edges(edges: Any, nodes: Mapping[str, GraphNode]) -> dict[str, Edge]:
    if not isinstance(edges, Mapping):
        raise WorkflowSpecError(("edges",), "expected_map")
    required = {node_id for node_id, node in nodes.items() if node.type in EDGE_NODE_TYPES}
    if set(edges) != required:
        raise WorkflowSpecError(
            ("edges",),
            "every_node_requires_explicit_edge",
            "action, agent, tool, workflow and join nodes each need one edge; others none",
        )
    return {source: _edge(edges[source], source, nodes) for source in nodes if source in required}


def _edge(value: Any, source: str, nodes: Mapping[str, GraphNode]) -> Edge:
    path: Path = ("edges", source)
    if isinstance(value, str):
        if value in _RESERVED_IDS:
            return Edge(target=END)
        if value in nodes:
            return Edge(target=value)
        raise WorkflowSpecError(path, ("unknown_edge_target", value[:256]))
    if isinstance(value, Route):
        route = callback(value.fn, CONTEXT_ARITIES)
        if route is None:
            raise WorkflowSpecError(path, "invalid_route")
        return Edge(route=route)
    route = callback(value, CONTEXT_ARITIES)
    if route is None:
        raise WorkflowSpecError(path, "invalid_edge")
    return Edge(route=route)


def _check_topology(
    path: Path, node: GraphNode, nodes: Mapping[str, GraphNode], edges: Mapping[str, Edge]
) -> None:
    """`node` (at `path`, its position) names nodes that exist, in a valid shape."""
    if isinstance(node, ForkNode):
        if node.join not in nodes:
            raise WorkflowSpecError((*path, "join"), "invalid_fork_topology")
        if not _valid_branches(node, nodes, edges):
            raise WorkflowSpecError((*path, "branches"), "invalid_fork_topology")
    elif isinstance(node, RouterNode):
        if not all(target == END or target in nodes for target in node.targets):
            raise WorkflowSpecError((*path, "targets"), "unknown_graph_target")
    elif isinstance(node, LoopNode):
        if node.body not in nodes:
            raise WorkflowSpecError((*path, "body"), "unknown_graph_target")
        if not (node.done == END or node.done in nodes):
            raise WorkflowSpecError((*path, "done"), "unknown_graph_target")


def _valid_branches(
    fork: ForkNode, nodes: Mapping[str, GraphNode], edges: Mapping[str, Edge]
) -> bool:
    """Each branch is an action-like node (not the fork or its join) whose edge is the join."""
    for branch in fork.branches:
        node = nodes.get(branch)
        if node is None or branch in (fork.id, fork.join) or node.type not in FORK_BRANCH_TYPES:
            return False
        edge = edges.get(branch)
        if edge is None or edge.target != fork.join:
            return False
    return True
