"""Spec builders the compile tests share (test_compile.py, test_compile_graph.py)."""

from __future__ import annotations

from typing import Any

import pytest

from adk_actors.tools import tool
from adk_actors.workflows.compile import compile_workflow
from adk_actors.workflows.errors import WorkflowSpecError
from providers.errors import AdkError


def ok(state: dict[str, Any]) -> dict[str, Any]:
    return {}


def with_context(state: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    return {}


@tool
def lookup(value: int) -> dict[str, int]:
    """Look a value up."""
    return {"value": value}


def needs_three(a: Any, b: Any, c: Any) -> None:
    """A callable no action, predicate or route may be: it takes three arguments."""
    return None


def seq(steps: Any = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"version": 1, "id": "wf", "kind": "sequential"}
    spec["steps"] = [{"id": "a", "run": ok}] if steps is None else steps
    return {**spec, **extra}


def step(**fields: Any) -> dict[str, Any]:
    return {"id": "a", "run": ok, **fields}


def graph(nodes: Any, edges: Any, entry: str | None = "a", **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"id": "g", "kind": "graph", "nodes": nodes, "edges": edges}
    if entry is not None:
        spec["entry"] = entry
    return {**spec, **extra}


def fork_graph(changes: dict[str, Any] | None = None, /, **edges: Any) -> dict[str, Any]:
    """A fork of `left`/`right` joined at `join` (valid unless `changes` or `edges` say
    otherwise; an edge given as None is left out)."""
    node = {"id": "fork", "type": "fork", "branches": ["left", "right"], "join": "join"}
    nodes = [
        {**node, **(changes or {})},
        {"id": "left", "run": ok},
        {"id": "right", "run": ok},
        {"id": "join", "type": "join"},
    ]
    all_edges: dict[str, Any] = {"left": "join", "right": "join", "join": "end", **edges}
    return graph(nodes, {k: v for k, v in all_edges.items() if v is not None}, entry="fork")


def refusal(spec: Any) -> tuple[tuple[Any, ...], Any]:
    with pytest.raises(WorkflowSpecError) as caught:
        compile_workflow(spec)
    error = caught.value
    assert error.reason == ("invalid_workflow", error.path, error.what)
    assert isinstance(error, AdkError)
    return error.path, error.what
