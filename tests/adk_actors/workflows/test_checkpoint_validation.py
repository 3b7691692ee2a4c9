"""`validate_checkpoint`: every tamper class is refused before anything runs
(``invalid_checkpoint``, ``checkpoint_workflow_mismatch``, ``checkpoint_complete``,
``invalid_checkpoint_state``), and every cursor a run can commit is accepted."""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
import pytest
from msgspec.structs import replace

from adk_actors.workflows.checkpoint import (
    Checkpoint,
    CompleteCursor,
    ForkResult,
    LoopCursor,
    ParallelCursor,
    Remaining,
    SequentialCursor,
    TransferCursor,
    completed_checkpoint,
    decode_checkpoint,
    encode_checkpoint,
    prepare_resume,
    upgrade_checkpoint,
    validate_checkpoint,
)
from adk_actors.workflows.spec import END, CompiledWorkflow
from tests.adk_actors.workflows._checkpoints import (
    GRAPH,
    LOOP,
    PARALLEL,
    SEQUENTIAL,
    TRANSFER,
    child_checkpoint,
    fresh,
    graph_at,
    refused,
)

# -- validate_checkpoint: every tamper class -----------------------------------------------------


def test_a_non_json_output_is_an_invalid_checkpoint() -> None:
    """Follows adk_workflow_test: checkpoint_resume_does_not_replay_committed_step_case
    (the output replaced by a process id)."""
    cp = replace(fresh(SEQUENTIAL), cursor=SequentialCursor(next_index=1), output="first-output")
    assert validate_checkpoint(SEQUENTIAL, cp) == {"n": 1}
    assert refused(SEQUENTIAL, replace(cp, output=object())) == "invalid_checkpoint"


def test_a_completed_checkpoint_is_refused() -> None:
    """Follows adk_workflow_test: checkpoint_resume_does_not_replay_committed_step_case
    (resuming a completed checkpoint)."""
    cp = completed_checkpoint(fresh(SEQUENTIAL), {"n": 2})
    assert refused(SEQUENTIAL, cp) == "checkpoint_complete"
    assert refused(SEQUENTIAL, decode_checkpoint(encode_checkpoint(cp))) == "checkpoint_complete"


@pytest.mark.parametrize(
    "changes",
    [
        {"schema_version": 3},
        {"schema_version": 0},
        {"schema_version": True},
        {"workflow_id": "other"},
        {"workflow_version": 2},
        {"kind": "parallel"},
    ],
)
def test_another_workflow_checkpoint_is_a_mismatch(changes: dict[str, Any]) -> None:
    assert (
        refused(SEQUENTIAL, replace(fresh(SEQUENTIAL), **changes)) == "checkpoint_workflow_mismatch"
    )


def test_a_checkpoint_of_another_kind_is_a_mismatch_before_anything_else() -> None:
    assert (
        refused(SEQUENTIAL, completed_checkpoint(fresh(LOOP), {})) == "checkpoint_workflow_mismatch"
    )


@pytest.mark.parametrize(
    "state", [{"pid": object()}, {"t": (1,)}, {"x": math.inf}, {"b": b"bytes"}, {1: 2}]
)
def test_a_state_that_is_not_json_is_an_invalid_checkpoint_state(state: dict[Any, Any]) -> None:
    assert (
        refused(SEQUENTIAL, replace(fresh(SEQUENTIAL), state=state)) == "invalid_checkpoint_state"
    )


def test_a_state_that_is_not_a_dict_is_an_invalid_checkpoint() -> None:
    assert refused(SEQUENTIAL, replace(fresh(SEQUENTIAL), state=[1])) == "invalid_checkpoint"


def test_what_is_not_a_checkpoint_is_an_invalid_checkpoint() -> None:
    as_dict = msgspec.to_builtins(fresh(SEQUENTIAL))
    assert refused(SEQUENTIAL, as_dict) == "invalid_checkpoint"
    assert refused(SEQUENTIAL, None) == "invalid_checkpoint"


