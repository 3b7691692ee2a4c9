"""The legacy graph helpers (the spec's ``adk_graph``), compiled into a graph workflow.

    g = adk.graph.new()
    g = adk.graph.add_node(g, "counter", lambda state: {"count": state.get("count", 0) + 1})
    g = adk.graph.add_conditional_edge(g, "counter", lambda s: "counter" if s["count"] < 3 else adk.graph.END)
    g = adk.graph.set_entry_point(g, "counter")
    final = adk.graph.run(adk.graph.compile(g), {"count": 0}, max_steps=10)   # {"count": 3}

A graph is an immutable value (each ``add_*`` returns a new one). `compile` checks
the entry point and the deterministic edges with the reference's reasons, then
compiles a ``graph`` workflow spec: one action node per node (its function returns
a state delta), its edge as the node's edge (a node without one ends the run, a
conditional edge is a `Route`). `run` runs that workflow under the workflow
supervisor (a coordinator process, its nodes in monitored tasks, one deadline), so
there is no second engine here: only the translation of the reference's failures
(``("max_steps_exceeded", n)``, ``("unknown_node", name)``) from the workflow's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

import msgspec

from adk_actors.workflows import Completed, Failed, Paused, Route, compile_workflow, run_workflow
from adk_actors.workflows.spec import MAX_STEPS
from providers.errors import AdkError, key_name

END: Final = "end"
"""The target that ends the run (the reference's ``end_node``)."""
DEFAULT_MAX_STEPS: Final = 10_000
DEFAULT_TIMEOUT: Final = 60.0
WORKFLOW_ID: Final = "legacy-graph"

NodeFn = Callable[[dict[str, Any]], Any]
Condition = Callable[[dict[str, Any]], str]


class Graph(msgspec.Struct, frozen=True):
    """A graph being built: nodes, edges (a node name, `END`, or a condition
    function), and the entry point."""

    nodes: Mapping[str, NodeFn] = MappingProxyType({})
    edges: Mapping[str, str | Condition] = MappingProxyType({})
    entry_point: str | None = None

    def __repr__(self) -> str:
        return f"Graph(nodes={list(self.nodes)}, entry_point={self.entry_point!r})"


class CompiledGraph(msgspec.Struct, frozen=True):
    """A checked graph (`compile`), ready to `run`."""

    graph: Graph
    entry_point: str

    def __repr__(self) -> str:
        return f"CompiledGraph(entry_point={self.entry_point!r})"


def new() -> Graph:
    """An empty graph."""
    return Graph()


def add_node(graph: Graph, name: str, fn: NodeFn) -> Graph:
    """`graph` with node `name` running ``fn(state) -> delta`` (a dict merged into the
    state); a second node of the same name replaces the first."""
    _check_graph(graph)
    _check_name(name, "invalid_node_name")
    if not callable(fn):
        raise AdkError("invalid_node_function", "a node is a function of the state")
    return msgspec.structs.replace(graph, nodes=MappingProxyType({**graph.nodes, name: fn}))


def add_edge(graph: Graph, source: str, target: str) -> Graph:
    """`graph` with a deterministic edge from `source` to `target` (a node or `END`)."""
    _check_graph(graph)
    _check_name(source, "invalid_edge_source")
    _check_name(target, "invalid_edge_target")
    return msgspec.structs.replace(graph, edges=MappingProxyType({**graph.edges, source: target}))


def add_conditional_edge(graph: Graph, source: str, condition: Condition) -> Graph:
    """`graph` with an edge from `source` decided by ``condition(state) -> name | END``,
    called with the state after `source` ran."""
    _check_graph(graph)
    _check_name(source, "invalid_edge_source")
    if not callable(condition):
        raise AdkError("invalid_edge_condition", "a conditional edge is a function of the state")
    return msgspec.structs.replace(
        graph, edges=MappingProxyType({**graph.edges, source: condition})
    )


def set_entry_point(graph: Graph, name: str) -> Graph:
    """`graph` starting at node `name`."""
    _check_graph(graph)
    _check_name(name, "invalid_entry_point")
    return msgspec.structs.replace(graph, entry_point=name)


def compile(graph: Graph) -> CompiledGraph:
    """Check `graph` and compile it; raises `AdkError`: ``missing_entry_point``,
    ``("unknown_entry_point", name)``, ``("unknown_edge_source", name)``,
    ``("unknown_edge_target", name)`` (in that order), or the workflow compiler's
    error (with its ``.path``) for a name the workflow refuses (``end`` is reserved)."""
    _check_graph(graph)
    entry = graph.entry_point
    if entry is None:
        raise AdkError("missing_entry_point", "set_entry_point names the first node")
    if entry not in graph.nodes:
        raise AdkError(("unknown_entry_point", _shown(entry)), "the entry point is not a node")
    for source, target in graph.edges.items():
        if source not in graph.nodes:
            raise AdkError(("unknown_edge_source", _shown(source)), "an edge starts at no node")
        if isinstance(target, str) and target != END and target not in graph.nodes:
            raise AdkError(("unknown_edge_target", _shown(target)), "an edge ends at no node")
    compile_workflow(_spec(graph, _Misroute()))  # the workflow's own checks, once
    return CompiledGraph(graph, entry)


def run(
    compiled: CompiledGraph,
    state: Mapping[str, Any] | None = None,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    """Run the graph from its entry point on `state` (JSON-safe) and return the final
    state. At most `max_steps` node runs (a cycle ends ``("max_steps_exceeded",
    max_steps)``), all within `timeout` seconds (None: no deadline).

    Raises `AdkError`: ``("invalid_max_steps", value)``, ``("max_steps_exceeded",
    n)``, ``("unknown_node", name)`` (a condition chose no node), ``timed_out``, or the
    workflow's structural failure (e.g. ``("node_failed", name, failure)`` for a node
    that raised or returned something other than a dict).
    """
    if not isinstance(compiled, CompiledGraph):
        raise AdkError("invalid_compiled_graph", "compile the graph with graph.compile")
    if (
        isinstance(max_steps, bool)
        or not isinstance(max_steps, int)
        or not 0 < max_steps <= MAX_STEPS
    ):
        raise AdkError(("invalid_max_steps", _shown(max_steps)), f"max_steps is 1..{MAX_STEPS}")
    misroute = _Misroute()
    workflow = compile_workflow(_spec(compiled.graph, misroute))
    outcome = run_workflow(workflow, dict(state or {}), max_steps=max_steps, timeout=timeout)
    match outcome:
        case Completed(final, _):
            return final
        case Failed(("budget_exhausted", "steps"), _):
            raise AdkError(("max_steps_exceeded", max_steps), "the graph ran max_steps nodes")
        case Failed(("route_failed", _, "invalid_route"), _) if misroute.chosen:
            raise AdkError(("unknown_node", misroute.chosen[0]), "a condition chose no node")
        case Failed(reason, _):
            raise AdkError(reason, "the graph failed")
        case Paused():
            raise AdkError("graph_paused", "a legacy graph node returned Pause")
    raise AdkError(("graph_ended", type(outcome).__name__), "the graph did not complete")


def _delta_node(fn: NodeFn) -> Callable[..., Any]:
    """The node as a workflow action whose only result is a state delta."""
    if inspect.iscoroutinefunction(fn):

        async def run_async(state: dict[str, Any]) -> Any:
            return _delta(await fn(state))

        return run_async

    def run_sync(state: dict[str, Any]) -> Any:
        return _delta(fn(state))

    return run_sync


def _delta(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise AdkError("invalid_state_delta", "a graph node returns a dict (its state delta)")
    return value


class _Misroute:
    """What one run's conditions chose outside the graph (the first is reported)."""

    def __init__(self) -> None:
        self.chosen: list[Any] = []


def _spec(graph: Graph, misroute: _Misroute) -> dict[str, Any]:
    """The graph workflow spec of `graph`; its conditions note a name that is no node
    in `misroute`, since the workflow reports only ``invalid_route``."""
    assert graph.entry_point is not None
    names = frozenset(graph.nodes)
    return {
        "version": 1,
        "id": WORKFLOW_ID,
        "kind": "graph",
        "entry": graph.entry_point,
        "nodes": [{"id": name, "run": _delta_node(fn)} for name, fn in graph.nodes.items()],
        "edges": {name: _edge(graph.edges.get(name, END), names, misroute) for name in graph.nodes},
    }


def _edge(target: str | Condition, names: frozenset[str], misroute: _Misroute) -> str | Route:
    if isinstance(target, str):
        return target
    condition = target

    def route(state: dict[str, Any]) -> Any:
        chosen = condition(state)
        if chosen != END and chosen not in names:
            misroute.chosen.append(_shown(chosen))
        return chosen

    return Route(route)


def _check_graph(graph: Any) -> None:
    if not isinstance(graph, Graph):
        raise AdkError("invalid_graph", "build the graph with graph.new()")


def _check_name(name: Any, reason: str) -> None:
    if not isinstance(name, str) or not name:
        raise AdkError(reason, "node names are non-empty strings")


def _shown(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        return key_name(value)
    return f"<{type(value).__name__}>"
