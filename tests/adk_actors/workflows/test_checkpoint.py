"""Checkpoints: building them, the codec round trip, strict decoding and encoding, and
`prepare_resume` (what `validate_checkpoint` refuses: test_checkpoint_validation.py)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from msgspec import UNSET
from msgspec.structs import replace

from adk_actors.workflows.checkpoint import (
    Checkpoint,
    CompleteCursor,
    ForkResult,
    GraphCursor,
    LoopCursor,
    ParallelCursor,
    Remaining,
    SequentialCursor,
    TransferCursor,
    completed_checkpoint,
    decode_checkpoint,
    encode_checkpoint,
    is_awaiting_resume,
    prepare_resume,
    remaining_of,
    validate_checkpoint,
)
from adk_actors.workflows.spec import END
from providers.errors import AdkError
from tests.adk_actors.workflows._checkpoints import (
    ALL,
    GRAPH,
    LOOP,
    PARALLEL,
    SEQUENTIAL,
    TRANSFER,
    child_checkpoint,
    fresh,
    graph_at,
)

# -- building and the codec ----------------------------------------------------------------------


def test_initial_checkpoints_start_each_kind_at_its_first_cursor() -> None:
    cursors = [fresh(wf).cursor for wf in ALL]
    assert cursors == [
        SequentialCursor(next_index=0),
        ParallelCursor(),
        LoopCursor(iteration=0),
        TransferCursor(member="a", input=None, transfers_used=0),
        GraphCursor(node="start", phase="ready", visits={}),
    ]
    cp = fresh(GRAPH)
    assert (cp.schema_version, cp.workflow_id, cp.workflow_version, cp.kind) == (
        2,
        "graph",
        1,
        "graph",
    )
    assert cp.remaining == Remaining(steps=10, transfers=2)
    assert remaining_of(cp) == {"steps": 10, "transfers": 2}
    assert cp.completed is False and cp.has_output is False and cp.output is UNSET
    for wf in ALL:
        assert validate_checkpoint(wf, fresh(wf)) == {"n": 1}


def test_the_json_keeps_the_reference_field_names() -> None:
    cp = replace(fresh(SEQUENTIAL), cursor=SequentialCursor(next_index=1), output="first-output")
    document = json.loads(encode_checkpoint(cp))
    assert document == {
        "schema_version": 2,
        "workflow_id": "seq",
        "workflow_version": 1,
        "kind": "sequential",
        "cursor": {"type": "sequential", "next_index": 1},
        "state": {"n": 1},
        "remaining": {"steps": 10, "transfers": 2},
        "completed": False,
        "output": "first-output",
    }
    assert "output" not in json.loads(encode_checkpoint(fresh(SEQUENTIAL)))


def rich_checkpoints() -> list[Checkpoint]:
    result = ForkResult(output={"branch": "left"}, delta={"left": 1})
    paused = {"reason": "approval", "details": None, "node_id": "nested"}
    return [
        *(fresh(wf) for wf in ALL),
        replace(fresh(SEQUENTIAL), output=None),
        replace(
            fresh(SEQUENTIAL),
            cursor=SequentialCursor(
                next_index=1,
                phase="awaiting_resume",
                pause=paused,
                nested_checkpoint=child_checkpoint(),
                resume_input={"approved": True},
            ),
        ),
        replace(
            fresh(TRANSFER),
            cursor=TransferCursor(member="b", input=["handoff", 1.5], transfers_used=1),
        ),
        replace(
            fresh(TRANSFER),
            cursor=TransferCursor(member="b", input=None, transfers_used=2, phase="done"),
        ),
        replace(fresh(LOOP), cursor=LoopCursor(iteration=1, phase="until")),
        replace(fresh(LOOP), cursor=LoopCursor(iteration=0, phase="done"), output=1),
        replace(fresh(PARALLEL), cursor=ParallelCursor(status="merged"), output={"l": None}),
        graph_at(node="body", input="x", visits={"loop": 2}),
        graph_at(node="start", phase="routing", node_output=None, route_target=END),
        graph_at(node="fork", phase="fork", results={"left": result}),
        graph_at(
            node="fork",
            phase="awaiting_resume",
            pause=paused,
            resume_kind="fork_nested_workflow",
            fork_results={"left": result},
            paused_branch="nested",
            nested_checkpoint=child_checkpoint(),
        ),
        completed_checkpoint(replace(fresh(GRAPH), output="done"), {"final": [1, 2]}),
    ]


@pytest.mark.parametrize("cp", rich_checkpoints())
def test_encode_decode_round_trip_is_exact_and_canonical(cp: Checkpoint) -> None:
    encoded = encode_checkpoint(cp)
    decoded = decode_checkpoint(encoded)
    assert decoded == cp
    assert encode_checkpoint(decoded) == encoded
    assert decode_checkpoint(encoded.decode()) == cp
    assert (
        encoded == json.dumps(json.loads(encoded), sort_keys=True, separators=(",", ":")).encode()
    )


def test_a_checkpoint_is_frozen() -> None:
    cp = fresh(SEQUENTIAL)
    with pytest.raises(AttributeError):
        cp.completed = True  # type: ignore[misc]


def test_completed_checkpoint_keeps_output_and_budgets() -> None:
    cp = completed_checkpoint(replace(fresh(LOOP), output="last"), {"done": True})
    assert (cp.completed, cp.cursor, cp.output, cp.state) == (
        True,
        CompleteCursor(),
        "last",
        {"done": True},
    )
    assert cp.remaining == Remaining(steps=10, transfers=2)


# -- strict decoding and encoding ------------------------------------------------------------------


def document(**changes: Any) -> bytes:
    base = json.loads(encode_checkpoint(fresh(SEQUENTIAL)))
    base.update(changes)
    return json.dumps(base).encode()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[]",
        b"{}",
        document(extra=1),
        document(state=[1]),
        document(remaining={"steps": 1}),
        document(remaining={"steps": 1, "transfers": 0, "more": 1}),
        document(cursor={"type": "sequential", "next_index": 0, "surprise": True}),
        document(cursor={"type": "elsewhere"}),
        document(cursor={"next_index": 0}),
        document(completed="no"),
        document(workflow_version="1"),
        b"{" * 100_000,
        b" " * (40 << 20),
    ],
)
def test_decode_is_strict(data: bytes) -> None:
    with pytest.raises(AdkError) as caught:
        decode_checkpoint(data)
    assert caught.value.reason == "invalid_checkpoint"


def test_decode_refuses_what_is_not_bytes() -> None:
    with pytest.raises(AdkError) as caught:
        decode_checkpoint(123)  # type: ignore[arg-type]
    assert caught.value.reason == "invalid_checkpoint"


@pytest.mark.parametrize(
    "cp",
    [
        replace(fresh(SEQUENTIAL), state={"pid": object()}),
        replace(fresh(SEQUENTIAL), state={"x": math.nan}),
        replace(fresh(SEQUENTIAL), state={"t": (1, 2)}),
        replace(fresh(SEQUENTIAL), state={1: "int key"}),
        replace(fresh(SEQUENTIAL), output=object()),
        replace(fresh(TRANSFER), cursor=TransferCursor(member="a", input={"x": {1, 2}})),
        graph_at(node="fork", phase="fork", results={"left": ForkResult(delta={"x": object()})}),
        replace(
            fresh(SEQUENTIAL),
            cursor=SequentialCursor(
                next_index=1,
                phase="awaiting_resume",
                pause={},
                nested_checkpoint=replace(child_checkpoint(), state={"x": object()}),
            ),
        ),
    ],
)
def test_encode_refuses_values_that_are_not_json(cp: Checkpoint) -> None:
    with pytest.raises(AdkError) as caught:
        encode_checkpoint(cp)
    assert caught.value.reason == "invalid_checkpoint"


def test_encode_refuses_what_is_not_a_checkpoint() -> None:
    with pytest.raises(AdkError) as caught:
        encode_checkpoint({"completed": False})  # type: ignore[arg-type]
    assert caught.value.reason == "invalid_checkpoint"


# -- prepare_resume ------------------------------------------------------------------------------


def paused_graph() -> Checkpoint:
    return graph_at(node="start", phase="awaiting_resume", pause={"reason": "approval"})


def test_a_checkpoint_that_is_not_paused_is_resumed_as_it_is() -> None:
    cp = fresh(GRAPH)
    assert not is_awaiting_resume(cp)
    assert prepare_resume(GRAPH, cp, None, False) is cp
    assert prepare_resume(GRAPH, cp, {"ignored": True}, True) is cp


def test_a_paused_checkpoint_needs_a_resume_input() -> None:
    """Follows adk_workflow_graph_test: pause_resume_routes_without_replaying_node."""
    cp = paused_graph()
    assert is_awaiting_resume(cp)
    with pytest.raises(AdkError) as caught:
        prepare_resume(GRAPH, cp, None, False)
    assert caught.value.reason == "resume_input_required"


@pytest.mark.parametrize("value", [object(), {"x": math.nan}, {1: "int key"}, {"s": {1, 2}}])
def test_a_resume_input_that_is_not_json_is_refused(value: Any) -> None:
    """Follows adk_workflow_graph_test: pause_resume_routes_without_replaying_node (pid input)."""
    with pytest.raises(AdkError) as caught:
        prepare_resume(GRAPH, paused_graph(), value, True)
    assert caught.value.reason[0] == "invalid_resume_input"


@pytest.mark.parametrize("value", [{"approved": True}, None, ("a", 1), 3])
def test_a_resume_input_is_stored_in_the_paused_cursor(value: Any) -> None:
    cp = prepare_resume(GRAPH, paused_graph(), value, True)
    assert isinstance(cp.cursor, GraphCursor)
    expected = list(value) if isinstance(value, tuple) else value
    assert cp.cursor.resume_input == expected
    assert validate_checkpoint(GRAPH, cp) == cp.state
    assert decode_checkpoint(encode_checkpoint(cp)) == cp


def test_a_paused_sequential_step_takes_a_resume_input() -> None:
    cursor = SequentialCursor(
        next_index=1, phase="awaiting_resume", pause={}, nested_checkpoint=child_checkpoint()
    )
    cp = replace(fresh(SEQUENTIAL), cursor=cursor)
    with pytest.raises(AdkError) as caught:
        prepare_resume(SEQUENTIAL, cp, None, False)
    assert caught.value.reason == "resume_input_required"
    resumed = prepare_resume(SEQUENTIAL, cp, "approved", True)
    assert isinstance(resumed.cursor, SequentialCursor)
    assert resumed.cursor.resume_input == "approved"
    assert resumed.cursor.nested_checkpoint == child_checkpoint()