SEQ = fresh(SEQUENTIAL)
TAMPERED: list[tuple[CompiledWorkflow, Checkpoint]] = [
    (SEQUENTIAL, replace(SEQ, completed=1)),  # type: ignore[arg-type]
    (SEQUENTIAL, replace(SEQ, remaining=Remaining(steps=-1, transfers=0))),
    (SEQUENTIAL, replace(SEQ, remaining=Remaining(steps=True, transfers=0))),
    (SEQUENTIAL, replace(SEQ, remaining=Remaining(steps=1, transfers=10_001))),
    (SEQUENTIAL, replace(SEQ, remaining=Remaining(steps=1_000_001, transfers=0))),
    (SEQUENTIAL, replace(SEQ, remaining={"steps": 1, "transfers": 0})),  # type: ignore[arg-type]
    (SEQUENTIAL, replace(SEQ, cursor=SequentialCursor(next_index=-1))),
    (SEQUENTIAL, replace(SEQ, cursor=SequentialCursor(next_index=4))),
    (SEQUENTIAL, replace(SEQ, cursor=SequentialCursor(next_index=True))),
    (SEQUENTIAL, replace(SEQ, cursor=LoopCursor(iteration=0))),
    (SEQUENTIAL, replace(SEQ, cursor=CompleteCursor())),
    (
        SEQUENTIAL,
        replace(
            SEQ,
            cursor=SequentialCursor(
                next_index=0,
                phase="awaiting_resume",
                pause={},
                nested_checkpoint=child_checkpoint(),
            ),
        ),
    ),
    (
        SEQUENTIAL,
        replace(SEQ, cursor=SequentialCursor(next_index=1, phase="awaiting_resume", pause={})),
    ),
    (
        SEQUENTIAL,
        replace(
            SEQ,
            cursor=SequentialCursor(
                next_index=1, phase="awaiting_resume", nested_checkpoint=child_checkpoint()
            ),
        ),
    ),
    (SEQUENTIAL, replace(SEQ, cursor=SequentialCursor(next_index=1, pause={}))),
    (PARALLEL, replace(fresh(PARALLEL), cursor=ParallelCursor(status="done"))),  # type: ignore[arg-type]
    (LOOP, replace(fresh(LOOP), cursor=LoopCursor(iteration=4))),
    (LOOP, replace(fresh(LOOP), cursor=LoopCursor(iteration=-1))),
    (TRANSFER, replace(fresh(TRANSFER), cursor=TransferCursor(member="ghost"))),
    (TRANSFER, replace(fresh(TRANSFER), cursor=TransferCursor(member="a", input=object()))),
    (GRAPH, graph_at(node="ghost")),
    (GRAPH, graph_at(node="start", visits={"start": 1})),
    (GRAPH, graph_at(node="start", visits={"loop": 3})),
    (GRAPH, graph_at(node="start", visits={"ghost": 0})),
    (GRAPH, graph_at(node="start", input=object())),
    (GRAPH, graph_at(node="start", phase="elsewhere")),
    (GRAPH, graph_at(node="start", phase="routing", route_target="ghost")),
    (GRAPH, graph_at(node="start", phase="routing", node_output=object())),
    (GRAPH, graph_at(node="start", phase="fork", results={})),
    (GRAPH, graph_at(node="fork", phase="fork")),
    (GRAPH, graph_at(node="fork", phase="fork", results={"join": ForkResult(delta={})})),
    (
        GRAPH,
        graph_at(
            node="fork", phase="fork", results={"left": ForkResult(result_version=2, delta={})}
        ),
    ),
    (GRAPH, graph_at(node="fork", phase="fork", results={"left": ForkResult(delta=[])})),  # type: ignore[arg-type]
    (GRAPH, graph_at(node="fork", phase="fork", results={"left": {"delta": {}}})),  # type: ignore[dict-item]
    (GRAPH, graph_at(node="start", phase="awaiting_resume")),
    (GRAPH, graph_at(node="loop", phase="awaiting_resume", pause={})),
    (
        GRAPH,
        graph_at(node="start", phase="awaiting_resume", pause={}, resume_kind="nested_workflow"),
    ),
    (
        GRAPH,
        graph_at(node="nested", phase="awaiting_resume", pause={}, resume_kind="nested_workflow"),
    ),
    (GRAPH, graph_at(node="fork", phase="awaiting_resume", pause={}, resume_kind="node")),
    (GRAPH, graph_at(node="fork", phase="awaiting_resume", pause={}, resume_kind="fork_branch")),
    (
        GRAPH,
        graph_at(
            node="fork",
            phase="awaiting_resume",
            pause={},
            resume_kind="fork_branch",
            fork_results={},
            paused_branch="join",
            paused_delta={},
        ),
    ),
    (
        GRAPH,
        graph_at(
            node="fork",
            phase="awaiting_resume",
            pause={},
            resume_kind="fork_branch",
            fork_results={},
            paused_branch="left",
        ),
    ),
    (
        GRAPH,
        graph_at(
            node="fork",
            phase="awaiting_resume",
            pause={},
            resume_kind="fork_nested_workflow",
            fork_results={},
            paused_branch="left",
            nested_checkpoint=child_checkpoint(),
        ),
    ),
    (
        GRAPH,
        graph_at(
            node="fork",
            phase="awaiting_resume",
            pause={},
            resume_kind="fork_nested_workflow",
            fork_results={},
            paused_branch="nested",
        ),
    ),
    (
        GRAPH,
        graph_at(
            node="fork",
            phase="awaiting_resume",
            pause={},
            resume_kind="fork_branch",
            fork_results={},
        ),
    ),
    (GRAPH, graph_at(node="choose", phase="routing")),
    (GRAPH, graph_at(node="choose", phase="routing", route_target="start")),
    (GRAPH, graph_at(node="loop", phase="routing")),
    (GRAPH, graph_at(node="loop", phase="routing", route_target="body")),
    (GRAPH, graph_at(node="fork", phase="routing", route_target="join")),
    (
        GRAPH,
        graph_at(
            node="nested",
            phase="awaiting_resume",
            pause={},
            resume_kind="nested_workflow",
            nested_checkpoint=fresh(GRAPH),
        ),
    ),
    (
        GRAPH,
        graph_at(
            node="fork",
            phase="awaiting_resume",
            pause={},
            resume_kind="fork_nested_workflow",
            fork_results={},
            paused_branch="nested",
            nested_checkpoint=replace(child_checkpoint(), completed=True),
        ),
    ),
    (
        SEQUENTIAL,
        replace(
            SEQ,
            cursor=SequentialCursor(
                next_index=1,
                phase="awaiting_resume",
                pause={},
                nested_checkpoint=fresh(SEQUENTIAL),
            ),
        ),
    ),
    (GRAPH, graph_at(node="start", phase="awaiting_resume", pause={}, resume_kind="elsewhere")),  # type: ignore[arg-type]
    (GRAPH, graph_at(node="start", phase="awaiting_resume", pause={"x": object()})),
    (GRAPH, replace(fresh(GRAPH), cursor=SequentialCursor(next_index=0))),
]


