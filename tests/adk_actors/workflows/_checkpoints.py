"""The workflows and checkpoint builders the checkpoint tests share (test_checkpoint.py,
test_checkpoint_validation.py)."""

from __future__ import annotations

from typing import Any

import pytest
from msgspec.structs import replace

from adk_actors.workflows.checkpoint import (
    Checkpoint,
    GraphCursor,
    initial_checkpoint,
    validate_checkpoint,
)
from adk_actors.workflows.compile import compile_workflow
from adk_actors.workflows.spec import CompiledWorkflow
from providers.errors import AdkError


def ok(state: dict[str, Any]) -> dict[str, Any]:
    return {}


CHILD = compile_workflow({"id": "child", "kind": "sequential", "steps": [{"id": "c", "run": ok}]})
SEQUENTIAL = compile_workflow(
    {
        "id": "seq",
        "kind": "sequential",
        "steps": [
            {"id": "first", "run": ok},
            {"id": "nested", "run": CHILD},
            {"id": "last", "run": ok},
        ],
    }
)
PARALLEL = compile_workflow(
    {"id": "par", "kind": "parallel", "branches": [{"id": "l", "run": ok}, {"id": "r", "run": ok}]}
)
LOOP = compile_workflow(
    {"id": "loop", "kind": "loop", "body": ok, "until": lambda s: True, "max_iterations": 3}
)
TRANSFER = compile_workflow(
    {
        "id": "transfer",
        "kind": "transfer",
        "entry": "a",
        "members": {"a": {"run": ok}, "b": {"run": ok}},
    }
)
GRAPH = compile_workflow(
    {
        "id": "graph",
        "kind": "graph",
        "entry": "start",
        "nodes": [
            {"id": "start", "run": ok},
            {
                "id": "loop",
                "type": "loop",
                "while": lambda s: True,
                "body": "body",
                "max_iterations": 2,
            },
            {"id": "body", "run": ok},
            {"id": "fork", "type": "fork", "branches": ["left", "nested"], "join": "join"},
            {"id": "left", "run": ok},
            {"id": "nested", "type": "workflow", "workflow": CHILD},
            {"id": "join", "type": "join"},
            {"id": "choose", "type": "branch", "choose": lambda s: "end", "targets": ["end"]},
        ],
        "edges": {"start": "loop", "body": "loop", "left": "join", "nested": "join", "join": "end"},
    }
)
ALL = [SEQUENTIAL, PARALLEL, LOOP, TRANSFER, GRAPH]


def fresh(wf: CompiledWorkflow, state: dict[str, Any] | None = None) -> Checkpoint:
    return initial_checkpoint(wf, {"n": 1} if state is None else state, steps=10, transfers=2)


def child_checkpoint() -> Checkpoint:
    return fresh(CHILD, {"child": True})


def graph_at(**cursor: Any) -> Checkpoint:
    return replace(fresh(GRAPH), cursor=GraphCursor(**cursor))


def refused(wf: CompiledWorkflow, cp: Any) -> Any:
    with pytest.raises(AdkError) as caught:
        validate_checkpoint(wf, cp)
    return caught.value.reason