@pytest.mark.parametrize(
    ("wf", "cp"), TAMPERED, ids=[f"{wf.kind}-{i}" for i, (wf, _) in enumerate(TAMPERED)]
)
def test_a_cursor_or_field_that_does_not_fit_is_an_invalid_checkpoint(
    wf: CompiledWorkflow, cp: Checkpoint
) -> None:
    """behaviors §7: a tampered checkpoint is ``invalid_checkpoint`` before anything
    runs; among them a router routing to a node outside its targets (or without a
    chosen one), a loop or fork in the routing phase, a paused fork branch that names
    no branch, and a child checkpoint of another workflow (or a completed one)."""
    assert refused(wf, cp) == "invalid_checkpoint"


VALID: list[tuple[CompiledWorkflow, Checkpoint]] = [
    (SEQUENTIAL, replace(SEQ, cursor=SequentialCursor(next_index=3))),
    (
        SEQUENTIAL,
        replace(
            SEQ,
            cursor=SequentialCursor(
                next_index=1,
                phase="awaiting_resume",
                pause={"reason": "r"},
                nested_checkpoint=child_checkpoint(),
            ),
        ),
    ),
    (LOOP, replace(fresh(LOOP), cursor=LoopCursor(iteration=3))),
    (
        TRANSFER,
        replace(
            fresh(TRANSFER), cursor=TransferCursor(member="b", input={"in": [1]}, transfers_used=1)
        ),
    ),
    (GRAPH, graph_at(node="start", visits={"start": 0, "loop": 2})),
    (GRAPH, graph_at(node="start", phase="routing", node_output={"o": 1}, route_target="loop")),
    (GRAPH, graph_at(node="start", phase="routing", node_output={"o": 1})),
    (GRAPH, graph_at(node="choose", phase="routing", route_target=END)),
    (GRAPH, graph_at(node="join", phase="ready", input={"left": None, "nested": 1})),
    (GRAPH, graph_at(node="fork", phase="fork", results={})),
    (GRAPH, graph_at(node="start", phase="awaiting_resume", pause={})),
    (GRAPH, graph_at(node="join", phase="awaiting_resume", pause={}, resume_kind="node")),
    (
        GRAPH,
        graph_at(
            node="nested",
            phase="awaiting_resume",
            pause={},
            resume_kind="nested_workflow",
            nested_checkpoint=child_checkpoint(),
        ),
    ),
    (
        GRAPH,
        graph_at(
            node="fork",
            phase="awaiting_resume",
            pause={},
            resume_kind="fork_branch",
            fork_results={"nested": ForkResult(output=1, delta={"n": 2})},
            paused_branch="left",
            paused_delta={"paused": True},
        ),
    ),
    (
        GRAPH,
        graph_at(
            node="fork",
            phase="awaiting_resume",
            pause={},
            resume_kind="fork_nested_workflow",
            fork_results={"left": ForkResult(output=1, delta={})},
            paused_branch="nested",
            nested_checkpoint=child_checkpoint(),
        ),
    ),
]


@pytest.mark.parametrize(
    ("wf", "cp"), VALID, ids=[f"{wf.kind}-{i}" for i, (wf, _) in enumerate(VALID)]
)
def test_cursors_that_fit_are_accepted(wf: CompiledWorkflow, cp: Checkpoint) -> None:
    assert validate_checkpoint(wf, cp) == cp.state
    assert validate_checkpoint(wf, decode_checkpoint(encode_checkpoint(cp))) == cp.state


def test_a_tampered_document_decodes_but_does_not_validate() -> None:
    data = json.loads(encode_checkpoint(fresh(SEQUENTIAL)))
    data["cursor"]["next_index"] = 99
    cp = decode_checkpoint(json.dumps(data))
    assert refused(SEQUENTIAL, cp) == "invalid_checkpoint"


# -- schema version 2: finished phases and transfers used; version 1 still read -------------------

V2_TAMPERED: list[tuple[CompiledWorkflow, Checkpoint]] = [
    (LOOP, replace(fresh(LOOP), cursor=LoopCursor(iteration=3, phase="until"))),
    (LOOP, replace(fresh(LOOP), cursor=LoopCursor(iteration=3, phase="done"))),
    (LOOP, replace(fresh(LOOP), cursor=LoopCursor(iteration=0, phase="later"))),  # type: ignore[arg-type]
    (TRANSFER, replace(fresh(TRANSFER), cursor=TransferCursor(member="a"))),  # no transfers_used
    (TRANSFER, replace(fresh(TRANSFER), cursor=TransferCursor(member="a", transfers_used=-1))),
    (TRANSFER, replace(fresh(TRANSFER), cursor=TransferCursor(member="a", transfers_used=True))),
    (
        TRANSFER,
        replace(  # with the 2 transfers left, more than MAX_TRANSFERS in all
            fresh(TRANSFER), cursor=TransferCursor(member="a", transfers_used=9_999)
        ),
    ),
    (
        TRANSFER,
        replace(fresh(TRANSFER), cursor=TransferCursor(member="a", transfers_used=0, phase="x")),  # type: ignore[arg-type]
    ),
    # a version 1 checkpoint has none of version 2's fields
    (LOOP, replace(fresh(LOOP), schema_version=1, cursor=LoopCursor(iteration=0, phase="until"))),
    (PARALLEL, replace(fresh(PARALLEL), schema_version=1, cursor=ParallelCursor(status="merged"))),
    (
        TRANSFER,
        replace(
            fresh(TRANSFER), schema_version=1, cursor=TransferCursor(member="a", transfers_used=0)
        ),
    ),
]


@pytest.mark.parametrize(
    ("wf", "cp"), V2_TAMPERED, ids=[f"{wf.kind}-{i}" for i, (wf, _) in enumerate(V2_TAMPERED)]
)
def test_a_finished_phase_or_transfer_count_that_does_not_fit_is_refused(
    wf: CompiledWorkflow, cp: Checkpoint
) -> None:
    """A loop phase past the last iteration, a transfer cursor without its count (or
    one that, with the transfers left, exceeds the ceiling), and a version 1 checkpoint
    carrying version 2 fields are ``invalid_checkpoint``."""
    assert refused(wf, cp) == "invalid_checkpoint"


V2_VALID: list[tuple[CompiledWorkflow, Checkpoint]] = [
    (LOOP, replace(fresh(LOOP), cursor=LoopCursor(iteration=2, phase="until"))),
    (LOOP, replace(fresh(LOOP), cursor=LoopCursor(iteration=0, phase="done"))),
    (PARALLEL, replace(fresh(PARALLEL), cursor=ParallelCursor(status="merged"))),
    (
        TRANSFER,
        replace(
            fresh(TRANSFER), cursor=TransferCursor(member="b", transfers_used=9_998, phase="done")
        ),
    ),
    (TRANSFER, replace(fresh(TRANSFER), schema_version=1, cursor=TransferCursor(member="b"))),
    (LOOP, replace(fresh(LOOP), schema_version=1, cursor=LoopCursor(iteration=1))),
    (PARALLEL, replace(fresh(PARALLEL), schema_version=1)),
]


@pytest.mark.parametrize(
    ("wf", "cp"), V2_VALID, ids=[f"{wf.kind}-{i}" for i, (wf, _) in enumerate(V2_VALID)]
)
def test_finished_phases_and_version_1_checkpoints_are_accepted(
    wf: CompiledWorkflow, cp: Checkpoint
) -> None:
    assert validate_checkpoint(wf, cp) == cp.state
    assert validate_checkpoint(wf, decode_checkpoint(encode_checkpoint(cp))) == cp.state


def test_a_version_1_checkpoint_is_upgraded_when_resumed() -> None:
    """An encoded version 1 transfer checkpoint (as older builds wrote it) decodes,
    validates and is upgraded by `prepare_resume`: ``transfers_used`` is the workflow's
    ``max_transfers`` less the transfers left."""
    v1 = json.dumps(
        {
            "schema_version": 1,
            "workflow_id": "transfer",
            "workflow_version": 1,
            "kind": "transfer",
            "cursor": {"type": "transfer", "member": "b", "input": "hi"},
            "state": {"n": 1},
            "remaining": {"steps": 5, "transfers": 13},
            "completed": False,
        }
    )
    cp = decode_checkpoint(v1)
    assert validate_checkpoint(TRANSFER, cp) == {"n": 1}
    ready = prepare_resume(TRANSFER, cp, None, False)
    assert ready.schema_version == 2
    assert ready.cursor == TransferCursor(member="b", input="hi", transfers_used=3)
    assert validate_checkpoint(TRANSFER, ready) == {"n": 1}
    assert upgrade_checkpoint(TRANSFER, ready) is ready
    # more left than the workflow's own budget (a run given a larger max_transfers): 0
    more = replace(cp, remaining=Remaining(steps=5, transfers=40))
    assert prepare_resume(TRANSFER, more, None, False).cursor.transfers_used == 0  # type: ignore[union-attr]
    # other kinds only change their version
    loop_v1 = replace(fresh(LOOP), schema_version=1)
    assert prepare_resume(LOOP, loop_v1, None, False) == fresh(LOOP)
